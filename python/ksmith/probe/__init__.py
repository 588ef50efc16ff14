"""The probe runner: runs extracted KernelBench-format programs in a sandboxed child process,
repairs their guessed arguments from the error text and reports what ran.

Modules:

- ``guesses``: the argument guesses (tensor shapes and dtypes, literal values, expressions) and
  how they are turned into values and back into Python source.
- ``rules``: the repair rules that read an exception and propose changed guesses.
- ``program``: rewriting ``get_inputs()`` / ``get_init_inputs()`` in the program text.
- ``loading``: running a program text in a fresh module, and seeding the generators.
- ``execute``: what the sandboxed child does with one program (the repair search, verification,
  the ATen operators it runs).
- ``sizing`` and ``work``: sizing a program for the GPU, and measuring the work of a call;
  ``slots``: the integers a program exposes and their roles; ``sized_program``: writing the
  sizes as module-level constants.
- ``sandbox``: the child process (limits, namespaces, capped output, kill on timeout).
- ``result``: the fields of a result line.
- ``worker``: the warm worker process speaking JSON lines with the Rust side.

The Rust crate ``ksmith-probe`` embeds these files and starts ``python -m ksmith.probe.worker``.
What a request carries when the configuration says nothing is :data:`DEFAULTS`
(``defaults.json``), the defaults of ``[probe]`` too: ``ProbeConfig::default`` embeds the file.
"""

import json
import pathlib

#: The request's defaults (``defaults.json``; ``sizing`` holds the sizing step's targets).
DEFAULTS: dict = json.loads(pathlib.Path(__file__).with_name("defaults.json").read_text())

"""Where the sizes of a verified state came from: the repository (a call site, a parameter's
default, a model of the repository that built and called the class) or the probe (a guess, a
repair). Sizing grows a structural size of the repository's (a width, a channel count) at most
``max_structural_scale`` times (:mod:`.sizing`); the probe's own guesses grow freely.

The request says it: ``arg_sources`` (the extractor's ``name=value: kind ...`` lines, as
``modules.parquet`` keeps them) and ``observed`` (the program's input functions are the
configuration a model of the repository gave the class, ``ksmith_probe::observed``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .guesses import Arg, TensorGuess, ValueGuess

#: Kinds of ``arg_sources`` whose value is the repository's.
REPOSITORY_KINDS = ("call", "default")
#: The batch a sized program is observed at: the classes' own probes run the model's sizes on
#: the CPU, and their sizing grows the batch again.
OBSERVE_BATCH = 2


@dataclasses.dataclass(frozen=True)
class Provenance:
    """Per constructor parameter (its name, or ``argN`` for the N-th positional argument), the
    kind of its source (``call``, ``default``, ``guess``); ``observed``: the input functions
    are a model's configuration of the class."""

    kinds: dict[str, str] = dataclasses.field(default_factory=dict)
    observed: bool = False

    @classmethod
    def of(cls, request: dict[str, Any]) -> Provenance:
        """The provenance a probe request carries (none: every size is the probe's)."""
        kinds = {}
        for line in request.get("arg_sources") or []:
            name, eq, rest = str(line).partition("=")
            _, colon, where = rest.partition(": ")
            if eq and colon:
                kinds[name.strip()] = where.split(" ", 1)[0]
        return cls(kinds, bool(request.get("observed")))

    def init_is_repository(self, index: int, arg: Arg) -> bool:
        """Whether constructor argument ``index`` still holds the repository's value: untouched
        by the repair search, and a model's, a call site's or a default. A field of a
        configuration object (:mod:`.config_args`) is the repository's while it holds its first
        value and that was the class's default or the object a call site built."""
        field = arg.within
        if field is not None:
            if arg.guess != field.first or field.source == "guess":
                return False
            return self.observed or field.source == "default" or self.kinds.get(field.param) in REPOSITORY_KINDS
        if not isinstance(arg.guess, ValueGuess) or arg.guess.orig is None:
            return False
        if self.observed:
            return True
        kind = self.kinds.get(arg.name or "") or self.kinds.get(f"arg{index}")
        return kind in REPOSITORY_KINDS

    def dim_is_repository(self, guess: TensorGuess, d: int) -> bool:
        """Whether dimension ``d`` of a tensor input is the repository's: an untouched input of
        an observed call, past its first dimension (the observation cut the batch)."""
        return self.observed and guess.orig is not None and d > 0

"""What the probe runner and the evaluator worker both need, written once.

- `constants`: a program's module-level integer size constants, read and rewritten in place (the
  probe's sizing writes them; the evaluator's hidden-shape check rewrites them).
- `outputs`: whether two runs' outputs are the same (bitwise, NaN matching NaN) or close (within
  a per-dtype tolerance).

The Rust crate ``ksmith-sandbox`` embeds this package with ``ksmith.confine`` and both stages write
it into their runtime folder.
"""

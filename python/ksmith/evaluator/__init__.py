"""The ksmith evaluator: compile, correctness, speed and integrity checks for Triton candidates.

A worker per device (`python -m ksmith.evaluator worker --device cuda|cpu`) speaks a versioned
JSON-lines protocol (`protocol`) with the Rust client (`ksmith-eval`); `serve` offers the same
over HTTP. For each request the trusted side (`evaluate`) runs static checks (`static_check`),
builds the task's inputs and reference outputs in a trusted child (`reference_child`, cached per
task), runs the candidate in its own killable child (`candidate_child` with the instruments of
`integrity`, supervised by `sandbox`), compares outputs itself (`compare`) and times on the GPU
(`timing`). Without a GPU everything runs in Triton's interpreter on CPU tensors and timing is
reported as not measured.
"""

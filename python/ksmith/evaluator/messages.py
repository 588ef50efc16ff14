"""The messages a child (reference or candidate) sends its worker over the private channel (see
`child_common.Channel`), as typed records.

Each message is a dataclass with a wire name (`Message.TYPE`); on the wire it is one JSON object
with its fields and ``"type"``. `decode` turns a received object back into its class and refuses
anything else (unknown type, missing or extra fields), so the worker reads fields, never dict
keys that may be absent.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar


class BadMessage(ValueError):
    """A line on the channel that is not one of the messages below."""


@dataclasses.dataclass
class Message:
    """Base of every message: `TYPE` is its name on the wire."""

    TYPE: ClassVar[str] = ""

    def to_json(self) -> dict[str, Any]:
        """The wire form: the fields plus ``"type"``."""
        return {"type": self.TYPE, **dataclasses.asdict(self)}


@dataclasses.dataclass
class SandboxFailed(Message):
    """The child could not confine itself (the worker's environment is at fault)."""

    TYPE: ClassVar[str] = "sandbox_error"
    message: str


@dataclasses.dataclass
class CompileFailed(Message):
    """Importing the candidate or building `ModelNew` failed."""

    TYPE: ClassVar[str] = "compile_error"
    message: str


@dataclasses.dataclass
class Violation(Message):
    """An integrity violation the harness saw; ends the run."""

    TYPE: ClassVar[str] = "violation"
    hack: str
    message: str


@dataclasses.dataclass
class Compiled(Message):
    """`ModelNew` is built; `weights` says how its parameters were set."""

    TYPE: ClassVar[str] = "compiled"
    weights: str


@dataclasses.dataclass
class RunFailed(Message):
    """The candidate raised while running."""

    TYPE: ClassVar[str] = "runtime_error"
    message: str


@dataclasses.dataclass
class CorrectnessDone(Message):
    """Every trial's outputs are written; what the instruments saw while they ran."""

    TYPE: ClassVar[str] = "correctness_done"
    phases: dict[str, float]
    launches: dict[str, int]
    torch_work: dict[str, float]
    torch_calls: dict[str, int]
    gpu_share: float | None
    hardware: dict[str, Any]


@dataclasses.dataclass
class ReadyToTime(Message):
    """The child waits for the worker's `go` (the worker holds the GPU for timing)."""

    TYPE: ClassVar[str] = "ready_to_time"


@dataclasses.dataclass
class Timed(Message):
    """Timing statistics (the protocol's `Timing`) and how they were taken."""

    TYPE: ClassVar[str] = "timing"
    timing: dict[str, Any]
    capture_error: str
    stream: list[float] | None = None
    phases: dict[str, float] | None = None


@dataclasses.dataclass
class ReferenceFailed(Message):
    """The reference program failed (the task is broken)."""

    TYPE: ClassVar[str] = "error"
    message: str


@dataclasses.dataclass
class TrialsDone(Message):
    """The reference wrote every trial (`ref.pt`)."""

    TYPE: ClassVar[str] = "trials_done"
    hardware: dict[str, Any]
    work: float


@dataclasses.dataclass
class Unexpected(Message):
    """Made by the worker's reader, never sent: a JSON object on the channel that is none of the
    messages above (`what` says why)."""

    TYPE: ClassVar[str] = "unexpected"
    what: str


MESSAGES: dict[str, type[Message]] = {
    cls.TYPE: cls
    for cls in (
        SandboxFailed,
        CompileFailed,
        Violation,
        Compiled,
        RunFailed,
        CorrectnessDone,
        ReadyToTime,
        Timed,
        ReferenceFailed,
        TrialsDone,
    )
}


def read(obj: object) -> Message:
    """`decode`, with anything undecodable as an `Unexpected` message (what the reader of a
    child's channel passes on)."""
    try:
        return decode(obj)
    except BadMessage as e:
        return Unexpected(str(e))


def decode(obj: object) -> Message:
    """The message a decoded JSON object stands for; `BadMessage` for anything else."""
    if not isinstance(obj, dict):
        raise BadMessage(f"a message is a JSON object, got {type(obj).__name__}")
    kind = obj.get("type")
    cls = MESSAGES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise BadMessage(f"unknown message type {kind!r}")
    fields = {k: v for k, v in obj.items() if k != "type"}
    try:
        return cls(**fields)
    except TypeError as e:
        raise BadMessage(f"`{kind}` message: {e}") from None

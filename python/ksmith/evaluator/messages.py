"""The messages a child (reference or candidate) sends its worker over the private channel (see
`child_common.Channel`), as typed records, and the seal that tells the harness's lines from
anything else written there.

Each message is a dataclass with a wire name (`Message.TYPE`); its body is one JSON object with
its fields and ``"type"``. `decode` turns a received body back into its class and refuses
anything else (unknown type, missing or extra fields), so the worker reads fields, never dict
keys that may be absent.

On the wire every line is sealed (`seal`, `Unsealer`): ``{"seq": n, "body": {...}, "mac": hex}``
where ``mac`` is HMAC-SHA256 over the sequence number and the body under a secret the worker gave
this child only (through the fork server, never on disk or in the environment). The candidate
runs in the harness's process and can write to every descriptor it inherited, the channel
included; a line it writes there (a forged result, or bytes that break the harness's next line)
fails the seal, and the worker's verdict is `hacked` (`sandbox_escape`). What the seal cannot stop:
a candidate that finds the secret in the harness's memory (which the static checks and the
runtime's audit hook refuse the means for).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
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
class ExtensionsBuilt(Message):
    """The build child (`build_child`) built every extension: the binary of each module, relative
    to its workspace, and the seconds the builds took."""

    TYPE: ClassVar[str] = "extensions_built"
    files: dict[str, str]
    seconds: float


@dataclasses.dataclass
class ExtensionsFailed(Message):
    """An extension did not build: the compiler's first errors (`message`); `toolchain` when the
    toolchain failed rather than the candidate's sources."""

    TYPE: ClassVar[str] = "extensions_failed"
    message: str
    toolchain: bool


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
class Unreproducible(Message):
    """The harness built other inputs or weights than the reference was judged on (the task's
    `get_inputs()` depends on something besides the seed)."""

    TYPE: ClassVar[str] = "unreproducible"
    message: str


@dataclasses.dataclass
class Ready(Message):
    """The harness has done the ungated part of its next call (building, compiling) and waits for
    the worker's ``next``, which the worker sends under the GPU's shared gate."""

    TYPE: ClassVar[str] = "ready"
    label: str


@dataclasses.dataclass
class ResultReady(Message):
    """One result file is written: `file` (in the child's workspace) holds the outputs of the call
    `label` names (of the `kind` of calls), to be judged against the reference's trial `trial` at size set `size_set`
    (None: the visible sizes). `repeat`: the file also holds a second run on the same inputs;
    `diagnose`: a failure should be explained (another trial's outputs, lower precision)."""

    TYPE: ClassVar[str] = "result_ready"
    #: "trial", "hidden" (a size set) or "identity" (the worker calls the judging of a timed
    #: call's digests "timed", see `Timed`).
    kind: str
    label: str
    file: str
    size_set: int | None
    trial: int
    repeat: bool = False
    diagnose: bool = False


@dataclasses.dataclass
class ItemFailed(Message):
    """The candidate raised (or could not be rebuilt) at a hidden size set: it is incorrect there."""

    TYPE: ClassVar[str] = "item_failed"
    label: str
    message: str


@dataclasses.dataclass
class CorrectnessDone(Message):
    """Every correctness call is made; what the instruments saw while they ran."""

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
    """Timing statistics (the protocol's `Timing`) and how they were taken; for a candidate,
    `table` is the result file with the digests of its `rows` timed calls (see `digest`), which
    the worker hands to the judge with the calls it picks. `stream`: where the candidate's graph
    could not be captured, its stream check (`timing.StreamCheck.summary`, ms: on the calling
    stream, to the end of a device-wide sync, that sync after a call that does nothing)."""

    TYPE: ClassVar[str] = "timing"
    timing: dict[str, Any]
    capture_error: str
    stream: list[float] | None = None
    phases: dict[str, float] | None = None
    table: str | None = None
    rows: int = 0


@dataclasses.dataclass
class ReferenceFailed(Message):
    """The reference program failed, or the task does not fit (the task is broken)."""

    TYPE: ClassVar[str] = "error"
    message: str


@dataclasses.dataclass
class BuildDone(Message):
    """The reference ran every trial (twice) and every size set: what the worker keeps of the task
    (no tensor): per trial its inputs' fingerprint and whether the reference mutates its inputs
    or returns an alias of one; the size sets that hold, with the same facts; the FLOPs of one
    call by class (`speed_of_light.flop_classes`), its dominant data type and the bytes of its
    parameters and buffers (for its speed-of-light)."""

    TYPE: ClassVar[str] = "build_done"
    hardware: dict[str, Any]
    work: float
    flops: dict[str, float]
    dtype: str
    state_bytes: int
    init_fingerprint: str
    trials: list[dict[str, Any]]
    out_meta: list[list[Any]]
    input_bytes: int
    output_bytes: int
    size_sets: list[dict[str, Any]]
    dropped: list[str]


@dataclasses.dataclass
class BaselineCompiled(Message):
    """The compile baseline's child (`compile_baseline`) compiled the reference with
    `torch.compile` in `compile_s` seconds (its first call) and the compiled outputs match the
    eager ones; it waits for the worker's `go` to time it."""

    TYPE: ClassVar[str] = "baseline_compiled"
    compile_s: float


@dataclasses.dataclass
class JudgeReady(Message):
    """The judge (a reference child that compares) has built the reference and waits for files."""

    TYPE: ClassVar[str] = "judge_ready"


@dataclasses.dataclass
class Judged(Message):
    """The judge's finding on one result file (see `ResultReady`): why the outputs cannot be
    compared (`structure`), whether they pass, the error statistics, whether a second run agreed,
    the mutation and alias facts of candidate and reference, and for a failing file with
    `diagnose`: another trial whose reference outputs it matches, and a lower-precision
    computation that explains it."""

    TYPE: ClassVar[str] = "judged"
    label: str
    structure: str | None
    ok: bool
    errors: list[dict[str, Any]]
    repeat_ok: bool | None
    mutated: bool
    ref_mutated: bool
    alias: list[bool]
    ref_alias: list[bool]
    equals_trial: int | None = None
    low_precision: dict[str, Any] | None = None
    #: The file (or the request naming it) is not what an honest harness writes
    #: (`result_file`): `structure` says why.
    forged: bool = False


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
        ExtensionsBuilt,
        ExtensionsFailed,
        Compiled,
        RunFailed,
        Unreproducible,
        Ready,
        ResultReady,
        ItemFailed,
        CorrectnessDone,
        ReadyToTime,
        Timed,
        ReferenceFailed,
        BuildDone,
        BaselineCompiled,
        JudgeReady,
        Judged,
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


def _mac(secret: bytes, seq: int, body: str) -> str:
    return hmac.new(secret, f"{seq}:{body}".encode(), hashlib.sha256).hexdigest()


def seal(secret: bytes, seq: int, message: Message) -> str:
    """The wire line (without newline) of `message`, the `seq`-th this channel carries."""
    body = json.dumps(message.to_json(), sort_keys=True, separators=(",", ":"))
    return json.dumps({"seq": seq, "body": body, "mac": _mac(secret, seq, body)})


class Unsealer:
    """Reads a channel's lines in order; any line that is not the next sealed message is a
    forgery."""

    def __init__(self, secret: bytes):
        self.secret = secret
        self.seq = 0

    def open(self, line: bytes) -> Message:
        """The message of `line`; `BadMessage` (naming what is wrong) for anything else."""
        try:
            frame = json.loads(line.decode("utf-8"))
            seq, body, mac = frame["seq"], frame["body"], frame["mac"]
        except (ValueError, UnicodeDecodeError, TypeError, KeyError):
            raise BadMessage(f"a line on the harness's channel that it did not write: {line[:120]!r}") from None
        if not (isinstance(body, str) and isinstance(mac, str)) or not hmac.compare_digest(
            mac, _mac(self.secret, seq if isinstance(seq, int) else -1, body)
        ):
            raise BadMessage(f"a message on the harness's channel with a wrong seal: {line[:120]!r}")
        if seq != self.seq:
            raise BadMessage(f"a sealed message out of order (#{seq}, expected #{self.seq}): replayed")
        self.seq += 1
        return read(json.loads(body))

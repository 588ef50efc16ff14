"""GPU timing, used by both children (reference and candidate) so both are measured the same way
(and, on the CPU, the candidate's rehearsal of it, whose times are not reported).

Method: warm-up calls (at least `warmup` calls and `warmup_ms`), then CUDA-graph capture of one
call; each sample replays the graph once between two CUDA events, after a write of a buffer of
4x the L2 size (`l2_policy = "flushed"`: every sample starts with a cold L2 and the GPU is kept
busy by the flush while the host enqueues the next sample, so launch jitter does not reach the
measurement). When capture fails (synchronizing or side-stream code), each sample is a direct call
(`cuda_event`): the GPU is synchronized idle before the start event, so the call's own launches
are timed, and a device-wide `torch.cuda.synchronize()` comes before the end event, so work on
any stream is counted; such a call pays its own launch overhead, which a graph replay does not
have. Before that timing, `stream_disagreement` times the same call to its end on the calling
stream and to the end of a device-wide sync, against a call that does nothing timed the same
way: work left on another stream shows as the difference (`StreamCheck`, the harness's
`side_stream`). The number of samples is chosen from five whole samples (everything a
sample costs the GPU: its hooks, flushes and companion included) to fill `budget_ms`, within
`[min_samples, max_samples]`. Samples outside 1.5 IQR of the quartiles are dropped from the
median, IQR and coefficient of variation (std / mean); `samples_ms` keeps every sample's time, in
order.

Every sample alike: before EVERY sample `prepare(row, set)` runs (untimed): the candidate's
harness writes fresh input values into the sample's buffer set there (`inputs.refresh`, from a seed
drawn for that sample), and after every sample `observe(row, set)` (untimed) reduces its outputs
and inputs to a digest (`digest`). Which samples are checked is decided only after the timing,
by the worker, among all of them; nothing before, during or after a sample depends on it, and
every sample's time counts. A candidate that keys results on its inputs (values, addresses,
version counters) sees new values at every call; one that skips work on some calls returns wrong
outputs there, at calls it cannot tell from checked ones. (The five estimate samples are made
the same way; `row` is None for them: not recorded.)

Rotating buffer sets: a memory-bound kernel's speed depends on where its buffers lie in DRAM, so
one set of buffers gives a median that moves by a few percent from one process to the next
while it is stable within the process. The children therefore time up to `buffer_sets` copies of
the inputs (each with its own graph, output and workspace, so at different addresses), within
`buffer_mb` of extra memory, and the samples rotate over them: the median is taken over several
placements, which is what makes it repeatable across processes.

Counts the candidate cannot steer: the candidate's timing draws, from a seed the worker sends
only when timing starts, how many warm-up calls beyond `warmup` are made (up to `warmup` more) and
how far the number of samples moves from its estimate (0.8x to 1.25x).

The reference beside the candidate (`reference_in_process`, on by default): in each candidate
timing process the harness also builds the task's reference, allocates the buffer sets and
captures the reference's CUDA graph on each of them before the candidate is imported (what those
graphs run is the task's own work, whatever the candidate later does to PyTorch). `measure` then
pairs every sample with one of the reference on the same set and the same fresh values
(`Companion`), flushed the same way (a pair counts as two samples against `max_samples`, and
`budget_ms` covers both: the GPU is held about as long as for the candidate alone), and reports
the reference's stats as `reference_in_process`, with its method. The reference is always timed
by its best method, the one its own timing uses: its CUDA graphs, whatever the candidate's method
(a candidate whose graph cannot be captured is timed with direct calls and compared with the
reference's graphs: refusing capture never buys a kinder measurement), and direct calls only
where the reference's own graph cannot be captured. The
speedup is the ratio of the two medians of the same process (`in_process_speedup`): what makes a
whole process slower or faster (about 0.2-0.6 % from one process to the next for a 40 us kernel,
and the profile the candidate's process runs first) moves both and cancels. Where the reference
beside the candidate is more than `reference_drift` away from the reference timed in its own
process (by the same method, its best), the figure with less noise is used (`figure_noise`).

Noise and anomalies (`settle`, on a GPU): a measurement whose CV (the candidate's or the reference
beside it) is above `max_cv` is measured again, at most `REMEASURE` times; the least noisy is kept
and, when even that one is above the bound, marked `noisy`. A measurement whose samples split into
a majority and a minority of calls much slower than the median (`slow_minority`: at least
`ANOMALY_SHARE` of the samples `ANOMALY_FACTOR` times the median or more) is measured again too,
and where the re-measurement shows it again the stats carry `anomaly` (the worker's verdict:
`timing_anomaly`). Honest kernels' samples have a CV below 1 %, and a graph replays the same work
every time: a slow minority is a candidate that behaves differently on some calls. Only graph
replays are judged so: a direct call's time includes its host side, whose jitter makes slow
minorities of honest kernels (an H200, `relu(x + y)` as direct calls: in 3-10 % of measurements on
a quiet host, 15-30 % with its cores busy, Python's collector on or off alike; none as graph
replays; scripts/timing_interference.py). Nor is one judged so when the
reference timed beside it shows one too (`interfered`: its samples are interleaved with the
candidate's, so what slows the GPU or the host from outside slows both alike; on an H200 an honest
9 us kernel's samples showed slow minorities of 6-14 % in 5 of 408 evaluations with other
evaluations starting beside them, docs/bench/multi-gpu.md). Such a measurement is measured again
like a noisy one and never counts towards `anomaly`; a candidate gains nothing by slowing the
reference beside it too, since every sample's outputs stay liable to the checks.

Several processes: a whole process can be slower than the others (on an H200, about one in ten
is 1.5-2 % slower for a 40 us kernel, all its buffer sets together, while its own samples agree to
0.3 %: no estimator inside one process removes it, see docs/bench/eval-h200.md). The worker
can also time the reference and each candidate in `processes` processes (each a fresh child;
for a candidate with its judge and every check of the timing, see `evaluate`; the default is 1,
the reference beside the candidate does more for less), and while their
medians disagree by more than `process_spread` (relative, max / min - 1) adds one more, up to
`extra_processes`: `another_process` decides, `combine` takes the median of the per-process
medians. The samples' time and count (`budget_ms`, `max_samples`) are shared out between the
`processes` processes (`per_process`), so the GPU time of a candidate grows only by their
warm-ups and captures (and by one share when a process is added).
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from .inputs import tensor_bytes


def trimmed_stats(samples: list[float]) -> dict[str, Any]:
    """Median, IQR, CV and count after dropping samples outside 1.5 IQR."""
    if not samples:
        return {"median_ms": 0.0, "iqr_ms": 0.0, "cv": 0.0, "samples": 0}
    s = sorted(samples)
    q1, _, q3 = statistics.quantiles(s, n=4) if len(s) >= 4 else (s[0], 0, s[-1])
    iqr = q3 - q1
    kept = [x for x in s if q1 - 1.5 * iqr <= x <= q3 + 1.5 * iqr] or s
    mean = statistics.fmean(kept)
    std = statistics.pstdev(kept) if len(kept) > 1 else 0.0
    kq1, _, kq3 = statistics.quantiles(kept, n=4) if len(kept) >= 4 else (kept[0], 0, kept[-1])
    return {
        "median_ms": statistics.median(kept),
        "mean_ms": mean,
        "iqr_ms": kq3 - kq1,
        "cv": std / mean if mean > 0 else 0.0,
        "samples": len(kept),
    }


def buffer_sets(cfg: dict[str, Any], one_set_bytes: int) -> int:
    """How many copies of the inputs to rotate over: `buffer_sets` at most, and no more than fit
    in `buffer_mb` of extra memory (at least one)."""
    want = max(1, int(cfg.get("buffer_sets", 1)))
    budget = float(cfg.get("buffer_mb", 0.0)) * 2**20
    if one_set_bytes <= 0:
        return want
    return max(1, min(want, 1 + int(budget // one_set_bytes)))


def input_sets(cfg: dict[str, Any], inputs: list[Any], device: str) -> list[list[Any]]:
    """The buffer sets to time: fresh device copies of `inputs`, as many as `buffer_sets`
    allows for their size."""
    from .child_common import clone_all, to_device

    return [to_device(clone_all(inputs), device) for _ in range(buffer_sets(cfg, tensor_bytes(inputs)))]


class _CpuEvent:
    """A CUDA event's interface on the host clock (the CPU rehearsal)."""

    def __init__(self, enable_timing: bool = True):
        self.t = 0.0

    def record(self) -> None:
        self.t = time.perf_counter()

    def elapsed_time(self, other: _CpuEvent) -> float:
        return (other.t - self.t) * 1000.0


#: `prepare` / `observe` around every sample: (the sample's row, or None for an estimate
#: sample, its buffer set).
Hook = Callable[[int | None, int], None]


@dataclasses.dataclass
class Samples:
    """What `Timer._samples` measured, per sample: the timed call, the companion beside it, the
    L2 flush before it, the GPU's whole span of the sample (hooks and companion included), and
    the spans of `prepare` and `observe` (the fresh values' and the digests' cost)."""

    times: list[float]
    companion: list[float]
    flushes: list[float]
    spans: list[float]
    prepared: list[float]
    observed: list[float]


@dataclasses.dataclass
class Companion:
    """The reference timed beside the candidate (`Timer.measure`): one call per buffer set, graph
    replays, or, where its graph could not be captured, `direct` calls of its model, each from an
    idle GPU to a device-wide sync (as its own timing is then)."""

    runs: list[Callable[[], Any]]
    direct: bool = False


#: Work a direct call may leave off its calling stream beyond its own there (`StreamCheck`), ms.
STREAM_SLACK_MS = 0.015

#: Measurements beyond the first while one is noisy or shows a slow minority (`Timer.settle`).
REMEASURE = 2
#: A slow minority: at least this share of the samples ...
ANOMALY_SHARE = 0.05
#: ... each at least this many times the median ...
ANOMALY_FACTOR = 1.5
#: ... and this much above it, ms (host jitter of a direct call stays below).
ANOMALY_FLOOR_MS = 0.02

#: A slow minority the reference beside the candidate shows at this share of the candidate's or
#: more is interference (`interfered`).
INTERFERENCE_RATIO = 0.5

#: The most warm-up calls one measurement makes (a kernel of a few microseconds reaches
#: `warmup_ms` long before).
MAX_WARMUP = 10_000


class Timer:
    """Times zero-argument callables on the current CUDA device (or rehearses it on the CPU)."""

    def __init__(self, cfg: dict[str, Any], device: str = "cuda"):
        self.cfg = cfg
        self.cuda = device.startswith("cuda")
        self.flush_buf: torch.Tensor | None = None
        if self.cuda:
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            l2 = int(getattr(props, "L2_cache_size", 0) or 64 * 2**20)
            self.flush_buf = torch.empty(max(4 * l2, 256 * 2**20) // 4, dtype=torch.int32, device="cuda")

    def event(self) -> Any:
        return torch.cuda.Event(enable_timing=True) if self.cuda else _CpuEvent()

    def synchronize(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def flush(self) -> None:
        if self.flush_buf is not None:
            self.flush_buf.zero_()

    def capture(self, fn: Callable[[], Any]) -> tuple[torch.cuda.CUDAGraph | None, str]:
        """A CUDA graph of one call of `fn`, or (None, error text)."""
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    fn()
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                fn()
            torch.cuda.synchronize()
            return g, ""
        except Exception as e:  # noqa: BLE001 - any capture failure falls back to events
            try:
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001
                pass
            return None, f"{type(e).__name__}: {e}"

    def warm_up(self, runs: list[Callable[[], Any]], calls: int) -> int:
        """`calls` calls rotating over `runs`, then, where those took less than `warmup_ms`, as
        many more as fill it at their pace (one batch, one sync), at most `MAX_WARMUP` in all.
        Returns the number of calls made."""
        self.synchronize()
        start, end = self.event(), self.event()
        start.record()
        n = 0
        while n < max(calls, 1):
            runs[n % len(runs)]()
            n += 1
        end.record()
        self.synchronize()
        took = start.elapsed_time(end)
        if took < self.cfg["warmup_ms"]:
            more = min(MAX_WARMUP - n, math.ceil((self.cfg["warmup_ms"] - took) / max(took / n, 1e-4)))
            for _ in range(max(more, 0)):
                runs[n % len(runs)]()
                n += 1
            self.synchronize()
        return n

    def _samples(
        self,
        runs: list[Callable[[], Any]],
        n: int,
        device_sync: bool,
        record: bool,
        prepare: Hook | None = None,
        observe: Hook | None = None,
        companion: Companion | None = None,
    ) -> Samples:
        """`n` samples; sample `i` runs `runs[i % len(runs)]` after `prepare(row, set)` and is
        followed by `observe(row, set)` (both untimed; `row` is the sample's index when `record`,
        else None); with `companion`, each sample is followed by one of its calls on the same set,
        flushed and timed its own way. With `device_sync` (direct calls), the GPU is idle when
        the call starts (its launches are timed) and a device-wide sync ends it."""
        begin = [self.event() for _ in range(n)]
        finish = [self.event() for _ in range(n)]
        prepared = [self.event() for _ in range(n)] if prepare is not None else []
        observed = [(self.event(), self.event()) for _ in range(n)] if observe is not None else []
        events = [(self.event(), self.event()) for _ in range(n)]
        flushes = [self.event() for _ in range(n)] if self.flush_buf is not None else []
        paired = [(self.event(), self.event()) for _ in range(n)] if companion else []
        for i, (start, end) in enumerate(events):
            s = i % len(runs)
            row = i if record else None
            begin[i].record()
            if prepare is not None:
                prepare(row, s)
                prepared[i].record()
            if flushes:
                flushes[i].record()
            self.flush()
            if device_sync:
                self.synchronize()
            start.record()
            runs[s]()
            if device_sync:
                self.synchronize()
            end.record()
            if observe is not None:
                observed[i][0].record()
                observe(row, s)
                observed[i][1].record()
            if companion:
                self.flush()
                if companion.direct:
                    self.synchronize()
                paired[i][0].record()
                companion.runs[i % len(companion.runs)]()
                if companion.direct:
                    self.synchronize()
                paired[i][1].record()
            finish[i].record()
        self.synchronize()
        return Samples(
            times=[a.elapsed_time(b) for a, b in events],
            companion=[a.elapsed_time(b) for a, b in paired],
            flushes=[f.elapsed_time(a) for f, (a, _) in zip(flushes, events, strict=True)] if flushes else [],
            spans=[a.elapsed_time(b) for a, b in zip(begin, finish, strict=True)],
            prepared=[a.elapsed_time(b) for a, b in zip(begin, prepared, strict=True)] if prepared else [],
            observed=[a.elapsed_time(b) for a, b in observed],
        )

    def measure(
        self,
        fns: list[Callable[[], Any]],
        graphs: list[Any],
        rng: random.Random | None = None,
        prepare: Hook | None = None,
        observe: Hook | None = None,
        companion: Companion | None = None,
    ) -> dict[str, Any]:
        """Times the buffer sets `fns`, or the replays of their `graphs` (what `capture_all`
        returned: one per set, or none), rotating over them, with `prepare` and `observe` around
        every sample (see the module doc), and returns the stats dict of the protocol's `Timing`
        (with `samples_ms`, every sample's time). With `rng`, the extra warm-up calls and the
        number of samples are drawn from it. With `companion` (the reference, one call per set),
        each sample is paired with one of the companion (see the module doc): the budget is
        shared by both, and the companion's stats are `reference_in_process` in the result."""
        cfg = self.cfg
        runs = [g.replay for g in graphs] if graphs else fns
        device_sync = self.cuda and not graphs
        warmup = int(cfg["warmup"]) + (rng.randint(0, int(cfg["warmup"])) if rng else 0)
        if companion:
            self.warm_up(companion.runs, warmup)
        self.warm_up(runs, warmup)
        estimate = self._samples(runs, 5, device_sync, False, prepare, observe, companion)
        n = int(cfg["budget_ms"] / max(statistics.median(estimate.spans), 1e-3))
        if rng is not None:
            n = int(n * rng.uniform(0.8, 1.25))
        # a pair is two samples' GPU time: the pairs count twice against max_samples
        most = int(cfg["max_samples"]) // (2 if companion else 1)
        n = max(cfg["min_samples"], min(most, n))
        n = max(n, len(runs))
        got = self._samples(runs, n, device_sync, True, prepare, observe, companion)
        by_set: dict[int, list[float]] = {}
        for i, x in enumerate(got.times):
            by_set.setdefault(i % len(runs), []).append(x)
        stats = trimmed_stats(got.times)
        stats["samples_ms"] = got.times
        stats["set_medians_ms"] = [statistics.median(v) for _, v in sorted(by_set.items())]
        if got.flushes:
            stats["flush_ms"] = statistics.median(got.flushes)
        if got.prepared:
            stats["prepare_ms"] = statistics.median(got.prepared)
        if got.observed:
            stats["observe_ms"] = statistics.median(got.observed)
        stats["method"] = "cuda_graph" if graphs else "cuda_event"
        stats["l2_policy"] = "flushed"
        if companion:
            stats["reference_in_process"] = dict(
                trimmed_stats(got.companion),
                samples_ms=got.companion,
                method="cuda_event" if companion.direct else "cuda_graph",
            )
        return stats

    def settle(
        self,
        fns: list[Callable[[], Any]],
        graphs: list[Any],
        rng: random.Random | None = None,
        prepare: Hook | None = None,
        observe: Hook | None = None,
        companion: Companion | None = None,
    ) -> dict[str, Any]:
        """`measure`, measured again while noisy or showing a slow minority (see the module doc;
        on the CPU's rehearsal once). The kept measurement's stats, with `rounds` (a summary of
        each measurement), `noisy` and, where a slow minority showed in a measurement and again
        in the next, `anomaly`."""
        rounds: list[dict[str, Any]] = []
        limit = float(self.cfg.get("max_cv", math.inf))
        while True:
            stats = self.measure(fns, graphs, rng, prepare, observe, companion)
            # direct calls carry the host's jitter: a slow minority there is not the candidate's
            judged = self.cuda and stats["method"] == "cuda_graph"
            stats["slow_minority"] = slow_minority(stats["samples_ms"]) if judged else None
            stats["reference_slow_share"] = beside_slow_share(stats)
            stats["interfered"] = interfered(stats)
            rounds.append(stats)
            if not self.cuda:
                break
            if len(rounds) >= 2 and all(r["slow_minority"] and not r["interfered"] for r in rounds[-2:]):
                stats["anomaly"] = [
                    dict(r["slow_minority"], reference_share=r["reference_slow_share"]) for r in rounds[-2:]
                ]
                break
            if noise(stats) <= limit and not stats["slow_minority"]:
                break
            if len(rounds) > REMEASURE:
                break
        kept = rounds[-1] if rounds[-1].get("anomaly") or noise(rounds[-1]) <= limit else min(rounds, key=noise)
        kept["noisy"] = self.cuda and noise(kept) > limit
        kept["rounds"] = [
            {
                "median_ms": r["median_ms"],
                "cv": r["cv"],
                "samples": r["samples"],
                "reference_cv": (r.get("reference_in_process") or {}).get("cv"),
                "slow_share": (r["slow_minority"] or {}).get("share", 0.0),
                "reference_slow_share": r["reference_slow_share"],
                "interfered": r["interfered"],
            }
            for r in rounds
        ]
        return kept

    def capture_all(self, fns: list[Callable[[], Any]]) -> tuple[list[Any], str]:
        """One graph per buffer set: (graphs, "") when every set was captured, else
        ([], the first error): then every set is timed with events (on the CPU: no graphs)."""
        if not self.cuda:
            return [], "no CUDA graphs on the CPU"
        graphs = []
        for fn in fns:
            g, err = self.capture(fn)
            if g is None:
                return [], err
            graphs.append(g)
        return graphs, ""

    def stream_disagreement(self, fn: Callable[[], Any], n: int = 21) -> StreamCheck:
        """Whether `fn` leaves work on other streams (see `StreamCheck`): `n` calls, each timed to
        its end on the calling stream and, the same call, to the end of a device-wide sync after
        it, each followed by a call that does nothing timed the same way (the sync's own cost under
        the same conditions); each from an idle GPU, after an L2 flush, as a timed direct call."""
        spans: dict[str, list[float]] = {"local": [], "gap": [], "sync": []}
        marks = [[self.event() for _ in range(3)] for _ in range(2 * n)]
        for i, (start, mid, end) in enumerate(marks):
            self.flush()
            self.synchronize()
            start.record()
            if i % 2 == 0:
                fn()
            mid.record()
            self.synchronize()
            end.record()
        self.synchronize()
        for i, (start, mid, end) in enumerate(marks):
            if i % 2 == 0:
                spans["local"].append(start.elapsed_time(mid))
                spans["gap"].append(mid.elapsed_time(end))
            else:
                spans["sync"].append(mid.elapsed_time(end))
        return StreamCheck(*(statistics.median(v) for v in spans.values()))


@dataclasses.dataclass
class StreamCheck:
    """A direct call's work on the calling stream against the same call's to the end of a
    device-wide sync (`Timer.stream_disagreement`), medians in ms. `escaped_ms`: how much longer
    the sync waited after the call's calling-stream work than it waits after a call that does
    nothing: work left on other streams. Judged by `escapes`."""

    local_ms: float
    gap_ms: float
    sync_ms: float

    @property
    def escaped_ms(self) -> float:
        return self.gap_ms - self.sync_ms

    def escapes(self) -> bool:
        """More work off the calling stream than on it (plus 15 us of host jitter)."""
        return self.escaped_ms > self.local_ms + STREAM_SLACK_MS

    def summary(self) -> list[float]:
        """[on the calling stream, to the end of the sync, the sync's own cost] (ms)."""
        return [self.local_ms, self.local_ms + self.gap_ms, self.sync_ms]


def noise(stats: dict[str, Any]) -> float:
    """The CV of a measurement: the larger of the candidate's and the reference's beside it."""
    beside = stats.get("reference_in_process") or {}
    return max(float(stats.get("cv", 0.0)), float(beside.get("cv", 0.0)))


def figure_noise(stats: dict[str, Any]) -> float:
    """How noisy a timing figure (a median) is: the relative standard error of its samples' mean,
    CV / sqrt(samples) (infinite without samples)."""
    n = int(stats.get("samples", 0))
    return float(stats.get("cv", 0.0)) / math.sqrt(n) if n > 0 else math.inf


def slow_minority(samples: list[float]) -> dict[str, Any] | None:
    """The calls much slower than the median when they are a minority worth a look (see the
    module doc): their share, count and median, and the median of all; None otherwise."""
    if len(samples) < 2:
        return None
    slow = slow_calls(samples)
    share = len(slow) / len(samples)
    if share < ANOMALY_SHARE:
        return None
    return {
        "share": share,
        "count": len(slow),
        "median_ms": statistics.median(samples),
        "slow_median_ms": statistics.median(slow),
    }


def slow_calls(samples: list[float]) -> list[float]:
    """The samples `ANOMALY_FACTOR` times their median or more and `ANOMALY_FLOOR_MS` above it
    (none of an empty list)."""
    if not samples:
        return []
    median = statistics.median(samples)
    return [x for x in samples if x >= median * ANOMALY_FACTOR and x - median >= ANOMALY_FLOOR_MS]


def beside_slow_share(stats: dict[str, Any]) -> float | None:
    """The share of the reference's samples beside the candidate (`Companion`) that are slow the
    way `slow_minority` counts, against their own median; None without a reference beside."""
    beside = (stats.get("reference_in_process") or {}).get("samples_ms")
    if not beside:
        return None
    return len(slow_calls(beside)) / len(beside)


def interfered(stats: dict[str, Any]) -> bool:
    """Whether a measurement's slow minority is something else on the GPU or the host, not the
    candidate: the reference timed beside it (its samples interleaved with the candidate's, the
    same flushes, fresh values and digests around them) was slowed alike
    (``reference_slow_share``, `beside_slow_share`), at least `INTERFERENCE_RATIO` of the
    candidate's slow share. Such a measurement is measured again, as a noisy one is, and never
    makes an anomaly (see the module doc)."""
    own = stats.get("slow_minority")
    beside = stats.get("reference_slow_share")
    return own is not None and beside is not None and beside >= float(own["share"]) * INTERFERENCE_RATIO


def per_process(cfg: dict[str, Any]) -> dict[str, Any]:
    """The timing options one process gets: `budget_ms` and `max_samples` (totals) divided by
    `processes`, `max_samples` no lower than `min_samples`."""
    n = max(1, int(cfg.get("processes", 1)))
    out = dict(cfg)
    out["budget_ms"] = float(cfg["budget_ms"]) / n
    out["max_samples"] = max(int(cfg["min_samples"]), int(cfg["max_samples"]) // n)
    return out


def spread(medians: list[float]) -> float:
    """How far the per-process medians disagree: max / min - 1 (0 for fewer than two)."""
    if len(medians) < 2 or min(medians) <= 0:
        return 0.0
    return max(medians) / min(medians) - 1.0


def another_process(medians: list[float], cfg: dict[str, Any], measured: bool) -> bool:
    """Whether to time in one more process, given the medians of those timed so far: until
    `processes` are timed; then, where the times are `measured` (not the CPU's rehearsal, whose
    host-clock times say nothing), while their `spread` is above `process_spread` and fewer than
    `processes + extra_processes` are timed.

    Why not the lower of two: the outlier process is the slow one (the H200 runs showed no fast
    one), so the lower of two would discard it without a third process; but where both are
    ordinary (about four times in five) the lower is biased low and varies more than their mean
    (for a normal spread, 0.68 against 0.5 times one process's variance). So: where the two agree,
    their mean (the median of two); where they disagree, a third process, which costs one share of
    the samples for about one candidate in five, and the median of three, which outvotes one slow
    process."""
    n = len(medians)
    want = max(1, int(cfg.get("processes", 1)))
    if n < want:
        return True
    most = want + max(0, int(cfg.get("extra_processes", 0)))
    return measured and n < most and spread(medians) > float(cfg.get("process_spread", 0.0))


def combine(stats: list[dict[str, Any]]) -> dict[str, Any]:
    """One measurement from the per-process `stats` (each `Timer.measure`'s): `median_ms` is the
    median of the per-process medians (`process_medians_ms`, in the order timed), `samples` the
    samples kept over all processes; the other figures (IQR, CV, mean, buffer sets, flush,
    method) are those of the process whose median is nearest the combined one.
    `process_samples_ms` keeps every process's samples (in order), and, when every process
    timed the reference beside the candidate, `process_reference_samples_ms` the reference's
    sample paired with each: the labels' confidence intervals are drawn from them."""
    medians = [float(s["median_ms"]) for s in stats]
    median = statistics.median(medians)
    nearest = min(range(len(stats)), key=lambda i: abs(medians[i] - median))
    out = dict(stats[nearest])
    out["median_ms"] = median
    out["samples"] = sum(int(s["samples"]) for s in stats)
    out["process_medians_ms"] = medians
    out["process_samples_ms"] = [list(s.get("samples_ms") or []) for s in stats]
    beside = [(s.get("reference_in_process") or {}).get("samples_ms") for s in stats]
    if stats and all(beside):
        out["process_reference_samples_ms"] = [list(b or []) for b in beside]
    return out


def settings(cfg: dict[str, Any]) -> str:
    """The timing method's settings in words (every row's stamp carries them): `cfg` is the
    evaluator's `timing` section (totals, before `per_process`)."""
    beside = "the reference timed beside the candidate" if cfg.get("reference_in_process") else "no reference beside"
    return (
        f"CUDA-graph replay (events around direct calls where capture fails), L2 flushed before "
        f"every sample; warm-up >= {cfg['warmup']} calls and {cfg['warmup_ms']} ms; "
        f"{cfg['min_samples']}-{cfg['max_samples']} samples in {cfg['budget_ms']} ms over "
        f"{cfg.get('processes', 1)} process(es) (+{cfg.get('extra_processes', 0)} while their "
        f"medians differ by > {cfg.get('process_spread', 0.0)}); {cfg.get('buffer_sets', 1)} buffer "
        f"sets within {cfg.get('buffer_mb', 0.0)} MB; re-measured above CV {cfg.get('max_cv')}; "
        f"median of samples within 1.5 IQR; {beside}"
    )


def in_process_speedup(
    stats: list[dict[str, Any]], reference: dict[str, Any], cfg: dict[str, Any]
) -> tuple[float | None, str]:
    """The speedup from the reference timed beside the candidate (`reference_in_process` of each
    process's stats): the median over the processes of (reference in that process / candidate in
    that process). `reference` is the reference child's own timing (its best method, as beside
    the candidate). Returns (None, "") when a process has no such figure; where one of them is more than
    `reference_drift` (relative) away from `reference`, the figure with less noise
    (`figure_noise`) decides: the paired ratio when the reference beside the candidate is the less
    noisy (with a note), else (None, why): the caller uses the reference's own figure."""
    ratios = []
    notes = []
    limit = float(cfg.get("reference_drift", 0.05))
    own = float(reference["median_ms"])
    for i, s in enumerate(stats):
        beside_stats = s.get("reference_in_process") or {}
        beside = float(beside_stats.get("median_ms", 0.0))
        cand = float(s["median_ms"])
        if beside <= 0 or cand <= 0:
            return None, ""
        drift = beside / own - 1.0
        if abs(drift) > limit:
            gap = (
                f"the reference took {beside:.4f} ms beside the candidate (timing process {i + 1}, CV "
                f"{float(beside_stats.get('cv', 0.0)):.2%} over {beside_stats.get('samples')} samples) against "
                f"{own:.4f} ms in its own process (CV {float(reference.get('cv', 0.0)):.2%} over "
                f"{reference.get('samples')} samples): {drift:+.1%}, more than reference_drift = {limit:.1%}"
            )
            if figure_noise(beside_stats) >= figure_noise(reference):
                return None, gap + "; the speedup uses the reference's own timing, the less noisy figure"
            notes.append(gap + "; the speedup uses the figure beside the candidate, the less noisy one")
        ratios.append(beside / cand)
    return statistics.median(ratios), "; ".join(notes)

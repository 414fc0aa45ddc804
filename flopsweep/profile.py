"""``profile=true``: one extra profiled step after the measured ones, and where its time went.

The measured steps are never profiled, so the timing is unaffected. After them each rank
runs one more optimizer step under :class:`torch.profiler.profile`, writes its trace
(Chrome trace format, gzipped; open it in Perfetto, https://ui.perfetto.dev, or
``chrome://tracing``) to ``profile/rank<R>.trace.json.gz`` in the run directory, and
splits the step into parts that add up to its wall time:

``compute_s``
    busy time of compute work (every device interval that is not communication or the
    optimizer step).
``optimizer_s``
    busy time of the optimizer step (gradient clipping, the update, zeroing) not
    overlapped by other compute.
``exposed_comm_s``
    communication not overlapped by any compute: the time a rank waits on its peers.
``idle_s``
    the step's wall time in which nothing of the above runs. On a GPU this is the
    host-bound time (kernel launches, Python, synchronisation).
``comm_s``
    all communication, overlapped or not (not a part of the sum).

``compute_s + optimizer_s + exposed_comm_s + idle_s == step_s``, the profiled step's
wall time (the span of the ``flopsweep.step`` annotation).

What "device interval" means depends on where the run is:

- **CUDA**: GPU kernels, memcpys and memsets. Communication is NCCL's kernels. The
  optimizer is the device work launched inside the ``flopsweep.optimizer`` annotation
  (matched by each launch's correlation id).
- **CPU (gloo)**: the profiler sees operators, not cores: every ``cpu_op`` on any
  thread counts as busy, communication is the c10d collectives and gloo's own spans
  (``gloo:all_reduce`` on gloo's threads, which the main thread waits for), and
  the optimizer is the ``flopsweep.optimizer`` annotation. Idle is then Python and
  framework time between operators, not an idle core.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from flopsweep.annotations import OPTIMIZER_ANNOTATION, STEP_ANNOTATION

COMM_PATTERN = re.compile(
    r"nccl|gloo|c10d::|c10d_functional::|record_param_comms|all_?reduce|all_?gather|reduce_?scatter"
    r"|broadcast|all_?to_?all|allgather_into_tensor|_reduce_scatter_base|barrier|wait_tensor",
    re.IGNORECASE,
)
"""Names of communication: NCCL kernels on CUDA; c10d collectives (and gloo's) on the CPU; the
functional collectives of DTensor tensor parallelism (``_c10d_functional::all_gather_into_tensor``,
``reduce_scatter_tensor``, ``all_reduce``, ``wait_tensor``)."""

DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
"""Chrome-trace categories of work on a GPU's timeline (torch.profiler / Kineto)."""


@dataclass(frozen=True, kw_only=True)
class StepBreakdown:
    """Where one profiled step's wall time went, seconds (see the module docstring).

    Attributes:
        step_s: wall time of the profiled step.
        compute_s, optimizer_s, exposed_comm_s, idle_s: the parts; they sum to ``step_s``.
        comm_s: all communication, overlapped or not.
        view: ``"cuda"`` (GPU kernels) or ``"cpu"`` (CPU operators).
        optimizer_from: how the optimizer's work was found: ``"launch"`` (CUDA: kernels launched
            inside the host annotation), ``"gpu_annotation"`` (CUDA, a trace without launch
            correlation ids), ``"host_annotation"`` (CPU). CUDA breakdowns recorded without this
            key (before 2026-12-01) undercount the optimizer; the analysis does not show their
            compute/optimizer split.
        wall_s: the same step timed by ``time.perf_counter`` inside the annotation, apart from
            the trace (a check on ``step_s``); None when the trace alone was read.
    """

    step_s: float
    compute_s: float
    optimizer_s: float
    exposed_comm_s: float
    idle_s: float
    comm_s: float
    view: str
    optimizer_from: str = "host_annotation"
    wall_s: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


Interval = tuple[float, float]

PARTS = ("compute_s", "optimizer_s", "exposed_comm_s", "idle_s")
"""The fields of :class:`StepBreakdown` that add up to ``step_s``."""


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint intervals covering the same points as ``intervals``."""
    merged: list[list[float]] = []
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def intersect(a: Sequence[Interval], b: Sequence[Interval]) -> list[Interval]:
    """The intersection of two sorted, disjoint interval lists (as from :func:`union`)."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(a: Sequence[Interval], b: Sequence[Interval]) -> list[Interval]:
    """The points of ``a`` not in ``b`` (both sorted and disjoint)."""
    out: list[Interval] = []
    j = 0
    for start, end in a:
        cur = start
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < end:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < end:
            out.append((cur, end))
    return out


def length(intervals: Iterable[Interval]) -> float:
    return sum(end - start for start, end in intervals)


def _span(event: dict[str, Any]) -> Interval:
    start = float(event["ts"])
    return start, start + float(event.get("dur", 0.0))


def _named(events: Iterable[dict[str, Any]], category: str, name: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("cat") == category and e.get("name") == name]


def step_breakdown(events: Sequence[dict[str, Any]], *, cuda: bool) -> StepBreakdown:
    """Split the profiled step of one rank's Chrome trace into :class:`StepBreakdown` parts.

    Args:
        events: the trace's ``traceEvents`` (timestamps and durations in microseconds).
        cuda: classify GPU work (True) or CPU operators (False).

    Raises:
        ValueError: the trace has no ``flopsweep.step`` annotation.
    """
    steps = _named(events, "user_annotation", STEP_ANNOTATION)
    if not steps:
        raise ValueError(f"the trace has no {STEP_ANNOTATION!r} annotation")
    window = [_span(max(steps, key=lambda e: float(e.get("dur", 0.0))))]
    host_optimizer = union(_span(e) for e in _named(events, "user_annotation", OPTIMIZER_ANNOTATION))
    if cuda:
        work = [e for e in events if e.get("cat") in DEVICE_CATEGORIES]
        # Kineto's GPU-side annotation spans do not nest: the optimizer's own span is cut short
        # where torch's ``Optimizer.step#AdamW.step`` span begins (on an H200, Llama 8B: 27 ms
        # of its 93 ms). The kernels launched inside the host span are the optimizer's work.
        optimizer = _launched_within(events, work, host_optimizer) if host_optimizer else []
        optimizer_from = "launch"
        if not optimizer:  # a trace without correlation ids
            optimizer = union(_span(e) for e in _named(events, "gpu_user_annotation", OPTIMIZER_ANNOTATION))
            optimizer_from = "gpu_annotation"
    else:
        # gloo runs its collectives on its own threads, where the profiler records them as
        # user annotations (``gloo:all_reduce``), not as operators.
        work = [
            e
            for e in events
            if e.get("cat") == "cpu_op"
            or (e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("gloo:"))
        ]
        optimizer = host_optimizer
        optimizer_from = "host_annotation"
    comm = union(_span(e) for e in work if COMM_PATTERN.search(str(e.get("name", ""))))
    busy = union(_span(e) for e in work if not COMM_PATTERN.search(str(e.get("name", ""))))
    comm, busy = intersect(comm, window), intersect(busy, window)
    opt_busy = intersect(busy, optimizer)
    compute = subtract(busy, opt_busy)
    exposed = subtract(comm, busy)
    us = 1e-6
    step = length(window)
    return StepBreakdown(
        step_s=step * us,
        compute_s=length(compute) * us,
        optimizer_s=length(opt_busy) * us,
        exposed_comm_s=length(exposed) * us,
        idle_s=(step - length(union([*busy, *comm]))) * us,
        comm_s=length(comm) * us,
        view="cuda" if cuda else "cpu",
        optimizer_from=optimizer_from,
    )


def launched_ids(events: Sequence[dict[str, Any]], host: Sequence[Interval]) -> set[Any]:
    """The ``correlation`` ids of the launches (``cuda_runtime`` or ``cuda_driver`` calls; Triton
    kernels are launched through the driver API) that lie inside the host intervals; a device
    event with the same id is the work that launch started."""
    return {
        e["args"]["correlation"]
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver")
        and isinstance(e.get("args"), dict)
        and "correlation" in e["args"]
        and intersect([_span(e)], host)
    }


def _launched_within(
    events: Sequence[dict[str, Any]], work: Sequence[dict[str, Any]], host: Sequence[Interval]
) -> list[Interval]:
    """The device spans of the work launched inside the host intervals (:func:`launched_ids`)."""
    launched = launched_ids(events, host)
    return union(
        _span(e) for e in work if isinstance(e.get("args"), dict) and e["args"].get("correlation") in launched
    )


def read_trace(path: Path) -> list[dict[str, Any]]:
    """The ``traceEvents`` of a Chrome trace file, gzipped (``.gz``) or not."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


class TraceProblem(RuntimeError):
    """The profiled step ran, but its trace could not be written or read back. The run's
    measured figures are unaffected; the record gets a warning and no ``metrics.breakdown``."""


def trace_dir_problem(directory: Path) -> str | None:
    """Why traces cannot be written to ``directory`` (made when missing), or None.

    A file of that name (``profile`` in the run directory), a parent that cannot be made or a
    directory that is not writable is a problem; an existing directory with old traces is not
    (they are overwritten); so is another user's symbolic link on its path
    (:func:`flopsweep.links.foreign_link`: never followed).
    """
    from flopsweep.safe_folders import foreign_link_refusal

    if foreign := foreign_link_refusal(directory):
        return f"{foreign.line}, so no trace is written there"
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if directory.exists() and not directory.is_dir():
            return f"{directory} is a file, not a directory, so no trace can be written there"
        return f"cannot make {directory} ({exc.strerror or exc})"
    if os.path.islink(directory):  # a link planted there: never followed
        return f"{directory} is a symbolic link, not a directory of this run, so no trace is written there"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"{directory} is not writable"
    return None


def export_trace(prof: Any, trace_path: Path) -> None:
    """``prof.export_chrome_trace`` into a new file of an unpredictable name beside ``trace_path``
    (:func:`flopsweep.files.create_new`; gzip from its ``.gz`` suffix), then renamed to
    ``trace_path``: a link or FIFO planted at ``trace_path`` is replaced, never written through."""
    from flopsweep.files import create_new

    fd, tmp = create_new(trace_path.parent, f".{trace_path.name}.", suffix=".tmp.json.gz")
    os.close(fd)
    try:
        prof.export_chrome_trace(str(tmp))
        os.replace(tmp, trace_path)
    finally:
        tmp.unlink(missing_ok=True)


KINETO_LINE = re.compile(r"^(VERBOSE|INFO|WARNING|ERROR|STAGE|USDT):\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ")
"""A line that Kineto (torch.profiler's C++ back end) prints itself, straight to the process's
stderr: ``USDT:2026-11-30 23:55:08 3151:3151 SyncActivityProfilerHandler.cpp:52] profiler_start``."""


@contextlib.contextmanager
def native_chatter_to(sink: Callable[[str], None]) -> Iterator[None]:
    """Route what native code writes to file descriptors 1 and 2 inside the block: Kineto's own
    lines (:data:`KINETO_LINE`) go to ``sink`` (the rank's debug log), every other line back to
    the descriptor it was written to, once the block ends.

    Kineto prints ``profiler_start``/``profiler_stop`` from C++ on every profiled step, past
    Python's ``sys.stderr``, so only the descriptors themselves can catch it.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        saved = {1: os.dup(1), 2: os.dup(2)}
        try:
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            for fd, captured in ((1, out), (2, err)):
                captured.seek(0)
                kept = []
                for line in captured.read().decode("utf-8", "replace").splitlines(keepends=True):
                    if KINETO_LINE.match(line):
                        sink(line.rstrip("\n"))
                    else:
                        kept.append(line)
                if kept:
                    os.write(fd, "".join(kept).encode())


def profile_step(
    trainer: Any,
    batches: list[Any],
    device: Any,
    trace_path: Path,
    chatter: Callable[[str], None] = lambda line: None,
) -> StepBreakdown:
    """Run one optimizer step under torch.profiler, write its trace to ``trace_path``
    (gzipped when it ends in ``.gz``), and return the step's breakdown.

    The step is wrapped in the ``flopsweep.step`` annotation; trainers wrap their optimizer
    step in ``flopsweep.optimizer``. On CUDA the device is synchronised before and after the
    step so that the annotation spans all of its kernels. Kineto's console lines go to
    ``chatter`` (:func:`native_chatter_to`).

    Raises:
        TraceProblem: the step ran, but its trace could not be written or read back.
        Whatever the step itself raises (an out-of-memory error), unchanged.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    if cuda:
        torch.cuda.synchronize(device)
    with native_chatter_to(chatter):
        with profile(activities=activities) as prof:
            with record_function(STEP_ANNOTATION):
                start = time.perf_counter()
                trainer.step(batches)
                if cuda:
                    torch.cuda.synchronize(device)
                wall = time.perf_counter() - start
        try:
            export_trace(prof, trace_path)
            return replace(step_breakdown(read_trace(trace_path), cuda=cuda), wall_s=wall)
        except Exception as exc:  # noqa: BLE001 - the step ran; only its trace is lost
            raise TraceProblem(f"the trace {trace_path} could not be written or read: {exc}") from exc

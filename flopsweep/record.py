"""The ``metrics.json`` record: schema constants, metric specs, the atomic writer, the reader.

Torch-free: the job, the Hydra callbacks and the analysis all import it. The
record is the only contract between a run and the analysis; docs/design.md lists
every key. Metric values of a run that is not ``ok`` are null, never 0. A record
is strict JSON: a non-finite number is written as null (with a flag), never as
``NaN``.

Adding a metric: compute it in the worker or :mod:`flopsweep.metrics`, and add a
:class:`MetricSpec` line to ``METRIC_SPECS``; the analysis derives its columns,
units and ranking direction (``better``) from that table.

:func:`plural` is here too, the one way every message of the sweep and the analysis writes a
count with its noun (``1 run``, ``2 runs``), since this is the module both import.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import secrets
import shutil
import signal
import stat
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 2
METRICS_FILE = "metrics.json"
STATUSES = ("ok", "oom", "error", "invalid")
PHASES = ("config", "init", "warmup", "measure", "launch")
MAX_RECORD_BYTES = 16 * 2**20
"""Records larger than this are not read (a real one is a few KiB)."""


@dataclass(frozen=True)
class MetricSpec:
    """One key of ``metrics``.

    Attributes:
        key: the key in ``metrics``.
        unit: its unit (``s``, ``1/s``, ``FLOP``, ``TFLOP/s``, ``bytes``, ``1`` for a ratio, ``count``, ``""``
            for text or structures).
        better: which way is better, ``higher`` (rates, TFLOPs, MFU) or ``lower`` (times, memory),
            or ``None`` (not a figure of merit: counts, FLOPs, peaks, text). The analysis sorts
            and ranks by it: best first.
        header: the short column header in tables.
        column: the analysis column, when it differs from ``key`` (a scaled or nested value).
        path: the path inside ``metrics`` when nested (``iteration_time_s.mean``).
        scale: divide by this for the column (bytes -> GiB).
        description: one line for the legend.
    """

    key: str
    unit: str
    better: str | None
    header: str
    description: str
    column: str | None = None
    path: tuple[str, ...] | None = None
    scale: float | None = None

    @property
    def name(self) -> str:
        """The analysis column name."""
        return self.column or self.key


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``count`` and ``noun`` as a message writes them: ``1 run``, ``0 runs``, ``3 runs``.

    Args:
        noun: the singular, e.g. ``"run"``, ``"ok run"``, ``"visible GPU"`` (the last word takes
            the ``s``).
        many: the plural when adding ``s`` is wrong, e.g. ``"mismatches"`` for ``"mismatch"``.
    """
    return f"{count} {noun if count == 1 else many or noun + 's'}"


GIB = float(2**30)

METRIC_SPECS: tuple[MetricSpec, ...] = (
    MetricSpec(
        "iteration_time_s",
        "s",
        "lower",
        "iter_s(mean)",
        "mean seconds per optimizer step",
        column="iteration_time_s_mean",
        path=("iteration_time_s", "mean"),
    ),
    MetricSpec(
        "iteration_time_s",
        "s",
        "lower",
        "iter_s(median)",
        "median seconds per optimizer step",
        column="iteration_time_s_median",
        path=("iteration_time_s", "median"),
    ),
    MetricSpec(
        "iteration_time_s",
        "1",
        "lower",
        "cv",
        "coefficient of variation of the step times",
        column="iteration_time_s_cv",
        path=("iteration_time_s", "cv"),
    ),
    MetricSpec("tokens_per_s", "1/s", "higher", "tokens/s", "global tokens per second (from the mean step)"),
    MetricSpec("tokens_per_s_per_device", "1/s", "higher", "tokens/s/dev", "tokens per second per device"),
    MetricSpec("global_batch_size", "", None, "gbs", "sequences per optimizer step over all ranks"),
    MetricSpec("tokens_per_step", "", None, "tok/step", "tokens per optimizer step over all ranks"),
    MetricSpec(
        "model_flops_per_iteration",
        "FLOP",
        None,
        "model_FLOP",
        "work the model needs per step: every weight matmul fwd+bwd, attention x density, no recompute",
    ),
    MetricSpec(
        "hardware_flops_per_iteration",
        "FLOP",
        None,
        "hw_FLOP",
        "model FLOPs plus the activation-checkpointing recompute that runs",
    ),
    MetricSpec(
        "model_tflops_per_device",
        "TFLOP/s",
        "higher",
        "TFLOPs",
        "model FLOPs / (mean step time x world size)",
    ),
    MetricSpec(
        "hardware_tflops_per_device",
        "TFLOP/s",
        "higher",
        "hw_TFLOPs",
        "hardware FLOPs / (mean step time x world size)",
    ),
    MetricSpec(
        "tflops_per_device",
        "TFLOP/s",
        "higher",
        "eq3_TFLOPs",
        "Narayanan et al. eq. 3 as published (dense, f = 4 with checkpointing); null for Llama",
    ),
    MetricSpec("mfu", "1", "higher", "MFU", "model TFLOPs / dense bf16 (or run precision) datasheet peak"),
    MetricSpec("hfu", "1", "higher", "HFU", "hardware TFLOPs / datasheet peak"),
    MetricSpec("peak_tflops", "TFLOP/s", None, "peak", "datasheet dense peak used for MFU/HFU"),
    MetricSpec("peak_tflops_source", "", None, "peak_src", "where the peak comes from"),
    MetricSpec(
        "measured_matmul_tflops",
        "TFLOP/s",
        None,
        "gemm_TFLOPs",
        "dense GEMM rate measured on the device at the run's matmul precision",
    ),
    MetricSpec("matmul_fraction", "1", "higher", "gemm_frac", "model TFLOPs / measured_matmul_tflops"),
    MetricSpec("peak_tflops_fp8", "TFLOP/s", None, "peak_fp8", "datasheet dense fp8 peak (fp8 runs)"),
    MetricSpec("mfu_fp8", "1", "higher", "MFU_fp8", "model TFLOPs / dense fp8 peak (fp8 runs)"),
    MetricSpec(
        "peak_cuda_allocated_bytes",
        "bytes",
        "lower",
        "alloc_GiB",
        "peak allocated GPU memory, max over ranks",
        column="peak_cuda_allocated_gib",
        scale=GIB,
    ),
    MetricSpec(
        "cuda_alloc_retries",
        "count",
        "lower",
        "alloc_retries",
        "times the CUDA caching allocator freed its cache and retried cudaMalloc in the measured "
        "steps, max over ranks (each retry synchronises the device: memory too tight for speed)",
    ),
    MetricSpec(
        "peak_cuda_reserved_bytes",
        "bytes",
        "lower",
        "resv_GiB",
        "peak reserved GPU memory, max over ranks",
        column="peak_cuda_reserved_gib",
        scale=GIB,
    ),
    MetricSpec(
        "peak_host_rss_bytes",
        "bytes",
        "lower",
        "rss_GiB",
        "peak host resident memory, max over ranks",
        column="peak_host_rss_gib",
        scale=GIB,
    ),
    MetricSpec("swap_used_bytes", "bytes", "lower", "swap", "host swap in use at the end"),
    MetricSpec("per_rank", "", None, "per_rank", "per-rank memory figures"),
    MetricSpec("loss_first", "", None, "loss0", "mean loss of the first step (warm-up included)"),
    MetricSpec("loss_last", "", None, "loss", "mean loss of the last measured step"),
    MetricSpec("loss_finite", "", None, "loss_ok", "false when any step's loss was NaN or infinite"),
    MetricSpec("warmup_steps", "", None, "warmup", "warm-up steps run (steps.warmup plus any extra)"),
    MetricSpec("unsteady_steps", "", None, "unsteady", "measured steps over 3x the median of the others"),
    MetricSpec("recompute", "", None, "recompute", "checkpointing recompute: none, early_stop, full"),
    MetricSpec("fp8_layers", "", None, "fp8_layers", "nn.Linear layers converted to float8 (fp8 runs)"),
    MetricSpec("flops_convention", "", None, "convention", "how the FLOPs figures are counted"),
    MetricSpec(
        "breakdown",
        "s",
        "lower",
        "prof_step_s",
        "profile=true: wall time of the one profiled step (after the measured ones)",
        column="breakdown_step_s",
        path=("breakdown", "step_s"),
    ),
    MetricSpec(
        "breakdown",
        "s",
        "lower",
        "compute_s",
        "profiled step: busy compute time (not communication, not the optimizer)",
        column="breakdown_compute_s",
        path=("breakdown", "compute_s"),
    ),
    MetricSpec(
        "breakdown",
        "s",
        "lower",
        "optim_s",
        "profiled step: optimizer step (clip, update, zero) not overlapped by compute",
        column="breakdown_optimizer_s",
        path=("breakdown", "optimizer_s"),
    ),
    MetricSpec(
        "breakdown",
        "s",
        "lower",
        "exp_comm_s",
        "profiled step: communication not overlapped by any compute",
        column="breakdown_exposed_comm_s",
        path=("breakdown", "exposed_comm_s"),
    ),
    MetricSpec(
        "breakdown",
        "s",
        "lower",
        "idle_s",
        "profiled step: nothing runs (on a GPU: host-bound time); the four parts sum to prof_step_s",
        column="breakdown_idle_s",
        path=("breakdown", "idle_s"),
    ),
    MetricSpec(
        "breakdown",
        "s",
        "lower",
        "comm_s",
        "profiled step: all communication, overlapped or not",
        column="breakdown_comm_s",
        path=("breakdown", "comm_s"),
    ),
)
"""Every metric of the record, in record order (a key may have several columns)."""

METRIC_KEYS: tuple[str, ...] = tuple(dict.fromkeys(spec.key for spec in METRIC_SPECS))
"""The keys of ``metrics``, each once."""


class RecordExistsError(FileExistsError):
    """Raised instead of writing over an existing ``metrics.json``."""


class RecordError(ValueError):
    """A ``metrics.json`` that cannot be read as a flopsweep record; the message says why."""


class RecordUnwritable(OSError):
    """A file could not be written where a run's output goes: the directory became read-only,
    was removed or replaced, or the disk is full.

    ``str()`` is one line naming the path and the OS error, and for a full disk the free space
    (``shutil.disk_usage``); :attr:`fix` says what to do.
    """

    def __init__(self, path: Path, cause: OSError, kept: Path | None = None) -> None:
        super().__init__(cause.errno, cause.strerror or str(cause), str(path))
        self.path = Path(path)
        full = cause.errno in (errno.ENOSPC, errno.EDQUOT)
        where = _existing(self.path)
        self.line = f"cannot write {path}: {cause.strerror or cause}"
        if full:
            self.line += f", {_free_space(where)} free on {where}"
        if kept is not None:  # written and synced, then refused its name: nothing is lost
            self.line += f"; the whole record is kept in {kept}"
        self.fix = f"free space on {where}" if full else f"make {where} writable"

    def __str__(self) -> str:
        return self.line


class NotRecorded(Exception):
    """A job ended but its ``metrics.json`` could not be written (see :class:`RecordUnwritable`).
    The message is the one line to print: the job, the path, why, and the fix."""


def _existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (``shutil.disk_usage`` needs one)."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _free_space(path: Path) -> str:
    """The space free for this user on ``path``'s file system, as ``12.0 KiB``."""
    try:
        return _size(shutil.disk_usage(path).free)
    except OSError:
        return "unknown space"


def _size(n: float) -> str:
    """Bytes as ``512 B``, ``12.0 KiB``, ``3.5 GiB``."""
    unit = "B"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            break
        n /= 1024
    return f"{n:.0f} B" if unit == "B" else f"{n:.1f} {unit}"


MIN_FREE_BYTES = 2**20
"""Free space a sweep wants before its next job: that job's Hydra files, log, tracebacks and
record take some tens of KiB."""


def check_writable(directory: Path) -> None:
    """Write, sync and remove one byte in ``directory``, and find at least :data:`MIN_FREE_BYTES`
    free there: the sweep's check, between two jobs, that the next job can be recorded (a
    read-only, replaced or nearly full directory fails here, rather than in Hydra with a traceback).

    Raises:
        RecordUnwritable: naming the directory, the OS error and, for a full disk, the free space.
    """
    probe = Path(directory) / f".flopsweep-probe.{os.getpid()}.{secrets.token_hex(4)}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        usage = shutil.disk_usage(directory)
    except OSError as exc:
        raise RecordUnwritable(directory, exc) from None
    finally:
        _discard(probe)
    if usage.total and usage.free < MIN_FREE_BYTES:  # some FUSE file systems report no sizes at all
        low = RecordUnwritable(directory, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
        low.line = f"{directory} has {_size(usage.free)} free, under the {_size(MIN_FREE_BYTES)} a job needs"
        raise low


@dataclass(frozen=True, kw_only=True)
class ErrorInfo:
    """``record.error``: why a run is not ``ok``.

    Attributes:
        type: the exception class name (``ConfigError``, ``OutOfMemoryError``, ``Timeout``...).
        message: one paragraph.
        phase: one of :data:`PHASES`.
        rank: the global rank that failed first, or None (the job itself).
        traceback: path of that rank's traceback file, or None.
        traceback_text: that rank's traceback itself, only when the rank could not write its own
            files (its directory read-only or full) and torch kept it instead; the key is
            absent otherwise.
    """

    type: str
    message: str
    phase: str | None
    rank: int | None = None
    traceback: str | None = None
    traceback_text: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if out["traceback_text"] is None:
            del out["traceback_text"]
        return out


@dataclass(frozen=True, kw_only=True)
class RankFigures:
    """What one rank measured; rank 0 gathers one per rank, and ``metrics.per_rank`` keeps the
    memory part of each.

    Attributes:
        rank: global rank.
        device: ``torch.cuda.get_device_name`` or ``"cpu"``.
        step_times_s: seconds per measured optimizer step on this rank.
        losses: mean loss per step run (warm-up and measured), null where not finite.
        peak_cuda_allocated_bytes, peak_cuda_reserved_bytes: since the measured steps began;
            null on the CPU.
        peak_host_rss_bytes: the process's peak resident set.
        cuda_alloc_retries: times the CUDA caching allocator freed its cache and retried
            ``cudaMalloc`` during the measured steps (``num_alloc_retries`` of
            ``torch.cuda.memory_stats``; each retry synchronises the device); null on the CPU.
        matmul_tflops: the measured dense GEMM rate at the run's matmul precision, TFLOP/s.
        warmup_steps: warm-up steps run (``steps.warmup`` plus any extra).
        fp8_layers: Linear layers converted to float8, null when the run is not fp8.
        unsteady_steps: measured steps over 3x the median of the others.
        breakdown: ``profile=true`` only: the profiled step's parts, seconds
            (:class:`flopsweep.profile.StepBreakdown`).
        profile_problem: ``profile=true`` only: why this rank has no breakdown (its trace could
            not be written or read), else null; the record's warnings carry it.
    """

    rank: int
    device: str
    step_times_s: list[float]
    losses: list[float | None]
    peak_cuda_allocated_bytes: int | None
    peak_cuda_reserved_bytes: int | None
    peak_host_rss_bytes: int
    cuda_alloc_retries: int | None = None
    matmul_tflops: float | None = None
    warmup_steps: int = 0
    fp8_layers: int | None = None
    unsteady_steps: list[int] = field(default_factory=list)
    breakdown: dict[str, Any] | None = None
    profile_problem: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


PER_RANK_KEYS = (
    "rank",
    "device",
    "peak_cuda_allocated_bytes",
    "peak_cuda_reserved_bytes",
    "peak_host_rss_bytes",
    "cuda_alloc_retries",
    "matmul_tflops",
)
"""The keys of each ``metrics.per_rank`` entry (a part of :class:`RankFigures`)."""


def error(
    type_: str,
    message: str,
    phase: str | None,
    rank: int | None = None,
    traceback: str | None = None,
    *,
    traceback_text: str | None = None,
):
    """``record.error`` as a dict (see :class:`ErrorInfo`)."""
    info = ErrorInfo(
        type=type_,
        message=message,
        phase=phase,
        rank=rank,
        traceback=traceback,
        traceback_text=traceback_text,
    )
    return info.as_dict()


def null_metrics() -> dict[str, Any]:
    """Metrics of a run that produced none: every key present, every value null."""
    return dict.fromkeys(METRIC_KEYS)


def strict(value: Any, path: str = "", flagged: list[str] | None = None) -> Any:
    """``value`` with every non-finite float replaced by null, for strict JSON.

    Each replaced path is appended to ``flagged`` (``metrics.loss_last``), so that the
    record can say what it nulled.
    """
    if isinstance(value, float) and not math.isfinite(value):
        if flagged is not None:
            flagged.append(path)
        return None
    if isinstance(value, dict):
        return {k: strict(v, f"{path}.{k}" if path else str(k), flagged) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict(v, f"{path}[{i}]", flagged) for i, v in enumerate(value)]
    return value


def atomic_write_json(path: Path, payload: dict[str, Any], *, overwrite: bool = True) -> None:
    """Write strict JSON to a temporary file in the same directory, fsync it, then move it in place.

    A reader sees the whole file or none, also when the writer is killed mid-way
    (at worst a hidden ``.NAME.PID.RANDOM.tmp`` file is left behind). The temporary file is
    created by :func:`create_new` (exclusive, never through a link, an unpredictable name), so a
    link planted in the directory is never written through. With
    ``overwrite=False`` the file is hard-linked into place, which fails atomically
    when ``path`` exists, so two writers can never replace each other's record.

    Raises:
        RecordExistsError: when ``overwrite`` is false and ``path`` exists.
        RecordUnwritable: when the file system refuses the write (read-only, the directory gone
            or replaced, a full disk); nothing is left at ``path``.
        ValueError: when ``payload`` holds a non-finite float (use :func:`strict` first).
    """
    path = Path(path)
    if not overwrite and path.exists():
        raise RecordExistsError(exists_message(path))
    text = json.dumps(payload, indent=2, allow_nan=False)
    tmp = path  # nothing created yet: _discard(path) below must not remove a file of someone else
    synced = False
    with signals_deferred():
        try:
            fd, tmp = create_new(path.parent, f".{path.name}.{os.getpid()}.")
            with open(fd, "w") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            synced = True
            _test_pause(tmp, path)
            if overwrite:
                os.replace(tmp, path)
            else:
                _link_no_clobber(tmp, path)
        except RecordExistsError:
            raise
        except OSError as exc:
            if tmp != path:
                _discard(tmp)
            raise RecordUnwritable(path, exc, kept=tmp if synced and tmp.exists() else None) from exc
        finally:
            if tmp != path:
                _discard(tmp)
        _fsync_dir(path.parent)


def create_new(directory: Path, prefix: str, suffix: str = ".tmp") -> tuple[int, Path]:
    """Create a new, empty file in ``directory`` safely, for a folder that others may write to.

    The name is ``prefix`` + 8 random characters + ``suffix`` (unpredictable), and the file is
    created exclusively without following a link (``tempfile.mkstemp``: ``O_CREAT | O_EXCL |
    O_NOFOLLOW``), so a file or a symbolic link planted under any name is never written through.
    Its mode is what ``open(path, "w")`` would give (``0o666`` less the umask), not mkstemp's 0600.

    Returns:
        ``(fd, path)``: a descriptor open for reading and writing, which the caller closes.

    Raises:
        OSError: when the directory refuses the file (read-only, gone, full).
    """
    import tempfile

    fd, name = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=directory)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
    except OSError:
        pass  # a file system without modes (some FUSE mounts) keeps mkstemp's
    return fd, Path(name)


def _umask() -> int:
    """This process's umask, read without changing it where Linux tells it (``/proc/self/status``)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _discard(tmp: Path) -> None:
    """Remove a temporary file if the file system lets us (a read-only one keeps it)."""
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM (Ctrl-C, a scheduler's preemption) until the block is done.

    A record being written is finished first; the signal is then raised again, and the
    handler that was in place runs. (Masking with ``pthread_sigmask`` is not enough: the
    signal may land on another thread, and CPython runs the handler on the main thread
    anyway.) Only the main thread can set handlers; elsewhere this does nothing.
    """
    pending: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    try:
        previous = {s: signal.signal(s, lambda signum, frame: pending.append(signum)) for s in held}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        for s in dict.fromkeys(pending):
            signal.raise_signal(s)


WRITE_PAUSE_ENV = "FLOPSWEEP_TEST_WRITE_PAUSE"
"""Test hook: seconds to pause between writing a ``metrics.json``'s temporary file and moving it
into place, after creating ``<tmp>.paused``, so that a test can signal a writer inside that
window (signals are deferred there: the pause ends, the record is written, then they arrive)."""


def _test_pause(tmp: Path, path: Path) -> None:
    seconds = os.environ.get(WRITE_PAUSE_ENV)
    if seconds and path.name == METRICS_FILE:
        import time

        Path(f"{tmp}.paused").touch()
        time.sleep(float(seconds))
        with contextlib.suppress(OSError):  # a test may have made the directory read-only meanwhile
            Path(f"{tmp}.paused").unlink(missing_ok=True)


def record_path_problem(path: Path) -> str | None:
    """Why a run must not start that would write its record to ``path``, or None (absent, or a
    regular file).

    Links are never records where the sweep writes: ``metrics.json`` as a symbolic link (dangling,
    looping or to a file) or a FIFO, a device, a socket or a directory is refused, checked with
    ``lstat`` before the run (the finished record could not take its name, and the measurement
    would be lost). The analysis skips such paths with a reason.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path} cannot be checked ({exc.strerror}); fix its directory or choose another one"
    if stat.S_ISREG(st.st_mode):
        return None
    what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
    return (
        f"{path} is {what}, not a run record: the run's record could not take its place. "
        "Fix: remove or rename it, then run again (or choose a new hydra.sweep.dir / hydra.run.dir)"
    )


def exists_message(path: Path) -> str:
    """The refusal to overwrite ``path``, naming it and the two ways out."""
    return (
        f"{path} already exists; refusing to overwrite a run record. Use a new output directory "
        "(hydra.run.dir / hydra.sweep.dir), or resume=true to keep ok records and re-run the rest."
    )


def _link_no_clobber(tmp: Path, path: Path) -> None:
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise RecordExistsError(exists_message(path)) from None
    except OSError:  # a file system without hard links: check, then rename (a small race)
        if path.exists():
            raise RecordExistsError(exists_message(path)) from None
        os.replace(tmp, path)


def _fsync_dir(directory: Path) -> None:
    """Make a rename durable (best effort: not every platform can open a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def file_kind(mode: int) -> str:
    """What a ``st_mode`` is, in words: ``regular file``, ``symbolic link``, ``FIFO``, ..."""
    kinds = (
        (stat.S_ISREG, "regular file"),
        (stat.S_ISLNK, "symbolic link"),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
    )
    return next((name for test, name in kinds if test(mode)), "special file")


def not_a_record(path: Path) -> str | None:
    """Why ``path`` cannot be a record without opening it (``lstat``: links are not followed), or
    None for a regular file: ``a symbolic link (not followed: a record is a regular file)``,
    ``a FIFO, not a regular file``, ... Raises OSError when it cannot be examined."""
    kind = file_kind(os.lstat(path).st_mode)
    if kind == "regular file":
        return None
    if kind == "symbolic link":
        return "a symbolic link (not followed: a record is a regular file)"
    return f"a {kind}, not a regular file"


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit``, read without following a link
    or blocking: ``lstat`` first (a FIFO or device is never opened), then ``open`` with
    ``O_NOFOLLOW | O_NONBLOCK``, then ``fstat`` of what was opened (a swap between the two
    calls is caught), then at most ``limit + 1`` bytes.

    Raises:
        RecordError: for a link, a FIFO, a device, a directory, a file over ``limit`` bytes or
            an OS error, one phrase naming it.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        if why := not_a_record(path):
            raise RecordError(why)
        fd = os.open(path, flags)
    except OSError as exc:
        raise RecordError(f"cannot read the file: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise RecordError(f"a {file_kind(st.st_mode)}, not a regular file")
        if st.st_size > limit:
            raise RecordError(f"{st.st_size} bytes is over the {limit} byte limit of a record")
        chunks, size = [], 0
        while size <= limit and (chunk := os.read(fd, min(limit + 1 - size, 1 << 20))):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise RecordError(f"cannot read the file: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > limit:
        raise RecordError(f"over the {limit} byte limit of a record (it grew while read)")
    return b"".join(chunks)


def read_json(path: Path) -> dict[str, Any]:
    """Parse one ``metrics.json`` safely: a regular file, not a link, size-capped, strict, an
    object at the top.

    This is the one reader of record files (the job's resume check, the callbacks and
    the analysis use it). Links are never followed and nothing but a regular file is opened
    (:func:`read_regular`): a record is a regular file at its own path. It does not upgrade
    old schema versions; the analysis does (:func:`analysis.schema.read_record`).

    Raises:
        RecordError: for a file that is a link, a FIFO, a device or a directory, unreadable,
            over :data:`MAX_RECORD_BYTES`, empty, not UTF-8, not JSON, nested too deep, or
            not an object.
    """
    data = read_regular(Path(path), MAX_RECORD_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(f"cannot read the file: {exc}") from None
    if not text.strip():
        raise RecordError("empty file")
    try:
        record = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise RecordError("JSON nested too deep") from None
    except json.JSONDecodeError as exc:
        raise RecordError(f"invalid JSON (truncated?): {str(exc)[:200]}") from None
    except ValueError as exc:  # NaN/Infinity (not strict JSON), int() of a 5,000-digit number
        raise RecordError(f"not strict JSON: {str(exc)[:200]}") from None
    if not isinstance(record, dict):
        raise RecordError(f"top level is a JSON {type(record).__name__}, not an object")
    return record


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not strict JSON")

"""A rank's failures, real or injected, and the files that tell the launcher about them.

Everything here is the rank's side of the scratch folder's protocol (``job_dir/.flopsweep``, read back by
:func:`flopsweep.outcome.collect`): ``rank{N}_phase.txt`` (:class:`Phase`: the phase the rank last
entered), ``rank{N}_error.json`` (:func:`write_error`: the error, whether it was an out-of-memory
(:func:`is_oom`) and when), ``rank{N}_injected.json`` (:func:`injected_file`: a signal fault the rank
injected into itself) and ``rank{N}_stack.txt`` (:func:`stack_on_fatal_signal`: faulthandler's stacks of a
rank killed by a signal); and the test faults ``fault.*`` injects (:func:`inject_fault`, :func:`poisoned`).
Torch-free at import: torch is imported only to raise or recognise its out-of-memory error.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from flopsweep.config import FaultConfig
from flopsweep.files import atomic_write_json, replace_text
from flopsweep.record import error as record_error


def stack_on_fatal_signal(path: Path) -> None:
    """Write every thread's Python stack to ``path`` when this rank dies of SIGABRT, SIGSEGV, SIGBUS,
    SIGFPE or SIGILL (``faulthandler``), until the process ends (interpreter shutdown included), so
    that the record of a rank killed by a signal says where it was. ``path`` is created exclusively,
    without following a link; the stream stays open for faulthandler."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    faulthandler.enable(os.fdopen(fd, "w"), all_threads=True)


SIGNAL_FAULTS = ("kill", "abort")
"""The fault kinds that end the rank by a signal, leaving no error file: the rank first writes
:func:`injected_file`, so that the record says the signal was injected."""


def injected_file(rank: int) -> str:
    """``rank{N}_injected.json`` in the run's scratch folder: ``{"message": ...}`` of a signal fault
    that ``rank`` injected into itself (:data:`SIGNAL_FAULTS`)."""
    return f"rank{rank}_injected.json"


class InjectedFault(RuntimeError):
    """The error that ``fault.kind=raise`` raises (test-only)."""


class Phase:
    """The rank's current phase, mirrored to a file so that the job can name the phase
    of a rank that was killed or timed out. Entering a phase first injects the
    configured test fault when it is this rank's and this phase's."""

    def __init__(self, path: Path, *, fault: FaultConfig, rank: int) -> None:
        self.path, self.fault, self.rank = path, fault, rank
        self.name = "init"

    def enter(self, name: str) -> None:
        self.name = name
        # An empty file first (an inode, no data block: it is made on a full disk too), so that the
        # launcher knows the rank started (outcome._phase_of: empty reads as init) if the write fails.
        with contextlib.suppress(FileExistsError):
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        replace_text(self.path, name)  # never through a link planted in the scratch folder
        if self.fault.kind != "none" and self.fault.phase == name and self.fault.rank == self.rank:
            message = f"injected fault: {self.fault.kind} on rank {self.rank} in {name}"
            if self.fault.kind in SIGNAL_FAULTS:  # the job names the injection, not the OOM killer
                atomic_write_json(self.path.parent / injected_file(self.rank), {"message": message})
            inject_fault(self.fault.kind, message)


def inject_fault(kind: str, message: str) -> None:
    """Fail as ``kind`` says: ``oom`` raises ``torch.OutOfMemoryError`` (allocating past the
    memory of a CPU host is not safe), ``raise`` raises :class:`InjectedFault`, ``kill``
    sends SIGKILL to this process, ``abort`` raises SIGABRT (``os.abort``), ``hang`` blocks until
    the launcher stops the rank."""
    if kind == "oom":
        import torch

        raise torch.OutOfMemoryError(message)
    if kind == "raise":
        raise InjectedFault(message)
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "abort":
        os.abort()
    if kind == "hang":
        print(f"[flopsweep] {message}: blocking until stopped", file=sys.stderr, flush=True)
        threading.Event().wait()


def poisoned(loss: Any, phase: Phase) -> Any:
    """``loss`` (a tensor), or ``loss * NaN`` under ``fault.kind=nan_loss`` in the fault's phase on its
    rank (:attr:`Phase.fault`): every step's loss there is NaN, as :func:`flopsweep.worker.warm_up` and
    :func:`flopsweep.worker.measure` record it."""
    f = phase.fault
    if f.kind == "nan_loss" and f.phase == phase.name and f.rank == phase.rank:
        return loss * float("nan")
    return loss


def is_oom(exc: BaseException) -> bool:
    """True for ``torch.OutOfMemoryError`` and allocator failures that surface as RuntimeError."""
    import torch

    if isinstance(exc, torch.OutOfMemoryError):
        return True
    text = str(exc)
    host = "can't allocate memory" in text  # DefaultCPUAllocator: a host allocation failed
    return isinstance(exc, RuntimeError) and (
        "out of memory" in text.lower() or "ALLOC_FAILED" in text or host
    )


def write_error(
    job_dir: str, scratch_dir: str, rank: int, phase: str, exc: BaseException, *, report: bool
) -> None:
    """Write ``rank``'s failure in ``phase``: its traceback to ``job_dir/traceback_rank{N}.txt`` (skipped
    when that cannot be written) and ``scratch_dir/rank{N}_error.json``, the record's error
    (:class:`flopsweep.wire.ErrorInfo`) plus ``oom`` (:func:`is_oom`) and ``time`` (s since the epoch),
    by which the launcher picks the rank that failed first. With ``report`` (a Slurm task, whose log is
    its own) one line on stderr too. Neither file is written through a link planted in its folder."""
    when = time.time()
    tb_path = Path(job_dir) / f"traceback_rank{rank}.txt"
    try:
        replace_text(tb_path, "".join(traceback.format_exception(exc)))  # never through a planted link
    except OSError:
        tb_path = None
    # The record's error (flopsweep.wire.ErrorInfo) plus what the launcher needs to pick the
    # rank that failed first: whether it was an out-of-memory, and when.
    error = {
        **record_error(type(exc).__name__, str(exc)[:2000], phase, rank, str(tb_path) if tb_path else None),
        "oom": is_oom(exc),
        "time": when,
    }
    atomic_write_json(Path(scratch_dir) / f"rank{rank}_error.json", error)
    if not report:
        return
    print(
        f"[flopsweep rank {rank}] {phase} failed: {error['type']}: {error['message'][:300]}",
        file=sys.stderr,
        flush=True,
    )

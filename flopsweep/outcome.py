"""A run's outcome: what its ranks left in the scratch folder and how they exited, as an :class:`Outcome`.

The launcher (:func:`flopsweep.launch.launch_local`, a Slurm node's agent: :mod:`flopsweep.node_agent`)
hands :func:`collect` the exit codes of the ranks that ended and the scratch folder (``job_dir/.flopsweep``),
where each rank left the files of :mod:`flopsweep.rank_faults` (its phase, its error, an injected signal,
its fatal-signal stacks) and rank 0 the gathered figures (``rank_result.json``). :func:`collect` picks the
cause of a failure (the timeout, the earliest OOM, a signal, the earliest error) and names its rank and its
phase (:func:`last_phase`). Torch-free: it reads files only.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flopsweep import record as rec
from flopsweep.config import RunConfig, typed_form
from flopsweep.rank_faults import injected_file
from flopsweep.safe_read import RecordError, read_regular

INVALID_ERRORS = ("KernelUnavailable",)  # exception type names (flopsweep.attention) that mean "invalid"


@dataclass(frozen=True)
class Outcome:
    """What a job's ranks produced: per-rank figures when ``status == "ok"``, else an error."""

    status: str  # "ok" | "oom" | "error" | "invalid"
    ranks: list[dict[str, Any]] | None = None
    error: dict[str, Any] | None = None
    warnings: list[str] = dataclasses.field(default_factory=list)
    """Findings that do not cost the run its figures (a rank that died while tearing down)."""


def timeout_message(timeout_s: float, nproc: int, phase: str) -> str:
    """The ``error.message`` of a run that ran out of ``timeout_s``: the key and its value, the ranks' least
    advanced phase (:func:`last_phase`) and the fix. A limit too low for the whole config (start-up, warm-up,
    the measured steps) shows only here; ``timeout_s <= 0`` is refused before Hydra (``lower_bounds``)."""
    where = "still starting" if phase == "launch" else f"in {phase}"
    ranks, stopped = (
        ("the rank was", "its one worker was")
        if nproc == 1
        else ("the ranks were", f"all {nproc} workers were")
    )
    return (
        f"timeout: no result within timeout_s={typed_form(timeout_s)} s ({ranks} {where}); {stopped} "
        f"stopped. Fix: if the run needs longer, raise timeout_s (default "
        f"{typed_form(RunConfig.timeout_s)}); "
        "if it hung, its run.log shows where"
    )


def collect(
    scratch: Path,
    ended: dict[int, int],
    nproc: int,
    timeout_s: float | None = None,
    torch_errors: dict[int, str] | None = None,
) -> Outcome:
    """Turn the scratch files and exit codes into an :class:`Outcome`.

    The cause, in this order: the timeout (``timeout_s`` not None: nothing had
    failed when the time ran out), an OOM on any rank (the earliest; a rank's OOM
    makes its peers fail in their collectives, never the reverse), a rank killed
    by a signal before the launcher stopped anything, the earliest error a rank
    wrote, the traceback torch kept for a rank that could not write its error file, a non-zero
    exit code. So when rank 1 runs out of memory and rank 0 then
    fails in a collective or is stopped, the record names the OOM on rank 1. A rank
    that raised ``KernelUnavailable`` (the attention kernel cannot run here) makes
    the run ``invalid``.

    Args:
        ended: exit code by rank of the ranks that ended on their own (see :func:`supervise`).
        timeout_s: the job's time limit when it ran out, else None.
        torch_errors: traceback text by rank from :func:`take_torch_errors`."""
    if timeout_s is not None:
        phase, rank = last_phase(scratch, nproc)
        return _error("Timeout", timeout_message(timeout_s, nproc, phase), phase, rank)
    errors = [json.loads(p.read_text()) for p in sorted(scratch.glob("rank*_error.json"))]
    ooms = [e for e in errors if e["oom"]]
    killed = sorted(rank for rank, code in ended.items() if code < 0)
    if ooms or (errors and not killed):
        first = min(ooms or errors, key=lambda e: e["time"])
        status = "oom" if first.pop("oom") else "invalid" if first["type"] in INVALID_ERRORS else "error"
        first.pop("time")
        return Outcome(status, error=first)
    result = scratch / "rank_result.json"
    if (
        killed
        and not errors
        and result.exists()
        and all(_phase_of(scratch, rank, raw=True) == "teardown" for rank in killed)
    ):
        return _died_in_teardown(scratch, ended, killed)
    if killed:
        return _killed(scratch, killed[0], -ended[killed[0]])
    if len(ended) == nproc and not any(ended.values()) and result.exists():
        return Outcome("ok", ranks=json.loads(result.read_text())["ranks"])
    failed = sorted(rank for rank, code in ended.items() if code)
    kept = [rank for rank in failed if (torch_errors or {}).get(rank)]
    if kept:
        return _unreported(torch_errors[kept[0]], _phase_of(scratch, kept[0]), kept[0])
    if failed:
        return _error(
            "WorkerDied",
            f"rank {failed[0]} exited with code {ended[failed[0]]} and left no error",
            _phase_of(scratch, failed[0]),
            failed[0],
        )
    return _error("WorkerDied", "the workers exited without a result", *last_phase(scratch, nproc))


def _died_in_teardown(scratch: Path, ended: dict[int, int], killed: list[int]) -> Outcome:
    """``ok`` with a ``teardown_signal`` warning: every killed rank had already handed its figures
    to rank 0, which wrote them (``rank_result.json``), and was only tearing down (its process group,
    the backend's threads) when the signal came, so the measurement is whole. A DeepSpeed rank on
    gloo now and then aborts there ("terminate called without an active exception": a native thread
    destroyed while joinable); its Python stack, when faulthandler caught one, is in the rank's
    scratch file, and its first line goes into the warning."""
    notes = []
    for rank in killed:
        try:
            name = signal.Signals(-ended[rank]).name
        except ValueError:
            name = f"signal {-ended[rank]}"
        stack = (_fatal_stack(scratch, rank) or "").splitlines()
        where = f"; {stack[0][:200]}" if stack else ""
        notes.append(
            f"teardown_signal: rank {rank} was killed by {name} while tearing down, after its figures "
            f"were gathered; the measurement is whole{where}"
        )
    ranks = json.loads((scratch / "rank_result.json").read_text())["ranks"]
    return Outcome("ok", ranks=ranks, warnings=notes)


RESULT_BYTES = 2**26
"""At most this much of ``rank_result.json`` is read by :func:`gathered_before` (every rank's figures:
a few KiB a rank; 64 MiB holds thousands)."""


def gathered_before(scratch: Path, what: str) -> Outcome | None:
    """``ok`` with a ``teardown_signal`` warning when ``what`` (an interrupt to the launcher: ``Ctrl-C
    (SIGINT)``, ``SIGTERM``) stopped the ranks after rank 0 had written every rank's figures
    (``rank_result.json``, after the gather): the ranks were only tearing down (the process group, the
    backend's threads), so the measurement is whole, as for a rank killed there (:func:`collect`). None
    when the figures were not all in, or the file is not a regular one of at most :data:`RESULT_BYTES`
    holding a list under ``ranks``."""
    try:
        ranks = json.loads(read_regular(scratch / "rank_result.json", RESULT_BYTES))["ranks"]
    except (RecordError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(ranks, list) or not ranks:
        return None
    note = (
        f"teardown_signal: interrupted by {what} while the ranks tore down, after their figures were "
        "gathered; the measurement is whole"
    )
    return Outcome("ok", ranks=ranks, warnings=[note])


def _unreported(text: str, phase: str, rank: int) -> Outcome:
    """The error of a rank that could not write its error file, from the traceback torch kept:
    the exception's type and message from its last line, the whole traceback in the record."""
    last = next((line for line in reversed(text.splitlines()) if line.strip()), "")
    name, _, message = last.partition(": ")
    kind = name.rsplit(".", 1)[-1] if name.replace(".", "").replace("_", "").isalnum() else "WorkerDied"
    message = f"rank {rank} could not write its error file; its last exception: {message or last}"
    return Outcome("error", error=rec.error(kind, message[:2000], phase, rank, traceback_text=text))


def _killed(scratch: Path, rank: int, signum: int) -> Outcome:
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    message = f"rank {rank} was killed by {name}"
    if injected := _injected(scratch, rank):
        message += f" ({injected})"
    elif name == "SIGKILL":
        message += " (often the kernel's OOM killer: check host memory)"
    stack = _fatal_stack(scratch, rank)
    if stack:
        message += "; its Python stack is in the record's error.traceback_text"
    error = rec.error("WorkerKilled", message, _phase_of(scratch, rank), rank, traceback_text=stack)
    return Outcome("error", error=error)


def _injected(scratch: Path, rank: int) -> str | None:
    """The message of the signal fault ``rank`` injected into itself (``fault.kind=kill``/``abort``:
    :func:`flopsweep.rank_faults.injected_file`), read bounded and without following a link; None
    when it injected none."""
    try:
        payload = json.loads(read_regular(scratch / injected_file(rank), 4096))
    except (RecordError, ValueError):
        return None
    message = payload.get("message") if isinstance(payload, dict) else None
    return message if isinstance(message, str) else None


STACK_BYTES = 64 * 1024
"""At most this much of a rank's fatal-signal stack file (faulthandler's output) is read."""


def _fatal_stack(scratch: Path, rank: int) -> str | None:
    """The Python stacks that faulthandler wrote when ``rank`` died of a fatal signal, or None."""
    try:
        fd = os.open(scratch / f"rank{rank}_stack.txt", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as stream:
        text = stream.read(STACK_BYTES).decode("utf-8", "replace").strip()
    return text or None


def _error(kind: str, message: str, phase: str, rank: int | None) -> Outcome:
    return Outcome("error", error=rec.error(kind, message, phase, rank))


def _phase_of(scratch: Path, rank: int, *, raw: bool = False) -> str:
    """The phase that ``rank`` last entered, or ``launch`` when it never started. An empty or
    unreadable file means the rank started but could not write the phase's name (a full disk):
    ``init``, the earliest phase of a started rank. ``teardown`` (the rank handed its figures over
    and is tearing down) reads as ``measure`` unless ``raw``."""
    path = scratch / f"rank{rank}_phase.txt"
    if not path.exists():
        return "launch"
    try:
        text = path.read_text().strip()
    except OSError:
        text = ""
    if text == "teardown":  # after the measured steps; a record names the phase measure
        return text if raw else "measure"
    return text if text in ("init", "warmup", "measure") else "init"


def last_phase(scratch: Path, nproc: int) -> tuple[str, int | None]:
    """The least advanced phase over the ranks (``launch`` if none started), and its rank
    when exactly one rank is that far behind, else None."""
    order = ["launch", "init", "warmup", "measure"]
    phases = [order.index(_phase_of(scratch, rank)) for rank in range(nproc)]
    least = min(phases)
    behind = [rank for rank, index in enumerate(phases) if index == least]
    return order[least], behind[0] if len(behind) == 1 else None

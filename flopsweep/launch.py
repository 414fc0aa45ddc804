"""Start a run's ranks as fresh processes and collect what they report.

Locally, ``torch.multiprocessing.start_processes`` (spawn) starts
``nproc_per_node`` workers, even for one rank, so that no CUDA, NCCL or allocator
state leaks from one sweep job into the next. When a rank fails, the spawn
context stops the others; when the job outlives ``timeout_s``, every worker is
killed. Either way the outcome names the rank and the phase.
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flopsweep.config import RunConfig
from flopsweep.worker import RankSpec, spawned_main

SCRATCH = ".flopsweep"


@dataclass(frozen=True)
class Outcome:
    """What a job's ranks produced: per-rank figures when ``status == "ok"``, else an error."""

    status: str  # "ok" | "oom" | "error"
    ranks: list[dict[str, Any]] | None = None
    error: dict[str, Any] | None = None


def free_port() -> int:
    """A TCP port that was free a moment ago, for the rendezvous on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_local(cfg: RunConfig, job_dir: Path) -> Outcome:
    """Run ``cfg`` on ``int(cfg.nproc_per_node)`` spawned ranks and wait for them.

    Args:
        cfg: a validated config (``device`` and ``nproc_per_node`` resolved).
        job_dir: the Hydra job directory; tracebacks land here, the scratch files
            in ``job_dir/.flopsweep``.
    """
    import torch.multiprocessing as mp
    from torch.multiprocessing.spawn import ProcessExitedException, ProcessRaisedException

    nproc = int(cfg.nproc_per_node)
    scratch = prepare_scratch(job_dir)
    spec = RankSpec(
        cfg=cfg,
        job_dir=str(job_dir),
        scratch_dir=str(scratch),
        master_addr="127.0.0.1",
        master_port=free_port(),
        nproc_per_node=nproc,
        world_size=nproc,
    )
    context = mp.start_processes(spawned_main, args=(spec,), nprocs=nproc, join=False, start_method="spawn")
    deadline = time.monotonic() + cfg.timeout_s
    failure: str | None = None
    try:
        while not context.join(timeout=0.5, grace_period=5.0):
            if time.monotonic() > deadline:
                failure = f"timeout: no result within timeout_s={cfg.timeout_s:g} s; all workers were stopped"
                break
    except ProcessExitedException as exc:
        failure = f"rank {exc.error_index} " + (
            f"was killed by {exc.signal_name}" if exc.signal_name else f"exited with code {exc.exit_code}"
        )
    except ProcessRaisedException as exc:
        failure = f"rank {exc.error_index} raised: {str(exc).strip().splitlines()[-1]}"
    finally:
        stop_all(context.processes)
    return collect(scratch, failure, nproc)


def prepare_scratch(job_dir: Path) -> Path:
    scratch = Path(job_dir) / SCRATCH
    scratch.mkdir(parents=True, exist_ok=True)
    for stale in scratch.iterdir():
        stale.unlink()
    return scratch


def stop_all(processes: list[Any], grace_s: float = 5.0) -> None:
    """SIGTERM every live worker, then SIGKILL what is left after ``grace_s``."""
    for p in processes:
        if p.is_alive():
            p.terminate()
    end = time.monotonic() + grace_s
    for p in processes:
        p.join(max(0.0, end - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()


def collect(scratch: Path, failure: str | None, nproc: int) -> Outcome:
    """Turn the scratch files into an :class:`Outcome`.

    The earliest error a rank wrote is the cause (an OOM wins a tie): when rank 1
    runs out of memory, rank 0 then fails in a collective, and the record must
    name the OOM on rank 1.
    """
    errors = [json.loads(p.read_text()) for p in sorted(scratch.glob("rank*_error.json"))]
    if errors:
        first = min(errors, key=lambda e: (e["time"], not e["oom"]))
        status = "oom" if first.pop("oom") else "error"
        first.pop("time")
        return Outcome(status, error=first)
    result = scratch / "rank_result.json"
    if failure is None and result.exists():
        return Outcome("ok", ranks=json.loads(result.read_text())["ranks"])
    phase, rank = _last_phase(scratch, nproc)
    kind = "Timeout" if failure and failure.startswith("timeout") else "WorkerDied"
    message = failure or "the workers exited without a result"
    if "SIGKILL" in message:
        message += " (often the kernel's OOM killer: check host memory)"
    return Outcome(
        "error", error={"type": kind, "message": message, "phase": phase, "rank": rank, "traceback": None}
    )


def _last_phase(scratch: Path, nproc: int) -> tuple[str, int | None]:
    """The least advanced phase over the ranks, and its rank (``launch`` if none started)."""
    order = ["init", "warmup", "measure"]
    seen = []
    for rank in range(nproc):
        path = scratch / f"rank{rank}_phase.txt"
        if path.exists():
            seen.append((order.index(path.read_text().strip()), rank))
    if not seen:
        return "launch", None
    index, rank = min(seen)
    return order[index], rank

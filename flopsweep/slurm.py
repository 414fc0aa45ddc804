"""Slurm launcher settings and checks, and the older one-task-per-rank shape.

By default (``hydra.launcher.tasks_per_node=1``) each Slurm task is the agent of one node and spawns
that node's ranks with the local supervisor (:mod:`flopsweep.node_agent`); its agents watch each other
with :class:`TaskWatch`'s heartbeats. With ``hydra.launcher.tasks_per_node=${nproc_per_node}`` each
task is one rank, as described below (the older shape, kept while the agent path settles).

hydra-submitit-launcher submits a sweep as one Slurm job array, one element per Hydra job, each
with ``nodes x tasks_per_node`` tasks, and every task runs ``run.py``'s task function. The tasks
of a job agree on its directory: ``hydra.sweep.dir`` is resolved in the sweep process and reaches
the tasks through Hydra's resolver cache (``${now:}``, ``${flopsweep_uid:}``), and the subdir is
the job number. Inside a task, :func:`launch_slurm_task` spawns no worker: the task becomes one
rank. Its place comes from ``submitit.helpers.TorchDistributedEnvironment`` (``SLURM_PROCID``,
``SLURM_LOCALID``, ``SLURM_NTASKS``, the first host of ``SLURM_JOB_NODELIST``), exported as
``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``
(``MASTER_PORT`` from the environment if set, else drawn from the job id below the ephemeral
ports, :func:`flopsweep.launch.rendezvous_port`: submitit's own draw, 20000-60000, overlaps
Linux's ephemeral 32768-60999, where any process's outgoing connection can hold it).

GPUs: ``CUDA_VISIBLE_DEVICES`` is left as Slurm or submitit set it (``export`` is called with
``set_cuda_visible_devices=False``). A task that sees exactly one GPU (Slurm bound one GPU to each
task, e.g. ``--gpus-per-task=1``) uses device 0; a task that sees all of the node's job GPUs
(``gpus_per_node``, the default here) uses device ``LOCAL_RANK`` (:func:`cuda_device_index`).

Failures: the rank runs in a thread and the task's main thread watches it (:class:`TaskWatch`)
through files in the job's shared scratch directory, so that a task never waits for ever. It stops
waiting when another rank wrote an error file and this rank is still busy ``PEER_GRACE_S`` later
(it waits in a collective that cannot complete), when a watched task's heartbeat stops for
``STALE_S`` (killed, e.g. by the OOM killer), on SIGTERM (``scancel``, time limit, preemption),
or after ``timeout_s``. The task function then returns normally, so that submitit stores a result
and the sweep goes on. Only one task writes ``metrics.json`` (:func:`writes_record`): global rank
0, or, when the heartbeats of every lower rank stopped, the lowest live rank.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra_plugins.hydra_submitit_launcher.config import LocalQueueConf

from flopsweep import record as rec
from flopsweep.config import ConfigError
from flopsweep.files import replace_text
from flopsweep.launch import SCRATCH, Outcome, collect, rendezvous_port
from flopsweep.record import METRICS_FILE
from flopsweep.text import plural
from flopsweep.worker import RankSpec, run_rank

if TYPE_CHECKING:
    from flopsweep.layout import Plan

log = logging.getLogger("flopsweep")

POLL_S = 0.5
"""Seconds between two looks of the main thread at the rank and the scratch files."""
HEARTBEAT_S = 2.0
"""Seconds between two heartbeats of a task."""
STALE_S = 30.0
"""A task whose heartbeat did not change for this many seconds is taken as dead."""
PEER_GRACE_S = 10.0
"""Seconds a rank may still run after another rank reported an error."""
MEM_GB_PER_GPU_RANK = 32
"""Host memory asked per GPU rank by conf/hydra/launcher/slurm.yaml (``mem_gb`` is per node)."""
SHAPE_KEYS = ("nproc_per_node", "nnodes", "device")
"""Keys that fix a Slurm job's shape: one job array has one shape, so a sweep must not vary them."""

_took_over = threading.Event()


def inside_submitit_task() -> bool:
    """True in a task that submitit started (``SUBMITIT_EXECUTOR`` is ``slurm`` or ``local``)."""
    return os.environ.get("SUBMITIT_EXECUTOR", "") in ("slurm", "local")


def writes_record() -> bool:
    """Whether this process writes ``metrics.json``: always outside a submitit task; inside one,
    only global rank 0, or the task that took over because every lower rank's task stopped."""
    if not inside_submitit_task():
        return True
    import submitit

    return submitit.JobEnvironment().global_rank == 0 or _took_over.is_set()


def cuda_device_index(local_rank: int, visible: str | None = None) -> int:
    """CUDA device index of this task's rank: 0 when ``CUDA_VISIBLE_DEVICES`` (``visible``,
    default the environment's) names exactly one GPU, else ``local_rank``."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible
    names = [name for name in (visible or "").split(",") if name.strip()]
    return 0 if len(names) == 1 else local_rank


@dataclasses.dataclass
class LocalConf(LocalQueueConf):
    """``hydra/launcher=slurm_local``: submitit_local's keys and ``parallel_jobs``."""

    _target_: str = "hydra_plugins.flopsweep_slurm.FlopsweepLocalLauncher"
    parallel_jobs: int = 1
    """Jobs of a sweep that run at once. 1 (the default): one at a time, so that no job's timing
    shares this machine's cores or GPUs with another's. More only with ``device=cuda``, where each
    running job gets GPUs of its own (``parallel_jobs x gpus_per_node`` must be visible)."""


def tasks_per_node(nproc_per_node: str) -> int:
    """``hydra.launcher.tasks_per_node`` of conf/hydra/launcher/slurm.yaml (resolver ``flopsweep_tasks``):
    1, one task per node, the node agent that spawns the node's ranks (:mod:`flopsweep.node_agent`);
    0 for ``nproc_per_node=auto``, which :func:`check_sweep` rejects before submission with a message
    (the launcher's int field would fail on ``auto`` first)."""
    return 1 if str(nproc_per_node).isdigit() else 0


def ranks_per_node(nproc_per_node: str) -> int:
    """``nproc_per_node`` as an int; 0 for ``auto``."""
    return int(nproc_per_node) if str(nproc_per_node).isdigit() else 0


def gpus_per_node(device: str, nproc_per_node: str) -> int | None:
    """``hydra.launcher.gpus_per_node`` of slurm.yaml (resolver ``flopsweep_gpus``): one GPU per rank;
    none (null) for ``device=cpu`` or ``auto`` ranks."""
    return None if device == "cpu" else ranks_per_node(nproc_per_node) or None


def cpus_per_task(nproc_per_node: str) -> int:
    """``hydra.launcher.cpus_per_task`` of slurm.yaml (resolver ``flopsweep_cpus``): ``CPUS_PER_RANK``
    per rank of the node agent's task (the data is synthetic: a few cores per rank suffice)."""
    return CPUS_PER_RANK * max(1, ranks_per_node(nproc_per_node))


CPUS_PER_RANK = 8
"""Cores asked per rank by slurm.yaml (``cpus_per_task`` is per node agent: ``nproc_per_node`` of them)."""


def mem_gb(device: str, nproc_per_node: str) -> int | None:
    """``hydra.launcher.mem_gb`` (host memory per node, GB) of slurm.yaml (resolver ``flopsweep_mem_gb``):
    ``MEM_GB_PER_GPU_RANK`` per GPU rank; null (the partition's default) for ``device=cpu``."""
    gpus = gpus_per_node(device, nproc_per_node)
    return None if gpus is None else MEM_GB_PER_GPU_RANK * gpus


def check_sweep(*, nproc_per_node: str, swept: Iterable[str]) -> None:
    """Check, before submission, the run keys that fix a job's shape.

    Raises:
        ConfigError: when ``nproc_per_node`` is ``auto`` (Slurm needs the task count at
            submission), or when a sweep varies one of ``SHAPE_KEYS``.
    """
    for key in SHAPE_KEYS:
        if key in set(swept):
            raise ConfigError(
                key,
                "a sweep",
                "a Slurm job array has one shape (nodes, tasks, GPUs) for all of its jobs",
                f"set {key} to one value per sweep, and run one sweep per value",
            )
    if not str(nproc_per_node).isdigit() or int(nproc_per_node) < 1:
        raise ConfigError(
            "nproc_per_node",
            nproc_per_node,
            "a Slurm launcher needs the ranks per node at submission (one Slurm task per rank)",
            "set nproc_per_node to the GPUs per node to use, e.g. nproc_per_node=8 "
            "(with device=cpu: the CPU ranks per node, e.g. 2)",
        )


def check_launcher(
    launcher: Mapping[str, Any], *, nproc_per_node: int, nnodes: int, device: str, local: bool = False
) -> None:
    """Check resolved submitit launcher settings (``hydra.launcher``) against the run.

    ``tasks_per_node`` is 1 (one node agent per node, the default) or ``nproc_per_node`` (one task
    per rank, the older shape), ``nodes == nnodes``, and on GPUs one GPU per rank
    (``gpus_per_node == nproc_per_node``, or ``gpus_per_task`` giving as many).

    Raises:
        ConfigError: naming the launcher key, its value and what to set.
    """
    tasks, nodes = launcher.get("tasks_per_node") or 1, launcher.get("nodes") or 1
    if tasks not in (1, nproc_per_node):
        raise ConfigError(
            "hydra.launcher.tasks_per_node",
            tasks,
            f"a Slurm task is either the agent of one node (1: it spawns the nproc_per_node={nproc_per_node} "
            "ranks) or one rank (nproc_per_node)",
            "set hydra.launcher.tasks_per_node=1 (the default of slurm.yaml: one node agent per node)",
        )
    if local and nodes != 1:
        raise ConfigError(
            "hydra.launcher.nodes",
            nodes,
            "hydra/launcher=slurm_local (submitit_local) runs every task on this machine, one node",
            f"set nnodes=1 with nproc_per_node={nproc_per_node * nnodes}, or hydra/launcher=slurm",
        )
    if nodes != nnodes:
        raise ConfigError(
            "hydra.launcher.nodes",
            nodes,
            f"the job asks Slurm for {plural(nodes, 'node')}, but nnodes={nnodes}",
            f"set hydra.launcher.nodes={nnodes}, or nnodes={nodes}",
        )
    per_task = launcher.get("gpus_per_task") or 0
    gpus = per_task * tasks if per_task else launcher.get("gpus_per_node") or 0
    if device == "cpu" and gpus:
        raise ConfigError(
            "hydra.launcher.gpus_per_node",
            gpus,
            "device=cpu runs no rank on a GPU, but the job asks Slurm for GPUs",
            "set hydra.launcher.gpus_per_node=null, or device=cuda",
        )
    if (device == "cuda" or gpus) and gpus != nproc_per_node:
        fix = f"set hydra.launcher.gpus_per_node={nproc_per_node}"
        if gpus:
            fix += f", or nproc_per_node={gpus} for {gpus} GPU ranks per node"
        raise ConfigError(
            "hydra.launcher.gpus_per_node",
            gpus or None,
            f"each of the {plural(nproc_per_node, 'rank')} per node runs on a GPU of its own",
            fix,
        )


def launch_slurm_task(plan: Plan, job_dir: Path) -> Outcome:
    """Run this task's rank of ``plan.cfg`` and return the job's outcome (see the module docstring).

    A task other than rank 0 returns once the record writer wrote ``metrics.json`` (its outcome
    is then only informative), or takes over the writing when every lower rank's task stopped.

    Args:
        plan: a validated plan; its world size (``nproc_per_node x nnodes``, the product of its
            layout's degrees) must equal the job's task count.
        job_dir: the Hydra job directory, shared by every task of the job; scratch files go to
            ``job_dir/.flopsweep``.
    """
    from submitit import JobEnvironment
    from submitit.helpers import TorchDistributedEnvironment

    if "MASTER_PORT" not in os.environ:  # every task of the job draws the same, below the ephemeral ports
        os.environ["MASTER_PORT"] = str(rendezvous_port(JobEnvironment().job_id))
    env = TorchDistributedEnvironment().export(set_cuda_visible_devices=False, overwrite=True)
    cfg, world = plan.cfg, plan.world_size
    if env.world_size != world:
        message = (
            f"the Slurm job has {plural(env.world_size, 'task')} but nnodes x nproc_per_node = {world}: "
            "set hydra.launcher.nodes=${nnodes} and hydra.launcher.tasks_per_node=${nproc_per_node}"
        )
        return Outcome("error", error=rec.error("LaunchMismatch", message, "launch", env.rank))
    scratch = Path(job_dir) / SCRATCH
    scratch.mkdir(parents=True, exist_ok=True)
    spec = RankSpec(
        cfg=cfg,
        job_dir=str(job_dir),
        scratch_dir=str(scratch),
        master_addr=env.master_addr,
        master_port=env.master_port,
        nproc_per_node=env.local_world_size,
        node_rank=env.rank // env.local_world_size,
        layout=plan.layout,
    )
    device_index = cuda_device_index(env.local_rank)
    log.info(
        "slurm task: rank %d of %d (local rank %d, device index %d) on node %s (node rank %d), master %s:%d",
        env.rank,
        world,
        env.local_rank,
        device_index,
        os.environ.get("SLURMD_NODENAME", "?"),
        spec.node_rank,
        env.master_addr,
        env.master_port,
    )
    record = Path(job_dir) / METRICS_FILE
    with TaskWatch(scratch, rank=env.rank, world_size=world, timeout_s=cfg.timeout_s) as watch:
        failure = watch.run(lambda: run_rank(spec, rank=env.rank, local_rank=device_index))
        writer = env.rank == 0 or watch.wait_for_writer(record)
        if writer and (failure or any(scratch.glob("rank*_error.json"))):
            time.sleep(2 * POLL_S)  # let error files that other ranks are writing arrive
    outcome = _outcome(_collect(scratch, failure, world), failure)
    if writer and env.rank != 0:
        outcome = _taken_over(outcome, env.rank)
    if not writer and record.exists():
        shutil.rmtree(scratch, ignore_errors=True)  # a heartbeat may have raced the writer's clean-up
    return outcome


def _collect(scratch: Path, failure: str | None, world: int) -> Outcome:
    """:func:`flopsweep.launch.collect` for a task that saw only its own rank end:
    ``failure`` is None when it ended cleanly, else why the task stopped waiting."""
    if failure is None:
        return collect(scratch, dict.fromkeys(range(world), 0), world)
    outcome = collect(scratch, {}, world)
    if outcome.error and outcome.error["type"] == "WorkerDied":
        outcome = Outcome(outcome.status, error={**outcome.error, "message": failure})
    return outcome


def _outcome(outcome: Outcome, failure: str | None) -> Outcome:
    """Name a SIGTERM or a dead task in the error type (collect calls it WorkerDied)."""
    if outcome.error and outcome.error["type"] == "WorkerDied" and failure:
        kind = "Terminated" if failure.startswith("SIGTERM") else "TaskDied"
        return Outcome(outcome.status, error={**outcome.error, "type": kind})
    return outcome


def _taken_over(outcome: Outcome, rank: int) -> Outcome:
    """The outcome that a task writes for the dead task(s) of ranks 0 to ``rank - 1``."""
    dead = "rank 0" if rank == 1 else f"ranks 0 to {rank - 1}"
    seen = f"{outcome.error['type']}: {outcome.error['message']}" if outcome.error else "no error"
    message = (
        f"the task of {dead} stopped without a record (killed, e.g. by the OOM killer, or its node "
        f"failed); rank {rank} wrote this one and saw {seen}"
    )
    phase = outcome.error["phase"] if outcome.error else "measure"
    return Outcome("error", error=rec.error("TaskDied", message, phase, 0))


class TaskWatch:
    """The main thread's watch over this task's rank and the job's other tasks.

    Every task writes a heartbeat file ``task{rank}_heartbeat.txt`` in the shared scratch
    directory every ``HEARTBEAT_S``. A heartbeat is stale when its content did not change for
    ``STALE_S`` by this task's clock, so that clock skew and file-attribute caching between
    nodes do not matter. Rank 0 watches every task; the others watch rank 0.
    """

    def __init__(self, scratch: Path, *, rank: int, world_size: int, timeout_s: float) -> None:
        self.scratch, self.rank, self.world_size, self.timeout_s = Path(scratch), rank, world_size, timeout_s
        self._seen: dict[int, tuple[str, float]] = {}  # rank -> (last heartbeat, when it last changed)
        self._peer_error_since: float | None = None
        self._sigterm = False
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, name="flopsweep-heartbeat", daemon=True)

    def __enter__(self) -> TaskWatch:
        self._beat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._beat.join()

    def run(self, target: Callable[[], None]) -> str | None:
        """Run ``target`` (this rank) in a daemon thread; None when it ended, else why the task stopped
        waiting for it (the thread is left behind; the process exits when the task returns)."""
        done = threading.Event()
        thread = threading.Thread(
            target=_call, args=(target, done), name=f"flopsweep-rank{self.rank}", daemon=True
        )
        atexit.register(_exit_if_running, thread)
        deadline = time.monotonic() + self.timeout_s
        with self._on_sigterm():
            thread.start()
            while not done.wait(POLL_S):
                why = self._why_stop(deadline)
                if why:
                    log.warning("rank %d: %s", self.rank, why)
                    return why
        return None

    def wait_for_writer(self, record: Path, limit_s: float = 10 * STALE_S) -> bool:
        """Wait until ``record`` exists (False) or every lower rank's task is stale (True: this task
        takes over the writing, :func:`writes_record` becomes true). Gives up (False) after ``limit_s``."""
        end = time.monotonic() + limit_s
        while time.monotonic() < end:
            if record.exists():
                return False
            if len(self.stale(range(self.rank))) == self.rank:
                log.warning(
                    "rank %d writes the record: no heartbeat from a lower rank's task for %g s",
                    self.rank,
                    STALE_S,
                )
                _took_over.set()
                return True
            time.sleep(POLL_S)
        log.warning("rank %d: no %s after %.0f s; leaving it to rank 0", self.rank, record, limit_s)
        return False

    def stale(self, ranks: Iterable[int]) -> list[int]:
        """Those of ``ranks`` whose heartbeat did not change for ``STALE_S`` (counted from the
        first look when the file is missing)."""
        now, stale = time.monotonic(), []
        for rank in ranks:
            try:
                beat = (self.scratch / f"task{rank}_heartbeat.txt").read_text()
            except OSError:
                beat = ""
            last, since = self._seen.get(rank, (None, now))
            if beat != last:
                self._seen[rank] = (beat, now)
            elif now - since > STALE_S:
                stale.append(rank)
        return stale

    def _why_stop(self, deadline: float) -> str | None:
        return self.why_stop(deadline)

    def why_stop(self, deadline: float | None = None, *, peer_errors: bool = True) -> str | None:
        """Why this task should stop waiting, or None: SIGTERM, ``deadline`` (monotonic; None: none)
        passed, another rank's error file ``PEER_GRACE_S`` old (unless not ``peer_errors``: a node
        agent's supervisor sees those itself), a watched task's heartbeat stale. A node agent
        (:mod:`flopsweep.node_agent`) is watched as the task of rank ``node_rank``."""
        if self._sigterm:
            return "SIGTERM: Slurm is stopping the job (scancel, time limit or preemption)"
        if deadline is not None and time.monotonic() > deadline:
            return f"timeout: no result within timeout_s={self.timeout_s:g} s"
        peers = [p for p in self.scratch.glob("rank*_error.json") if p.name != f"rank{self.rank}_error.json"]
        peers = peers if peer_errors else []
        if peers and self._peer_error_since is None:
            self._peer_error_since = time.monotonic()
        if peers and time.monotonic() - self._peer_error_since > PEER_GRACE_S:
            peer = peers[0].name.removeprefix("rank").split("_")[0]
            return f"rank {peer} failed and rank {self.rank} still waited for it {PEER_GRACE_S:g} s later"
        watched = range(1, self.world_size) if self.rank == 0 else [0]
        dead = self.stale(watched)
        if dead:
            task = f"rank {dead[0]}" if peer_errors else f"node {dead[0]}'s agent"
            return (
                f"the task of {task} stopped (no heartbeat for {STALE_S:g} s): killed, e.g. "
                "by the OOM killer, or its node failed"
            )
        return None

    def _heartbeat(self) -> None:
        path, count = self.scratch / f"task{self.rank}_heartbeat.txt", 0
        while True:
            count += 1
            with contextlib.suppress(OSError):  # the record writer removes the scratch directory
                replace_text(path, str(count))  # never through a link planted there
            if self._stop.wait(HEARTBEAT_S):
                return

    @contextlib.contextmanager
    def _on_sigterm(self) -> Iterator[None]:
        """Note SIGTERM while the rank runs (submitit's own handler only logs it)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def note(signum: int, frame: Any) -> None:
            self._sigterm = True

        previous = signal.signal(signal.SIGTERM, note)
        try:
            yield
        finally:
            signal.signal(signal.SIGTERM, previous)


def _call(target: Callable[[], None], done: threading.Event) -> None:
    try:
        target()
    except SystemExit:
        pass  # run_rank wrote the rank's error file
    except BaseException:  # noqa: BLE001 - the watch reports the missing result
        log.exception("the rank thread failed outside run_rank")
    finally:
        done.set()


def _exit_if_running(thread: threading.Thread) -> None:
    """At exit, end the process at once when the rank thread is still stuck in a collective:
    interpreter shutdown could otherwise wait in the process group's destructors."""
    if thread.is_alive():
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)

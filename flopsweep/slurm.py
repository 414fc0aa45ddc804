"""Slurm launcher settings and checks, and which task of a Slurm job writes its record.

hydra-submitit-launcher submits a sweep as one Slurm job array, one element per Hydra job, each with
``nodes`` tasks, one per node (``hydra.launcher.tasks_per_node=1``): each task runs ``run.py``'s task
function as the agent of its node (:mod:`flopsweep.node_agent`), which spawns that node's ranks with
the local supervisor; the agents of a multi-node job run in lockstep (:mod:`flopsweep.lockstep`). The
tasks of a job agree on its directory: ``hydra.sweep.dir`` is resolved in the sweep process and reaches
the tasks through Hydra's resolver cache (``${now:}``, ``${flopsweep_uid:}``), and the subdir is the
job number. The rendezvous port is ``MASTER_PORT`` from the environment if set, else drawn from the
job id below the ephemeral ports (:func:`flopsweep.launch.rendezvous_port`: submitit's own draw,
20000-60000, overlaps Linux's ephemeral 32768-60999, where any process's outgoing connection can hold it).

GPUs: ``CUDA_VISIBLE_DEVICES`` is left as Slurm set it; the agent's ranks use devices 0 to
``nproc_per_node - 1`` of what it sees (``gpus_per_node``, the default here).

Only one task writes ``metrics.json`` (:func:`writes_record`): node 0's agent, or another node's
agent whose control store stopped answering (:func:`take_over_record`).

The older shape, one Slurm task per rank (``hydra.launcher.tasks_per_node=${nproc_per_node}``, each
task a rank watched by heartbeat files), is gone: :func:`check_launcher` refuses it in one line that
names ``tasks_per_node=1``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from hydra_plugins.hydra_submitit_launcher.config import LocalQueueConf

from flopsweep.config import ConfigError
from flopsweep.text import plural

log = logging.getLogger("flopsweep")

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
    only the task of global rank 0 (node 0's agent), or another node's agent that took over
    (:func:`take_over_record`)."""
    if not inside_submitit_task():
        return True
    import submitit

    return submitit.JobEnvironment().global_rank == 0 or _took_over.is_set()


def take_over_record() -> None:
    """From now on this task writes the job's record (:func:`writes_record`): node 0's agent is gone
    (:meth:`flopsweep.lockstep.NodeGroup.follow` lost its control store)."""
    _took_over.set()


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
            "a Slurm launcher needs the ranks per node at submission (each node agent spawns that many)",
            "set nproc_per_node to the GPUs per node to use, e.g. nproc_per_node=8 "
            "(with device=cpu: the CPU ranks per node, e.g. 2 with backend=ddp, 1 with backend=single)",
        )


def check_launcher(
    launcher: Mapping[str, Any], *, nproc_per_node: int, nnodes: int, device: str, local: bool = False
) -> None:
    """Check resolved submitit launcher settings (``hydra.launcher``) against the run.

    ``tasks_per_node`` is 1 (one node agent per node, which spawns the node's ranks),
    ``array_parallelism`` (when given) a whole number of 1 or more, ``nodes == nnodes``, and on GPUs one
    GPU per rank (``gpus_per_node == nproc_per_node``, or ``gpus_per_task`` giving as many).

    Raises:
        ConfigError: naming the launcher key, its value and what to set; the older one task per rank
            (``tasks_per_node == nproc_per_node`` > 1) among them.
    """
    tasks, nodes = launcher.get("tasks_per_node") or 1, launcher.get("nodes") or 1
    if tasks != 1:
        older = " (one task per rank, the older shape, is gone)" if tasks == nproc_per_node else ""
        raise ConfigError(
            "hydra.launcher.tasks_per_node",
            tasks,
            f"a Slurm task is the agent of one node: it spawns the node's nproc_per_node={nproc_per_node} "
            f"ranks{older}",
            "set hydra.launcher.tasks_per_node=1 (the default of slurm.yaml: one node agent per node)",
        )
    parallel = launcher.get("array_parallelism")
    if parallel is not None and (isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1):
        raise ConfigError(
            "hydra.launcher.array_parallelism",
            parallel,
            "at most this many jobs of the sweep's Slurm job array run at once (sbatch --array=0-N%K)",
            "set hydra.launcher.array_parallelism=2 (any whole number of 1 or more), or leave it out (256)",
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

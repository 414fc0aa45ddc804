"""Slurm client calls and what the nodes offer: the deadline of every call (:func:`command_timeout`,
:func:`run_command`, :func:`scancel`), ``sinfo``'s nodes (:func:`read_sinfo`) and
:func:`check_request`, which refuses, before anything is submitted, a job that no node of the
partition could ever run (Slurm would accept it and leave it PENDING for ever). The parsers are
pure (tested on strings). :mod:`flopsweep.cluster` re-exports every name here.

Every Slurm command inherits this process's environment, so ``SLURM_CONF`` picks the cluster (the
private test cluster of ``.ci/slurm-up.sh``, or the system's ``/etc/slurm/slurm.conf`` when unset).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from flopsweep.config import ConfigError
from flopsweep.text import figure, plural

log = logging.getLogger("flopsweep")

COMMAND_TIMEOUT_S = 30.0
"""Seconds a ``sinfo``, ``sacct`` or ``squeue`` call may take."""
SINFO_FORMAT = "%N|%P|%c|%m|%G"
"""``sinfo -h -N -o`` fields: node, partition (``*`` marks the default), CPUs, memory (MB), GRES."""
STATE_FORMAT = "%i|%T"
"""``squeue -h -r --states=all -o`` fields: job id (``123_4`` for an array element), state."""

PENDING_STATES = frozenset(
    {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SPECIAL_EXIT"}
)
RUNNING_STATES = frozenset(
    {"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING", "RESIZING", "SUSPENDED", "STOPPED"}
)
FINISHED_STATES = frozenset({"COMPLETED", "FINISHED"})  # FINISHED: submitit_local's word
ENDED_STATES = frozenset(
    {
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
        "PREEMPTED",
        "REVOKED",
        "INTERRUPTED",  # submitit_local: the job's process died by a signal
    }
)
"""Slurm job states (``sacct``/``squeue`` long names) by what they mean for a waiting sweep."""


class ClusterError(RuntimeError):
    """Slurm cannot be asked (no client, no controller reachable); the message is one line with a fix.
    ``code``: the exit status of the sweep it stops: 2 where this machine cannot be a Slurm client (no
    ``sinfo`` on PATH, ``SLURM_CONF`` names no file: the launcher is refused, as a config is), else 1."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


TIMEOUT_ENV = "FLOPSWEEP_SLURM_TIMEOUT_S"
"""Environment variable that sets the deadline of every Slurm client call (``sinfo``, ``sbatch``,
``squeue``, ``sacct``, ``scancel``), seconds from 1 to 3600; unset: ``COMMAND_TIMEOUT_S`` (``sbatch``:
``SUBMIT_TIMEOUT_S``). For a slow controller, or a test."""
SUBMIT_TIMEOUT_S = 120.0
"""Seconds ``sbatch`` may take to submit a sweep's job array (a busy controller takes seconds)."""


def command_timeout(default: float | None = None) -> float:
    """The deadline of one Slurm client call, seconds: ``$FLOPSWEEP_SLURM_TIMEOUT_S`` or ``default``.

    Raises:
        ClusterError: the variable is not a number from 1 to 3600.
    """
    text = os.environ.get(TIMEOUT_ENV)
    if text is None:
        return COMMAND_TIMEOUT_S if default is None else default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 1 <= value <= 3600:
        raise ClusterError(
            f"{TIMEOUT_ENV}={text[:40]!r} is not a number of seconds from 1 to 3600. Fix: set it to e.g. 60, "
            "or unset it"
        )
    return value


def run_command(args: Sequence[str], *, timeout_s: float | None = None) -> subprocess.CompletedProcess:
    """Run a Slurm client command with a deadline (:func:`command_timeout` when None), text output
    captured. On the deadline its whole process group (it runs in a session of its own) is killed,
    so a client that forked a helper cannot keep the call waiting.

    Raises:
        FileNotFoundError: no such command on PATH.
        subprocess.TimeoutExpired: it did not end within the deadline (it was killed).
    """
    timeout_s = command_timeout() if timeout_s is None else timeout_s
    with subprocess.Popen(
        list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def scancel(job_id: str) -> str | None:
    """Cancel a Slurm job (or array element) with ``scancel``, within :func:`command_timeout`.
    Returns None when scancel accepted it, else why not (one line)."""
    try:
        proc = run_command(["scancel", job_id])
    except FileNotFoundError:
        return "no scancel on PATH"
    except subprocess.TimeoutExpired:
        return f"scancel did not answer within {figure(command_timeout(), 6)} s"
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1][:300]
    return None


# --- sinfo: what the nodes have ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class NodeRow:
    """One line of ``sinfo -h -N -o SINFO_FORMAT``: a node in one partition."""

    name: str
    partition: str
    default: bool
    """The partition is the cluster's default (``sinfo`` prints it with a ``*``)."""
    cpus: int
    memory_mb: int
    """``RealMemory`` of the node, MB (Slurm's M: 2^20 bytes)."""
    gpus: int
    """GPUs in the node's GRES (``gpu:8``, ``gpu:h100:8(S:0-1)``); 0 without."""


def _leading_int(text: str) -> int:
    match = re.match(r"\s*(\d+)", text)
    return int(match.group(1)) if match else 0


def gres_gpus(gres: str) -> int:
    """GPUs named in a GRES string: ``gpu:8`` -> 8, ``gpu:a100:4(S:0-1),gpu:v100:2`` -> 6,
    ``gpu`` -> 1, ``(null)`` or ``shard:8`` -> 0."""
    total = 0
    for item in re.split(r",(?![^()]*\))", gres.strip()):
        fields = re.sub(r"\(.*?\)", "", item).split(":")
        if fields[0] != "gpu":
            continue
        total += int(fields[-1]) if len(fields) > 1 and fields[-1].isdigit() else 1
    return total


def parse_sinfo(text: str) -> list[NodeRow]:
    """Rows of ``sinfo -h -N -o SINFO_FORMAT`` output (other lines are skipped)."""
    rows = []
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) != 5 or not fields[0]:
            continue
        name, partition, cpus, memory, gres = fields
        rows.append(
            NodeRow(
                name=name,
                partition=partition.rstrip("*"),
                default=partition.endswith("*"),
                cpus=_leading_int(cpus),
                memory_mb=_leading_int(memory),
                gpus=gres_gpus(gres),
            )
        )
    return rows


def slurm_conf() -> str:
    """The slurm.conf that Slurm's commands read here, for messages: ``SLURM_CONF`` or the default."""
    conf = os.environ.get("SLURM_CONF")
    return "/etc/slurm/slurm.conf (SLURM_CONF is not set)" if conf is None else f"SLURM_CONF={conf!r}"


def run_client(args: list[str], **_: Any) -> subprocess.CompletedProcess:
    """:func:`run_command` (its own deadline, :func:`command_timeout`) with ``subprocess.run``'s call
    shape: the keyword arguments (``capture_output``, ``text``, ``timeout``, ``check``) are accepted
    and ignored. The default ``run`` of :func:`read_sinfo` and :class:`flopsweep.cluster.SlurmStates`,
    which tests replace with a fake of the same shape.

    Raises:
        FileNotFoundError: no such command on PATH.
        subprocess.TimeoutExpired: it did not end within the deadline (it was killed).
    """
    return run_command(args)


def read_sinfo(run: Callable[..., subprocess.CompletedProcess] = run_client) -> list[NodeRow]:
    """The cluster's nodes, from ``sinfo``.

    Raises:
        ClusterError: ``SLURM_CONF`` names no file (sinfo would retry for 60 s), no ``sinfo`` on
            PATH, or it failed (no controller reachable) or did not answer within :func:`command_timeout`.
    """
    conf = os.environ.get("SLURM_CONF")
    if conf is not None and not os.path.isfile(conf):
        raise ClusterError(
            f"hydra/launcher=slurm: SLURM_CONF={conf!r} is not a file. Fix: point SLURM_CONF at the "
            "slurm.conf of a running cluster (.ci/slurm-up.sh prints its own), or unset it",
            code=2,
        )
    try:
        proc = run(
            ["sinfo", "-h", "-N", "-o", SINFO_FORMAT],
            capture_output=True,
            text=True,
            timeout=command_timeout(),
            check=False,
        )
    except FileNotFoundError:
        raise ClusterError(
            "hydra/launcher=slurm: no sinfo on PATH: this machine has no Slurm client. Fix: run the sweep "
            "on a Slurm login node, or try it here with hydra/launcher=slurm_local",
            code=2,
        ) from None
    except subprocess.TimeoutExpired:
        raise ClusterError(
            f"hydra/launcher=slurm: sinfo did not answer within {figure(command_timeout(), 6)} s "
            f"({slurm_conf()}). "
            "Fix: check that the Slurm controller is up and reachable from here"
        ) from None
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise ClusterError(
            f"hydra/launcher=slurm: sinfo failed: {why} ({slurm_conf()}). Fix: start the Slurm controller, "
            "or point SLURM_CONF at the slurm.conf of a running cluster"
        )
    return parse_sinfo(proc.stdout)


# --- the request against the nodes ------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class Request:
    """What one job of the array asks of each of its nodes (from the resolved ``hydra.launcher``)."""

    nodes: int
    tasks: int
    cpus_per_task: int
    gpus: int
    """Per node: ``gpus_per_task x tasks_per_node``, else ``gpus_per_node``."""
    gpu_key: str
    mem_gb: float | None
    """Per node, GB as submitit passes it to ``--mem`` (Slurm's G: 1024 MB); None: the partition's default."""
    partition: str | None

    @classmethod
    def of(cls, launcher: Mapping[str, Any]) -> Request:
        tasks = int(launcher.get("tasks_per_node") or 1)
        per_task = int(launcher.get("gpus_per_task") or 0)
        per_node = launcher.get("gpus_per_node") or 0
        per_node = per_node if isinstance(per_node, int) else _leading_int(str(per_node).split(":")[-1])
        return cls(
            nodes=int(launcher.get("nodes") or 1),
            tasks=tasks,
            cpus_per_task=int(launcher.get("cpus_per_task") or 1),
            gpus=per_task * tasks if per_task else int(per_node),
            gpu_key="hydra.launcher.gpus_per_task" if per_task else "hydra.launcher.gpus_per_node",
            mem_gb=launcher.get("mem_gb"),
            partition=launcher.get("partition") or None,
        )


def partition_nodes(rows: Sequence[NodeRow], partition: str | None) -> tuple[list[NodeRow], str]:
    """The nodes a job of ``partition`` may run on (``a,b``: any of them; None: the default
    partition, or every node when none is marked), and a name for them in messages.

    Raises:
        ConfigError: ``hydra.launcher.partition`` names no partition of the cluster, or holds an empty
            name (``cpu,,long``, ``cpu,``: dropped here in silence, the list went to sbatch as given).
    """
    known = sorted({row.partition for row in rows})
    if partition:
        wanted = [p.strip() for p in partition.split(",") if p.strip()]
        if wanted and len(wanted) < len(partition.split(",")):
            raise ConfigError(
                "hydra.launcher.partition",
                partition,
                "holds an empty partition name (a doubled or trailing comma)",
                f"set hydra.launcher.partition={','.join(wanted)}",
            )
        unknown = [p for p in wanted if p not in known]
        if unknown:
            raise ConfigError(
                "hydra.launcher.partition",
                partition,
                f"the cluster has no partition {unknown[0]} (sinfo lists: {', '.join(known) or 'none'})",
                f"set hydra.launcher.partition to one of {', '.join(known) or 'its partitions'}",
            )
        chosen, label = [r for r in rows if r.partition in wanted], f"partition {partition}"
    else:
        defaults = [r for r in rows if r.default]
        chosen = defaults or list(rows)
        label = f"the default partition {defaults[0].partition}" if defaults else "the cluster"
    by_name = {row.name: row for row in chosen}
    return list(by_name.values()), label


def check_request(launcher: Mapping[str, Any], rows: Sequence[NodeRow]) -> None:
    """Refuse a job that no ``nodes`` nodes of its partition can hold: Slurm would accept it and
    keep it PENDING for ever. Checked per node: ``tasks_per_node x cpus_per_task`` CPUs, the GPUs
    (GRES ``gpu``), ``mem_gb`` (when set) against the node's memory; then the node count.

    Args:
        launcher: the resolved ``hydra.launcher`` (keys of hydra-submitit-launcher's submitit_slurm).
        rows: the cluster's nodes (:func:`read_sinfo`).

    Raises:
        ConfigError: naming the launcher key, its value, what the largest node has, and the fix.
    """
    want = Request.of(launcher)
    nodes, where = partition_nodes(rows, want.partition)
    if not nodes:
        raise ConfigError(
            "hydra.launcher.partition",
            want.partition,
            f"sinfo lists no node in {where}",
            "set hydra.launcher.partition to a partition with nodes",
        )
    if len(nodes) < want.nodes:
        raise ConfigError(
            "hydra.launcher.nodes",
            want.nodes,
            f"{where} has {plural(len(nodes), 'node')}",
            f"set nnodes={len(nodes)} (hydra.launcher.nodes follows it), or pick a larger partition",
        )
    cpus = want.tasks * want.cpus_per_task
    mem_mb = None if want.mem_gb is None else int(float(want.mem_gb) * 1024)
    checks = [  # key, value, asked per node, the node's figure, (unit, how), the fix given the largest
        (
            "hydra.launcher.cpus_per_task",
            want.cpus_per_task,
            cpus,
            lambda r: r.cpus,
            ("CPUs", f" ({plural(want.tasks, 'task')} x {want.cpus_per_task})"),
            lambda most: (
                f"set hydra.launcher.cpus_per_task={most // want.tasks}"
                if most >= want.tasks
                else f"set nproc_per_node={most} or fewer, with hydra.launcher.cpus_per_task=1"
            ),
        ),
        (
            want.gpu_key,
            launcher.get(want.gpu_key.rsplit(".", 1)[-1]),
            want.gpus,
            lambda r: r.gpus,
            ("GPUs", ""),
            lambda most: (
                f"set nproc_per_node={most} (one GPU per rank)"
                if most
                else "pick a partition with GPUs (hydra.launcher.partition=...), or device=cpu"
            ),
        ),
        (
            "hydra.launcher.mem_gb",
            want.mem_gb,
            mem_mb or 0,
            lambda r: r.memory_mb,
            ("MB of memory", ""),
            lambda most: f"set hydra.launcher.mem_gb={most // 1024}, or null (the partition's default)",
        ),
    ]
    for key, value, need, have, unit, fix in checks:
        most = max(have(r) for r in nodes)
        if sum(have(r) >= need for r in nodes) < want.nodes:
            largest = f"the largest node of {where} has {most} {unit[0]}"
            if want.nodes > 1:
                largest = f"fewer than {want.nodes} nodes have that ({largest})"
            asked = f"a job asks for {need} {unit[0]}{unit[1]} per node"
            raise ConfigError(key, value, f"{asked}, but {largest}", fix(most))
    fit = [r for r in nodes if all(have(r) >= need for _, _, need, have, _, _ in checks)]
    if len(fit) < want.nodes:
        raise ConfigError(
            "hydra.launcher.nodes",
            want.nodes,
            f"only {plural(len(fit), 'node')} of {where} {'has' if len(fit) == 1 else 'have'} "
            f"{cpus} CPUs, {want.gpus} GPUs and {mem_mb or 0} MB",
            f"set nnodes={len(fit)}" if fit else "ask for less per node",
        )

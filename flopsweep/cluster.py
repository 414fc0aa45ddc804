"""What a Slurm cluster offers and where a sweep's jobs stand: ``sinfo``, ``sacct`` and ``squeue``.

Used by the launcher plugins (``hydra_plugins/flopsweep_slurm``) in the sweep process:
:func:`check_request` refuses, before anything is submitted, a job that no node of the partition
could ever run (Slurm would accept it and leave it PENDING for ever), and :class:`JobWatch` waits
for the submitted jobs, shows each job's state as it changes, and notices a job that ended
without a result (cancelled, failed, timed out, never started) instead of waiting for ever.

The parsers are pure (tested on strings); the commands run with a timeout. Every Slurm command
inherits this process's environment, so ``SLURM_CONF`` picks the cluster (the private test
cluster of ``.ci/slurm-up.sh``, or the system's ``/etc/slurm/slurm.conf`` when unset).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from flopsweep.config import ConfigError
from flopsweep.text import plural

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
    """Slurm cannot be asked (no client, no controller reachable); the message is one line with a fix."""


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
        return f"scancel did not answer within {command_timeout():g} s"
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


def _run(args: list[str], **_: Any) -> subprocess.CompletedProcess:
    return run_command(args)


def read_sinfo(run: Callable[..., subprocess.CompletedProcess] = _run) -> list[NodeRow]:
    """The cluster's nodes, from ``sinfo``.

    Raises:
        ClusterError: ``SLURM_CONF`` names no file (sinfo would retry for 60 s), no ``sinfo`` on
            PATH, or it failed (no controller reachable) or did not answer within :func:`command_timeout`.
    """
    conf = os.environ.get("SLURM_CONF")
    if conf is not None and not os.path.isfile(conf):
        raise ClusterError(
            f"hydra/launcher=slurm: SLURM_CONF={conf!r} is not a file. Fix: point SLURM_CONF at the "
            "slurm.conf of a running cluster (.ci/slurm-up.sh prints its own), or unset it"
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
            "on a Slurm login node, or try it here with hydra/launcher=slurm_local"
        ) from None
    except subprocess.TimeoutExpired:
        raise ClusterError(
            f"hydra/launcher=slurm: sinfo did not answer within {command_timeout():g} s ({slurm_conf()}). "
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
        ConfigError: ``hydra.launcher.partition`` names no partition of the cluster.
    """
    known = sorted({row.partition for row in rows})
    if partition:
        wanted = [p.strip() for p in partition.split(",") if p.strip()]
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


# --- sacct / squeue: where the jobs are -------------------------------------------------------


def expand_job_id(job_id: str) -> list[str]:
    """Array element ids in one ``sacct``/``squeue`` job id: ``12_3`` -> ``[12_3]``,
    ``12_[0-2,5%2]`` -> ``[12_0, 12_1, 12_2, 12_5]``, ``12`` -> ``[12]``."""
    match = re.fullmatch(r"(\d+)_\[([^\]]*)\]", job_id.strip())
    if not match:
        return [job_id.strip()]
    main, ids = match.group(1), []
    for part in match.group(2).split("%")[0].split(","):
        low, _, high = part.partition("-")
        if low.isdigit():
            ids += [f"{main}_{i}" for i in range(int(low), int(high or low) + 1)]
    return ids


def parse_states(text: str) -> dict[str, str]:
    """Job id -> state from ``sacct -X -n -P -o JobID,State`` or ``squeue -h -r --states=all -o
    '%i|%T'`` output. ``CANCELLED by 0`` -> ``CANCELLED``; job steps (``12_3.batch``) are skipped."""
    return _parse_states(text)[0]


JOB_ID = re.compile(r"\d+(_(\d+|\[[\d,%-]*\]))?(\+\d+)?")
"""A job id as squeue and sacct print it: ``12``, ``12_3``, ``12_[0-4%2]``, a het job ``12+0``."""


def _parse_states(text: str) -> tuple[dict[str, str], int]:
    """:func:`parse_states` and the count of non-blank lines that are no job's state (an answer
    that is not squeue's nor sacct's: it tells nothing about any job)."""
    states, unparsed = {}, 0
    for line in text.splitlines():
        job_id, _, state = line.strip().partition("|")
        state = state.split("|")[0].split(" ")[0].strip().upper()
        if "." in job_id and JOB_ID.fullmatch(job_id.split(".")[0]):
            continue  # a job step
        if not JOB_ID.fullmatch(job_id) or not re.fullmatch(r"[A-Z_]+\+?", state):
            unparsed += bool(line.strip())
            continue
        for one in expand_job_id(job_id):
            states[one] = state
    return states, unparsed


def state_kind(state: str | None) -> str:
    """What a state means to the sweep: ``pending``, ``running``, ``finished`` (a result should be
    there), ``ended`` (cancelled, failed, timed out...: maybe no result) or ``unknown`` (None: the
    job is not known to sacct nor squeue)."""
    if state is None:
        return "unknown"
    state = state.upper().split(" ")[0].rstrip("+")
    for kind, names in (
        ("pending", PENDING_STATES),
        ("running", RUNNING_STATES),
        ("finished", FINISHED_STATES),
        ("ended", ENDED_STATES),
    ):
        if state in names:
            return kind
    return "ended" if state.startswith("CANCELLED") else "running"


class SlurmStates:
    """Job states from ``squeue``, and from ``sacct`` for the jobs that ``squeue`` no longer knows.

    ``squeue --states=all`` is asked first because it is live: a cancelled job whose tasks are still
    writing their record and result shows ``COMPLETING`` there until its last process ended, while
    ``sacct`` says ``CANCELLED`` at once. A finished job leaves ``squeue`` ``MinJobAge`` (300 s by
    default) after its end; ``sacct`` then still knows it where the cluster keeps accounting. It fails
    without accounting (``AccountingStorageType=accounting_storage/none``, as on the test cluster);
    after its first failure it is not asked again. A job that neither knows is missing from the answer
    (state ``unknown``). A terminal state in the answer therefore means that the job's processes ended.
    """

    def __init__(self, run: Callable[..., subprocess.CompletedProcess] = _run) -> None:
        self.run = run
        self.use_sacct = True

    def __call__(self, job_ids: Iterable[str]) -> dict[str, str] | None:
        """State by job id (``12_3`` for an array element) of the jobs that squeue or sacct know;
        None when squeue could not be asked (e.g. the controller is down for a while)."""
        job_ids = list(job_ids)
        states = self._squeue(sorted({job_id.split("_")[0] for job_id in job_ids}))
        if states is None:
            return None
        gone = sorted({job_id.split("_")[0] for job_id in job_ids if job_id not in states})
        if gone and self.use_sacct:
            states = {**(self._sacct(gone) or {}), **states}
        return states

    def _squeue(self, arrays: list[str]) -> dict[str, str] | None:
        if not arrays:
            return {}
        proc = self._call(["squeue", "-h", "-r", "--states=all", "-o", STATE_FORMAT, "-j", ",".join(arrays)])
        if proc is not None and proc.returncode == 0:
            states, unparsed = _parse_states(proc.stdout)
            if not unparsed:
                return states
            line = proc.stdout.strip().splitlines()[0][:200]
            log.warning("flopsweep: squeue answered what is no job state (%r); the states are unknown", line)
            return None
        if proc is not None and "Invalid job id" in proc.stderr:
            return {}  # squeue -j of jobs that all left the controller (MinJobAge): none of them is known
        why = "no answer" if proc is None else (proc.stderr.strip().splitlines() or ["no message"])[-1]
        log.warning("flopsweep: squeue failed (%s); the jobs' states are unknown until it answers", why)
        return None

    def _sacct(self, arrays: list[str]) -> dict[str, str] | None:
        proc = self._call(["sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", ",".join(arrays)])
        if proc is None or proc.returncode != 0:
            why = ["timeout"] if proc is None else (proc.stderr or proc.stdout).strip().splitlines()
            log.info("sacct cannot be asked (%s): only squeue is", (why or ["no message"])[-1])
            self.use_sacct = False
            return None
        states, unparsed = _parse_states(proc.stdout)
        return None if unparsed else states

    def _call(self, args: list[str]) -> subprocess.CompletedProcess | None:
        try:
            return self.run(args, capture_output=True, text=True, timeout=command_timeout(), check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None


# --- the wait ---------------------------------------------------------------------------------

RESULT_GRACE_S = 15.0
"""Seconds a job's result files may still appear after Slurm says it ended (its processes ended,
:class:`SlurmStates`): a shared file system may show a new file late. submitit's own wait for a
result file is as long."""
RESULT_POLL_S = 1.0
"""Seconds between two looks at the result files (cheap: a stat each)."""


def query_interval(elapsed_s: float) -> float:
    """Seconds between two ``sacct``/``squeue`` calls after ``elapsed_s`` of waiting: 2 s at
    first, then a tenth of the time waited, at most 30 s (long sweeps ask the controller rarely)."""
    return min(30.0, max(2.0, elapsed_s / 10))


@dataclasses.dataclass
class Watched:
    """One submitted job of the sweep, as :class:`JobWatch` follows it."""

    num: int
    """The Hydra job number (``hydra.job.num``)."""
    job: Any
    """The submitit Job (``SlurmJob`` or ``LocalJob``)."""
    shown: str = ""
    """The state last shown."""
    state: str | None = None
    """The last state Slurm gave (None: not known)."""
    ended_since: float | None = None
    """When (monotonic) the job was first seen ended, finished or gone without every result."""
    outcome: str | None = None
    """``result`` (every task's result file is there), ``partial`` (task 0's is; the job ended) or
    ``lost`` (no result of task 0 will come); None while waiting."""
    unknown_looks: int = 0
    """Looks in a row at the queue that did not list the job (or got no usable answer)."""
    cancelled: str | None = None
    """For a lost job that Slurm did not say ended: ``cancelled`` (scancel accepted it), else why
    the cancel failed; None when it was not needed."""

    @property
    def label(self) -> str:
        return f"job #{self.num} (id {self.job.job_id})"


def result_files(job: Any) -> list[bool]:
    """Whether each task of a submitit ``job`` left its result file."""
    return [job.task(i).paths.result_pickle.exists() for i in range(job.num_tasks)]


def started(job: Any) -> bool:
    """Whether the job ever started: its first task's log file exists (Slurm opens the batch
    script's output file when the job starts)."""
    return job.task(0).paths.stdout.exists()


MISSING_LOOKS = 3
"""Looks in a row at a queue answer that does not list a job before the job counts as gone (with
``grace_s`` passed too): one answer without it may be a controller's hiccup, not the job's end."""
UNANSWERED_LOOKS = 20
"""Looks in a row without a usable queue answer (squeue failed, timed out, or printed what is no
job state) after which the waiting jobs are cancelled and recorded lost: minutes at
:func:`query_interval`, instead of a wait for ever."""


class JobWatch:
    """Wait for a sweep's jobs: show each state change, and end the wait of a job that can give
    no result.

    A job is done when every task's result file exists (submitit wrote it), ``partial`` when the
    job ended with task 0's result only (the one Hydra reads), and ``lost`` when Slurm says it
    ended, or did not list it ``MISSING_LOOKS`` times in a row, and task 0's result is still missing
    ``grace_s`` later (a shared file system may show the files of a job that ran late). A queue that
    gives no usable answer ``UNANSWERED_LOOKS`` times in a row loses every waiting job. "Unknown" is
    not "ended": a lost job that Slurm did not say ended is cancelled (``cancel``) before it is
    recorded, so that it cannot run on unwatched.

    Args:
        jobs: ``(hydra job number, submitit job)`` pairs.
        states: job ids -> state by id, or None when it cannot be told (:class:`SlurmStates`).
        show: called with each state line, e.g. ``job #0 (id 12_0): RUNNING``.
        finished: called with each job as it gets a result (outcome ``result`` or ``partial``), at
            once, before the other jobs end (the sweep's progress line; a lost job's record is
            written after the wait).
        cancel: cancels a submitit job; None when done, else why not (:func:`scancel`).
    """

    def __init__(
        self,
        jobs: Iterable[tuple[int, Any]],
        states: Callable[[list[str]], Mapping[str, str] | None],
        *,
        show: Callable[[str], None] = log.info,
        finished: Callable[[Watched], None] = lambda w: None,
        cancel: Callable[[Any], str | None] = lambda job: scancel(job.job_id),
        grace_s: float = RESULT_GRACE_S,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.jobs = [Watched(num, job) for num, job in jobs]
        self.states, self.show, self.grace_s, self.clock, self.sleep = states, show, grace_s, clock, sleep
        self.cancel, self.finished = cancel, finished
        self.unanswered = 0

    def wait(self) -> list[Watched]:
        """Return once every job has an outcome (``Watched.outcome``), in submission order."""
        start = self.clock()
        next_query = start
        while True:
            self.look_at_results()
            if all(w.outcome for w in self.jobs):
                return self.jobs
            if self.clock() >= next_query:
                self.look_at_states()
                next_query = self.clock() + query_interval(self.clock() - start)
            if all(w.outcome for w in self.jobs):
                return self.jobs
            self.sleep(RESULT_POLL_S)

    def look_at_results(self) -> None:
        for w in self.jobs:
            if w.outcome is None and all(result_files(w.job)):
                w.outcome = "result"
                self._show(w, "done")
                self.finished(w)

    def look_at_states(self) -> None:
        waiting = [w for w in self.jobs if w.outcome is None]
        states = self.states([w.job.job_id for w in waiting])
        if states is None:  # no usable answer: decide nothing now, but not for ever
            self.unanswered += 1
            if self.unanswered >= UNANSWERED_LOOKS:
                for w in waiting:
                    w.state, w.unknown_looks = None, self.unanswered
                    self._lose(w)
            return
        self.unanswered = 0
        now = self.clock()
        for w in waiting:
            w.state = states.get(w.job.job_id)
            kind = state_kind(w.state)
            w.unknown_looks = w.unknown_looks + 1 if kind == "unknown" else 0
            if kind in ("pending", "running"):
                w.ended_since = None
                self._show(w, w.state or "")
                continue
            self._show(w, w.state or "not listed by the queue")
            w.ended_since = now if w.ended_since is None else w.ended_since
            gone = kind != "unknown" or w.unknown_looks >= MISSING_LOOKS
            if now - w.ended_since >= self.grace_s and gone:
                if result_files(w.job)[0]:
                    w.outcome = "partial"
                    self.finished(w)
                else:
                    self._lose(w)

    def _lose(self, w: Watched) -> None:
        """Record ``w`` lost; cancel it first unless Slurm said it ended."""
        if state_kind(w.state) not in ("ended", "finished"):
            why = self.cancel(w.job)
            w.cancelled = "cancelled" if why is None else why
            self._show(w, "cancelled" if why is None else f"not cancelled: {why}")
        w.outcome = "lost"

    def _show(self, w: Watched, state: str) -> None:
        if state and state != w.shown:
            w.shown = state
            self.show(f"flopsweep: {w.label}: {state}")


ENDED_WHY = {
    "CANCELLED": "scancel, or an administrator",
    "TIMEOUT": "the time limit, hydra.launcher.timeout_min",
    "OUT_OF_MEMORY": "Slurm's memory limit, hydra.launcher.mem_gb",
    "NODE_FAIL": "its node failed",
    "BOOT_FAIL": "its node failed to boot",
    "PREEMPTED": "a job of higher priority preempted it",
    "DEADLINE": "its deadline passed",
    "FAILED": "the batch script or a task failed",
    "COMPLETED": "its tasks exited without a result",
    "FINISHED": "its tasks exited without a result",
    "INTERRUPTED": "its process was killed",
}
"""The usual cause of each final state, for the record's message."""


def lost_message(w: Watched) -> str:
    """The ``error.message`` of a job that ended without a result, e.g. ``job 12_0 ended CANCELLED
    (scancel, or an administrator) before it started; no task ran``. A job that neither squeue nor
    sacct knows "left the queue": on a cluster without accounting, ``scancel`` of a pending element
    of a job array removes it from Slurm at once, with no final state."""
    state = (w.state or "").split(" ")[0]
    what = (
        f"was not listed by the queue {w.unknown_looks} times in a row (squeue and sacct no longer "
        "know it: scancel, or an administrator)"
    )
    if w.unknown_looks >= UNANSWERED_LOOKS:
        what = f"could not be followed: the queue gave no usable answer {w.unknown_looks} times in a row"
    if state in ENDED_WHY:
        what = f"ended {state} ({ENDED_WHY[state]})"
    elif state:
        what = f"ended {state}"
    cancel = ""
    if w.cancelled == "cancelled":
        cancel = "; flopsweep cancelled it so that it cannot run on unwatched"
    elif w.cancelled:
        cancel = f"; cancelling it failed ({w.cancelled}): check squeue and scancel it yourself"
    if not started(w.job):
        return f"job {w.job.job_id} {what} before it started; no task ran{cancel}"
    return f"job {w.job.job_id} {what} without a result; its log: {w.job.task(0).paths.stdout}{cancel}"


def local_states(jobs: Mapping[str, Any]) -> Callable[[list[str]], dict[str, str]]:
    """The states of submitit_local jobs by job id: ``RUNNING``, ``FINISHED``, else ``INTERRUPTED``
    (the process died by a signal, or is gone without a result)."""

    def states(job_ids: list[str]) -> dict[str, str]:
        found = {job_id: str(jobs[job_id].state).upper() for job_id in job_ids}
        return {job_id: s if s in ("RUNNING", "FINISHED") else "INTERRUPTED" for job_id, s in found.items()}

    return states

"""What a Slurm cluster offers and where a sweep's jobs stand: ``sinfo``, ``sacct`` and ``squeue``
(the client calls and ``sinfo``'s nodes: :mod:`flopsweep.sinfo`, re-exported here).

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

import dataclasses
import logging
import re
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from flopsweep.sinfo import (  # noqa: F401 - flopsweep.cluster.X, as the launcher plugins use them
    COMMAND_TIMEOUT_S,
    ENDED_STATES,
    FINISHED_STATES,
    PENDING_STATES,
    RUNNING_STATES,
    SINFO_FORMAT,
    STATE_FORMAT,
    SUBMIT_TIMEOUT_S,
    TIMEOUT_ENV,
    ClusterError,
    NodeRow,
    Request,
    check_request,
    command_timeout,
    gres_gpus,
    parse_sinfo,
    partition_nodes,
    read_sinfo,
    run_client,
    run_command,
    scancel,
    slurm_conf,
)

log = logging.getLogger("flopsweep")


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

    def __init__(self, run: Callable[..., subprocess.CompletedProcess] = run_client) -> None:
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


NODE_FAILED = "NodeFailed"
"""``error.type`` of a record whose job Slurm ended ``NODE_FAIL``: a node of the job went down (the
ranks on the other nodes were stopped by SIGTERM and wrote the record)."""


def no_requeue(additional: Mapping[str, Any] | None) -> dict[str, Any]:
    """``hydra.launcher.additional_parameters`` with ``no_requeue`` (``sbatch --no-requeue``) unless it
    says ``requeue`` or ``no_requeue`` itself: Slurm requeues a batch job whose node failed (or that
    was preempted) by default, and a requeued flopsweep job would measure again after its sweep
    reported it, over its record."""
    extra = dict(additional or {})
    if not {"requeue", "no_requeue", "no-requeue"} & set(extra):
        extra["no_requeue"] = True
    return extra


def ended_record(record: Mapping[str, Any], job_id: str, state: str | None) -> dict[str, Any] | None:
    """``record`` (a ``metrics.json`` a task wrote) with the end Slurm gave its job, or None when
    there is nothing to add: a record that is not ``error``, a state that is not one of
    :data:`ENDED_WHY`'s failures, or a record that already says it. A job that ended ``NODE_FAIL``
    gets ``error.type`` :data:`NODE_FAILED`; every such record's ``error.message`` ends with
    ``Slurm ended job ID STATE (why)``. The ranks that wrote it saw only SIGTERM."""
    name = (state or "").upper().split(" ")[0].rstrip("+")
    error = record.get("error")
    if record.get("status") != "error" or not isinstance(error, dict) or name not in ENDED_WHY:
        return None
    if name in ("COMPLETED", "FINISHED", "FAILED"):  # the tasks' own end: their record says it
        return None
    note = f"Slurm ended job {job_id} {name} ({ENDED_WHY[name]})"
    message = str(error.get("message") or "")
    if note in message:
        return None
    kind = NODE_FAILED if name == "NODE_FAIL" else error.get("type")
    return {**record, "error": {**error, "type": kind, "message": f"{message}; {note}" if message else note}}


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

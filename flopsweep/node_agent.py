"""One node agent per node: under ``hydra/launcher=slurm`` (and ``slurm_local``) each Slurm task is
the agent of one node, and it spawns and supervises that node's ``nproc_per_node`` ranks with the
code a local run uses (:func:`flopsweep.launch.spawn_ranks`, :func:`flopsweep.launch.supervise`).

Which path a job takes is read from its config, not from the environment
(:func:`flopsweep.launcher_choice.job_launcher` names the launcher of the job's Hydra config,
``hydra.launcher._target_``); ``hydra.launcher.tasks_per_node`` is 1, one task per node (the launcher
refuses any other value before it submits).

The agent's place comes from submitit's ``JobEnvironment`` (``SLURM_NODEID``, ``SLURM_JOB_NUM_NODES``,
the first host of ``SLURM_JOB_NODELIST`` through ``scontrol show hostnames``): its ranks get
``RANK = node_rank * nproc_per_node + local_rank``, ``WORLD_SIZE = nnodes * nproc_per_node``,
``MASTER_ADDR`` (node 0's host) and the port of the run's rendezvous store.

One node (``nnodes=1``): the agent is :func:`flopsweep.launch.launch_local` itself, so the searches
(``batch=auto``, ``search.model=largest``) start their probe runs from it as on one machine.

Several nodes: the agents run in lockstep (:mod:`flopsweep.lockstep`): node 0's agent runs the job
(the searches, the record) and every run it starts, each probe and the measured run, is one step that
every agent runs with :func:`node_run`. Within a run the agents watch each other through the run's
scratch folder, shared by the nodes: each beats a heartbeat file (:class:`TaskWatch`, by node rank),
and each writes ``node{N}_ended.json`` (its ranks' exit codes by global rank) once its ranks ended or
were stopped; an agent stops its own ranks as soon as a rank anywhere wrote an error file, another
node's agent reported a failure, or a watched agent's heartbeat went stale. Node 0's agent then
merges the exit codes of every node into the run's outcome (:func:`flopsweep.outcome.collect`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from flopsweep import record as rec
from flopsweep.config import typed_form
from flopsweep.files import replace_text
from flopsweep.launch import SCRATCH, Terminated, launch, raise_terminated, spawn_ranks
from flopsweep.outcome import Outcome, collect, last_phase
from flopsweep.safe_read import RecordError, read_regular
from flopsweep.text import figure, plural

if TYPE_CHECKING:
    from flopsweep.layout import Plan

log = logging.getLogger("flopsweep")

ENDED_BYTES = 1 << 16
"""At most this much of another node's ``node{N}_ended.json`` is read."""
HEARTBEAT_S = 2.0
"""Seconds between two heartbeats of an agent."""
STALE_S = 30.0
"""An agent whose heartbeat did not change for this many seconds is taken as dead."""
ENDED_WAIT_S = 60.0
"""Node 0's agent waits at most this long for another node's ``node{N}_ended.json`` after its own
ranks ended (less when that agent's heartbeat goes stale)."""


def launch_node_agent(plan: Plan, job_dir: Path) -> Outcome:
    """The measured run of ``plan`` from this node's agent (see the module docstring): on one node a
    local launch, on several node 0's agent's step of the lockstep (:func:`flopsweep.launch.launch`);
    SIGTERM (``scancel``, a time limit, a failed node) stops every rank and is an ``error`` outcome of
    type ``Terminated`` in the phase reached, so that the task returns and submitit keeps a result."""
    from submitit import JobEnvironment

    env = JobEnvironment()
    node, nnodes, nproc = env.node, env.num_nodes, plan.nproc_per_node
    if nnodes * nproc != plan.world_size:
        message = (
            f"the Slurm job has {plural(nnodes, 'node')} of {nproc} ranks but the run's world size is "
            f"{plan.world_size}: set hydra.launcher.nodes=${{nnodes}} and hydra.launcher.tasks_per_node=1"
        )
        return Outcome("error", error=rec.error("LaunchMismatch", message, "launch", node * nproc))
    if nnodes == 1:  # on several nodes each agent says so as it joins the group (flopsweep.lockstep)
        log_agent(node, nnodes, plan)
    previous = signal.signal(signal.SIGTERM, raise_terminated)  # submitit's own handler only logs it
    try:
        return launch(plan, job_dir)  # nnodes > 1: NodeGroup.run (flopsweep.lockstep)
    except Terminated:  # every rank was stopped on the way out; the task returns, so submitit keeps a result
        return terminated(Path(job_dir), plan.world_size)
    finally:
        signal.signal(signal.SIGTERM, previous)


def log_agent(node: int, nnodes: int, plan: Plan) -> None:
    """The agent's one line: ``node agent N of M on NODE: spawns ranks A to B of W``."""
    nproc = plan.nproc_per_node
    log.info(
        "node agent %d of %d on %s: spawns ranks %d to %d of %d",
        node,
        nnodes,
        os.environ.get("SLURMD_NODENAME", "?"),
        node * nproc,
        (node + 1) * nproc - 1,
        plan.world_size,
    )


def terminated(job_dir: Path, world_size: int) -> Outcome:
    """The outcome of a run that SIGTERM stopped, in the phase its ranks reached."""
    phase, rank = last_phase(Path(job_dir) / SCRATCH, world_size)
    message = "SIGTERM: Slurm is stopping the job (scancel, time limit or preemption); every rank was stopped"
    return Outcome("error", error=rec.error("Terminated", message, phase, rank))


def node_run(
    plan: Plan, run_dir: Path, *, master_addr: str, port: int, node: int, nnodes: int
) -> Outcome | None:
    """Run this node's ranks of ``plan`` in ``run_dir`` (its scratch folder ``run_dir/.flopsweep``,
    prepared by node 0's agent) against the rendezvous store at ``master_addr:port``, watching the
    other nodes' agents, and write ``node{node}_ended.json``.

    Returns:
        On node 0, the run's :class:`~flopsweep.outcome.Outcome` over every node's ranks (the other
        nodes' exit codes from their ``node{N}_ended.json``, waited for up to :data:`ENDED_WAIT_S`);
        elsewhere None (node 0's agent has the outcome).
    """
    cfg, nproc, world = plan.cfg, plan.nproc_per_node, plan.world_size
    scratch, first = Path(run_dir) / SCRATCH, node * nproc
    with TaskWatch(scratch, rank=node, world_size=nnodes, timeout_s=cfg.timeout_s) as watch:
        ran = spawn_ranks(
            plan,
            Path(run_dir),
            scratch,
            master_addr=master_addr,
            master_port=port,
            node_rank=node,
            stop=lambda: watch.why_stop() or _peer_failed(scratch, node),
        )
        ended = {first + rank: code for rank, code in ran.ended.items()}
        failed = bool(
            ran.why or ran.timed_out or any(ended.values()) or any(scratch.glob("rank*_error.json"))
        )
        if ran.why:
            log.warning("node agent %d stopped its ranks: %s", node, ran.why)
        if node == 0:  # first: the others stop their ranks when node 0's failed
            _write_ended(scratch, node, ended, failed)
            ended.update(_other_nodes(scratch, watch, nnodes))
    if node != 0:  # after the heartbeat stopped: node 0's agent removes the folder once it read this
        _write_ended(scratch, node, ended, failed)
        return None
    errors = {first + rank: text for rank, text in ran.torch_errors.items()}
    outcome = collect(
        scratch, ended, world, timeout_s=cfg.timeout_s if ran.timed_out else None, torch_errors=errors
    )
    if ran.why and outcome.error and outcome.error["type"] == "WorkerDied":
        kind = "Terminated" if ran.why.startswith("SIGTERM") else "TaskDied"
        outcome = Outcome(outcome.status, error={**outcome.error, "type": kind, "message": ran.why})
    return outcome


def _write_ended(scratch: Path, node: int, ended: dict[int, int], failed: bool) -> None:
    with contextlib.suppress(OSError):
        replace_text(scratch / f"node{node}_ended.json", json.dumps({"ended": ended, "failed": failed}))


def _peer_failed(scratch: Path, node: int) -> str | None:
    """Why another node's agent stopped (its ``node{N}_ended.json`` says ``failed``), or None."""
    for path in scratch.glob("node*_ended.json"):
        if path.name == f"node{node}_ended.json":
            continue
        try:
            payload = json.loads(read_regular(path, ENDED_BYTES))
        except (RecordError, ValueError):
            continue
        if isinstance(payload, dict) and payload.get("failed"):
            return f"the agent of {path.name.split('_')[0].replace('node', 'node ')} reported a failed rank"
    return None


def _other_nodes(scratch: Path, watch: TaskWatch, nnodes: int) -> dict[int, int]:
    """Exit codes by global rank from the other nodes' ``node{N}_ended.json``, waited for until they
    exist, their agent's heartbeat is stale, or :data:`ENDED_WAIT_S` passed."""
    codes: dict[int, int] = {}
    pending = set(range(1, nnodes))
    end = time.monotonic() + ENDED_WAIT_S
    while pending and time.monotonic() < end:
        for n in sorted(pending):
            try:
                payload = json.loads(read_regular(scratch / f"node{n}_ended.json", ENDED_BYTES))
                codes.update({int(rank): int(code) for rank, code in payload.get("ended", {}).items()})
            except (RecordError, ValueError, AttributeError, TypeError):
                continue
            pending.discard(n)
        if pending and len(watch.stale(pending)) == len(pending):
            break
        time.sleep(0.2)
    return codes


class TaskWatch:
    """A node agent's watch over the other agents of its job during one run.

    Every agent writes a heartbeat file ``task{node}_heartbeat.txt`` in the run's shared scratch
    folder every :data:`HEARTBEAT_S`. A heartbeat is stale when its content did not change for
    :data:`STALE_S` by this agent's clock, so that clock skew and file-attribute caching between
    nodes do not matter. Node 0's agent watches every agent; the others watch node 0's.
    """

    def __init__(self, scratch: Path, *, rank: int, world_size: int, timeout_s: float) -> None:
        self.scratch, self.rank, self.world_size, self.timeout_s = Path(scratch), rank, world_size, timeout_s
        self._seen: dict[int, tuple[str, float]] = {}  # node -> (last heartbeat, when it last changed)
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, name="flopsweep-heartbeat", daemon=True)

    def __enter__(self) -> TaskWatch:
        self._beat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._beat.join()

    def stale(self, ranks: Iterable[int]) -> list[int]:
        """Those of ``ranks`` (node ranks) whose heartbeat did not change for :data:`STALE_S`
        (counted from the first look when the file is missing)."""
        now, stale = time.monotonic(), []
        for rank in ranks:
            try:
                beat = read_regular(self.scratch / f"task{rank}_heartbeat.txt", 64).decode(errors="replace")
            except RecordError:
                beat = ""
            last, since = self._seen.get(rank, (None, now))
            if beat != last:
                self._seen[rank] = (beat, now)
            elif now - since > STALE_S:
                stale.append(rank)
        return stale

    def why_stop(self, deadline: float | None = None) -> str | None:
        """Why this agent should stop its ranks, or None: ``deadline`` (monotonic; None: none)
        passed, or a watched agent's heartbeat is stale (a rank's error file is seen by
        :func:`flopsweep.launch.supervise` itself)."""
        if deadline is not None and time.monotonic() > deadline:
            return f"timeout: no result within timeout_s={typed_form(self.timeout_s)} s"
        watched = range(1, self.world_size) if self.rank == 0 else [0]
        dead = self.stale(watched)
        if dead:
            return (
                f"the task of node {dead[0]}'s agent stopped (no heartbeat for {figure(STALE_S, 6)} "
                f"s): killed, e.g. "
                "by the OOM killer, or its node failed"
            )
        return None

    def _heartbeat(self) -> None:
        path, count = self.scratch / f"task{self.rank}_heartbeat.txt", 0
        while True:
            count += 1
            with contextlib.suppress(OSError):  # node 0's agent removes the scratch folder after a run
                replace_text(path, str(count))  # never through a link planted there
            if self._stop.wait(HEARTBEAT_S):
                return

"""One node agent per node: under ``hydra/launcher=slurm`` (and ``slurm_local``) each Slurm task is
the agent of one node, and it spawns and supervises that node's ``nproc_per_node`` ranks with the
code a local run uses (:func:`flopsweep.launch.spawn_ranks`, :func:`flopsweep.launch.supervise`).

Which path a job takes is read from its config, not from the environment
(:mod:`flopsweep.launcher_choice`): ``job_launcher`` names the launcher of the job's Hydra config
(``hydra.launcher._target_``), and ``agent_per_node`` says whether its tasks are node agents
(``hydra.launcher.tasks_per_node`` is 1, the default of conf/hydra/launcher/slurm.yaml) or one
rank each (``tasks_per_node == nproc_per_node``: :func:`flopsweep.slurm.launch_slurm_task`, the
older path).

The agent's place comes from submitit's ``JobEnvironment`` (``SLURM_NODEID``, ``SLURM_JOB_NUM_NODES``,
the first host of ``SLURM_JOB_NODELIST`` through ``scontrol show hostnames``): its ranks get
``RANK = node_rank * nproc_per_node + local_rank``, ``WORLD_SIZE = nnodes * nproc_per_node``,
``MASTER_ADDR`` (node 0's host) and ``MASTER_PORT``.

One node (``nnodes=1``): the agent is :func:`flopsweep.launch.launch_local` itself, so the searches
(``batch=auto``, ``search.model=largest``) start their probe runs from it as on one machine.

Several nodes: node 0's agent empties the scratch folder, serves the rendezvous store at
``MASTER_PORT`` (all interfaces; the ranks join it as clients, ``TORCHELASTIC_USE_AGENT_STORE``) and
sets its ``ready`` key; every other agent waits for that key (``timeout_s``) before it spawns, so no
rank writes into a folder that is still being emptied. The agents watch each other through the
shared job folder: each beats a heartbeat file (:class:`flopsweep.slurm.TaskWatch`, by node rank),
and each writes ``node{N}_ended.json`` (its ranks' exit codes by global rank) once its ranks ended or
were stopped; an agent stops its own ranks as soon as a rank anywhere wrote an error file, another
node's agent reported a failure, or a watched agent's heartbeat went stale. Node 0's agent then
merges the exit codes of every node and writes the record (:func:`flopsweep.launch.collect`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flopsweep import record as rec
from flopsweep.files import RecordError, read_regular, replace_text
from flopsweep.launch import (
    SCRATCH,
    STORE_GRACE_S,
    Outcome,
    Terminated,
    collect,
    last_phase,
    prepare_scratch,
    raise_terminated,
    rendezvous_port,
    spawn_ranks,
)
from flopsweep.text import plural

if TYPE_CHECKING:
    from flopsweep.layout import Plan

log = logging.getLogger("flopsweep")

ENDED_BYTES = 1 << 16
"""At most this much of another node's ``node{N}_ended.json`` is read."""


def launch_node_agent(plan: Plan, job_dir: Path) -> Outcome:
    """Spawn and supervise this node's ranks of ``plan`` (see the module docstring); the outcome of
    the whole job on node 0, an informative one elsewhere (node 0's agent writes the record)."""
    from submitit import JobEnvironment

    env = JobEnvironment()
    node, nnodes, nproc = env.node, env.num_nodes, plan.nproc_per_node
    if nnodes * nproc != plan.world_size:
        message = (
            f"the Slurm job has {plural(nnodes, 'node')} of {nproc} ranks but the run's world size is "
            f"{plan.world_size}: set hydra.launcher.nodes=${{nnodes}} and hydra.launcher.tasks_per_node=1"
        )
        return Outcome("error", error=rec.error("LaunchMismatch", message, "launch", node * nproc))
    log.info(
        "node agent %d of %d on %s: spawns ranks %d to %d of %d",
        node,
        nnodes,
        os.environ.get("SLURMD_NODENAME", "?"),
        node * nproc,
        (node + 1) * nproc - 1,
        plan.world_size,
    )
    previous = signal.signal(signal.SIGTERM, raise_terminated)  # submitit's own handler only logs it
    try:
        if nnodes == 1:
            from flopsweep.launch import launch_local

            return launch_local(plan, job_dir)
        return _across_nodes(plan, Path(job_dir).absolute(), env, node, nnodes)
    except Terminated:  # every rank was stopped on the way out; the task returns, so submitit keeps a result
        phase, rank = last_phase(Path(job_dir) / SCRATCH, plan.world_size)
        message = (
            "SIGTERM: Slurm is stopping the job (scancel, time limit or preemption); every rank was stopped"
        )
        return Outcome("error", error=rec.error("Terminated", message, phase, rank))
    finally:
        signal.signal(signal.SIGTERM, previous)


def _across_nodes(plan: Plan, job_dir: Path, env: Any, node: int, nnodes: int) -> Outcome:
    import datetime

    from torch.distributed import TCPStore

    from flopsweep.slurm import TaskWatch

    cfg, nproc, world = plan.cfg, plan.nproc_per_node, plan.world_size
    master_addr = env.hostnames[0]
    port = int(os.environ.get("MASTER_PORT") or rendezvous_port(env.job_id))
    timeout = datetime.timedelta(seconds=cfg.timeout_s + STORE_GRACE_S)
    scratch = job_dir / SCRATCH
    if node == 0:
        scratch = prepare_scratch(job_dir)
        store = TCPStore(master_addr, port, is_master=True, wait_for_workers=False, timeout=timeout)
        store.set("ready", "1")
    else:
        store = TCPStore(master_addr, port, is_master=False, timeout=timeout)
        store.wait(["ready"])
    log.info("node agent %d: rendezvous %s:%d", node, master_addr, port)
    first = node * nproc
    with TaskWatch(scratch, rank=node, world_size=nnodes, timeout_s=cfg.timeout_s) as watch:
        ran = spawn_ranks(
            plan,
            job_dir,
            scratch,
            master_addr=master_addr,
            master_port=port,
            node_rank=node,
            stop=lambda: watch.why_stop(peer_errors=False) or _peer_failed(scratch, node),
        )
        ended = {first + rank: code for rank, code in ran.ended.items()}
        failed = bool(
            ran.why or ran.timed_out or any(ended.values()) or any(scratch.glob("rank*_error.json"))
        )
        with contextlib.suppress(OSError):
            replace_text(scratch / f"node{node}_ended.json", json.dumps({"ended": ended, "failed": failed}))
        if ran.why:
            log.warning("node agent %d stopped its ranks: %s", node, ran.why)
        if node != 0:
            if watch.wait_for_writer(job_dir / rec.METRICS_FILE):  # node 0's agent is gone
                message = (
                    "node 0's agent stopped without a record (its node failed, or it was killed); "
                    f"node {node}'s agent wrote this one"
                )
                return Outcome("error", error=rec.error("TaskDied", message, "measure", 0))
            seen = "a failed rank" if failed else "its ranks ended cleanly"
            message = f"node {node}'s agent ({seen}); node 0's agent writes the record"
            return Outcome("error", error=rec.error("NotRecorder", message, "measure", first))
        ended.update(_other_nodes(scratch, watch, nnodes, wait=not failed))
    del store
    errors = {first + rank: text for rank, text in ran.torch_errors.items()}
    outcome = collect(
        scratch, ended, world, timeout_s=cfg.timeout_s if ran.timed_out else None, torch_errors=errors
    )
    if ran.why and outcome.error and outcome.error["type"] == "WorkerDied":
        kind = "Terminated" if ran.why.startswith("SIGTERM") else "TaskDied"
        outcome = Outcome(outcome.status, error={**outcome.error, "type": kind, "message": ran.why})
    return outcome


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


def _other_nodes(scratch: Path, watch: Any, nnodes: int, *, wait: bool) -> dict[int, int]:
    """Exit codes by global rank from the other nodes' ``node{N}_ended.json``: waited for (until they
    exist or their agent's heartbeat is stale) when ``wait``, else read as they are."""
    codes: dict[int, int] = {}
    pending = set(range(1, nnodes))
    end = time.monotonic() + (60.0 if wait else 2.0)
    while pending and time.monotonic() < end:
        for n in sorted(pending):
            try:
                payload = json.loads(read_regular(scratch / f"node{n}_ended.json", ENDED_BYTES))
            except (RecordError, ValueError):
                continue
            codes.update({int(rank): int(code) for rank, code in payload.get("ended", {}).items()})
            pending.discard(n)
        if pending and len(watch.stale(pending)) == len(pending):
            break
        time.sleep(0.5)
    return codes

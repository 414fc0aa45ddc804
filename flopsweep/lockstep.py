"""The node agents of a multi-node job in lockstep: node 0's agent decides, every agent spawns (issue 44).

Under ``hydra/launcher=slurm`` with ``nnodes`` > 1 each node's one Slurm task is that node's agent
(:mod:`flopsweep.node_agent`). Every run of the job, each probe of ``batch=auto``,
``search.model=largest`` and ``search.grow=seq_len`` and then the measured run, must start on every
node's ranks. So node 0's agent runs the job as one machine would (validation, the searches, the
record), and each run it starts (:func:`flopsweep.launch.launch`, inside :func:`node_group`) is one
step of the lockstep (:meth:`NodeGroup.run`): it prepares the run's scratch folder, binds the run's own
rendezvous store, publishes the step in the job's control store, ``step{k}``, and runs its own ranks
(:func:`flopsweep.node_agent.node_run`). The other agents (:meth:`NodeGroup.follow`) take step after
step, run their ranks of it and wait for the next, until ``end``; they decide nothing, so the
searches' probes, their order and the size measured are node 0's alone.

A step is JSON (nothing is unpickled): the run's folder relative to the job folder (no absolute path,
no ``..``: :func:`run_folder`), the port of the run's rendezvous store, and the run's plan, its config
and layout (:func:`plan_json`), which a follower rebuilds on its own plan, field by field of the
dataclasses it holds, and checks by writing it back (:func:`plan_from_json`).

The control store is a ``torch.distributed.TCPStore`` served by node 0's agent at ``MASTER_PORT``
(from the environment, else drawn from the Slurm job id below the ephemeral ports,
:func:`flopsweep.launch.rendezvous_port`). Each run's ranks meet at a store of their own, bound to a
port the kernel picks and held until the run ends (as a local launch's, :func:`flopsweep.launch.agent_store`),
so no run's keys meet another's. Node 0's agent publishes the next step only once every agent reported
its ranks of this one ended (``node{N}_ended.json``), so no two runs overlap.

Before any rank starts the agents agree (:meth:`NodeGroup.agree`): every agent, also one whose own
validation refused the job (another node's host memory or files may differ), says whether it takes the
job; node 0's agent records another agent's refusal as ``invalid``, and the others end at once when node
0's refused, so that no agent waits for ranks that never come.

A follower whose control store stops answering (node 0's agent died or its node failed) writes the
job's record itself, ``error`` of type ``TaskDied`` (:func:`flopsweep.slurm.writes_record`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import logging
import signal
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from flopsweep import record as rec
from flopsweep.files import replace_text
from flopsweep.launch import (
    SCRATCH,
    STORE_GRACE_S,
    Terminated,
    launching_across_nodes,
    prepare_scratch,
    raise_terminated,
    rendezvous_port,
)
from flopsweep.launcher_choice import job_launcher
from flopsweep.layout import Layout, Plan
from flopsweep.node_agent import log_agent, node_run, terminated
from flopsweep.outcome import Outcome

if TYPE_CHECKING:
    from flopsweep.config import RunConfig
    from flopsweep.job.result import JobResult

log = logging.getLogger("flopsweep")

END_ACK_S = 5
"""Node 0's agent waits at most this long (seconds) for every other agent to take the ``end`` step
(they wait for it in the store: milliseconds, unless an agent is gone)."""
JOIN_S = 300
"""The agents wait at most this long (seconds) for each other to join the group and say whether they
take the job (:meth:`NodeGroup.agree`)."""


def plan_json(plan: Plan) -> str:
    """``plan`` as one JSON text: its config and layout (``dataclasses.asdict``), device and shape."""
    return json.dumps(
        {
            "cfg": dataclasses.asdict(plan.cfg),
            "layout": dataclasses.asdict(plan.layout),
            "device": plan.device,
            "nproc_per_node": plan.nproc_per_node,
            "nnodes": plan.nnodes,
        },
        sort_keys=True,
    )


def plan_from_json(own: Plan, text: str) -> Plan:
    """The plan of :func:`plan_json`'s ``text``, rebuilt on ``own`` (this agent's plan of the same
    job): each field of ``own.cfg``'s dataclasses takes the text's value; nothing else is made.

    Raises:
        ValueError: when the text is no such plan, changes the job's shape (``nproc_per_node``,
            ``nnodes``), or does not come back as the same text (a field the rebuild cannot set).
    """
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("layout"), dict):
        raise ValueError("the step's plan is not a plan")
    if (data.get("nproc_per_node"), data.get("nnodes")) != (own.nproc_per_node, own.nnodes):
        raise ValueError("the step's plan has another shape (nproc_per_node, nnodes) than the job's")
    cfg: RunConfig = _rebuilt(own.cfg, data.get("cfg"))
    plan = Plan(
        cfg=cfg,
        device=str(data.get("device")),
        nproc_per_node=own.nproc_per_node,
        nnodes=own.nnodes,
        layout=Layout(**{k: v for k, v in data["layout"].items() if k in Layout.__dataclass_fields__}),
        device_given=own.device_given,  # the command's, the same on every node
    )
    if json.loads(plan_json(plan)) != data:
        raise ValueError("the step's plan does not rebuild on this agent's config")
    return plan


def _rebuilt(template: Any, data: Any) -> Any:
    """``data`` (JSON) as the type of ``template``: a dataclass field by field, a tuple from a list."""
    if dataclasses.is_dataclass(template) and not isinstance(template, type):
        if not isinstance(data, dict):
            raise ValueError(f"the step's plan gives {type(data).__name__} for a {type(template).__name__}")
        changes = {}
        for field in dataclasses.fields(template):
            if field.init and field.name in data:
                value = _rebuilt(getattr(template, field.name), data[field.name])
                if value != getattr(template, field.name):
                    changes[field.name] = value
        return dataclasses.replace(template, **changes) if changes else template
    if isinstance(template, tuple) and isinstance(data, list):
        return tuple(data)
    return data


def run_folder(job_dir: Path, relative: Any) -> Path:
    """``job_dir / relative`` for a step's folder, which must lie inside the job folder.

    Raises:
        ValueError: for a folder that is not text, is absolute or has a ``..`` part.
    """
    if not isinstance(relative, str) or not relative:
        raise ValueError("the step names no folder")
    path = PurePosixPath(relative)
    if path.is_absolute() or ".." in path.parts:
        raise ValueError(f"the step's folder {relative!r} leaves the job folder")
    return Path(job_dir) / path


@dataclasses.dataclass
class NodeGroup:
    """The agents of one multi-node job, joined by the control store that node 0's agent serves."""

    node: int
    nnodes: int
    master_addr: str
    port: int
    job_dir: Path
    timeout_s: float
    store: Any
    steps: int = 0
    """Steps published (node 0) or taken (the others) so far."""

    @property
    def leads(self) -> bool:
        """Node 0's agent: it decides every step."""
        return self.node == 0

    @classmethod
    def join(cls, cfg: RunConfig, plan: Plan | None, job_dir: Path, env: Any) -> NodeGroup:
        """This agent's part of the group: node 0's agent serves the control store (all interfaces),
        the others connect to it (retrying for at most :data:`JOIN_S`)."""
        import os

        from torch.distributed import TCPStore

        master_addr = env.hostnames[0]
        port = int(os.environ.get("MASTER_PORT") or rendezvous_port(env.job_id))
        leads = env.node == 0
        join = datetime.timedelta(seconds=JOIN_S)
        store = TCPStore(master_addr, port, is_master=leads, wait_for_workers=False, timeout=join)
        if plan is not None:
            log_agent(env.node, env.num_nodes, plan)
        log.info("node agent %d of %d: control store %s:%d", env.node, env.num_nodes, master_addr, port)
        return cls(
            node=env.node,
            nnodes=env.num_nodes,
            master_addr=master_addr,
            port=port,
            job_dir=Path(job_dir).absolute(),
            timeout_s=store_timeout_s(cfg),
            store=store,
        )

    def agree(self, refusal: str) -> str:
        """Say whether this agent takes the job (``refusal`` empty) or why not (its validation refused
        it: another node's host or files may differ), and hear the others: node 0's agent hears every
        agent, the others node 0's. Returns the first refusal heard (``node N's agent: ...``), else
        ``""``. Waits at most :data:`JOIN_S` for an answer; none counts as a refusal."""
        self.store.set(f"joined{self.node}", refusal)
        others = range(1, self.nnodes) if self.leads else [0]
        try:
            self.store.wait([f"joined{n}" for n in others], datetime.timedelta(seconds=JOIN_S))
            heard = {n: self.store.get(f"joined{n}").decode(errors="replace") for n in others}
        except RuntimeError as exc:  # DistStoreError: no answer within JOIN_S
            return f"an agent did not join within {JOIN_S} s ({type(exc).__name__})"
        self.store.set_timeout(datetime.timedelta(seconds=self.timeout_s))
        return next((f"node {n}'s agent: {why}" for n, why in heard.items() if why), "")

    def run(self, plan: Plan, run_dir: Path) -> Outcome:
        """Node 0's agent: one step, ``plan`` in ``run_dir`` (inside the job folder) on every node's
        ranks; the run's outcome over all of them (:func:`flopsweep.node_agent.node_run`)."""
        from torch.distributed import TCPStore

        run_dir = Path(run_dir).absolute()
        relative = run_dir.relative_to(self.job_dir).as_posix()
        prepare_scratch(run_dir)  # before the step is published: no rank writes into a folder being emptied
        timeout = datetime.timedelta(seconds=self.timeout_s + STORE_GRACE_S)
        ranks = TCPStore(self.master_addr, 0, is_master=True, wait_for_workers=False, timeout=timeout)
        try:
            self._publish({"kind": "run", "dir": relative, "port": ranks.port, "plan": plan_json(plan)})
            outcome = node_run(
                plan, run_dir, master_addr=self.master_addr, port=ranks.port, node=0, nnodes=self.nnodes
            )
        finally:
            del ranks  # closes the run's listening socket
        assert outcome is not None
        return outcome

    def follow(self, plan: Plan) -> Outcome:
        """Another node's agent: run every step node 0's agent publishes until ``end``; an
        informative outcome (node 0's agent writes the record), or, when the control store stops
        answering, ``TaskDied`` (this agent then writes the record, :func:`flopsweep.slurm.writes_record`)."""
        previous = signal.signal(signal.SIGTERM, raise_terminated)  # submitit's own handler only logs it
        first = self.node * plan.nproc_per_node
        try:
            while True:
                try:
                    step = self._take()
                except (RuntimeError, ValueError) as exc:  # DistStoreError: node 0's agent is gone
                    return self._took_over(exc)
                if step.get("kind") != "run":
                    with contextlib.suppress(RuntimeError):
                        self.store.set(f"done{self.node}", "1")
                    runs = f"{self.steps - 1} run(s)"
                    message = (
                        f"node {self.node}'s agent ran its ranks of {runs}; node 0's agent writes the record"
                    )
                    return Outcome("error", error=rec.error("NotRecorder", message, "measure", first))
                log.info("node agent %d of %d: runs its ranks of %s", self.node, self.nnodes, step.get("dir"))
                try:
                    run_dir = run_folder(self.job_dir, step.get("dir"))
                    step_plan, port = plan_from_json(plan, str(step.get("plan"))), int(step.get("port", 0))
                except (ValueError, TypeError) as exc:  # the same code on every node: never seen
                    return self._refused(step, first, exc)
                node_run(
                    step_plan,
                    run_dir,
                    master_addr=self.master_addr,
                    port=port,
                    node=self.node,
                    nnodes=self.nnodes,
                )
        except Terminated:
            return terminated(self.job_dir, plan.world_size)
        finally:
            signal.signal(signal.SIGTERM, previous)

    def close(self, *, wait: bool = True) -> None:
        """Node 0's agent: publish ``end`` and, with ``wait``, wait (at most :data:`END_ACK_S`) until
        every other agent took it; then the control store closes. Not waiting when the job is being
        stopped (SIGTERM: Slurm kills the task ``KillWait`` later, and its record must be written first)."""
        if not self.leads:
            return
        with contextlib.suppress(RuntimeError):
            self._publish({"kind": "end"})
            if wait:
                done = [f"done{n}" for n in range(1, self.nnodes)]
                self.store.wait(done, datetime.timedelta(seconds=END_ACK_S))

    def _publish(self, step: dict[str, Any]) -> None:
        self.store.set(f"step{self.steps}", json.dumps(step))
        self.steps += 1

    def _take(self) -> dict[str, Any]:
        key = f"step{self.steps}"
        self.store.wait([key])
        step = json.loads(self.store.get(key))
        self.steps += 1
        if not isinstance(step, dict):
            raise ValueError(f"{key} is not a step")
        return step

    def _refused(self, step: dict[str, Any], first: int, exc: BaseException) -> Outcome:
        """A step this agent cannot run: its error file in the step's scratch folder (node 0's agent
        stops its ranks and records it, as a rank's error) and this agent stops following."""
        message = f"node {self.node}'s agent cannot run step {self.steps - 1}: {exc}"
        log.error("%s", message)
        with contextlib.suppress(ValueError, TypeError, OSError):
            scratch = run_folder(self.job_dir, step.get("dir")) / SCRATCH
            error = {**rec.error("StepRefused", message, "launch", first), "oom": False, "time": time.time()}
            replace_text(scratch / f"rank{first}_error.json", json.dumps(error))
        return Outcome("error", error=rec.error("StepRefused", message, "launch", first))

    def _took_over(self, exc: BaseException) -> Outcome:
        from flopsweep.slurm import take_over_record

        take_over_record()
        message = (
            "node 0's agent stopped without a record (its node failed, or it was killed): its control "
            f"store stopped answering ({type(exc).__name__}); node {self.node}'s agent wrote this one"
        )
        log.warning("%s", message)
        return Outcome("error", error=rec.error("TaskDied", message, "launch", 0))


def multi_node_agent(cfg: RunConfig) -> bool:
    """Whether this process is a node agent of a Slurm job of several nodes (its config names a
    flopsweep Slurm launcher and ``nnodes`` > 1)."""
    return job_launcher() != "local" and isinstance(cfg.nnodes, int) and cfg.nnodes > 1


def store_timeout_s(cfg: RunConfig) -> float:
    """The control store's wait: the job's ``timeout_s`` plus :data:`STORE_GRACE_S`, at most a week
    (a ``timeout_s`` that validation refused still gives a usable store)."""
    try:
        return min(float(cfg.timeout_s), 7 * 24 * 3600.0) + STORE_GRACE_S
    except (TypeError, ValueError):
        return 1800.0 + STORE_GRACE_S


@contextlib.contextmanager
def node_group(job: JobResult, job_dir: Path) -> Iterator[NodeGroup | None]:
    """Around a job's searches and measured run: this agent's :class:`NodeGroup` when the job is a
    Slurm job of several nodes (:func:`multi_node_agent`), else None. Entered by every agent, also by
    one whose own validation refused the job, so that the agents agree (:meth:`NodeGroup.agree`)
    before any rank starts: node 0's agent ends the job ``invalid`` with another agent's refusal, and
    the others end at once when node 0's refused. Within, node 0's agent's runs
    (:func:`flopsweep.launch.launch`) are steps of the group."""
    if not multi_node_agent(job.cfg):
        yield None
        return
    from submitit import JobEnvironment

    env = JobEnvironment()
    if env.num_nodes != job.cfg.nnodes:  # the measured run's launch says so (LaunchMismatch)
        yield None
        return
    try:
        group = NodeGroup.join(job.cfg, job.plan, job_dir, env)
    except (RuntimeError, OSError) as exc:  # DistStoreError, DistNetworkError: no store to meet at
        if job.status is None:
            message = f"node {env.node}'s agent could not join the job's control store: {exc}"
            job.fail("error", rec.error(type(exc).__name__, message.splitlines()[0][:500], "launch"))
        yield None
        return
    try:
        mine = str((job.error or {}).get("message") or "refused") if job.status is not None else ""
        heard = group.agree(mine)
        if heard and job.status is None:
            if group.leads:
                job.fail("invalid", rec.error("ConfigError", heard, "config"))
            else:  # node 0's agent records its own refusal
                job.fail("error", rec.error("NotRecorder", heard, "config"))
        with launching_across_nodes(group.run) if group.leads else contextlib.nullcontext():
            yield group
    except BaseException:
        stopping = True
        raise
    else:
        stopping = (job.error or {}).get("type") == "Terminated" or (
            job.outcome is not None and (job.outcome.error or {}).get("type") == "Terminated"
        )
    finally:
        group.close(wait=not stopping)
        group.store = None  # closes the control store

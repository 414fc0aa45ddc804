"""Slurm: rank arithmetic, launcher config and checks everywhere; real jobs with ``-m slurm``.

The ``slurm``-marked tests submit to a running cluster: the private two-node cluster of
``bash .ci/slurm-up.sh`` when its ``slurm.conf`` exists in ``$FLOPSWEEP_SLURM_DIR`` (default
``/tmp/flopsweep-slurm``; the ``cluster`` fixture then sets ``SLURM_CONF`` for every command the tests
start), else the cluster that the environment names. A selected slurm test that skips fails
(tests/conftest.py). There is no accounting database on the test cluster: the launcher follows its
jobs through ``squeue``. Every test still bounds its sweep with a timeout and cancels its own jobs
(by job name) when it ends, so that a test fails rather than hangs.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import validate
from omegaconf import OmegaConf

from flopsweep import cluster as fcluster
from flopsweep import config as fconfig
from flopsweep import slurm
from flopsweep.config import ConfigError
from flopsweep.launcher_choice import launcher_set
from flopsweep.plan import Environment, resolve

DISTRIBUTED_KEYS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")


DISTRIBUTED_AT_IMPORT = {k: os.environ.get(k) for k in DISTRIBUTED_KEYS}


@pytest.mark.parametrize("node", [0, 1])
def test_two_nodes_have_one_agent_each_and_node_zero_writes_the_record(
    monkeypatch: pytest.MonkeyPatch, node: int
) -> None:
    """One task per node (``tasks_per_node=1``): task ``SLURM_PROCID = node`` is that node's agent,
    whose ranks start at ``node * nproc_per_node``; node 0's agent alone writes the record."""
    from submitit import JobEnvironment

    for key in DISTRIBUTED_KEYS:
        # setenv first: monkeypatch then restores the key's absence, so nothing written here leaks
        # into later tests' subprocesses (every later slurm_local job of the suite once rendezvoused
        # on one leaked MASTER_PORT)
        monkeypatch.setenv(key, "")
        monkeypatch.delenv(key)
    monkeypatch.setenv("SUBMITIT_EXECUTOR", "slurm")
    for key, value in {
        "SLURM_JOB_ID": "4242",
        "SLURM_NTASKS": "2",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_JOB_NODELIST": "gpu-[017-018]",
        "SLURM_NODEID": str(node),
        "SLURM_PROCID": str(node),
        "SLURM_LOCALID": "0",
    }.items():
        monkeypatch.setenv(key, value)
    env = JobEnvironment()
    assert (env.node, env.num_nodes, env.global_rank, env.local_rank) == (node, 2, node, 0)
    assert slurm.writes_record() is (node == 0)


def test_the_rank_arithmetic_leaves_the_environment_as_it_found_it() -> None:
    """Run after the test above: ``export()`` writes ``MASTER_PORT`` and the rank variables into this
    process's environment, and a leak sent every later ``slurm_local`` job of the suite to one port."""
    assert {k: os.environ.get(k) for k in DISTRIBUTED_KEYS} == DISTRIBUTED_AT_IMPORT


def test_only_rank_zero_writes_the_record(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUBMITIT_EXECUTOR", raising=False)
    assert slurm.writes_record()  # not a submitit task: the job process writes
    monkeypatch.setenv("SUBMITIT_EXECUTOR", "local")
    monkeypatch.setenv("SUBMITIT_LOCAL_GLOBALID", "1")
    assert not slurm.writes_record()
    monkeypatch.setenv("SUBMITIT_LOCAL_GLOBALID", "0")
    assert slurm.writes_record()


def test_more_than_one_node_needs_slurm(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = fconfig.RunConfig(
        backend=fconfig.BackendConfig(name="ddp"), device="cpu", nproc_per_node="2", nnodes=2
    )
    monkeypatch.setenv("SUBMITIT_EXECUTOR", "slurm")  # the environment does not choose the launcher
    with pytest.raises(ConfigError, match="hydra/launcher=slurm"):
        validate(cfg)
    with launcher_set(
        {"_target_": "hydra_plugins.flopsweep_slurm.FlopsweepSlurmLauncher", "tasks_per_node": 1}
    ):
        assert validate(cfg).nnodes == 2  # a node agent of a 2-node Slurm job: its config says so


@pytest.fixture(scope="module")
def launcher_config(hydra_compose):
    def _launcher(overrides: list[str]) -> dict:
        cfg = hydra_compose.config(["hydra/launcher=slurm", *overrides], hydra=True)
        return OmegaConf.to_container(cfg.hydra.launcher, resolve=True)

    return _launcher


def test_slurm_launcher_two_nodes_of_eight_gpus(launcher_config) -> None:
    launcher = launcher_config(["device=cuda", "nproc_per_node=8", "nnodes=2"])
    assert launcher["_target_"] == "hydra_plugins.flopsweep_slurm.FlopsweepSlurmLauncher"
    assert (launcher["nodes"], launcher["tasks_per_node"], launcher["gpus_per_node"]) == (2, 1, 8)
    assert launcher["cpus_per_task"] == 8 * slurm.CPUS_PER_RANK  # one node agent: the cores of 8 ranks
    assert launcher["mem_gb"] == 8 * slurm.MEM_GB_PER_GPU_RANK
    assert launcher["partition"] is None and launcher["account"] is None
    slurm.check_launcher(launcher, nproc_per_node=8, nnodes=2, device="cuda")


def test_slurm_launcher_on_cpu_asks_for_no_gpu(launcher_config) -> None:
    launcher = launcher_config(["device=cpu", "nproc_per_node=2"])
    assert (launcher["nodes"], launcher["tasks_per_node"], launcher["gpus_per_node"]) == (1, 1, None)
    assert launcher["mem_gb"] is None
    slurm.check_launcher(launcher, nproc_per_node=2, nnodes=1, device="cpu")


@pytest.mark.parametrize("name", ["backends", "seed-deepspeed", "seed-fsdp", "seed-fsdp-2node"])
def test_gpu_sweeps_pass_the_slurm_launcher_check(launcher_config, name: str) -> None:
    launcher = launcher_config([f"+sweep={name}", "nproc_per_node=8"])
    slurm.check_launcher(launcher, nproc_per_node=8, nnodes=launcher["nodes"], device="cuda")
    assert launcher["gpus_per_node"] == 8 and launcher["tasks_per_node"] == 1
    assert launcher["nodes"] == (2 if name.endswith("2node") else 1)


@pytest.mark.parametrize(
    ("launcher", "run", "key"),
    [
        ({"tasks_per_node": 3, "gpus_per_node": 8}, (8, 1, "cuda"), "hydra.launcher.tasks_per_node"),
        ({"tasks_per_node": 1, "gpus_per_node": 8}, (1, 1, "cuda"), "hydra.launcher.gpus_per_node"),
        ({"tasks_per_node": 8, "gpus_per_node": 8}, (8, 1, "cuda"), "hydra.launcher.tasks_per_node"),
        ({"tasks_per_node": 1, "nodes": 1, "gpus_per_node": 8}, (8, 2, "cuda"), "hydra.launcher.nodes"),
        ({"tasks_per_node": 1, "nodes": 2}, (8, 2, "cuda"), "hydra.launcher.gpus_per_node"),
        ({"tasks_per_node": 1, "gpus_per_node": 2}, (2, 1, "cpu"), "hydra.launcher.gpus_per_node"),
        ({"array_parallelism": 0}, (2, 1, "cpu"), "hydra.launcher.array_parallelism"),
        ({"array_parallelism": -3}, (2, 1, "cpu"), "hydra.launcher.array_parallelism"),
        ({"array_parallelism": 1.5}, (2, 1, "cpu"), "hydra.launcher.array_parallelism"),
        ({"array_parallelism": True}, (2, 1, "cpu"), "hydra.launcher.array_parallelism"),
    ],
)
def test_check_launcher_names_the_key_to_set(launcher: dict, run: tuple, key: str) -> None:
    nproc, nnodes, device = run
    with pytest.raises(ConfigError, match="Fix: set ") as info:
        slurm.check_launcher(launcher, nproc_per_node=nproc, nnodes=nnodes, device=device)
    assert info.value.key == key and "\n" not in str(info.value)


def test_slurm_local_refuses_two_nodes_and_says_why() -> None:
    """submitit_local runs one machine: two nodes are refused naming that, not a task count."""
    with pytest.raises(ConfigError) as info:
        slurm.check_launcher(
            {"tasks_per_node": 1, "nodes": 2}, nproc_per_node=2, nnodes=2, device="cpu", local=True
        )
    message = str(info.value)
    assert info.value.key == "hydra.launcher.nodes" and "one node" in message
    assert "set nnodes=1 with nproc_per_node=4" in message and message.count("\n") == 0


def test_the_older_task_per_rank_shape_is_refused_in_one_line_naming_the_fix() -> None:
    """``tasks_per_node=${nproc_per_node}`` (one task per rank, removed): one line naming the key,
    the value and ``tasks_per_node=1``."""
    with pytest.raises(ConfigError) as info:
        slurm.check_launcher(
            {"tasks_per_node": 8, "nodes": 2, "gpus_per_task": 1}, nproc_per_node=8, nnodes=2, device="cuda"
        )
    message = str(info.value)
    assert message.startswith("Invalid config: hydra.launcher.tasks_per_node=8: ") and "\n" not in message
    assert "the older shape, is gone" in message and "Fix: set hydra.launcher.tasks_per_node=1" in message


def test_check_launcher_accepts_a_node_agent_with_the_nodes_gpus() -> None:
    slurm.check_launcher(
        {"tasks_per_node": 1, "nodes": 2, "gpus_per_task": 8}, nproc_per_node=8, nnodes=2, device="cuda"
    )  # one node agent per node, given the node's 8 GPUs


SINFO = """\
vm|debug*|2|21694|(null)
gpu-017|gpu|96|1031000|gpu:h100:8(S:0-1)
gpu-018|gpu|96|1031000|gpu:h100:4(S:0),gpu:a100:4(S:1)
cpu-001|cpu|64|256000|(null)
cpu-001|long|64|256000|(null)
"""


def test_parse_sinfo() -> None:
    rows = fcluster.parse_sinfo(SINFO)
    assert [(r.name, r.partition, r.default, r.cpus, r.memory_mb, r.gpus) for r in rows] == [
        ("vm", "debug", True, 2, 21694, 0),
        ("gpu-017", "gpu", False, 96, 1031000, 8),
        ("gpu-018", "gpu", False, 96, 1031000, 8),
        ("cpu-001", "cpu", False, 64, 256000, 0),
        ("cpu-001", "long", False, 64, 256000, 0),
    ]
    nodes, where = fcluster.partition_nodes(rows, None)
    assert [n.name for n in nodes] == ["vm"] and where == "the default partition debug"
    nodes, where = fcluster.partition_nodes(rows, "cpu,long")
    assert [n.name for n in nodes] == ["cpu-001"] and where == "partition cpu,long"
    for listed in ("cpu,,long", "cpu,long,", " ,cpu,long"):  # an empty name: one line, the list to give
        with pytest.raises(ConfigError) as err:
            fcluster.partition_nodes(rows, listed)
        assert str(err.value) == (
            f"Invalid config: hydra.launcher.partition={listed!r}: holds an empty partition name (a doubled "
            "or trailing comma). Fix: set hydra.launcher.partition=cpu,long."
        )


@pytest.mark.parametrize(
    ("gres", "gpus"),
    [
        ("(null)", 0),
        ("gpu:8", 8),
        ("gpu:h100:8(S:0-1)", 8),
        ("gpu:a100:2,gpu:v100:2(S:0)", 4),
        ("shard:8", 0),
    ],
)
def test_gres_gpus(gres: str, gpus: int) -> None:
    assert fcluster.gres_gpus(gres) == gpus


CI_REQUEST = {"nodes": 1, "tasks_per_node": 2, "cpus_per_task": 1, "gpus_per_node": None, "mem_gb": None}


@pytest.mark.parametrize(
    ("change", "key", "line"),
    [
        (
            {"cpus_per_task": 10000},
            "hydra.launcher.cpus_per_task",
            "Invalid config: hydra.launcher.cpus_per_task=10000: a job asks for 20000 CPUs "
            "(2 tasks x 10000) per node, but the largest node of the default partition debug has 2 CPUs. "
            "Fix: set hydra.launcher.cpus_per_task=1.",
        ),
        (
            {"cpus_per_task": 8},  # slurm.yaml's default on a 2-CPU node
            "hydra.launcher.cpus_per_task",
            "Fix: set hydra.launcher.cpus_per_task=1.",
        ),
        (
            {"tasks_per_node": 8, "gpus_per_node": 8, "partition": "debug"},
            "hydra.launcher.cpus_per_task",
            "Fix: set nproc_per_node=2 or fewer, with hydra.launcher.cpus_per_task=1.",
        ),
        (
            {"partition": "gpu", "tasks_per_node": 16, "gpus_per_node": 16},
            "hydra.launcher.gpus_per_node",
            "a job asks for 16 GPUs per node, but the largest node of partition gpu has 8 GPUs. "
            "Fix: set nproc_per_node=8 (one GPU per rank).",
        ),
        ({"gpus_per_node": 1}, "hydra.launcher.gpus_per_node", "or device=cpu."),
        (
            {"mem_gb": 64},
            "hydra.launcher.mem_gb",
            "has 21694 MB of memory. Fix: set hydra.launcher.mem_gb=21,",
        ),
        (
            {"partition": "gpu", "nodes": 3},
            "hydra.launcher.nodes",
            "partition gpu has 2 nodes. Fix: set nnodes=2",
        ),
        ({"partition": "h100"}, "hydra.launcher.partition", "(sinfo lists: cpu, debug, gpu, long)."),
    ],
)
def test_request_that_no_node_can_hold_is_refused(change: dict, key: str, line: str) -> None:
    with pytest.raises(ConfigError) as info:
        fcluster.check_request({**CI_REQUEST, **change}, fcluster.parse_sinfo(SINFO))
    assert info.value.key == key
    assert line in str(info.value) and "\n" not in str(info.value)


def test_request_that_fits_is_accepted() -> None:
    rows = fcluster.parse_sinfo(SINFO)
    fcluster.check_request(CI_REQUEST, rows)
    two_nodes = {"nodes": 2, "tasks_per_node": 8, "gpus_per_node": 8, "cpus_per_task": 12, "mem_gb": 256}
    fcluster.check_request({**two_nodes, "partition": "gpu"}, rows)
    with pytest.raises(ConfigError, match="fewer than 2 nodes have that"):
        fcluster.check_request({**two_nodes, "partition": "gpu", "cpus_per_task": 13}, rows)


@pytest.mark.parametrize(
    ("text", "states"),
    [
        # sacct -X -n -P -o JobID,State: pending elements of an array are folded into one line
        (
            "41_0|COMPLETED\n41_1|CANCELLED by 0\n41_[2-3,5%2]|PENDING\n",
            {"41_0": "COMPLETED", "41_1": "CANCELLED"} | {f"41_{i}": "PENDING" for i in (2, 3, 5)},
        ),
        # squeue -h -r --states=all -o '%i|%T'
        (
            "25_1|COMPLETING\n25_0|RUNNING\n27|PENDING\n",
            {"25_1": "COMPLETING", "25_0": "RUNNING", "27": "PENDING"},
        ),
        ("41_0.batch|COMPLETED\n\n", {}),
    ],
)
def test_parse_states(text: str, states: dict) -> None:
    assert fcluster.parse_states(text) == states


@pytest.mark.parametrize(
    ("state", "kind"),
    [
        ("PENDING", "pending"),
        ("REQUEUED", "pending"),
        ("RUNNING", "running"),
        ("COMPLETING", "running"),  # a cancelled job whose tasks are still writing their results
        ("COMPLETED", "finished"),
        ("CANCELLED", "ended"),
        ("CANCELLED by 0", "ended"),
        ("FAILED", "ended"),
        ("TIMEOUT", "ended"),
        ("NODE_FAIL", "ended"),
        ("OUT_OF_MEMORY", "ended"),
        ("FINISHED", "finished"),  # submitit_local
        ("INTERRUPTED", "ended"),  # submitit_local
        (None, "unknown"),
    ],
)
def test_state_kind(state: str | None, kind: str) -> None:
    assert fcluster.state_kind(state) == kind


def _answers(replies: dict[str, tuple[int, str, str]]):
    """A stand-in for subprocess.run that answers each command (by its name) with (rc, stdout,
    stderr) recorded from the test cluster, and notes the commands asked."""
    asked: list[str] = []

    def run(args: list[str], **kwargs) -> subprocess.CompletedProcess:
        asked.append(args[0])
        rc, out, err = replies[args[0]]
        return subprocess.CompletedProcess(args, rc, out, err)

    return run, asked


NO_ACCOUNTING = (1, "", "Slurm accounting storage is disabled\n")


def test_states_from_squeue_then_sacct_for_jobs_it_forgot() -> None:
    run, asked = _answers({"squeue": (0, "12_0|RUNNING\n12_1|PENDING\n", ""), "sacct": NO_ACCOUNTING})
    states = fcluster.SlurmStates(run)
    assert states(["12_0", "12_1"]) == {"12_0": "RUNNING", "12_1": "PENDING"} and asked == ["squeue"]
    # After MinJobAge squeue no longer knows the array; without accounting nothing does.
    run, asked = _answers(
        {"squeue": (1, "", "slurm_load_jobs error: Invalid job id specified\n"), "sacct": NO_ACCOUNTING}
    )
    states = fcluster.SlurmStates(run)
    assert states(["12_0"]) == {} and asked == ["squeue", "sacct"]
    assert states(["12_0"]) == {} and asked == ["squeue", "sacct", "squeue"]  # sacct is not asked again
    run, asked = _answers(
        {"squeue": (1, "", "Invalid job id specified"), "sacct": (0, "12_0|CANCELLED by 0\n", "")}
    )
    assert fcluster.SlurmStates(run)(["12_0"]) == {"12_0": "CANCELLED"}
    run, _ = _answers(
        {"squeue": (1, "", "Unable to contact slurm controller (connect failure)"), "sacct": NO_ACCOUNTING}
    )
    assert fcluster.SlurmStates(run)(["12_0"]) is None  # decide nothing while the controller is away


class _Timeline:
    """A clock for :class:`JobWatch` whose ``sleep`` moves time on and applies the events due."""

    def __init__(self, events: list[tuple[float, Callable[[], None]]]) -> None:
        self.now, self.events = 0.0, sorted(events, key=lambda e: e[0])

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        while self.events and self.events[0][0] <= self.now:
            self.events.pop(0)[1]()


def test_job_watch_shows_states_and_ends_jobs_without_result(tmp_path: Path) -> None:
    from submitit.slurm.slurm import SlurmJob

    held, ran, killed = (SlurmJob(folder=tmp_path / "%j", job_id=f"7_{i}", tasks=(0, 1)) for i in range(3))
    states = {"7_0": "PENDING", "7_1": "PENDING", "7_2": "RUNNING"}

    def touch(*paths: Path) -> None:
        for path in paths:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()

    touch(killed.task(0).paths.stdout)
    events = [
        (3, lambda: (states.update({"7_1": "RUNNING"}), touch(ran.task(0).paths.stdout))),
        (
            6,
            lambda: (
                states.update({"7_1": "COMPLETING"}),
                touch(*(ran.task(i).paths.result_pickle for i in (0, 1))),
            ),
        ),
        (9, lambda: states.update({"7_0": "CANCELLED"})),  # scancel while pending: no task ever started
        (9, lambda: states.update({"7_2": "FAILED"})),  # its tasks were killed: no result will come
    ]
    clock, lines, finished = _Timeline(events), [], []
    watch = fcluster.JobWatch(
        [(0, held), (1, ran), (2, killed)],
        lambda ids: {i: states[i] for i in ids},
        show=lines.append,
        finished=lambda w: finished.append((w.num, w.outcome, clock.now)),
        clock=lambda: clock.now,
        sleep=clock.sleep,
    )
    watched = watch.wait()
    assert [w.outcome for w in watched] == ["lost", "result", "lost"]
    assert finished == [(1, "result", 6)]  # told as the job's results appeared, not at the wait's end
    assert lines[:3] == [
        "flopsweep: job #0 (id 7_0): PENDING",
        "flopsweep: job #1 (id 7_1): PENDING",
        "flopsweep: job #2 (id 7_2): RUNNING",
    ]
    assert lines[3:] == [
        "flopsweep: job #1 (id 7_1): RUNNING",
        "flopsweep: job #1 (id 7_1): done",
        "flopsweep: job #0 (id 7_0): CANCELLED",
        "flopsweep: job #2 (id 7_2): FAILED",
    ]
    # Ended jobs are given up RESULT_GRACE_S after Slurm said so (their files may show late).
    assert 9 + fcluster.RESULT_GRACE_S <= clock.now <= 9 + fcluster.RESULT_GRACE_S + 5
    assert fcluster.lost_message(watched[0]) == (
        "job 7_0 ended CANCELLED (scancel, or an administrator) before it started; no task ran"
    )
    assert fcluster.lost_message(watched[2]).startswith(
        "job 7_2 ended FAILED (the batch script or a task failed)"
    )


def test_jobs_are_submitted_without_requeue_unless_the_user_says_otherwise() -> None:
    """A node failure or a preemption requeues a batch job by default; a requeued flopsweep job would
    measure again over its record, so ``--no-requeue`` is added, and a user's own choice is kept."""
    from flopsweep.cluster import no_requeue

    assert no_requeue(None) == {"no_requeue": True}
    assert no_requeue({"hold": True}) == {"hold": True, "no_requeue": True}
    for theirs in ({"requeue": True}, {"no_requeue": False}, {"no-requeue": True}):
        assert no_requeue(theirs) == theirs


def test_an_error_record_gets_the_end_slurm_gave_its_job() -> None:
    """``NODE_FAIL`` turns the SIGTERM the surviving ranks saw into ``NodeFailed``; other ends
    (TIMEOUT, CANCELLED, PREEMPTED) are added to the message; nothing is added to an ok record, to
    a job whose tasks ended by themselves, or twice."""
    from flopsweep.cluster import NODE_FAILED, ended_record

    sigterm = {"type": "Terminated", "message": "SIGTERM: Slurm is stopping the job", "phase": "measure"}
    record = {"status": "error", "error": sigterm, "run": {"id": "r"}}
    failed = ended_record(record, "12_0", "NODE_FAIL")
    assert (
        failed is not None
        and failed["error"]["type"] == NODE_FAILED
        and failed["error"]["phase"] == "measure"
    )
    assert (
        failed["error"]["message"]
        == f"{sigterm['message']}; Slurm ended job 12_0 NODE_FAIL (its node failed)"
    )
    assert record["error"] is sigterm and sigterm["type"] == "Terminated"  # the input is not changed
    assert ended_record(failed, "12_0", "NODE_FAIL") is None
    timeout = ended_record(record, "7", "TIMEOUT")
    assert timeout is not None and timeout["error"]["type"] == "Terminated"
    assert timeout["error"]["message"].endswith(
        "Slurm ended job 7 TIMEOUT (the time limit, hydra.launcher.timeout_min)"
    )
    assert ended_record(record, "7", "CANCELLED by 0")["error"]["message"].endswith(
        "7 CANCELLED (scancel, or an administrator)"
    )
    for state in ("COMPLETED", "FAILED", "RUNNING", None, ""):
        assert ended_record(record, "7", state) is None, state
    assert ended_record({"status": "ok", "error": None}, "7", "NODE_FAIL") is None


@pytest.mark.parametrize(
    "overrides",
    [
        {"batch": fconfig.BatchConfig(name="auto")},
        {"search": fconfig.ModelSearchConfig(model="largest")},
        {"search": fconfig.ModelSearchConfig(model="largest", grow="seq_len")},
    ],
)
def test_searches_are_planned_on_one_slurm_node_and_on_several(overrides: dict) -> None:
    """The searches run their probes on every node's ranks (node 0's agent decides, the others follow:
    flopsweep.lockstep), so a Slurm job of one or two nodes plans them; outside Slurm two nodes are
    refused as any run of two nodes is."""
    cpu = fconfig.RunConfig(
        backend=fconfig.BackendConfig(name="ddp"), device="cpu", nproc_per_node="2", **overrides
    )
    agent = Environment(cpu_count=2, in_submitit=True, under_slurm=True, slurm_job=True)
    assert resolve(cpu, agent).world_size == 2
    two_nodes = dataclasses.replace(cpu, nnodes=2)
    assert resolve(two_nodes, agent).world_size == 4
    with pytest.raises(ConfigError, match="only a Slurm job spans nodes") as info:
        resolve(two_nodes, Environment(cpu_count=2))
    assert info.value.key == "nnodes" and "\n" not in str(info.value)

"""Slurm: rank arithmetic, launcher config and checks everywhere; real jobs with ``-m slurm``.

The ``slurm``-marked tests submit to a running cluster (``bash .ci/slurm-up.sh`` starts a
one-node one). There is no accounting database there, so submitit cannot see a job that Slurm
killed: every test bounds its sweep with a timeout and cancels its own jobs (by job name) when
it ends, so that a test fails rather than hangs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import ROOT, records, run_py, validate
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from submitit.helpers import TorchDistributedEnvironment

from flopsweep import config as fconfig
from flopsweep import slurm
from flopsweep.config import ConfigError
from flopsweep.store import register_configs

CPU_JOB = [
    "hydra/launcher=slurm",
    "device=cpu",
    "nproc_per_node=2",
    "hydra.launcher.cpus_per_task=1",
    "precision=fp32",
    "steps.warmup=1",
    "steps.measure=2",
]


# --- rank arithmetic: SLURM_* variables of 2 nodes x 8 tasks (data, not a mock) ---------------


@pytest.mark.parametrize(("node", "local_rank"), [(0, 0), (0, 7), (1, 0), (1, 3), (1, 7)])
def test_two_nodes_of_eight_tasks_map_to_global_rank(
    monkeypatch: pytest.MonkeyPatch, node: int, local_rank: int
) -> None:
    """Slurm's block distribution: task ``SLURM_PROCID = node * 8 + SLURM_LOCALID``."""
    for key in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)  # restored (removed) after the test
    monkeypatch.setenv("SUBMITIT_EXECUTOR", "slurm")
    for key, value in {
        "SLURM_JOB_ID": "4242",
        "SLURM_NTASKS": "16",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_JOB_NODELIST": "gpu-[017-018]",
        "SLURM_NODEID": str(node),
        "SLURM_PROCID": str(node * 8 + local_rank),
        "SLURM_LOCALID": str(local_rank),
    }.items():
        monkeypatch.setenv(key, value)
    env = TorchDistributedEnvironment().export(set_cuda_visible_devices=False, overwrite=True)
    assert (env.rank, env.local_rank, env.world_size, env.local_world_size) == (
        node * 8 + local_rank,
        local_rank,
        16,
        8,
    )
    assert env.master_addr == "gpu-017"  # the first node hosts rank 0
    assert os.environ["RANK"] == str(node * 8 + local_rank) and os.environ["WORLD_SIZE"] == "16"
    assert os.environ["LOCAL_RANK"] == str(local_rank) and os.environ["MASTER_ADDR"] == "gpu-017"
    # Every task of the job draws the same port from the job id.
    assert os.environ["MASTER_PORT"] == str(TorchDistributedEnvironment().master_port)
    assert slurm.writes_record() is (node == 0 and local_rank == 0)


@pytest.mark.parametrize(
    ("visible", "local_rank", "index"),
    [
        ("0,1,2,3,4,5,6,7", 5, 5),  # gpus_per_node: each task sees the node's job GPUs
        ("4,5,6,7", 2, 2),  # the job got GPUs 4-7; its local rank 2 is the third of them
        ("6", 6, 0),  # Slurm bound one GPU to the task: it is device 0
        ("", 3, 3),  # no restriction
    ],
)
def test_cuda_device_index(visible: str, local_rank: int, index: int) -> None:
    assert slurm.cuda_device_index(local_rank, visible) == index


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
    monkeypatch.delenv("SUBMITIT_EXECUTOR", raising=False)
    with pytest.raises(ConfigError, match="hydra/launcher=slurm"):
        validate(cfg)
    monkeypatch.setenv("SUBMITIT_EXECUTOR", "slurm")  # a task of a 2-node Slurm job
    assert validate(cfg).nnodes == 2


# --- the launcher config and its checks ---------------------------------------------------------


@pytest.fixture(scope="module")
def launcher_config():
    register_configs()
    OmegaConf.register_new_resolver("flopsweep_uid", lambda: "test", replace=True)
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):

        def _launcher(overrides: list[str]) -> dict:
            cfg = compose(
                config_name="config", overrides=["hydra/launcher=slurm", *overrides], return_hydra_config=True
            )
            return OmegaConf.to_container(cfg.hydra.launcher, resolve=True)

        yield _launcher


def test_slurm_launcher_two_nodes_of_eight_gpus(launcher_config) -> None:
    launcher = launcher_config(["device=cuda", "nproc_per_node=8", "nnodes=2"])
    assert launcher["_target_"] == "hydra_plugins.flopsweep_slurm.FlopsweepSlurmLauncher"
    assert (launcher["nodes"], launcher["tasks_per_node"], launcher["gpus_per_node"]) == (2, 8, 8)
    assert launcher["mem_gb"] == 8 * slurm.MEM_GB_PER_GPU_RANK
    assert launcher["partition"] is None and launcher["account"] is None
    slurm.check_launcher(launcher, nproc_per_node=8, nnodes=2, device="cuda")


def test_slurm_launcher_on_cpu_asks_for_no_gpu(launcher_config) -> None:
    launcher = launcher_config(["device=cpu", "nproc_per_node=2"])
    assert (launcher["nodes"], launcher["tasks_per_node"], launcher["gpus_per_node"]) == (1, 2, None)
    assert launcher["mem_gb"] is None
    slurm.check_launcher(launcher, nproc_per_node=2, nnodes=1, device="cpu")


@pytest.mark.parametrize("name", ["backends", "seed-deepspeed", "seed-fsdp", "seed-fsdp-2node"])
def test_gpu_sweeps_pass_the_slurm_launcher_check(launcher_config, name: str) -> None:
    launcher = launcher_config([f"+sweep={name}", "nproc_per_node=8"])
    slurm.check_launcher(launcher, nproc_per_node=8, nnodes=launcher["nodes"], device="cuda")
    assert launcher["gpus_per_node"] == launcher["tasks_per_node"] == 8
    assert launcher["nodes"] == (2 if name.endswith("2node") else 1)


@pytest.mark.parametrize(
    ("launcher", "run", "key"),
    [
        ({"tasks_per_node": 1, "gpus_per_node": 8}, (8, 1, "cuda"), "hydra.launcher.tasks_per_node"),
        ({"tasks_per_node": 1, "gpus_per_node": 8}, (1, 1, "cuda"), "hydra.launcher.gpus_per_node"),
        ({"tasks_per_node": 8, "nodes": 1, "gpus_per_node": 8}, (8, 2, "cuda"), "hydra.launcher.nodes"),
        ({"tasks_per_node": 8, "nodes": 2}, (8, 2, "cuda"), "hydra.launcher.gpus_per_node"),
        ({"tasks_per_node": 2, "gpus_per_node": 2}, (2, 1, "cpu"), "hydra.launcher.gpus_per_node"),
    ],
)
def test_check_launcher_names_the_key_to_set(launcher: dict, run: tuple, key: str) -> None:
    nproc, nnodes, device = run
    with pytest.raises(ConfigError, match="Fix: set ") as info:
        slurm.check_launcher(launcher, nproc_per_node=nproc, nnodes=nnodes, device=device)
    assert info.value.key == key


def test_check_launcher_accepts_one_gpu_per_task() -> None:
    slurm.check_launcher(
        {"tasks_per_node": 8, "nodes": 2, "gpus_per_task": 1}, nproc_per_node=8, nnodes=2, device="cuda"
    )


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["hydra.launcher.tasks_per_node=1"], "hydra.launcher.tasks_per_node"),
        (["hydra.launcher.nodes=2"], "hydra.launcher.nodes"),
        (["hydra.launcher.gpus_per_node=2"], "hydra.launcher.gpus_per_node"),
        (["nproc_per_node=auto"], "nproc_per_node"),
        (["nproc_per_node=1,2"], "nproc_per_node"),
    ],
)
def test_contradicting_launcher_fails_before_submission(
    tmp_path: Path, overrides: list[str], key: str
) -> None:
    """No cluster needed: the launcher plugin refuses before it calls sbatch."""
    proc = run_py("-m", *CPU_JOB, *overrides, f"hydra.sweep.dir={tmp_path / 'sweep'}", timeout=120)
    assert proc.returncode == 1
    message = proc.stderr.strip().splitlines()[0]
    assert message.startswith(f"Invalid config: {key}=") and "Fix: set " in message, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "sweep").exists()  # nothing submitted, not even the sweep directory


@pytest.mark.slow
def test_submitit_local_runs_each_task_as_one_rank(tmp_path: Path) -> None:
    """The Slurm code path without Slurm: submitit_local starts two tasks, each one gloo rank."""
    local = [
        arg.replace("hydra/launcher=slurm", "hydra/launcher=slurm_local")
        for arg in CPU_JOB
        if "cpus_per_task" not in arg
    ]
    proc = run_py("-m", *local, "backend=ddp", f"hydra.sweep.dir={tmp_path}", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (record,) = records(tmp_path)
    assert record["status"] == "ok", record["error"]
    assert record["system"]["world_size"] == 2
    assert [r["rank"] for r in record["metrics"]["per_rank"]] == [0, 1]
    assert "slurm task: rank 1 of 2" in (tmp_path / "0" / "run.log").read_text()


# --- against a real Slurm (python -m pytest -m slurm, after bash .ci/slurm-up.sh) --------------


def _slurm(*args: str) -> str:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=30, check=True).stdout


@pytest.fixture(scope="module")
def cluster() -> None:
    if not shutil.which("sinfo"):
        pytest.fail("no Slurm client: start a test cluster with `bash .ci/slurm-up.sh`")
    states = _slurm("sinfo", "-h", "-N", "-o", "%T").split()
    assert {"idle", "mixed", "allocated"} & set(states), f"no usable Slurm node: {states}"


@pytest.fixture
def job_name(cluster: None) -> Iterator[str]:
    """A job name unique to the test; its jobs are cancelled when the test ends."""
    name = f"flopsweep-test-{uuid.uuid4().hex[:8]}"
    yield name
    subprocess.run(["scancel", f"--name={name}"], capture_output=True, timeout=30, check=False)


def sweep(
    sweep_dir: Path, name: str, *overrides: str, timeout: float = 240, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    try:
        return run_py(
            "-m",
            *CPU_JOB,
            f"hydra.launcher.name={name}",
            f"hydra.sweep.dir={sweep_dir}",
            *overrides,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the sweep did not end within {timeout} s (its jobs are cancelled)")


@pytest.mark.slurm
def test_two_point_sweep_two_tasks_per_job(tmp_path: Path, job_name: str) -> None:
    proc = sweep(tmp_path, job_name, "backend=ddp,fsdp")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "flopsweep summary: 2 ok, 0 oom, 0 error, 0 invalid" in proc.stdout
    recs = records(tmp_path)
    assert [r["config"]["backend"]["name"] for r in recs] == ["ddp", "fsdp"]
    for r in recs:
        assert r["status"] == "ok", r["error"]
        assert r["system"]["world_size"] == 2 and [p["rank"] for p in r["metrics"]["per_rank"]] == [0, 1]
    # One directory per job, shared by its two tasks; no task made one of its own.
    assert sorted(p.name for p in tmp_path.iterdir()) == [".submitit", "0", "1", "multirun.yaml"]
    for job in ("0", "1"):
        log = (tmp_path / job / "run.log").read_text()
        assert "slurm task: rank 0 of 2" in log and "slurm task: rank 1 of 2" in log
        assert not (tmp_path / job / ".flopsweep").exists()
    assert len(list((tmp_path / ".submitit").glob("*/*_1_result.pkl"))) == 2  # task 1 of each job ran


@pytest.mark.slurm
def test_rank_that_raises_gives_error_record(tmp_path: Path, job_name: str) -> None:
    proc = sweep(tmp_path, job_name, "backend=ddp", env={slurm.TEST_RAISE_ENV: "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "flopsweep summary: 0 ok, 0 oom, 1 error, 0 invalid" in proc.stdout
    (record,) = records(tmp_path)
    assert record["status"] == "error"
    assert record["error"]["rank"] == 1 and record["error"]["phase"] == "init"
    assert record["error"]["type"] == "ValueError" and slurm.TEST_RAISE_ENV in record["error"]["message"]
    assert all(value is None for value in record["metrics"].values())


@pytest.mark.slurm
def test_rank_that_never_joins_gives_error_record(tmp_path: Path, job_name: str) -> None:
    """Rank 0 waits in the rendezvous for rank 1, which raised: its task gives up PEER_GRACE_S later."""
    proc = sweep(tmp_path, job_name, "backend=ddp", env={slurm.TEST_RAISE_ENV: "1:rendezvous"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    (record,) = records(tmp_path)
    assert record["status"] == "error" and record["error"]["rank"] == 1
    assert record["error"]["type"] == "ValueError" and record["error"]["phase"] == "init"
    assert "rank 1 failed and rank 0 still waited for it" in (tmp_path / "0" / "run.log").read_text()


@pytest.mark.slurm
def test_killed_rank_zero_task_leaves_record_by_rank_one(tmp_path: Path, job_name: str) -> None:
    """Rank 0's task dies by SIGKILL: rank 1's task writes the record STALE_S later. submitit gets no
    result from task 0, so on this cluster without accounting the sweep would wait: the test stops it."""
    args = [
        sys.executable,
        "run.py",
        "-m",
        *CPU_JOB,
        "backend=ddp",
        f"hydra.launcher.name={job_name}",
        f"hydra.sweep.dir={tmp_path}",
    ]
    record = tmp_path / "0" / "metrics.json"
    with subprocess.Popen(
        args,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, slurm.TEST_RAISE_ENV: "0:kill"},
    ) as proc:
        try:
            end = time.monotonic() + slurm.STALE_S + 90
            while not record.exists():
                assert time.monotonic() < end, "no task wrote a record"
                time.sleep(0.5)
        finally:
            proc.kill()
    record = json.loads(record.read_text())
    assert record["status"] == "error" and record["error"]["type"] == "TaskDied"
    assert record["error"]["rank"] == 0 and "rank 1 wrote this one" in record["error"]["message"]


@pytest.mark.slurm
def test_scancel_gives_record_not_hang(tmp_path: Path, job_name: str) -> None:
    args = [
        sys.executable,
        "run.py",
        "-m",
        *CPU_JOB,
        "backend=ddp",
        "steps.measure=1000000",
        f"hydra.launcher.name={job_name}",
        f"hydra.sweep.dir={tmp_path}",
    ]
    phase = tmp_path / "0" / ".flopsweep" / "rank0_phase.txt"
    with subprocess.Popen(
        args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        try:
            end = time.monotonic() + 120
            while not (phase.exists() and phase.read_text() == "measure"):
                assert time.monotonic() < end and proc.poll() is None, "the job never reached measure"
                time.sleep(0.5)
            _slurm("scancel", f"--name={job_name}")
            output, _ = proc.communicate(timeout=90)
        finally:
            proc.kill()
    assert proc.returncode == 0, output[-3000:]
    (record,) = records(tmp_path)
    assert record["status"] == "error" and record["error"]["type"] == "Terminated"
    assert "SIGTERM" in record["error"]["message"] and record["error"]["phase"] == "measure"
    assert record["metrics"]["tokens_per_s"] is None


@pytest.mark.slurm
def test_contradicting_launcher_submits_nothing(tmp_path: Path, job_name: str) -> None:
    proc = sweep(tmp_path, job_name, "backend=ddp", "hydra.launcher.tasks_per_node=1", timeout=120)
    assert proc.returncode == 1 and "hydra.launcher.tasks_per_node" in proc.stderr
    assert _slurm("squeue", "-h", f"--name={job_name}").strip() == ""
    assert not tmp_path.joinpath(".submitit").exists()

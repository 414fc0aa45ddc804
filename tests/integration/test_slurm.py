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

import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import ROOT, records, run_py

from flopsweep import cluster as fcluster

CPU_JOB = [
    "hydra/launcher=slurm",
    "device=cpu",
    "nproc_per_node=2",
    "hydra.launcher.cpus_per_task=1",
    "precision=fp32",
    "steps.warmup=1",
    "steps.measure=2",
]


@pytest.mark.slow
def test_no_controller_is_one_line(tmp_path: Path) -> None:
    """No cluster needed: a slurm.conf whose controller port is closed (or no Slurm client at all)."""
    conf = tmp_path / "slurm.conf"
    conf.write_text(
        "ClusterName=nowhere\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=9\n"
        "NodeName=localhost CPUs=1\nPartitionName=p Nodes=localhost Default=YES\n"
    )
    proc = run_py(
        "-m", *CPU_JOB, f"hydra.sweep.dir={tmp_path / 'sweep'}", env={"SLURM_CONF": str(conf)}, timeout=180
    )
    assert proc.returncode == (1 if shutil.which("sinfo") else 2)  # 2: no Slurm client here at all
    (message,) = proc.stderr.strip().splitlines()
    assert message.startswith("flopsweep: hydra/launcher=slurm: ") and "Fix: " in message, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "sweep").exists()


@pytest.mark.slow
def test_submitit_local_runs_one_node_agent_that_spawns_both_ranks(tmp_path: Path) -> None:
    """The Slurm code path without Slurm: submitit_local starts one task, the node agent, which spawns
    the two gloo ranks."""
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
    assert "node agent 0 of 1 on ?: spawns ranks 0 to 1 of 2" in (tmp_path / "0" / "run.log").read_text()


@pytest.mark.slow
def test_a_plan_sweep_under_slurm_local_or_pool_prints_each_jobs_outcome_as_the_basic_launcher_does(
    tmp_path: Path,
) -> None:
    """Session 26: a plan job writes no record, and its outcome (``ok``, ``ok, does not fit``, ``invalid:
    KEY=VALUE``) was kept in the job's process only: under a launcher whose jobs run in other processes the
    progress line said ``1 of 2 jobs done (job 0), ...`` without it. The job leaves it in its
    ``.hydra/plan_outcome.json``, which the sweep process reads for the line and removes."""
    from flopsweep.job.planoutcome import OUTCOME_FILE

    args = ["nproc_per_node=1", "plan=true", "plan_gpu=H100", "model=gpt-tiny,llama3.1-70b"]
    said = {}
    for launcher in ("basic", "slurm_local"):
        sweep = tmp_path / launcher
        proc = run_py("-m", f"hydra/launcher={launcher}", *args, f"hydra.sweep.dir={sweep}", timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        lines = [
            line for line in proc.stdout.splitlines() if re.match(r"flopsweep: \d+ of \d+ jobs? done", line)
        ]
        said[launcher] = [line.split(", 0:")[0] for line in lines]
        assert not list(sweep.glob(f"*/{OUTCOME_FILE}"))  # read and removed by the sweep process
    assert (
        said["slurm_local"]
        == said["basic"]
        == [
            "flopsweep: 1 of 2 jobs done (job 0): ok",
            "flopsweep: 2 of 2 jobs done (job 1): ok, does not fit",
        ]
    )
    pool = ["hydra/launcher=pool", "hydra.launcher.slots=[0]", "device=cpu", "nproc_per_node=1", "plan=true"]
    proc = run_py("-m", *pool, "seed=0,1", f"hydra.sweep.dir={tmp_path / 'pool'}", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "flopsweep: 1 of 2 jobs done (job 0): ok, " in proc.stdout
    assert "flopsweep: 2 of 2 jobs done (job 1): ok, " in proc.stdout


@pytest.mark.slow
def test_slurm_local_prints_each_jobs_progress_line_in_the_sweep(tmp_path: Path) -> None:
    """As a local sweep does, slurm_local prints ``i of N jobs done (job J): <status>`` once per job, in the
    sweep's output, as each job ends (ok, oom, and a job whose rank was killed: its node agent, the task, ran
    the callbacks out of sight and recorded the kill), and each failed job's line once."""
    one_rank = ["hydra/launcher=slurm_local", "device=cpu", "nproc_per_node=1", "precision=fp32"]
    proc = run_py(
        "-m",
        *one_rank,
        "steps.warmup=1",
        "steps.measure=1",
        "fault.kind=none,kill,oom",
        f"hydra.sweep.dir={tmp_path}",
        timeout=300,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    ok, lost, oom = records(tmp_path)
    assert (ok["status"], lost["status"], oom["status"]) == ("ok", "error", "oom")
    assert lost["error"]["type"] == "WorkerKilled"  # SIGKILL took the rank; its node agent recorded it
    lines = [line for line in proc.stdout.splitlines() if re.match(r"flopsweep: \d+ of \d+ jobs? done", line)]
    assert [line.split(",")[0] for line in lines] == [
        "flopsweep: 1 of 3 jobs done (job 0): ok",
        "flopsweep: 2 of 3 jobs done (job 1): error",
        "flopsweep: 3 of 3 jobs done (job 2): oom",
    ], output[-3000:]
    # Each line comes after its job's end and before the next job starts.
    assert proc.stdout.index("job #0 (id") < proc.stdout.index(lines[0]) < proc.stdout.index("job #1 (id")
    assert proc.stdout.index(lines[1]) < proc.stdout.index("job #2 (id")
    assert "flopsweep summary: 1 ok, 1 oom, 1 error, 0 invalid, 0 skipped" in proc.stdout
    task_logs = "".join(p.read_text() for p in (tmp_path / ".submitit").rglob("*_log.out"))
    assert "launching 1 rank" in task_logs  # the tasks print no progress line
    assert not re.search(r"flopsweep: \d+ (of \d+ )?jobs? done", task_logs)
    # each failed job's cause (the task's own log is out of sight; a lost job's record is the sweep's)
    failed = [
        line
        for line in proc.stderr.splitlines()
        if line.startswith(("flopsweep: oom in ", "flopsweep: error in "))
    ]
    assert len(failed) == 2, proc.stderr[-3000:]
    assert ": WorkerKilled: rank 0 was killed by SIGKILL" in failed[0] and failed[0].endswith(
        f"-> {tmp_path / '1' / 'metrics.json'}"
    ), failed
    assert ": OutOfMemoryError: injected fault: oom on rank 0 in measure -> " in failed[1], failed
    assert failed[1].endswith(f"-> {tmp_path / '2' / 'metrics.json'}"), failed
    # each once: a lost job's line was printed, then logged again by the sweep process, whose
    # logger is Hydra's ("[HYDRA] error in ...": a trial)
    for line in failed:
        assert output.count(line.removeprefix("flopsweep: ")) == 1, output[-3000:]
    assert "[HYDRA] error in " not in proc.stdout and "[HYDRA] oom in " not in proc.stdout


def _slurm(*args: str) -> str:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=30, check=True).stdout


SLURM_DIR = Path(os.environ.get("FLOPSWEEP_SLURM_DIR", "/tmp/flopsweep-slurm"))
"""The state directory of .ci/slurm-up.sh's private cluster (its ``slurm.conf`` exists while it is up)."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """A usable Slurm cluster: the private one of .ci/slurm-up.sh when it is up (``SLURM_CONF`` is
    set to its slurm.conf for the module, and so inherited by run.py, submitit's sbatch and squeue),
    else the one of the environment. Fails, never skips, when there is none."""
    private = SLURM_DIR / "slurm.conf"
    with pytest.MonkeyPatch.context() as mp:
        if private.exists():
            mp.setenv("SLURM_CONF", str(private))
        if not shutil.which("sinfo"):
            pytest.fail("no Slurm client: start a test cluster with `bash .ci/slurm-up.sh`")
        try:
            states = _slurm("sinfo", "-h", "-N", "-o", "%T").split()
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            why = exc.stderr.strip() if isinstance(exc.stderr, str) else "no answer within 30 s"
            pytest.fail(
                f"sinfo failed ({fcluster.slurm_conf()}): {why}; start a cluster: bash .ci/slurm-up.sh"
            )
        assert {"idle", "mixed", "allocated"} & set(states), f"no usable Slurm node: {states}"
        yield


@pytest.fixture
def job_name(cluster: None) -> Iterator[str]:
    """A job name unique to the test; its jobs are cancelled when the test ends."""
    name = f"flopsweep-test-{uuid.uuid4().hex[:8]}"
    yield name
    subprocess.run(["scancel", f"--name={name}"], capture_output=True, timeout=30, check=False)


def job_with(*overrides: str) -> list[str]:
    """:data:`CPU_JOB` with ``overrides`` in place of its keys they give (``nproc_per_node=1``): a key given
    twice on the command line is refused before Hydra (docs/reliability-5.md #295)."""
    given = {o.partition("=")[0] for o in overrides}
    return [a for a in CPU_JOB if a.partition("=")[0] not in given] + list(overrides)


def sweep(
    sweep_dir: Path, name: str, *overrides: str, timeout: float = 240, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    try:
        return run_py(
            "-m",
            f"hydra.launcher.name={name}",
            f"hydra.sweep.dir={sweep_dir}",
            *job_with(*overrides),
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the sweep did not end within {timeout} s (its jobs are cancelled)")


@pytest.mark.slurm
def test_two_point_sweep_one_node_agent_per_job(tmp_path: Path, job_name: str) -> None:
    proc = sweep(tmp_path, job_name, "backend=ddp,fsdp")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "flopsweep summary: 2 ok, 0 oom, 0 error, 0 invalid" in proc.stdout
    recs = records(tmp_path)
    assert [r["config"]["backend"]["name"] for r in recs] == ["ddp", "fsdp"]
    for r in recs:
        assert r["status"] == "ok", r["error"]
        assert r["system"]["world_size"] == 2 and [p["rank"] for p in r["metrics"]["per_rank"]] == [0, 1]
    # One directory per job; its one Slurm task is the node agent, which spawned both ranks.
    assert sorted(p.name for p in tmp_path.iterdir()) == [".submitit", "0", "1", "multirun.yaml"]
    for job in ("0", "1"):
        log = (tmp_path / job / "run.log").read_text()
        assert log.count("node agent 0 of 1 on ") == 1 and "spawns ranks 0 to 1 of 2" in log, log[-2000:]
        assert not (tmp_path / job / ".flopsweep").exists()
    assert len(list((tmp_path / ".submitit").glob("*/*_0_result.pkl"))) == 2  # task 0 of each job ran
    assert not list((tmp_path / ".submitit").glob("*/*_1_result.pkl"))  # and no other task
    assert sum(line.endswith("): done") for line in proc.stdout.splitlines()) == 2  # one state line each


@pytest.mark.slurm
def test_a_tensor_parallel_layout_runs_across_the_tasks_of_a_node(tmp_path: Path, job_name: str) -> None:
    """Issue 23's layout under Slurm: TP 2 over the two tasks of one node (``nnodes=1``), FSDP2 on the
    mesh, each task one gloo rank; the record names the layout."""
    proc = sweep(
        tmp_path, job_name, "backend=fsdp", "model=llama-tiny", "parallel.tp=2", "parallel.dp_shard=1"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (record,) = records(tmp_path)
    assert record["status"] == "ok", record["error"]
    assert record["system"]["parallel"] == {
        "dp_replicate": 1,
        "dp_shard": 1,
        "tp": 2,
        "pp": 1,
        "cp": 1,
        "ep": 1,
    }
    assert record["metrics"]["loss_finite"] is True


@pytest.mark.slurm
def test_rank_that_raises_gives_error_record(tmp_path: Path, job_name: str) -> None:
    """``fault=`` under Slurm as on one machine: rank 1 raises at the start of its warm-up, after the
    process group is up, while rank 0 waits for it in a collective."""
    proc = sweep(tmp_path, job_name, "backend=ddp", "fault.kind=raise", "fault.rank=1", "fault.phase=warmup")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "flopsweep summary: 0 ok, 0 oom, 1 error, 0 invalid" in proc.stdout
    (record,) = records(tmp_path)
    assert record["status"] == "error"
    assert record["error"]["rank"] == 1 and record["error"]["phase"] == "warmup"
    assert record["error"]["type"] == "InjectedFault", record["error"]
    assert record["run"]["before_run"]["predicted_peak_gib"] > 0  # the estimate made before the ranks started
    assert all(value is None for value in record["metrics"].values())


@pytest.mark.slurm
def test_rank_that_never_joins_gives_error_record(tmp_path: Path, job_name: str) -> None:
    """Rank 0 waits in the rendezvous for rank 1, which raised before it joined (``fault.phase=init``):
    the node agent stops it as soon as rank 1's error file appears."""
    proc = sweep(tmp_path, job_name, "backend=ddp", "fault.kind=raise", "fault.rank=1", "fault.phase=init")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (record,) = records(tmp_path)
    assert record["status"] == "error" and record["error"]["rank"] == 1
    assert record["error"]["type"] == "InjectedFault" and record["error"]["phase"] == "init", record["error"]


@pytest.mark.slurm
def test_killed_rank_zero_is_recorded_by_its_node_agent(tmp_path: Path, job_name: str) -> None:
    """Rank 0 dies by SIGKILL: its node agent, which spawned it, stops rank 1 and writes the record
    naming the signal and the rank, as a local run's launcher does."""
    kill = ("fault.kind=kill", "fault.rank=0", "fault.phase=init")
    proc = sweep(tmp_path, job_name, "backend=ddp", *kill, timeout=360)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "flopsweep summary: 0 ok, 0 oom, 1 error, 0 invalid" in proc.stdout
    (record,) = records(tmp_path)
    assert record["status"] == "error" and record["error"]["type"] == "WorkerKilled", record["error"]
    assert record["error"]["rank"] == 0 and "rank 0 was killed by SIGKILL" in record["error"]["message"]


class Sweep:
    """A sweep running in the background (``run.py -m`` on the CPU job), its merged output read
    line by line by a thread, so that a test can wait for a line with a deadline."""

    def __init__(self, sweep_dir: Path, name: str, *overrides: str) -> None:
        args = [sys.executable, "run.py", "-m", f"hydra.launcher.name={name}"]
        args += [f"hydra.sweep.dir={sweep_dir}", *job_with(*overrides)]
        self.proc = subprocess.Popen(
            args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: list[str] = []
        self._more = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self._more:
                self.lines.append(line.rstrip("\n"))
                self._more.notify_all()
        with self._more:
            self._more.notify_all()

    def wait_for(self, text: str, timeout: float = 120) -> str:
        """The first output line that holds ``text``; fails after ``timeout`` s or when the sweep ended."""

        def found() -> str | None:
            return next((line for line in self.lines if text in line), None)

        with self._more:
            self._more.wait_for(lambda: found() or not self._reader.is_alive(), timeout)
            line = found()
        assert line, f"no line with {text!r} within {timeout} s:\n" + "\n".join(self.lines[-40:])
        return line

    def end(self, timeout: float = 180) -> int:
        """Wait for the sweep to exit; its exit status."""
        try:
            status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the sweep did not end within {timeout} s:\n" + "\n".join(self.lines[-40:]))
        self._reader.join(10)
        return status

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def __enter__(self) -> Sweep:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait()


def _job_id(line: str) -> str:
    """``12_0`` from a state line ``... flopsweep: job #0 (id 12_0): PENDING``."""
    return line.split("(id ", 1)[1].split(")", 1)[0]


HOLD = "+hydra.launcher.additional_parameters.hold=true"
"""sbatch --hold: the job stays PENDING (JobHeldUser) until ``scontrol release``."""


@pytest.mark.slurm
def test_state_lines_and_scancel_while_running(tmp_path: Path, job_name: str) -> None:
    """PENDING (held), RUNNING (released), then scancel: the tasks record the SIGTERM and return."""
    phase = tmp_path / "0" / ".flopsweep" / "rank0_phase.txt"
    with Sweep(tmp_path, job_name, "backend=ddp", "steps.measure=100000", HOLD) as run:
        pending = run.wait_for("): PENDING")
        _slurm("scontrol", "release", _job_id(pending))
        running = run.wait_for("): RUNNING")
        end = time.monotonic() + 120
        while not (phase.exists() and phase.read_text() == "measure"):
            assert time.monotonic() < end, "the job never reached measure"
            time.sleep(0.5)
        _slurm("scancel", f"--name={job_name}")
        assert run.end() == 0, run.output[-3000:]
        done = run.wait_for("): done")
    assert run.lines.index(pending) < run.lines.index(running) < run.lines.index(done)
    assert all(
        line.endswith(f"flopsweep: job #0 (id {_job_id(pending)}): {state}")
        for line, state in ((pending, "PENDING"), (running, "RUNNING"), (done, "done"))
    )
    (record,) = records(tmp_path)
    assert record["status"] == "error" and record["error"]["type"] == "Terminated"
    assert "SIGTERM" in record["error"]["message"] and record["error"]["phase"] == "measure"
    assert record["metrics"]["tokens_per_s"] is None


@pytest.mark.slurm
def test_scancel_while_pending_gives_error_record(tmp_path: Path, job_name: str) -> None:
    """A job cancelled before it started gives no result: the sweep records it and finishes."""
    with Sweep(tmp_path, job_name, "backend=ddp,fsdp", HOLD) as run:
        run.wait_for("job #1 (id ")  # both elements of the array are shown PENDING
        pending = run.wait_for("job #0 (id ")
        assert pending.endswith("PENDING"), run.output
        _slurm("scancel", _job_id(pending))  # the first element only
        _slurm("scontrol", "release", _job_id(pending).split("_")[0])  # the second one runs
        assert run.end() == 0, run.output[-3000:]
    assert "flopsweep summary: 1 ok, 0 oom, 1 error, 0 invalid" in run.output
    lost, ok = records(tmp_path)
    assert ok["status"] == "ok" and ok["config"]["backend"]["name"] == "fsdp"
    assert lost["status"] == "error" and lost["error"]["type"] == "JobLost"
    assert lost["error"]["phase"] == "launch" and lost["system"]["world_size"] is None
    # Without accounting a cancelled pending array element leaves Slurm at once, with no final state.
    message = lost["error"]["message"]
    assert (
        message.startswith(f"slurm job {_job_id(pending)} ") and "before it started; no task ran" in message
    )
    # unknown is not gone: the job is shown unlisted, then recorded lost after repeated looks
    assert f"flopsweep: job #0 (id {_job_id(pending)}): not listed by the queue" in run.output
    assert lost["config"]["backend"]["name"] == "ddp" and lost["run"]["job_num"] == 0
    assert (tmp_path / "0" / ".hydra" / "overrides.yaml").exists()  # a job directory like any other


@pytest.mark.slurm
def test_request_larger_than_any_node_is_refused_before_submission(tmp_path: Path, job_name: str) -> None:
    args = [a for a in CPU_JOB if "cpus_per_task" not in a] + ["hydra.launcher.cpus_per_task=10000"]
    sweep_dir = tmp_path / "sweep"
    proc = run_py("-m", *args, f"hydra.launcher.name={job_name}", f"hydra.sweep.dir={sweep_dir}", timeout=120)
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("flopsweep: Invalid config: hydra.launcher.cpus_per_task=10000: a job asks for"), (
        line
    )
    assert "Fix: set hydra.launcher.cpus_per_task=" in line and "Traceback" not in proc.stderr
    assert _slurm("squeue", "-h", "--states=all", f"--name={job_name}").strip() == ""
    assert not sweep_dir.exists()


@pytest.mark.slurm
def test_contradicting_launcher_submits_nothing(tmp_path: Path, job_name: str) -> None:
    proc = sweep(tmp_path, job_name, "backend=ddp", "hydra.launcher.tasks_per_node=3", timeout=120)
    assert proc.returncode == 1 and "hydra.launcher.tasks_per_node" in proc.stderr
    assert _slurm("squeue", "-h", f"--name={job_name}").strip() == ""
    assert not tmp_path.joinpath(".submitit").exists()

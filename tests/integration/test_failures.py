"""Issue 4, sweeps that lose nothing: failures become records, jobs are isolated,
writes are atomic, sweeps resume, and bad input gets a clear error.

The end-to-end tests run ``python run.py`` in a subprocess with real gloo ranks on
the CPU and faults injected with the test-only ``fault`` config.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
import yaml
from helpers import ROOT, RUN_PY, make_plan, read_record, run_py

from flopsweep import config as fconfig
from flopsweep import forecast
from flopsweep.backends import FSDPConfig
from flopsweep.config import ModelConfig, RunConfig
from flopsweep.job.records import measured, recorded
from flopsweep.job.result import JobResult
from flopsweep.layout import Layout
from flopsweep.memory import estimate
from flopsweep.memory_fix import levers_line
from flopsweep.metrics import compute_metrics, sanity_problem
from flopsweep.oom_note import oom_estimate_line
from flopsweep.outcome import Outcome
from flopsweep.record import error as error_info
from flopsweep.record import null_metrics

# Two gloo ranks, the smallest model, the fewest steps: seconds per job on a 2-core CPU.
TWO_RANKS = [
    "backend=ddp",
    "nproc_per_node=2",
    "device=cpu",
    "precision=fp32",
    "steps.warmup=1",
    "steps.measure=2",
]


ONE_RANK = ["device=cpu", "precision=fp32", "steps.warmup=0", "steps.measure=1"]


def record(job_dir: Path) -> dict:
    return read_record(job_dir / "metrics.json")  # a failed record's metrics all null (DESIGN.md)


def summary(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith("flopsweep summary: "))


# (fault, status, error type, phase, rank): jobs 1 and 5 run clean after faults.
FAULTS = [
    ("{kind:oom,rank:1,phase:measure}", "oom", "OutOfMemoryError", "measure", 1),
    ("{kind:none}", "ok", None, None, None),
    ("{kind:raise,rank:0,phase:warmup}", "error", "InjectedFault", "warmup", 0),
    ("{kind:kill,rank:1,phase:warmup}", "error", "WorkerKilled", "warmup", 1),
    ("{kind:hang,rank:1,phase:measure}", "error", "Timeout", "measure", None),
    ("{kind:none}", "ok", None, None, None),
    # a rank that aborts after its figures reached rank 0 (the intermittent gloo/DeepSpeed teardown abort)
    ("{kind:abort,rank:1,phase:teardown}", "ok", None, None, None),
]


TIMEOUT_S = 120  # long enough for every normal job on a loaded 2-core machine; the hang job waits it out
HANG_JOB = next(num for num, (fault, *_) in enumerate(FAULTS) if "hang" in fault)


def _entered(phase_file: Path, phase: str) -> bool:
    with contextlib.suppress(OSError):
        return phase_file.read_text().strip() == phase
    return False


@pytest.fixture(scope="module")
def failure_sweep(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess, subprocess.CompletedProcess, Path, list[psutil.Process]]:
    """The sweep over FAULTS (its folder and its process), a clean run of TWO_RANKS in a fresh
    process (its process and folder: test_jobs_after_a_fault's reference), and the sweep's processes
    while its hang job hung (test_hang_stops_every_worker's). The clean run starts once the hang
    job's rank 1 has entered its measured steps and hangs there: the cores are idle until TIMEOUT_S,
    so it shares them with no job of the sweep that has to finish in time (CI time: it used to run
    after the sweep)."""
    sweep_dir, fresh_dir = tmp_path_factory.mktemp("failures"), tmp_path_factory.mktemp("fresh")
    faults = ",".join(f for f, *_ in FAULTS)
    argv = [sys.executable, RUN_PY, "-m", f"fault={faults}", *TWO_RANKS, f"timeout_s={TIMEOUT_S}"]
    hanging = sweep_dir / str(HANG_JOB) / ".flopsweep" / "rank1_phase.txt"  # rank_faults.Phase's file
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        sweep = subprocess.Popen(
            [*argv, f"hydra.sweep.dir={sweep_dir}"], cwd=ROOT, stdout=out, stderr=err, text=True
        )
        try:
            while sweep.poll() is None and not _entered(hanging, "measure"):
                time.sleep(0.2)  # the rank's phase file, not a clock, says when
            family = psutil.Process(sweep.pid).children(recursive=True) if sweep.poll() is None else []
            fresh = run_py(*TWO_RANKS, f"hydra.run.dir={fresh_dir}")
            sweep.wait(timeout=len(FAULTS) * TIMEOUT_S + 600)
        finally:
            if sweep.poll() is None:  # hung past every job's timeout: the test fails on its exit status
                sweep.kill()
                sweep.wait()
        out.seek(0)
        err.seek(0)
        proc = subprocess.CompletedProcess(sweep.args, sweep.returncode, out.read(), err.read())
    return sweep_dir, proc, fresh, fresh_dir, family


@pytest.mark.slow
def test_failure_sweep_records_every_job(failure_sweep: tuple, hydra_compose) -> None:
    sweep_dir, proc, *_ = failure_sweep
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert summary(proc.stdout).startswith("flopsweep summary: 3 ok, 1 oom, 3 error, 0 invalid, 0 skipped")
    # what was known before the ranks started: metrics of an ok record, run.before_run of a failed one
    plan = make_plan(hydra_compose(TWO_RANKS))
    estimate_gib = round(estimate(plan.cfg, plan.layout).total_gib, 6)
    prediction = forecast.prediction(plan.cfg, plan.layout, [], gpus_per_node=2, device_name="cpu")
    for num, (_, status, kind, phase, rank) in enumerate(FAULTS):
        r = record(sweep_dir / str(num))
        assert r["status"] == status, (num, r["error"])
        if status == "ok":
            assert r["error"] is None and "before_run" not in r["run"]
            assert r["metrics"]["predicted_peak_gib"] == estimate_gib > 0, num
            continue
        assert r["metrics"] == null_metrics()  # DESIGN.md: not ok, every metric null
        assert r["run"]["before_run"] == {"predicted_peak_gib": estimate_gib, "predicted": prediction}, num
        assert not any(w.startswith("oom_estimate") for w in r["warnings"])  # fault.kind=oom names no GPU
        e = r["error"]
        assert (e["type"], e["phase"], e["rank"]) == (kind, phase, rank), (num, e)
    errors = [record(sweep_dir / str(num))["error"] for num in range(len(FAULTS))]
    assert "SIGKILL" in errors[3]["message"]
    assert "(injected fault: kill on rank 1 in warmup)" in errors[3]["message"]  # not the OOM killer
    assert "OOM killer" not in errors[3]["message"]
    aborted = record(sweep_dir / "6")  # measured whole: ok, with the rank's signal as a warning
    assert aborted["metrics"]["tokens_per_s"] > 0
    assert any(w.startswith("teardown_signal: rank 1 was killed by SIGABRT") for w in aborted["warnings"])
    assert not any(w.startswith("teardown_signal") for w in record(sweep_dir / "5")["warnings"])
    assert f"timeout_s={TIMEOUT_S}" in errors[4]["message"] and "stopped" in errors[4]["message"]
    for num in (0, 2):  # a Python exception leaves its traceback in the job directory
        tb = Path(errors[num]["traceback"])
        assert tb.parent == sweep_dir / str(num) and "injected fault" in tb.read_text()
    assert not list(sweep_dir.rglob(".flopsweep"))  # scratch files are gone


@pytest.mark.slow
def test_jobs_after_a_fault_measure_as_a_fresh_process(failure_sweep: tuple) -> None:
    """Isolation: a clean job after OOM, error, kill and hang equals a run in a fresh process (the
    fixture's, run beside the hang job)."""
    sweep_dir, _, proc, fresh_dir, _ = failure_sweep
    assert proc.returncode == 0, proc.stderr[-3000:]
    fresh = record(fresh_dir)["metrics"]
    for num in (1, 5):
        m = record(sweep_dir / str(num))["metrics"]
        assert (m["loss_first"], m["loss_last"]) == (fresh["loss_first"], fresh["loss_last"])
        assert len(m["iteration_time_s"]["values"]) == len(fresh["iteration_time_s"]["values"]) == 2


@pytest.mark.slow
def test_hang_stops_every_worker_and_leaves_no_process(failure_sweep: tuple) -> None:
    """The sweep's hang job (rank 1 hangs in its measured steps): past ``timeout_s`` both workers are
    stopped, no process the sweep had while it hung (its ranks, anything they started) is left, and the
    sweep goes on to its next job. A hang in init is named so by
    ``tests/unit/test_failures.py::test_timeout_and_silent_exits`` (a hang of this test's own waited
    out another 45 s: CI time). Runs before test_resume_reruns_exactly_the_failed_jobs, which runs the
    hang job again."""
    sweep_dir, proc, _, _, family = failure_sweep
    assert proc.returncode == 0, proc.stderr[-3000:]
    error = record(sweep_dir / str(HANG_JOB))["error"]
    assert error["type"] == "Timeout" and error["phase"] == "measure"
    assert "all 2 workers were stopped" in error["message"]
    assert len(family) >= 2, [p.cmdline() for p in family]  # the sweep's process tree held the job's ranks
    left = [
        p
        for p in family
        if p.is_running()
        and p.status() != psutil.STATUS_ZOMBIE
        and "resource_tracker" not in " ".join(p.cmdline())
    ]  # multiprocessing's helper, as before
    assert left == [], [p.cmdline() for p in left]
    assert record(sweep_dir / str(HANG_JOB + 1))["status"] == "ok"


@pytest.mark.slow
def test_resume_reruns_exactly_the_failed_jobs(failure_sweep: tuple) -> None:
    sweep_dir, *_ = failure_sweep
    before = {num: record(sweep_dir / str(num)) for num in range(len(FAULTS))}
    # Without resume, a second sweep into the same directory overwrites nothing.
    refused = run_py(
        "-m", "fault=" + ",".join(["{kind:none}"] * len(FAULTS)), *TWO_RANKS, f"hydra.sweep.dir={sweep_dir}"
    )
    assert refused.returncode == 2  # a folder refused, as every refusal before launch
    assert f"{sweep_dir / '0' / 'metrics.json'} already exists" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert {num: record(sweep_dir / str(num)) for num in before} == before

    proc = run_py(
        "-m",
        "fault=" + ",".join(["{kind:none}"] * len(FAULTS)),
        *TWO_RANKS,
        "resume=true",
        f"hydra.sweep.dir={sweep_dir}",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert summary(proc.stdout).startswith("flopsweep summary: 4 ok, 0 oom, 0 error, 0 invalid, 3 skipped")
    assert proc.stdout.count("launching 2 ranks") == 4
    for num, old in before.items():
        new = record(sweep_dir / str(num))
        assert new["status"] == "ok"
        if old["status"] == "ok":
            assert new == old  # skipped: the record is untouched
            continue
        assert new["run"]["id"] != old["run"]["id"]
        aside = sweep_dir / str(num) / f"metrics.{old['status']}-{old['run']['id']}.json"
        assert json.loads(aside.read_text()) == old  # the failed record is kept, under a new name


@pytest.mark.slow
def test_fail_fast_stops_after_the_first_failed_job(tmp_path: Path) -> None:
    proc = run_py(
        "-m",
        "fault.kind=none,raise,none",
        "fault.phase=warmup",
        "fail_fast=true",
        *ONE_RANK,
        f"hydra.sweep.dir={tmp_path}",
    )
    assert proc.returncode == 1
    assert record(tmp_path / "0")["status"] == "ok"
    assert record(tmp_path / "1")["status"] == "error"
    assert not (tmp_path / "2").exists()
    assert "fail_fast=true stopped the sweep" in proc.stderr and "Traceback" not in proc.stderr
    assert summary(proc.stdout).startswith("flopsweep summary: 1 ok, 0 oom, 1 error, 0 invalid, 0 skipped")


def _ranks(step_time_s: float, steps: int) -> list[dict]:
    return [
        {
            "rank": r,
            "device": "NVIDIA H200",
            "step_times_s": [step_time_s] * steps,
            "losses": [10.0] * (steps + 1),
            "peak_cuda_allocated_bytes": 2**30,
            "peak_cuda_reserved_bytes": 2**31,
            "peak_host_rss_bytes": 2**30,
        }
        for r in range(2)
    ]


def _h200_cfg(measure: int = 2) -> RunConfig:
    model = ModelConfig(name="gpt-1.3b", n_layer=24, n_embd=2048, n_head=16, seq_len=2048, vocab_size=50304)
    return RunConfig(
        model=model,
        device="cuda",
        nproc_per_node="2",
        backend=FSDPConfig(),
        steps=fconfig.StepsConfig(warmup=1, measure=measure),
    )


H100_OOM = (  # torch's CUDA out-of-memory message, as an H100 run recorded it
    "CUDA out of memory. Tried to allocate 1024.00 MiB. GPU 0 has a total capacity of 79.18 GiB of which "
    "322.19 MiB is free."
)


def _run() -> dict:
    return {"id": "x", "started_at": None, "finished_at": None, "overrides": [], "job_num": 0}


def test_recorded_puts_the_estimate_under_run_before_run_and_nulls_every_metric(
    tmp_path: Path, hydra_compose
) -> None:
    plan = make_plan(hydra_compose(TWO_RANKS))
    expected = round(estimate(plan.cfg, plan.layout).total_gib, 6)
    err = error_info("OutOfMemoryError", H100_OOM, "warmup", 0)
    (tmp_path / "oom").mkdir()
    job = JobResult(
        path=tmp_path / "oom" / "metrics.json",
        cfg=plan.cfg,
        run=_run(),
        plan=plan,
        layout=plan.layout,
        predicted_peak_gib=expected,
    )
    job.outcome = Outcome("oom", error=err)
    made = recorded(measured(job))
    assert made["status"] == "oom" and all(v is None for v in made["metrics"].values())
    assert made["run"]["before_run"]["predicted_peak_gib"] == expected > 0
    # forecast's prediction without the ranks' probes (none reported)
    prediction = forecast.prediction(plan.cfg, plan.layout, [], gpus_per_node=2, device_name="cpu")
    assert made["run"]["before_run"]["predicted"] == prediction and isinstance(prediction["source"], str)
    assert read_record(tmp_path / "oom" / "metrics.json") == made
    own = levers_line(plan.cfg)  # the estimate fits the 79.2 GiB: the config's own levers, unestimated
    assert made["warnings"][-1] == oom_estimate_line(
        expected, err, own
    )  # the estimate beside the GPU's memory
    assert made["warnings"][-1].endswith(f"Fix: {own}") and "activation_checkpointing=full" in own
    # refused before the launch's checks (no layout): the key is there, null
    (tmp_path / "cfg").mkdir()
    refused = JobResult(path=tmp_path / "cfg" / "metrics.json", cfg=plan.cfg, run=_run(), plan=plan)
    made = recorded(refused.fail("invalid", error_info("ConfigError", "x", "config")))
    assert made["run"]["before_run"] is None and made["metrics"] == null_metrics()


def _outcome_record(tmp_path: Path, cfg: RunConfig, ranks: list[dict]) -> dict:
    run = {"id": "x", "started_at": None, "finished_at": None, "overrides": [], "job_num": None}
    outcome = Outcome("ok", ranks=ranks)
    job = JobResult(
        path=tmp_path / "metrics.json", cfg=cfg, run=run, layout=Layout.data_parallel(2), outcome=outcome
    )
    return recorded(measured(job))


def test_plausible_h200_step_is_ok(tmp_path: Path) -> None:
    # 0.15 s per step of gpt-1.3b, micro batch 4 on 2 ranks: 1.46e14 FLOPs, about 487 TFLOPs per
    # device, under the 989.4 peak.
    r = _outcome_record(tmp_path, _h200_cfg(), _ranks(0.15, 2))
    assert r["status"] == "ok" and r["metrics"]["tflops_per_device"] == pytest.approx(487, rel=0.01)


def test_step_faster_than_the_peak_allows_is_invalid(tmp_path: Path) -> None:
    cfg = _h200_cfg()
    assert sanity_problem(cfg, compute_metrics(cfg, _ranks(0.01, 2))) is not None
    r = _outcome_record(tmp_path, cfg, _ranks(0.01, 2))
    assert r["status"] == "invalid" and r["error"]["type"] == "TimingSanity"
    assert "1.05 x the datasheet peak" in r["error"]["message"]
    # every metric null; the prediction made before the run (from the ranks' probes: the datasheet's GEMM
    # here) is run.before_run's, with no estimate (this job was not planned: no predicted_peak_gib)
    assert r["metrics"] == null_metrics()
    assert r["run"]["before_run"]["predicted"]["iteration_time_s"] > 0
    assert r["run"]["before_run"]["predicted_peak_gib"] is None


def test_fewer_steps_than_asked_is_invalid(tmp_path: Path) -> None:
    r = _outcome_record(tmp_path, _h200_cfg(measure=5), _ranks(0.15, 3))
    assert r["status"] == "invalid" and "measured 3 steps but steps.measure=5" in r["error"]["message"]
    assert r["metrics"]["tflops_per_device"] is None


WRITER = """
import os, sys
from flopsweep.files import WRITE_PAUSE_ENV, atomic_write_json
payload = {"values": list(range(300_000)), "n": 0}
atomic_write_json(sys.argv[1], payload, overwrite=False)  # a whole first record
payload["n"] = 1
os.environ[WRITE_PAUSE_ENV] = "600"
atomic_write_json(sys.argv[2], payload, overwrite=sys.argv[3] == "1")  # paused in its write window
"""


@pytest.mark.slow
@pytest.mark.parametrize("overwrite", [False, True])
def test_killed_writer_leaves_a_whole_record_or_none(tmp_path: Path, overwrite: bool) -> None:
    """SIGKILL a writer inside its write window (a test hook pauses it there, no timing race):
    a new record is absent, a record being replaced is still the whole old one."""
    first, second = tmp_path / "a" / "metrics.json", tmp_path / "b" / "metrics.json"
    first.parent.mkdir()
    second.parent.mkdir()
    target = first if overwrite else second  # overwrite: replace the first record in place
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(first), str(target), "1" if overwrite else "0"],
        cwd=ROOT,
        stderr=subprocess.DEVNULL,
    )
    try:
        paused = []
        while not paused and proc.poll() is None:  # the hook's marker, not a clock, says when
            paused = list(target.parent.glob(".metrics.json.*.tmp.paused"))
            time.sleep(0.05)
        assert paused, f"the writer exited ({proc.returncode}) before its write window"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert list(target.parent.glob(".metrics.json.*.tmp"))  # killed mid-write: the temp file is left
    if overwrite:
        data = json.loads(first.read_text())
        assert data["values"] == list(range(300_000)) and data["n"] == 0  # the old record, whole
    else:
        assert not second.exists()


@pytest.mark.slow
def test_two_sweeps_started_together_get_two_directories(tmp_path: Path) -> None:
    """Default settings (no hydra.sweep.dir): the per-process uid keeps the sweeps apart."""
    cmd = [sys.executable, RUN_PY, "-m", "seed=0,1", "model.n_layer=1", *ONE_RANK]
    procs = [
        subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    sweeps = sorted(p for p in tmp_path.glob("multirun/*/*") if p.is_dir())  # not the lock files
    assert len(sweeps) == 2
    records = [json.loads(p.read_text()) for s in sweeps for p in sorted(s.rglob("metrics.json"))]
    assert len(records) == 4 and {r["status"] for r in records} == {"ok"}
    assert len({r["run"]["id"] for r in records}) == 4
    assert sorted(r["config"]["seed"] for r in records) == [0, 0, 1, 1]


@pytest.mark.slow
def test_override_with_a_comma_stays_one_value(tmp_path: Path) -> None:
    proc = run_py("-m", 'tag="a,b"', *ONE_RANK, f"hydra.sweep.dir={tmp_path}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = record(tmp_path / "0")
    assert r["config"]["tag"] == "a,b"
    applied = yaml.safe_load((tmp_path / "0" / ".hydra" / "overrides.yaml").read_text())
    assert r["run"]["overrides"] == applied
    assert len([o for o in applied if o.startswith("tag=")]) == 1


@pytest.mark.slow
def test_a_failed_run_writes_only_inside_its_directory(tmp_path: Path) -> None:
    proc = run_py("hydra.run.dir=out/run", "fault.kind=raise", "fault.phase=measure", *ONE_RANK, cwd=tmp_path)
    assert proc.returncode == 1 and "flopsweep: error: injected fault" in proc.stderr
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    # nothing outside the run directory: its lock, beside it, is unlinked by its holder at the end
    outside = [name for name in written if not name.startswith("out/run/")]
    assert written and outside == [], written
    assert "out/run/traceback_rank0.txt" in written and "out/run/metrics.json" in written


# (overrides, key named in the message, where it is refused: "compose": Hydra (exit 1); "invalid":
# validate (exit 2; a single run writes no record, a sweep's job an invalid one); "option": run.py, a key
# of another option (exit 2);
# "refused": run.py before Hydra starts, no record (exit 2): a value of the wrong type, null or a list
# for a typed key, a group given no option name, flopsweep.overrides)
BAD_INPUTS = [
    # wrong types
    (["batch.micro_batch_size=abc"], "batch.micro_batch_size", "refused"),
    (["model.n_layer=2.5"], "model.n_layer", "refused"),
    (["steps.measure=true"], "steps.measure", "refused"),
    (["activation_checkpointing=maybe"], "activation_checkpointing", "refused"),
    (["timeout_s=soon"], "timeout_s", "refused"),
    (["backend=deepspeed", "backend.zero_stage=[1,2]"], "backend.zero_stage", "refused"),
    (["backend.zero_stage=2"], "backend.zero_stage", "option"),  # a key of backend=deepspeed only
    (["attention.window_blocks=0"], "attention.window_blocks", "option"),
    (
        ["batch.micro_batch_size=300", "batch.max_micro_batch_size=400"],
        "batch.max_micro_batch_size",
        "option",
    ),
    (["optim.lr=fast"], "optim.lr", "refused"),
    (["resume=perhaps"], "resume", "refused"),
    (["nproc_per_node=two"], "nproc_per_node", "invalid"),
    # out of range
    (["model.n_embd=130"], "model.n_embd", "refused"),  # before Hydra since session 24 (model_identity)
    (
        ["model.n_head=0"],
        "model.n_head",
        "refused",
    ),  # a family's size: before Hydra since session 26 (value_sets)
    (["backend=deepspeed", "backend.zero_stage=4"], "backend.zero_stage", "invalid"),
    (
        ["batch.micro_batch_size=0"],
        "batch.micro_batch_size",
        "refused",
    ),  # a lower bound: before Hydra (lower_bounds)
    (["batch.grad_accum=-1"], "batch.grad_accum", "refused"),  # a lower bound: before Hydra (lower_bounds)
    (["steps.measure=0"], "steps.measure", "refused"),  # a lower bound: before Hydra (lower_bounds)
    (["steps.warmup=-2"], "steps.warmup", "refused"),  # a lower bound: before Hydra (lower_bounds)
    (["timeout_s=0"], "timeout_s", "refused"),  # a lower bound: before Hydra (lower_bounds)
    (["timeout_s=inf"], "timeout_s", "refused"),  # a float out of range: before Hydra (checks.number_problem)
    (["optim.lr=-0.1"], "optim.lr", "refused"),
    (["optim.beta2=1.5"], "optim.beta2", "refused"),
    (["optim.eps=nan"], "optim.eps", "refused"),
    (["seed=-1"], "seed", "refused"),  # a lower bound: before Hydra (lower_bounds)
    (["backend=ddp", "nproc_per_node=0"], "nproc_per_node", "refused"),  # before Hydra (placement_problem)
    # lower bounds the value alone decides (flopsweep.lower_bounds.MIN_BY_KEY): before Hydra, session 25
    (["nnodes=0"], "nnodes", "refused"),
    (["steps.max_extra_warmup=-1"], "steps.max_extra_warmup", "refused"),
    (["search.memory_budget_gib=0"], "search.memory_budget_gib", "refused"),
    (["loss.chunk_tokens=-4"], "loss.chunk_tokens", "refused"),
    (["parallel.tp=0"], "parallel.tp", "refused"),
    (["attention=blocksparse", "attention.block_size=0"], "attention.block_size", "refused"),
    (["timeout_s=-1e-9"], "timeout_s", "refused"),
    (["nnodes=2"], "nnodes", "refused"),  # no launcher gives nodes: before Hydra (placement_problem)
    (["backend=deepspeed", "backend.reduce_bucket_size=1.5"], "backend.reduce_bucket_size", "invalid"),
    (
        ["backend=deepspeed", "backend.stage3_prefetch_bucket_size=-1"],
        "backend.stage3_prefetch_bucket_size",
        "invalid",
    ),
    (["fault.kind=segfault"], "fault.kind", "refused"),  # a name outside its set: before Hydra (value_sets)
    (["fault.kind=raise", "fault.phase=shutdown"], "fault.phase", "refused"),
    (["fault.kind=raise", "fault.rank=5"], "fault.rank", "invalid"),
    # unknown group options and keys
    (["model=gpt-42b"], "model", "refused"),
    (["backend=zero9"], "backend", "refused"),
    (["attention=flash3"], "attention", "refused"),
    (["precision=fp4"], "precision", "refused"),
    (["+sweep=nope"], "+sweep", "refused"),
    (["model.n_layers=3"], "model.n_layers", "refused"),
    (["++model.n_layers=3"], "model.n_layers", "refused"),  # no key of the option's schema: before Hydra
    (["+model._target_=os.system"], "model._target_", "refused"),
    (["+_target_=builtins.exec"], "_target_", "refused"),  # no key of the schema: before Hydra
    # inconsistent combinations
    (["backend=single", "nproc_per_node=2"], "backend", "invalid"),
    (["precision=fp16"], "precision", "invalid"),
    (["attention=sdpa-flash"], "attention", "invalid"),
    (["device=cuda"], "device", "invalid"),
    # commas, quotes and spaces
    (["nproc_per_node=1,2"], "nproc_per_node", "refused"),  # a sweep without -m (was Hydra's "Ambiguous")
    (["tag=a,b"], "tag", "refused"),
    (["tag=ünïcødé"], "tag", "refused"),  # Hydra's grammar: non-ASCII unquoted (session 20)
    (["model.n_layer=[2"], "model.n_layer", "refused"),
    (["hydra.job.chdri=true"], "hydra.job.chdri", "refused"),  # a hydra.* key no schema has
    (["hydra.sweeper.eta=3"], "hydra.sweeper.eta", "refused"),  # the tuner's, not the basic sweeper's
    (['model.n_layer="2, 3"'], "model.n_layer", "refused"),
    (['device="cpu, cuda"'], "device", "refused"),  # a name outside its set: before Hydra (value_sets)
    (["attention.name='sdpa flash'"], "attention.name", "refused"),
    (["backend=ddp", 'nproc_per_node="2 3"'], "nproc_per_node", "invalid"),
    (["precision.name='bf16\"'"], "precision.name", "refused"),
    (['backend.name="ddp, fsdp"'], "backend.name", "refused"),
    # issue 14: interpolations, output directories, rank counts (classes 7, 8, 11, 12, 13)
    (["tag=${oc.env:FLOPSWEEP_SURELY_UNSET_VAR}"], "tag", "refused"),
    (["tag=${tag}"], "tag", "refused"),
    (["hydra.run.dir=/proc/flopsweep-nope"], "hydra.run.dir", "refused"),
    (["hydra.run.dir=/dev/null"], "hydra.run.dir", "refused"),
    (["hydra.run.dir="], "hydra.run.dir", "refused"),
    (["hydra.sweep.subdir=../x"], "hydra.sweep.subdir", "refused"),
    (["batch.micro_batch_size=sort(range(1,6,2),reverse=true)"], "batch.micro_batch_size", "refused"),
    (["backend=ddp", "device=cpu", "nproc_per_node=100000"], "nproc_per_node", "refused"),  # 4 a core
]


def _cpu_device(overrides: list[str]) -> list[str]:
    return (
        overrides
        if any(o.lstrip("+").startswith(("device=", "device.")) for o in overrides)
        else [*overrides, "device=cpu"]
    )


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_while_the_record_is_written_waits_for_it(tmp_path: Path, sig: int, code: int) -> None:
    """SIGTERM (a scheduler's preemption) or Ctrl-C inside the write window: the record is
    finished first, and the message names it. A test hook pauses the writer in that window."""
    from flopsweep.files import WRITE_PAUSE_ENV

    proc = subprocess.Popen(
        [sys.executable, RUN_PY, "device=cpu", f"hydra.run.dir={tmp_path}"],
        cwd=ROOT,
        env={**os.environ, WRITE_PAUSE_ENV: "20"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while proc.poll() is None and not list(tmp_path.glob(".metrics.json.*.tmp.paused")):
            time.sleep(0.05)  # the hook's marker says when the writer is inside the window
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == code, err[-2000:]
    record = json.loads((tmp_path / "metrics.json").read_text())
    assert record["status"] == "ok"  # the run had finished; the signal did not cost its record
    assert f"recorded (ok) in {tmp_path / 'metrics.json'}" in err and "Traceback" not in err


@pytest.mark.slow
def test_refused_rerun_leaves_the_run_directory_untouched(tmp_path: Path) -> None:
    """A re-run into a directory that holds a record is refused before Hydra rewrites .hydra/."""
    first = run_py("device=cpu", "seed=0", f"hydra.run.dir={tmp_path}", timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    before = {p.name: p.read_text() for p in (tmp_path / ".hydra").iterdir()}
    again = run_py("device=cpu", "seed=3", f"hydra.run.dir={tmp_path}", timeout=120)
    assert again.returncode == 2 and "refusing to overwrite" in again.stderr
    assert {p.name: p.read_text() for p in (tmp_path / ".hydra").iterdir()} == before

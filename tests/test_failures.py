"""Issue 4, sweeps that lose nothing: failures become records, jobs are isolated,
writes are atomic, sweeps resume, and bad input gets a clear error.

The end-to-end tests run ``python run.py`` in a subprocess with real gloo ranks on
the CPU and faults injected with the test-only ``fault`` config.
"""

from __future__ import annotations

import ast
import concurrent.futures
import dataclasses
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from helpers import ROOT, RUN_PY, make_plan, run_py, validate

from flopsweep import config as fconfig
from flopsweep.backends import FSDPConfig
from flopsweep.config import BackendConfig, ConfigError, FaultConfig, ModelConfig, RunConfig
from flopsweep.files import RecordExistsError, atomic_write_json
from flopsweep.job import ok_record, set_aside
from flopsweep.job.records import measured, recorded
from flopsweep.job.result import JobResult
from flopsweep.launch import Outcome, collect, launch_local
from flopsweep.layout import Layout
from flopsweep.metrics import compute_metrics, sanity_problem

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
    return json.loads((job_dir / "metrics.json").read_text())


def summary(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith("flopsweep summary: "))


# ------------------------------------------------------------- the failure sweep

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


@pytest.fixture(scope="module")
def failure_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    sweep_dir = tmp_path_factory.mktemp("failures")
    faults = ",".join(f for f, *_ in FAULTS)
    proc = run_py(
        "-m", f"fault={faults}", *TWO_RANKS, f"timeout_s={TIMEOUT_S}", f"hydra.sweep.dir={sweep_dir}"
    )
    return sweep_dir, proc


@pytest.mark.slow
def test_failure_sweep_records_every_job(failure_sweep: tuple[Path, subprocess.CompletedProcess]) -> None:
    sweep_dir, proc = failure_sweep
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert summary(proc.stdout).startswith("flopsweep summary: 3 ok, 1 oom, 3 error, 0 invalid, 0 skipped")
    for num, (_, status, kind, phase, rank) in enumerate(FAULTS):
        r = record(sweep_dir / str(num))
        assert r["status"] == status, (num, r["error"])
        if status == "ok":
            assert r["error"] is None
            continue
        assert all(value is None for value in r["metrics"].values())
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
def test_jobs_after_a_fault_measure_as_a_fresh_process(
    failure_sweep: tuple[Path, subprocess.CompletedProcess], tmp_path: Path
) -> None:
    """Isolation: a clean job after OOM, error, kill and hang equals a run in a fresh process."""
    sweep_dir, _ = failure_sweep
    proc = run_py(*TWO_RANKS, f"hydra.run.dir={tmp_path}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    fresh = record(tmp_path)["metrics"]
    for num in (1, 5):
        m = record(sweep_dir / str(num))["metrics"]
        assert (m["loss_first"], m["loss_last"]) == (fresh["loss_first"], fresh["loss_last"])
        assert len(m["iteration_time_s"]["values"]) == len(fresh["iteration_time_s"]["values"]) == 2


@pytest.mark.slow
def test_resume_reruns_exactly_the_failed_jobs(
    failure_sweep: tuple[Path, subprocess.CompletedProcess],
) -> None:
    sweep_dir, _ = failure_sweep
    before = {num: record(sweep_dir / str(num)) for num in range(len(FAULTS))}
    # Without resume, a second sweep into the same directory overwrites nothing.
    refused = run_py(
        "-m", "fault=" + ",".join(["{kind:none}"] * len(FAULTS)), *TWO_RANKS, f"hydra.sweep.dir={sweep_dir}"
    )
    assert refused.returncode == 1
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


@pytest.mark.slow
def test_hang_stops_every_worker_and_leaves_no_process(tmp_path: Path) -> None:
    p = make_plan(
        RunConfig(
            device="cpu",
            nproc_per_node="2",
            backend=BackendConfig(name="ddp"),
            timeout_s=45,  # the ranks must reach "init" first, even on a loaded machine
            fault=FaultConfig(kind="hang", rank=1, phase="init"),
        )
    )
    outcome = launch_local(p, tmp_path)
    assert outcome.status == "error"
    assert outcome.error["type"] == "Timeout" and outcome.error["phase"] == "init"
    assert "all 2 workers were stopped" in outcome.error["message"]
    left = [
        p
        for p in psutil.Process().children(recursive=True)
        if "resource_tracker" not in " ".join(p.cmdline())
    ]  # multiprocessing's helper stays
    assert left == [], [p.cmdline() for p in left]


# ------------------------------------------------------------- the cause of a failure


def _scratch(tmp_path: Path, phases: dict[int, str], errors: dict[int, dict]) -> Path:
    for rank, phase in phases.items():
        (tmp_path / f"rank{rank}_phase.txt").write_text(phase)
    for rank, fields in errors.items():
        error = {
            "type": "RuntimeError",
            "message": "x",
            "phase": phases[rank],
            "rank": rank,
            "traceback": None,
            "oom": False,
            "time": 1.0,
            **fields,
        }
        (tmp_path / f"rank{rank}_error.json").write_text(json.dumps(error))
    return tmp_path


def test_oom_on_rank_1_wins_over_the_collective_error_it_caused_on_rank_0(tmp_path: Path) -> None:
    scratch = _scratch(
        tmp_path,
        {0: "measure", 1: "measure"},
        {
            0: {"type": "DistBackendError", "time": 1.0},
            1: {"type": "OutOfMemoryError", "oom": True, "time": 1.5},
        },
    )
    outcome = collect(scratch, {0: 1, 1: 1}, 2)
    assert outcome.status == "oom" and outcome.error["rank"] == 1 and outcome.error["phase"] == "measure"
    assert "oom" not in outcome.error and "time" not in outcome.error


def test_earliest_error_is_the_cause(tmp_path: Path) -> None:
    scratch = _scratch(
        tmp_path,
        {0: "warmup", 1: "warmup"},
        {0: {"type": "DistBackendError", "time": 2.0}, 1: {"type": "ValueError", "time": 1.0}},
    )
    outcome = collect(scratch, {0: 1, 1: 1}, 2)
    assert outcome.status == "error" and outcome.error["type"] == "ValueError" and outcome.error["rank"] == 1


def test_a_signal_names_the_killed_rank_not_the_peer_that_failed_after(tmp_path: Path) -> None:
    scratch = _scratch(tmp_path, {0: "measure", 1: "warmup"}, {0: {"type": "DistBackendError"}})
    outcome = collect(scratch, {0: 1, 1: -signal.SIGKILL}, 2)
    assert outcome.status == "error" and outcome.error["type"] == "WorkerKilled"
    assert outcome.error["rank"] == 1 and outcome.error["phase"] == "warmup"
    assert "SIGKILL" in outcome.error["message"]


def test_an_injected_kill_is_named_and_a_real_one_points_at_the_oom_killer(tmp_path: Path) -> None:
    """A rank killed by fault.kind=kill was reported as "often the kernel's OOM killer": the rank now
    leaves a note of its injection in the scratch folder, which the record's message names."""
    from flopsweep.files import atomic_write_json
    from flopsweep.worker import injected_file

    scratch = _scratch(tmp_path, {0: "measure", 1: "warmup"}, {})
    real = collect(scratch, {0: 1, 1: -signal.SIGKILL}, 2)
    assert real.error["message"].startswith("rank 1 was killed by SIGKILL (often the kernel's OOM killer")
    atomic_write_json(scratch / injected_file(1), {"message": "injected fault: kill on rank 1 in warmup"})
    injected = collect(scratch, {0: 1, 1: -signal.SIGKILL}, 2)
    assert (
        injected.error["message"] == "rank 1 was killed by SIGKILL (injected fault: kill on rank 1 in warmup)"
    )
    (scratch / injected_file(1)).unlink()
    (scratch / injected_file(1)).symlink_to(tmp_path / "elsewhere")  # never followed
    assert "OOM killer" in collect(scratch, {0: 1, 1: -signal.SIGKILL}, 2).error["message"]


def test_timeout_and_silent_exits(tmp_path: Path) -> None:
    scratch = _scratch(tmp_path, {0: "measure", 1: "warmup"}, {})
    timeout = collect(scratch, {}, 2, timeout_s=7.0)
    assert timeout.error["type"] == "Timeout" and "timeout_s=7" in timeout.error["message"]
    assert (timeout.error["phase"], timeout.error["rank"]) == ("warmup", 1)  # the rank that is behind
    died = collect(scratch, {0: 0, 1: 3}, 2)
    assert died.error["rank"] == 1 and "exited with code 3" in died.error["message"]
    no_result = collect(scratch, {0: 0, 1: 0}, 2)
    assert no_result.status == "error" and "without a result" in no_result.error["message"]


# ------------------------------------------------------------- timing sanity


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
    assert "exceeds 1.05 x the datasheet peak" in r["error"]["message"]
    assert all(value is None for value in r["metrics"].values())


def test_fewer_steps_than_asked_is_invalid(tmp_path: Path) -> None:
    r = _outcome_record(tmp_path, _h200_cfg(measure=5), _ranks(0.15, 3))
    assert r["status"] == "invalid" and "measured 3 steps but steps.measure=5" in r["error"]["message"]
    assert r["metrics"]["tflops_per_device"] is None


# ------------------------------------------------------------- atomic, unique, never overwritten

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


def test_refuses_to_overwrite_and_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    atomic_write_json(path, {"status": "ok"}, overwrite=False)
    with pytest.raises(RecordExistsError, match=str(path)):
        atomic_write_json(path, {"status": "error"}, overwrite=False)
    assert json.loads(path.read_text()) == {"status": "ok"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]  # no temporary file left


def test_set_aside_keeps_the_old_record_and_its_tracebacks(tmp_path: Path) -> None:
    old = {"status": "oom", "run": {"id": "abc"}, "config": {}}
    (tmp_path / "metrics.json").write_text(json.dumps(old))
    (tmp_path / "traceback_rank1.txt").write_text("tb")
    (tmp_path / "batch_search" / "mbs1").mkdir(parents=True)
    (tmp_path / "batch_search" / "mbs1" / "traceback_rank0.txt").write_text("probe tb")
    aside = set_aside(tmp_path / "metrics.json")
    assert aside == tmp_path / "metrics.oom-abc.json" and json.loads(aside.read_text()) == old
    assert (tmp_path / "traceback_rank1.oom-abc.txt").read_text() == "tb"
    # batch=auto's probes go aside with the record they belong to.
    assert (tmp_path / "batch_search.oom-abc" / "mbs1" / "traceback_rank0.txt").read_text() == "probe tb"
    assert not (tmp_path / "batch_search").exists()
    assert not (tmp_path / "metrics.json").exists() and set_aside(tmp_path / "metrics.json") is None


def test_ok_record_matches_config_but_not_run_control_keys(tmp_path: Path) -> None:
    cfg = validate(RunConfig(device="cpu"))
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({"status": "ok", "run": {"id": "a"}, "config": dataclasses.asdict(cfg)}))
    again = dataclasses.replace(cfg, resume=True, timeout_s=5.0, fault=FaultConfig(kind="none", rank=3))
    assert ok_record(path, again) is not None
    assert ok_record(path, dataclasses.replace(cfg, seed=1)) is None
    path.write_text("{not json")
    assert ok_record(path, cfg) is None


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


# ------------------------------------------------------------- overrides verbatim, untrusted input


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
    # besides the run directory only its lock, beside it (the real directory's, issue 30 class 6)
    outside = [name for name in written if not name.startswith("out/run/")]
    assert written and outside == ["out/.run.flopsweep-lock"], written
    assert "out/run/traceback_rank0.txt" in written and "out/run/metrics.json" in written


def test_loading_results_never_unpickles(tmp_path: Path) -> None:
    from analysis import load

    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.json").write_bytes(pickle.dumps(Evil()))
    df = load(tmp_path)
    assert df.empty and list(df.attrs["unreadable"]) == [str(tmp_path / "run" / "metrics.json")]
    assert not marker.exists()


FORBIDDEN_CALLS = {
    "eval",
    "exec",
    "compile",
    "instantiate",
    "get_class",
    "get_method",
    "import_module",
    "__import__",
    "Unpickler",
}
FORBIDDEN_MODULES = {"pickle", "marshal", "dill", "shelve", "hydra.utils"}


@pytest.mark.parametrize("package", ["flopsweep", "analysis"])
def test_no_code_path_evaluates_or_instantiates_config(package: str) -> None:
    """No eval/exec, no hydra.utils.instantiate, no pickle; the only ``load``/``loads`` is JSON's; the
    only import by name is :mod:`flopsweep.lazy`'s, which loads modules of flopsweep alone."""
    lazy = ROOT / "flopsweep" / "lazy.py"
    for path in sorted((ROOT / package).rglob("*.py")):
        forbidden = FORBIDDEN_CALLS - {"import_module"} if path == lazy else FORBIDDEN_CALLS
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = {a.name for a in node.names} | {getattr(node, "module", None) or ""}
                assert not names & FORBIDDEN_MODULES, (path, names)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in forbidden, (path, ast.unparse(node))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                where = f"{path.name}: {ast.unparse(node)}"
                assert node.func.attr not in forbidden - {"compile"}, where  # model.compile() is fine
                if node.func.attr in ("load", "loads"):
                    assert ast.unparse(node.func.value) == "json", where


@pytest.mark.parametrize(
    "path",
    ["os", "json", "tests.conftest", "multiprocessing.spawn", "flopsweep_evil", "flopsweep.x;y", ".models"],
)
def test_lazy_loads_only_modules_of_flopsweep(path: str) -> None:
    """A spec's torch path outside the package (or not a dotted name) is refused before any import."""
    from flopsweep import lazy, text

    before = set(sys.modules)
    with pytest.raises(ValueError, match="only modules of the flopsweep package"):
        lazy.resolve(path + ":x")
    assert set(sys.modules) - before == set()
    assert lazy.resolve("flopsweep.text:printable") is text.printable


# ------------------------------------------------------------- bad input

# (overrides, key named in the message, where it is refused: "compose": Hydra (exit 1); "invalid":
# validate, with an invalid record (exit 2); "option": run.py, a key of another option (exit 2);
# "refused": run.py before Hydra starts, no record (exit 2))
BAD_INPUTS = [
    # wrong types
    (["batch.micro_batch_size=abc"], "batch.micro_batch_size", "compose"),
    (["model.n_layer=2.5"], "model.n_layer", "compose"),
    (["steps.measure=true"], "steps.measure", "compose"),
    (["activation_checkpointing=maybe"], "activation_checkpointing", "compose"),
    (["timeout_s=soon"], "timeout_s", "compose"),
    (["backend=deepspeed", "backend.zero_stage=[1,2]"], "backend.zero_stage", "compose"),
    (["backend.zero_stage=2"], "backend.zero_stage", "option"),  # a key of backend=deepspeed only
    (["attention.window_blocks=0"], "attention.window_blocks", "option"),
    (
        ["batch.micro_batch_size=300", "batch.max_micro_batch_size=400"],
        "batch.max_micro_batch_size",
        "option",
    ),
    (["optim.lr=fast"], "optim.lr", "compose"),
    (["resume=perhaps"], "resume", "compose"),
    (["nproc_per_node=two"], "nproc_per_node", "invalid"),
    # out of range
    (["model.n_embd=130"], "model.n_embd", "invalid"),
    (["model.n_head=0"], "model.n_head", "invalid"),
    (["backend=deepspeed", "backend.zero_stage=4"], "backend.zero_stage", "invalid"),
    (["batch.micro_batch_size=0"], "batch.micro_batch_size", "invalid"),
    (["batch.grad_accum=-1"], "batch.grad_accum", "invalid"),
    (["steps.measure=0"], "steps.measure", "invalid"),
    (["steps.warmup=-2"], "steps.warmup", "invalid"),
    (["timeout_s=0"], "timeout_s", "invalid"),
    (["timeout_s=inf"], "timeout_s", "invalid"),
    (["optim.lr=-0.1"], "optim.lr", "invalid"),
    (["optim.beta2=1.5"], "optim.beta2", "invalid"),
    (["optim.eps=nan"], "optim.eps", "invalid"),
    (["seed=-1"], "seed", "invalid"),
    (["backend=ddp", "nproc_per_node=0"], "nproc_per_node", "invalid"),
    (["nnodes=2"], "nnodes", "invalid"),
    (["backend=deepspeed", "backend.reduce_bucket_size=1.5"], "backend.reduce_bucket_size", "invalid"),
    (
        ["backend=deepspeed", "backend.stage3_prefetch_bucket_size=-1"],
        "backend.stage3_prefetch_bucket_size",
        "invalid",
    ),
    (["fault.kind=segfault"], "fault.kind", "invalid"),
    (["fault.kind=raise", "fault.phase=shutdown"], "fault.phase", "invalid"),
    (["fault.kind=raise", "fault.rank=5"], "fault.rank", "invalid"),
    # unknown group options and keys
    (["model=gpt-42b"], "model", "compose"),
    (["backend=zero9"], "backend", "compose"),
    (["attention=flash3"], "attention", "compose"),
    (["precision=fp4"], "precision", "compose"),
    (["+sweep=nope"], "sweep", "compose"),
    (["model.n_layers=3"], "n_layers", "compose"),
    (["++model.n_layers=3"], "model.n_layers", "invalid"),
    (["+model._target_=os.system"], "model._target_", "invalid"),
    (["+_target_=builtins.exec"], "_target_", "invalid"),
    # inconsistent combinations
    (["backend=single", "nproc_per_node=2"], "backend", "invalid"),
    (["precision=fp16"], "precision", "invalid"),
    (["attention=sdpa-flash"], "attention", "invalid"),
    (["device=cuda"], "device", "invalid"),
    # commas, quotes and spaces
    (["nproc_per_node=1,2"], "nproc_per_node", "compose"),
    (["tag=a,b"], "tag", "compose"),
    (['model.n_layer="2, 3"'], "model.n_layer", "compose"),
    (['device="cpu, cuda"'], "device", "invalid"),
    (["attention.name='sdpa flash'"], "attention.name", "invalid"),
    (["backend=ddp", 'nproc_per_node="2 3"'], "nproc_per_node", "invalid"),
    (["precision.name='bf16\"'"], "precision.name", "invalid"),
    (['backend.name="ddp, fsdp"'], "backend.name", "invalid"),
    # issue 14: interpolations, output directories, rank counts (classes 7, 8, 11, 12, 13)
    (["tag=${oc.env:FLOPSWEEP_SURELY_UNSET_VAR}"], "tag", "refused"),
    (["tag=${tag}"], "tag", "refused"),
    (["hydra.run.dir=/proc/flopsweep-nope"], "hydra.run.dir", "refused"),
    (["hydra.run.dir=/dev/null"], "hydra.run.dir", "refused"),
    (["hydra.run.dir="], "hydra.run.dir", "refused"),
    (["hydra.sweep.subdir=../x"], "hydra.sweep.subdir", "refused"),
    (["batch.micro_batch_size=sort(range(1,6,2),reverse=true)"], "batch.micro_batch_size", "refused"),
    (["backend=ddp", "nproc_per_node=100000"], "nproc_per_node", "invalid"),
]
# Every row but device=cuda runs on the CPU; that row needs a machine without a GPU.
BAD_IDS = [" ".join(overrides) for overrides, _, _ in BAD_INPUTS]


def _cpu_device(overrides: list[str]) -> list[str]:
    return (
        overrides
        if any(o.lstrip("+").startswith(("device=", "device.")) for o in overrides)
        else [*overrides, "device=cpu"]
    )


def test_there_are_enough_bad_inputs() -> None:
    assert len(BAD_INPUTS) >= 30
    assert len(set(BAD_IDS)) == len(BAD_IDS)


@pytest.mark.parametrize(("overrides", "key", "where"), BAD_INPUTS, ids=BAD_IDS)
def test_bad_input_in_process(hydra_compose, overrides: list[str], key: str, where: str) -> None:
    """The fast check: Hydra's compose API refuses it, or validate() names the key."""
    if "device=cuda" in overrides and _has_gpu():
        pytest.skip("needs a machine without a GPU")
    if where == "refused":  # before Hydra starts: the line run.py prints
        from run import refusal

        message = refusal(overrides)
        assert message.startswith(f"Invalid config: {key}=") and "Fix:" in message and "\n" not in message
        return
    try:
        cfg = hydra_compose(_cpu_device(overrides))
    except Exception as exc:  # noqa: BLE001 - Hydra raises several types
        assert where in ("compose", "option"), exc
        assert key.split(".")[-1] in str(exc) or key in str(exc.__cause__), exc
        if where == "option":  # run.py's pre-check refuses it first, naming the option
            from run import foreign_option_keys

            assert "belongs to" in foreign_option_keys(overrides)
        return
    assert where == "invalid", f"{overrides} composed"
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    assert info.value.key == key and "Fix:" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("overrides", "refused"),
    [
        (["-m", "backend=ddp,fsdp", "backend.cpu_offload=true"], "backend=ddp (a command-line"),
        (["-m", "backend=fsdp,zero3", "backend.cpu_offload=true"], "backend=zero3 (a command-line"),
        (["-m", "backend=zero2,zero3", "backend.offload_optimizer=cpu"], None),  # both DeepSpeed
        (["-m", "backend=fsdp", "backend.cpu_offload=true"], None),
    ],
)
def test_a_sweep_over_options_refuses_a_key_that_one_of_them_lacks(
    overrides: list[str], refused: str | None
) -> None:
    """Before, ``backend=ddp,fsdp backend.cpu_offload=true`` passed the check (fsdp has the key) and
    Hydra stopped the sweep at the ddp job with a multi-line error; now one line before any job."""
    from run import foreign_option_keys

    message = foreign_option_keys(overrides)
    if refused is None:
        assert message is None
        return
    assert message.startswith("Invalid config: backend.") and "belongs to backend=" in message
    assert f"not to {refused}" in message and "Fix: drop the override" in message and "\n" not in message


def test_deepspeed_sizes_resolve_to_int_before_launch(hydra_compose) -> None:
    """``5e8`` is a whole number: validate() hands DeepSpeed an int, not a float it would reject."""
    cfg = hydra_compose(
        [
            "backend=deepspeed",
            "backend.reduce_bucket_size=5e8",
            "device=cpu",
            "backend.stage3_param_persistence_threshold=1000",
        ]
    )
    backend = validate(cfg).backend
    assert backend.reduce_bucket_size == 500_000_000 and type(backend.reduce_bucket_size) is int
    assert type(backend.stage3_param_persistence_threshold) is int
    assert backend.stage3_prefetch_bucket_size is None


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


# One subprocess case per exit path (the whole matrix runs in-process above).
EXIT_PATHS = [
    next(case for case in BAD_INPUTS if case[2] == where)
    for where in ("compose", "invalid", "option", "refused")
]
EXIT_IDS = [" ".join(overrides) for overrides, _, _ in EXIT_PATHS]


@pytest.fixture(scope="module")
def bad_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[subprocess.CompletedProcess, Path]]:
    """One bad input per exit path through ``python run.py``, two at a time."""
    base = tmp_path_factory.mktemp("bad")

    def one(i: int) -> tuple[subprocess.CompletedProcess, Path]:
        overrides, _, _ = EXIT_PATHS[i]
        run_dir = base / str(i)
        return run_py(*_cpu_device(overrides), f"hydra.run.dir={run_dir}", timeout=120), run_dir

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(one, range(len(EXIT_PATHS))))
    return dict(zip(EXIT_IDS, results, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize(("overrides", "key", "where"), EXIT_PATHS, ids=EXIT_IDS)
def test_bad_input_exits_nonzero_naming_the_key(bad_runs, overrides: list[str], key: str, where: str) -> None:
    if "device=cuda" in overrides and _has_gpu():
        pytest.skip("needs a machine without a GPU")
    proc, run_dir = bad_runs[" ".join(overrides)]
    output = proc.stdout + proc.stderr
    assert proc.returncode == {"compose": 1, "invalid": 2, "option": 2, "refused": 2}[where], output[-2000:]
    assert "Traceback" not in output
    assert "launching" not in output and "[flopsweep rank" not in output  # no worker started
    assert key in proc.stderr
    if where == "invalid":
        message = proc.stderr.strip().splitlines()[-1]
        assert message.startswith("flopsweep: invalid: Invalid config: ") and key in message
        assert "Fix:" in message
        r = record(run_dir)
        assert r["status"] == "invalid" and r["error"]["phase"] == "config"
    else:  # refused before Hydra composes: no record, one line naming the option it belongs to
        assert not (run_dir / "metrics.json").exists()
        if where == "option":
            assert "belongs to" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
        if where == "refused":
            assert proc.stderr.startswith(f"flopsweep: Invalid config: {key}=") and "Fix:" in proc.stderr
            assert len(proc.stderr.strip().splitlines()) == 1


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
    assert again.returncode == 1 and "refusing to overwrite" in again.stderr
    assert {p.name: p.read_text() for p in (tmp_path / ".hydra").iterdir()} == before


@pytest.mark.parametrize("where", ["/proc/flopsweep-nope", "/dev/null", "FILE/sub"])
def test_unmakeable_run_directory_is_one_line(tmp_path: Path, where: str) -> None:
    from run import output_dir_problem

    (tmp_path / "FILE").write_text("")
    where = where.replace("FILE", str(tmp_path / "FILE"))
    message = output_dir_problem([f"hydra.run.dir={where}"])
    assert message.startswith(f"Invalid config: hydra.run.dir={where}: cannot make the directory")


def test_the_docs_name_every_fault_kind_and_phase_the_config_takes_each_tested() -> None:
    """The README listed ``oom|raise|kill|hang`` while the refusal of ``fault.kind`` names
    ``abort`` and ``nan_loss`` too (a trial): the usage page lists what the config takes, and each kind
    is injected by some test."""
    from helpers import ROOT

    from flopsweep.config import FAULT_KINDS, FAULT_PHASES

    readme = (ROOT / "docs" / "usage.md").read_text()
    assert re.search(r"`fault\.kind=([a-z_|]+)`", readme).group(1).split("|") == list(FAULT_KINDS)
    assert re.search(r"`fault\.phase=([a-z_|]+)`", readme).group(1).split("|") == list(FAULT_PHASES)
    tests = "\n".join(path.read_text() for path in sorted((ROOT / "tests").glob("test_*.py")))
    for kind in FAULT_KINDS[1:]:
        assert re.search(rf"kind:{kind}\b|fault\.kind={kind}\b|kind=\"{kind}\"", tests), kind


@pytest.mark.parametrize("phase", ["init", "teardown"])
def test_a_nan_loss_fault_in_a_phase_without_a_loss_is_refused(phase: str) -> None:
    """fault.kind=nan_loss at init or teardown did nothing (no step runs there) and the run was ok with
    finite losses: it is refused in one line naming the phases that have a loss."""
    cfg = dataclasses.replace(RunConfig(), device="cpu", fault=FaultConfig(kind="nan_loss", phase=phase))
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    assert err.value.key == "fault.phase" and "fault.phase=warmup or fault.phase=measure" in str(err.value)
    assert "\n" not in str(err.value)
    assert validate(dataclasses.replace(cfg, fault=FaultConfig(kind="nan_loss", phase="measure")))

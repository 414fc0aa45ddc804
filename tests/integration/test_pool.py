"""hydra/launcher=pool end to end on the CPU: real sweeps of gpt-tiny through ``run.py``, each job a
process of its own with real gloo ranks. The pinning and the overlap are read from the records
(``system.visible_devices``, ``run.started_at``/``finished_at``), never from the speed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from datetime import datetime
from pathlib import Path

import psutil
import pytest
from helpers import ROOT, RUN_PY, records, run_sweep

TINY = ("device=cpu", "model=gpt-tiny", "steps.warmup=1", "steps.measure=1")


def _span(record: dict) -> tuple[float, float]:
    """The job's [start, end) in seconds (the record's times are whole seconds)."""
    start, end = (datetime.fromisoformat(record["run"][k]).timestamp() for k in ("started_at", "finished_at"))
    return start, end


def _peak(recs: list[dict], weight=lambda r: 1) -> int:
    """The most of ``weight`` (1: jobs; a job's device count: devices) held at one instant, from the
    records' [start, end) intervals; at one time an end counts before a start."""
    events = []
    for r in recs:
        start, end = _span(r)
        events += [(start, weight(r)), (end, -weight(r))]
    now = peak = 0
    for _, delta in sorted(events, key=lambda e: (e[0], e[1])):
        now += delta
        peak = max(peak, now)
    return peak


def _most_at_once(recs: list[dict]) -> int:
    """The most jobs running at one instant."""
    return _peak(recs)


def _most_devices_at_once(recs: list[dict]) -> int:
    """The most devices held at one instant."""
    return _peak(recs, lambda r: len(r["system"]["visible_devices"]))


def _no_device_shared(recs: list[dict]) -> None:
    for a in recs:
        for b in recs:
            if a is b or not set(a["system"]["visible_devices"]) & set(b["system"]["visible_devices"]):
                continue
            (s1, e1), (s2, e2) = _span(a), _span(b)
            assert e1 <= s2 or e2 <= s1, ("two jobs held one device at once", a["run"], b["run"])


@pytest.mark.slow
def test_one_device_jobs_run_two_at_a_time_on_two_slots_and_a_failure_leaves_the_others_ok(
    tmp_path: Path,
) -> None:
    sweep = tmp_path / "sweep"
    args = ("hydra/launcher=pool", "hydra.launcher.slots=[0,1]", *TINY, "nproc_per_node=1")
    args += ("repeats=2", "fault.kind=none,raise", "fault.phase=warmup")  # the failures end early
    proc = run_sweep(sweep, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    recs = records(sweep)
    assert len(recs) == 4
    by_fault = {k: [r for r in recs if r["config"]["fault"]["kind"] == k] for k in ("none", "raise")}
    assert [r["status"] for r in by_fault["none"]] == ["ok", "ok"]
    assert [r["status"] for r in by_fault["raise"]] == ["error", "error"]
    assert all(r["system"]["visible_devices"] in (["0"], ["1"]) for r in recs)
    assert {r["system"]["visible_devices"][0] for r in recs} == {"0", "1"}  # both slots were used
    _no_device_shared(recs)
    assert _most_at_once(recs) == 2  # two at once, never three
    assert proc.stdout.count("flopsweep: pool: job") == 8  # a line per start and per end
    assert "job 0 started on device 0 (1 running, 3 waiting)" in proc.stdout
    assert "flopsweep summary: 2 ok, 0 oom, 2 error, 0 invalid, 0 skipped" in proc.stdout
    for n in range(4):  # each job's own folder, config files and log, as under the basic launcher
        assert {"config.yaml", "hydra.yaml", "overrides.yaml"} <= {
            p.name for p in (sweep / str(n) / ".hydra").iterdir()
        }
        assert (sweep / str(n) / "run.log").is_file()

    again = run_sweep(sweep, *args, "resume=true")  # the ok records are kept, the failed ones run again
    assert again.returncode == 0, again.stderr[-3000:]
    assert "flopsweep summary: 0 ok, 0 oom, 2 error, 0 invalid, 2 skipped" in again.stdout
    assert [r["run"]["id"] for r in records(sweep) if r["status"] == "ok"] == [
        r["run"]["id"] for r in by_fault["none"]
    ]

    table = subprocess.run(
        [sys.executable, "-m", "analysis", str(sweep), "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert table.returncode == 0, table.stderr[-2000:]
    rows = json.loads(table.stdout)
    assert [r["repeats"] for r in rows if r["status"] == "ok"] == [2]  # the ok set-up's two rounds, pooled
    assert [r["status"] for r in rows].count("error") == 2


@pytest.mark.slow
def test_two_device_jobs_on_three_slots_run_one_at_a_time_and_one_device_jobs_fill_the_third(
    tmp_path: Path,
) -> None:
    sweep = tmp_path / "sweep"
    proc = run_sweep(
        sweep,
        "hydra/launcher=pool",
        "hydra.launcher.slots=3",
        *TINY,
        "backend=ddp",
        "nproc_per_node=2,1",
        "seed=0,1",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    recs = records(sweep)  # jobs 0, 1: two ranks; jobs 2, 3: one
    assert [r["status"] for r in recs] == ["ok"] * 4
    assert [r["system"]["world_size"] for r in recs] == [2, 2, 1, 1]
    assert [len(r["system"]["visible_devices"]) for r in recs] == [2, 2, 1, 1]
    assert all(set(r["system"]["visible_devices"]) <= {"0", "1", "2"} for r in recs)
    _no_device_shared(recs)
    assert _most_at_once(recs[:2]) == 1  # two 2-device jobs never fit together in 3 devices
    assert _most_devices_at_once(recs) <= 3
    # first fit: while job 0 holds two devices, job 1 waits and job 2 takes the third
    assert "job 2 started on device 2 (2 running, 2 waiting)" in proc.stdout


@pytest.mark.slow
def test_fail_fast_stops_a_pool_sweep_after_the_failed_job(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    proc = run_sweep(
        sweep,
        "hydra/launcher=pool",
        "hydra.launcher.slots=[0,1]",
        *TINY,
        "fail_fast=true",
        "fault.kind=raise,none",
        "fault.phase=init",
    )
    assert proc.returncode == 1
    assert "fail_fast=true stopped the sweep after job 0" in proc.stderr, proc.stderr[-2000:]
    assert [r["status"] for r in records(sweep)] == ["error"]  # job 1 never ran
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sig", "code", "said"), [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "Ctrl-C (SIGINT)")]
)
def test_a_signal_stops_every_running_job_and_leaves_no_process(
    tmp_path: Path, sig: int, code: int, said: str
) -> None:
    """SIGTERM (a scheduler) or Ctrl-C (SIGINT) stops every running job, each recorded as interrupted by that
    signal (the trial of session 36: Ctrl-C was recorded as SIGTERM), and leaves no process."""
    sweep = tmp_path / "sweep"
    argv = [sys.executable, RUN_PY, "-m", "hydra/launcher=pool", "hydra.launcher.slots=[0,1]", *TINY]
    argv += ["fault.kind=hang", "timeout_s=600", "seed=0,1,2", f"hydra.sweep.dir={sweep}"]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    guard = threading.Timer(240, proc.kill)
    guard.start()
    lines, family = [], []
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append(line)
            if sum("warm-up step 1/1" in x for x in lines) == 2:  # both jobs' ranks are in their hang
                family = psutil.Process(proc.pid).children(recursive=True)
                proc.send_signal(sig)
                break
        lines.extend(proc.stdout)  # type: ignore[arg-type]
        exit_code = proc.wait(timeout=120)
    finally:
        guard.cancel()
        if proc.poll() is None:
            proc.kill()
    output = "".join(lines)
    assert family, output[-3000:]
    assert exit_code == code, output[-3000:]
    assert "flopsweep: pool: stopping 2 running job(s)" in output
    # the last line names a stopped job's record (trial, session 18: it said none was recorded)
    assert "no run had been recorded yet" not in output and "the last run is recorded (error) in " in output
    left = [p for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert left == [], [p.cmdline() for p in left]
    recs = records(sweep)
    assert len(recs) == 2 and all(r["status"] == "error" for r in recs), [r["error"] for r in recs]
    assert all(f"interrupted by {said}" in r["error"]["message"] for r in recs), [r["error"] for r in recs]
    assert sorted(r["system"]["visible_devices"][0] for r in recs) == ["0", "1"]


@pytest.mark.slow
def test_a_job_past_the_pools_deadline_is_stopped_and_recorded(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    proc = run_sweep(
        sweep,
        "hydra/launcher=pool",
        "hydra.launcher.slots=[0]",
        "hydra.launcher.timeout_min=0.2",  # 12 s: the job's own timeout_s would wait 10 minutes
        "hydra.launcher.grace_s=10",
        *TINY,
        "fault.kind=hang",
        "timeout_s=600",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "job 0 ended (past its deadline, hydra.launcher.timeout_min=0.2: exit 143)" in proc.stdout
    [rec] = records(sweep)
    assert rec["status"] == "error" and rec["system"]["visible_devices"] == ["0"]
    assert "flopsweep summary: 0 ok, 0 oom, 1 error" in proc.stdout


def test_a_sweep_into_the_default_folder_keeps_every_job_in_it(tmp_path: Path) -> None:
    """The default ``hydra.sweep.dir`` (``multirun/${now:%Y-%m-%d}/${now:%H-%M-%S}...``) is the sweep's one
    folder for every job: read again in a job's own process (Hydra's ``now`` caches per process), it named
    a later second, and the sweep stopped after its first job (re-trial, session 37). Three plan jobs on two
    slots (no worker: seconds), from a fresh folder."""
    proc = subprocess.run(
        [sys.executable, RUN_PY, "-m", "hydra/launcher=pool", "hydra.launcher.slots=[0,1]", "device=cpu"]
        + ["seed=0,1,2", "plan=true"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (sweep,) = (tmp_path / "multirun").glob("*/*")  # one folder, as the basic launcher makes
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir()) == ["0", "1", "2"]
    for num in range(3):
        hydra_yaml = (sweep / str(num) / ".hydra" / "hydra.yaml").read_text()
        assert f"output_dir: {sweep / str(num)}\n" in hydra_yaml, hydra_yaml[-2000:]
    assert (sweep / "plan.csv").is_file()

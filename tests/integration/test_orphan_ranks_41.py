"""Ranks end when the process that started them dies (docs/reliability-12.md #960): a sweep process
killed by SIGKILL (``flopsweep -m backend=ddp,fsdp nproc_per_node=2 device=cpu steps.measure=400``) left
both ranks running as orphans (parent PID 1) until they finished, about 35 s, under the default launcher.
A subprocess is the point: a child process launches the ranks (:func:`flopsweep.launch.launch_local`,
the launcher of every job), the test SIGKILLs it once both ranks have started their work (their phase
files), then waits, with a deadline, until both rank processes are gone. Asserts state, not timing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
from helpers import ROOT

CHILD = """
import sys
from pathlib import Path
from flopsweep.config import BackendConfig, RunConfig, StepsConfig
from flopsweep.launch import launch_local
from flopsweep.plan import Environment, plan

cfg = RunConfig(device="cpu", backend=BackendConfig(name="ddp"), nproc_per_node="2",
                steps=StepsConfig(measure=100000))
launch_local(plan(cfg, Environment.detect()), Path(sys.argv[1]))
"""


def _ranks(pid: int) -> list[psutil.Process]:
    """The rank processes of launcher ``pid``: its children that run ``spawn_main`` (not the resource
    tracker)."""
    found = []
    for child in psutil.Process(pid).children():
        try:
            line = " ".join(child.cmdline())
        except psutil.Error:
            continue
        if "spawn_main" in line and "resource_tracker" not in line:
            found.append(child)
    return found


def _running(proc: psutil.Process) -> bool:
    """Whether ``proc`` (the same process: psutil checks its start time) still runs; a zombie does not."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_ranks_end_when_their_launcher_is_killed(tmp_path: Path) -> None:
    job_dir = tmp_path / "job"
    scratch = job_dir / ".flopsweep"
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(job_dir)],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    ranks: list[psutil.Process] = []
    try:
        end = time.monotonic() + 120
        while not all((scratch / f"rank{r}_phase.txt").exists() for r in (0, 1)):  # both ranks at work
            assert proc.poll() is None and time.monotonic() < end
            time.sleep(0.02)
        ranks = _ranks(proc.pid)
        assert len(ranks) == 2
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        end = time.monotonic() + 60
        while any(map(_running, ranks)) and time.monotonic() < end:
            time.sleep(0.05)
        assert not any(map(_running, ranks)), [p.pid for p in ranks if _running(p)]
    finally:
        for rank in ranks:  # only the ranks this test started, by pid: never left behind
            if _running(rank):
                rank.kill()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

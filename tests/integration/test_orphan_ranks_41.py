"""Ranks end when the process that started them dies (docs/reliability-13.md #960): a sweep process
killed by SIGKILL (``flopsweep -m backend=ddp,fsdp nproc_per_node=2 device=cpu steps.measure=400``) left
both ranks running as orphans (parent PID 1) until they finished, about 35 s, under the default launcher.
A subprocess is the point: a child process launches the ranks (:func:`flopsweep.launch.launch_local`,
the launcher of every job), the test SIGKILLs it once both ranks have started their work (their phase
files), then waits, with a deadline, until both rank processes are gone. Asserts state, not timing. And
``signals.end_with_parent`` itself, in forked children (the test process is never marked): the request is
made (``PR_GET_PDEATHSIG`` reads SIGTERM back), and a process whose parent is no longer the one that
started it (the race ``prctl(2)`` names) exits 143 at once."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from helpers import ROOT

from flopsweep.signals import TERMINATED_STATUS, end_with_parent

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


PR_GET_PDEATHSIG = 2


def _in_child(body) -> int:
    """The exit status of a forked child that runs ``body()`` (its return value is the status) and ends
    with ``os._exit``, never returning into pytest."""
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            code = body()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _asks_and_keeps_running() -> int:
    asked = end_with_parent(os.getppid())
    value = ctypes.c_int(0)
    ctypes.CDLL(None, use_errno=True).prctl(PR_GET_PDEATHSIG, ctypes.byref(value), 0, 0, 0)
    return 0 if asked and value.value == signal.SIGTERM else 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_a_process_whose_parent_is_the_launcher_asks_for_sigterm_and_runs_on() -> None:
    assert _in_child(_asks_and_keeps_running) == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_a_process_adopted_before_the_request_exits_143_at_once() -> None:
    # The launcher named is not this process's parent: as when it died first and init adopted the rank.
    assert _in_child(lambda: end_with_parent(os.getpid()) and 0) == TERMINATED_STATUS == 143

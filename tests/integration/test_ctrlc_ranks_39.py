"""A Ctrl-C to the whole process group while the ranks start (docs/reliability-10.md #660): each rank had
printed its ``KeyboardInterrupt`` traceback (in its import of torch) before flopsweep's one line. A subprocess
in its own process group is the point: a terminal's Ctrl-C reaches every process of the group. The signal is
sent once both ranks exist and Python runs in them (SIGINT caught or ignored in ``/proc/PID/status``), not
after a delay."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
from helpers import ROOT, RUN_PY

BIT = 1 << (signal.SIGINT - 1)


def _python_runs(pid: int) -> bool:
    """Whether process ``pid``'s SIGINT is caught or ignored: Python has set up its ``KeyboardInterrupt``
    handler, before it imports torch (a bounded read of ``/proc/PID/status``)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            text = f.read(8192)
    except OSError:
        return False
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return bool((int(fields.get("SigCgt", "0"), 16) | int(fields.get("SigIgn", "0"), 16)) & BIT)


def _ranks(pid: int) -> list[int]:
    """The rank processes of run ``pid``: its children that run ``spawn_main`` (not the resource tracker)."""
    found = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            line = " ".join(child.cmdline())
        except psutil.Error:
            continue
        if "spawn_main" in line and "resource_tracker" not in line:
            found.append(child.pid)
    return found


def test_a_ctrl_c_as_the_ranks_start_prints_only_flopsweeps_line(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    run_dir = tmp_path / "run"
    args = ["model=llama-tiny", "device=cpu", "backend=ddp", "nproc_per_node=2", f"hydra.run.dir={run_dir}"]
    with open(out, "w") as sink:
        proc = subprocess.Popen(
            [sys.executable, RUN_PY, *args],
            cwd=ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    try:
        end = time.monotonic() + 120
        while not ((ranks := _ranks(proc.pid)) and len(ranks) == 2 and all(map(_python_runs, ranks))):
            assert proc.poll() is None, out.read_text()
            assert time.monotonic() < end, out.read_text()
            time.sleep(0.005)
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: every process of the group
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = out.read_text()
    assert "Traceback" not in text, text
    assert code == 130, text
    lines = [line for line in text.splitlines() if line.startswith("flopsweep:")]
    recorded = f"the last run is recorded (error) in {run_dir}/metrics.json"
    assert lines == [f"flopsweep: interrupted (KeyboardInterrupt); {recorded}"], text
    assert "error in launch: KeyboardInterrupt: interrupted by Ctrl-C (SIGINT)" in text

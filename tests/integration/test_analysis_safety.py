"""Issue 30, the analysis side: spreadsheet formulas (class 3), outputs that would destroy inputs
(class 4), links and non-regular files where records are expected (class 5), records that lie
(class 9) and hostile strings in outputs (class 10).

Everything runs for real: the CLI in process or as ``python -m analysis`` in a subprocess, real
FIFOs, links, hard links and ``/dev/zero``, a real file-size limit for the full disk. A test that
could hang on a regression runs under a deadline (``signal.alarm`` or a subprocess timeout), which
fails it instead of hanging the suite; no test asserts a speed.
"""

from __future__ import annotations

import io
import os
import resource
import signal
import subprocess
import sys

import pandas as pd
import pytest
from unit.test_analysis_safety import (  # shared with the unit tier
    ESC,
    ROOT,
    hostile_records,
    hostile_tree,
    ok_record,
    put,
)


def run_module(*args, timeout: float = 300, preexec=None, env=None) -> subprocess.CompletedProcess:
    """``python -m analysis ARGS`` in a subprocess, under a deadline (a hang fails, never blocks)."""
    return subprocess.run(
        [sys.executable, "-m", "analysis", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=preexec,
        env=env,
    )


def _limit_file_size() -> None:
    """The child's files may not grow past 512 bytes: the write fails with EFBIG, as on a full disk."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))


@pytest.mark.slow
def test_a_write_that_fails_midway_keeps_the_previous_output_whole_in_one_line(tmp_path):
    put(tmp_path / "runs" / "a", ok_record())
    report = tmp_path / "out" / "report.csv"
    report.parent.mkdir()
    report.write_text("the previous report\n")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = run_module(
        tmp_path / "runs", "--format", "csv", "--output", report, "--force", preexec=_limit_file_size, env=env
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "usage:" not in done.stderr, done.stderr
    assert f"cannot write {report}: File too large (the previous file is kept whole)" in lines[0]
    assert report.read_text() == "the previous report\n"
    assert os.listdir(report.parent) == ["report.csv"]  # no temporary file left behind


@pytest.mark.slow
def test_cli_on_fifos_links_and_dev_zero_finishes_with_each_skip_named(tmp_path):
    root = hostile_tree(tmp_path / "runs")
    done = run_module(root, root / "fifo" / "metrics.json", "/dev/zero", "--format", "csv", timeout=300)
    assert done.returncode == 0, done.stderr
    assert len(pd.read_csv(io.StringIO(done.stdout))) == 2
    assert "skipping unreadable record /dev/zero: a character device, not a regular file" in done.stderr
    assert f"skipping unreadable record {root / 'fifo' / 'metrics.json'}: a FIFO" in done.stderr
    assert f"not following the directory link {root / 'sub' / 'up'}" in done.stderr


@pytest.mark.slow
def test_log_lines_and_footer_escape_control_characters(tmp_path):
    root = hostile_records(tmp_path / "runs\x1b[31m")
    put(root / "broken\x1b]0;x\x07", "{not json")
    done = run_module(root, "--format", "csv")
    assert done.returncode == 0, done.stderr
    assert "skipping unreadable record" in done.stderr and "\\x1b]0;x\\x07" in done.stderr
    assert ESC not in done.stderr and "\x07" not in done.stderr

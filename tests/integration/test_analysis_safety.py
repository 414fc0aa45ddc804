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
import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]


RECORDS = Path(__file__).resolve().parents[1] / "fixtures" / "records"


ESC = "\x1b"


def ok_record() -> dict:
    return json.loads((RECORDS / "v2-ok" / "metrics.json").read_text())


def put(directory: Path, rec: dict | str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "metrics.json"
    path.write_text(rec if isinstance(rec, str) else json.dumps(rec))
    return path


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
        tmp_path / "runs", "--format", "csv", "--output", report, preexec=_limit_file_size, env=env
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "usage:" not in done.stderr, done.stderr
    assert f"cannot write {report}: File too large (the previous file is kept whole)" in lines[0]
    assert report.read_text() == "the previous report\n"
    assert os.listdir(report.parent) == ["report.csv"]  # no temporary file left behind


def hostile_tree(root: Path) -> Path:
    """Two real records, and beside them a FIFO, a link to /dev/zero, a self-looping link, a
    dangling link, a link to a real record, and directory links that loop."""
    put(root / "a", ok_record())
    rec = ok_record()
    rec["run"]["id"] = "run-b"
    put(root / "sub" / "b", rec)
    os.mkfifo(root / "sub" / "fifo")  # a directory name would hide it; the file name counts
    (root / "fifo").mkdir()
    os.mkfifo(root / "fifo" / "metrics.json")
    (root / "zero").mkdir()
    (root / "zero" / "metrics.json").symlink_to("/dev/zero")
    (root / "self").mkdir()
    (root / "self" / "metrics.json").symlink_to("metrics.json")
    (root / "dangling").mkdir()
    (root / "dangling" / "metrics.json").symlink_to(root / "nowhere")
    (root / "linked").mkdir()
    (root / "linked" / "metrics.json").symlink_to(root / "a" / "metrics.json")
    (root / "sub" / "up").symlink_to("..")
    (root / "sub" / "here").symlink_to(".")
    return root


@pytest.mark.slow
def test_cli_on_fifos_links_and_dev_zero_finishes_with_each_skip_named(tmp_path):
    root = hostile_tree(tmp_path / "runs")
    done = run_module(root, root / "fifo" / "metrics.json", "/dev/zero", "--format", "csv", timeout=300)
    assert done.returncode == 0, done.stderr
    assert len(pd.read_csv(io.StringIO(done.stdout))) == 2
    assert "skipping unreadable record /dev/zero: a character device, not a regular file" in done.stderr
    assert f"skipping unreadable record {root / 'fifo' / 'metrics.json'}: a FIFO" in done.stderr
    assert f"not following the directory link {root / 'sub' / 'up'}" in done.stderr


HOSTILE = ("\x1b[31mred\x1b[0m \x1b]0;pwned\x07 \x9b2J |col| <b>x</b>\nnew row\r " * 12)[:400]


def hostile_records(root: Path) -> Path:
    for mbs in (4, 8):
        rec = ok_record()
        rec["run"]["id"] = f"run-{mbs}"
        rec["config"]["model"]["name"] = HOSTILE
        rec["config"]["batch"]["micro_batch_size"] = mbs
        rec["config"]["tag"] = "\x1b[2J"
        put(root / f"mbs{mbs}", rec)
    err = json.loads((RECORDS / "v2-error" / "metrics.json").read_text())
    err["config"]["model"]["name"] = HOSTILE
    err["error"]["message"] = "\x1b[31mboom\x1b[0m | x\nforged line"
    put(root / "err", err)
    return root


@pytest.mark.slow
def test_log_lines_and_footer_escape_control_characters(tmp_path):
    root = hostile_records(tmp_path / "runs\x1b[31m")
    put(root / "broken\x1b]0;x\x07", "{not json")
    done = run_module(root, "--format", "csv")
    assert done.returncode == 0, done.stderr
    assert "skipping unreadable record" in done.stderr and "\\x1b]0;x\\x07" in done.stderr
    assert ESC not in done.stderr and "\x07" not in done.stderr

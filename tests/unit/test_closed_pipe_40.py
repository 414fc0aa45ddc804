"""Session 40 (docs/reliability-11.md #704): ``flopsweep-analysis DIR 2>&1 | head -1`` exited 1 with nothing
said: stdout had a closed-pipe guard (:class:`flopsweep.streams.ClosedPipeGuard`) but stderr not, so the
footer's next line met ``BrokenPipeError`` and its traceback went to the same closed pipe;
``python -m flopsweep.reference 2>&1 | head -1`` alike. Now :func:`flopsweep.streams.standard_streams`, the
first step of every entry point (``run.py``, ``flopsweep``, ``flopsweep-analysis``, ``python -m analysis``,
``python -m flopsweep.reference`` and ``.shipped``), guards both streams: the process exits with its own
status (0), as with stdout alone. The analysis runs here on a committed record, its two streams pipes whose
readers have gone. No subprocess."""

from __future__ import annotations

import ast
import io
import os
import sys
from pathlib import Path

from helpers import RECORDS, ROOT

from flopsweep.streams import ClosedPipeGuard, guarded, standard_streams


def _gone_reader() -> io.TextIOWrapper:
    """A line-buffered text stream on a pipe whose reader has gone (``| head -1`` after its line)."""
    read, write = os.pipe()
    os.close(read)
    return io.TextIOWrapper(os.fdopen(write, "wb", buffering=0), encoding="utf-8", line_buffering=True)


def test_the_analysis_with_both_streams_gone_ends_quietly_with_status_0(monkeypatch):
    from analysis.__main__ import main
    from analysis.cli import entry

    out, err = _gone_reader(), _gone_reader()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    code = entry(lambda: main([str(RECORDS / "published"), "--width", "120"]))
    assert code == 0
    assert isinstance(sys.stderr, ClosedPipeGuard) and sys.stderr.closed  # its footer met the closed pipe
    assert isinstance(sys.stdout, ClosedPipeGuard) and sys.stdout.closed
    for stream in (out, err):
        assert os.path.samestat(os.fstat(stream.fileno()), os.stat(os.devnull))  # later writes: dropped
        stream.close()


def test_standard_streams_guards_both_streams_once(monkeypatch):
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    standard_streams()
    first = (sys.stdout, sys.stderr)
    assert all(isinstance(s, ClosedPipeGuard) for s in first)
    standard_streams()  # flopsweep runs run.py, and each calls it: not guarded twice
    assert (sys.stdout, sys.stderr) == first and guarded(sys.stdout) is sys.stdout
    print("said", file=sys.stderr)
    assert err.getvalue() == "said\n"


def test_every_entry_point_of_the_package_starts_with_the_guarded_streams():
    """Each ``python -m`` module of ``flopsweep`` and ``analysis`` (its ``if __name__ == "__main__":``)
    calls :func:`standard_streams` (``analysis``: through ``run_entry``), as ``run.py`` and the console
    scripts (:mod:`flopsweep.cli`) do."""
    mains: dict[str, str] = {}  # a file's __main__ blocks, together (run.py has three)
    files = [
        *sorted((ROOT / "flopsweep").glob("*.py")),
        *sorted((ROOT / "analysis").glob("*.py")),
        ROOT / "run.py",
    ]
    for path in files:
        for node in ast.parse(Path(path).read_text(encoding="utf-8")).body:
            if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
                name = path.relative_to(ROOT).as_posix()
                mains[name] = mains.get(name, "") + ast.unparse(node)
    assert {"flopsweep/reference.py", "flopsweep/shipped.py", "analysis/__main__.py", "run.py"} <= set(mains)
    for name, body in mains.items():
        assert "standard_streams()" in body or "run_entry(" in body, name

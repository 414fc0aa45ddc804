"""Session 39 (docs/reliability-10.md #547): ``--output /dev/stdout`` (the shell's way to name standard
output), ``--output FIFO`` and ``--output out`` (an existing folder, no trailing ``/``) were refused with
the fix of an output over a record: ``name a file outside every run's .hydra, .submitit and .flopsweep
folders, not a record, log or multirun.yaml``. Now the fix fits what is there
(``analysis.output._not_a_file_fix``): ``--output -`` for a device, FIFO or socket, the file of
``--format`` in the folder for a folder; each fix typed back runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import fixture_record, put

from analysis.__main__ import main


def _refused(capsys: pytest.CaptureFixture, *argv: str) -> str:
    assert main(list(argv)) == 2  # refused before any work: nothing written
    (line,) = capsys.readouterr().err.splitlines()
    return line


@pytest.mark.parametrize(("fmt", "name"), [("table", "report.md"), ("html", "report.html")])
def test_an_existing_folder_as_output_gets_the_file_of_its_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, fmt: str, name: str
) -> None:
    """#547: ``--output out`` (a folder there) names ``out/report.md``, which writes there."""
    monkeypatch.chdir(tmp_path)
    put(tmp_path / "runs" / "0", fixture_record())
    Path("out").mkdir()
    line = _refused(capsys, "runs", "--format", fmt, "--output", "out", "--force")
    assert "--output out is a directory, not a regular file" in line
    assert line.endswith(f". Fix: --output out/{name}")
    assert "multirun.yaml" not in line
    assert main(["runs", "--format", fmt, "--output", f"out/{name}"]) == 0
    assert (tmp_path / "out" / name).stat().st_size > 0


def test_a_fifo_or_dev_stdout_as_output_gets_standard_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """#547: a FIFO (``/dev/stdout`` in a pipe; under pytest a file) names ``--output -``."""
    monkeypatch.chdir(tmp_path)
    put(tmp_path / "runs" / "0", fixture_record())
    os.mkfifo("pipe")
    line = _refused(capsys, "runs", "--format", "csv", "--output", "pipe", "--force")
    assert "--output pipe is a device, FIFO or socket, not a regular file" in line
    assert (
        ". Fix: --output - (standard output; > /dev/null drops it), or name a regular file, e.g. report.csv"
        in line
    )
    assert main(["runs", "--format", "csv", "--output", "-"]) == 0
    assert capsys.readouterr().out.startswith('"model"')


def test_a_link_to_a_stream_is_never_replaced_even_with_force(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """#548: ``--output /dev/stdout --force`` with ``> out.txt`` (stdout a file) replaced the link
    ``/dev/stdout`` itself by a regular file (root may write ``/dev``), and ``out.txt`` stayed empty;
    without ``--force`` its fix was ``add --force``. A link like it here, ``dev/stdout`` ->
    ``/proc/self/fd/1`` (whatever fd 1 is under pytest), is refused either way and kept as it was."""
    monkeypatch.chdir(tmp_path)
    put(tmp_path / "runs" / "0", fixture_record())
    Path("dev").mkdir()
    Path("dev/stdout").symlink_to("/proc/self/fd/1")
    for force in ([], ["--force"]):
        line = _refused(capsys, "runs", "--format", "csv", "--output", "dev/stdout", *force)
        assert "--output dev/stdout leads to /proc/self/fd/1, an open stream of this command" in line
        assert "Fix: --output - (standard output" in line and "--force" not in line
    assert Path("dev/stdout").is_symlink() and os.readlink("dev/stdout") == "/proc/self/fd/1"
    assert sorted(os.listdir("dev")) == ["stdout"]  # no temporary file left either


def test_a_notebook_named_as_a_folder_or_a_device_gets_a_file_to_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """#549: ``--notebook out`` (a folder there) said ``Fix: --notebook out.ipynb``, beside it; ``--notebook
    /dev/null`` (a FIFO here, as a device) said ``Fix: --notebook /dev/null.ipynb``, a file in ``/dev`` (made
    there as root, refused for anyone else). Now the folder's ``results.ipynb``, or ``results.ipynb``; each
    fix parses (the notebook itself is not run here: seconds of a kernel)."""
    from analysis.cli import build_parser

    monkeypatch.chdir(tmp_path)
    Path("out").mkdir()
    os.mkfifo("pipe")
    for given, fix in (("out", "out/results.ipynb"), ("pipe", "results.ipynb"), ("x.txt", "x.ipynb")):
        with pytest.raises(SystemExit) as stop:
            build_parser().parse_args(["runs", "--notebook", given])
        assert stop.value.code == 2
        line = capsys.readouterr().err.strip()
        assert line.endswith(f"Fix: --notebook {fix}; see python -m analysis --help"), line
        assert build_parser().parse_args(["runs", "--notebook", fix]).notebook == Path(fix)

"""Session 38 (docs/reliability-9.md #474-#476): the analysis's refusals name the option and a fix that
fits it: ``--output h/`` names the file of ``--format`` (was ``report.md`` for HTML), ``--output out/..``
the normalised path (``out/../report.md`` left an empty ``out/``), and an unknown column the option
that gave it (``--best-by``, was ``in best``). Every fix printed is fed back and passes."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import fixture_record, put

from analysis.__main__ import main


def _runs(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    put(runs / "0", fixture_record())
    return runs


def _refused(capsys: pytest.CaptureFixture, *argv: str) -> str:
    with pytest.raises(SystemExit) as stop:
        main(list(argv))
    assert stop.value.code == 2
    return capsys.readouterr().err.splitlines()[-1]


@pytest.mark.parametrize(
    ("fmt", "name"),
    [("html", "report.html"), ("csv", "report.csv"), ("json", "report.json"), ("markdown", "report.md")],
)
def test_an_output_folders_fix_names_the_file_of_its_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, fmt: str, name: str
) -> None:
    """#474: ``--format html --output h/`` printed ``Fix: --output h/report.md`` (HTML in a .md file);
    the format after ``--output`` counts too, and the fix typed back writes that file."""
    monkeypatch.chdir(tmp_path)
    runs = str(_runs(tmp_path))
    for argv in ([runs, "--format", fmt, "--output", "h/"], [runs, "--output", "h/", "--format", fmt]):
        assert _refused(capsys, *argv).endswith(f"Fix: --output h/{name}; see python -m analysis --help")
    assert not (tmp_path / "h").exists()
    assert main([runs, "--format", fmt, "--output", f"h/{name}"]) == 0
    assert (tmp_path / "h" / name).is_file()


@pytest.mark.parametrize(
    ("given", "fix"), [("out/..", "report.md"), ("a/b/../..", "report.md"), ("a/./..", "report.md")]
)
def test_an_output_folder_with_dots_gets_the_normalised_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, given: str, fix: str
) -> None:
    """#475: ``--output out/..`` (``out`` absent) printed ``Fix: --output out/../report.md``, which wrote
    there but left an empty ``out/``; now the path normalised, and typed back it makes no folder."""
    monkeypatch.chdir(tmp_path)
    runs = str(_runs(tmp_path))
    assert _refused(capsys, runs, "--output", given).endswith(
        f"Fix: --output {fix}; see python -m analysis --help"
    )
    assert main([runs, "--output", fix]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md", "runs"]


def test_a_dot_dot_after_a_link_is_kept_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """#475: ``link/..`` is the link target's parent to the system, so the fix keeps it unnormalised."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "far" / "deep").mkdir(parents=True)
    (tmp_path / "ln").symlink_to(tmp_path / "far" / "deep")
    runs = str(_runs(tmp_path))
    assert _refused(capsys, runs, "--output", "ln/..").endswith(
        "Fix: --output ln/../report.md; see python -m analysis --help"
    )
    assert main([runs, "--output", "ln/../report.md"]) == 0
    assert (tmp_path / "far" / "report.md").is_file()


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--best-by", "modle"], "unknown column 'modle' in --best-by; did you mean 'model'?"),
        (["--sort", "modle"], "unknown column 'modle' in --sort; did you mean 'model'?"),
        (["--baseline", "backnd=fsdp"], "unknown column 'backnd' in --baseline; did you mean 'backend'?"),
        (["--filter", "modle=x"], "unknown column 'modle' in --filter; did you mean 'model'?"),
    ],
)
def test_an_unknown_column_names_its_option(tmp_path: Path, capsys, argv: list[str], said: str) -> None:
    """#476: the line named the query function (``in best``, ``in sort``), not the option typed."""
    assert _refused(capsys, str(_runs(tmp_path)), *argv).startswith(f"python -m analysis: error: {said}")


def test_all_in_best_by_is_refused_naming_the_option(tmp_path: Path, capsys) -> None:
    """#476: ``--best-by all,model`` was "unknown column 'all' in best; did you mean 'cuda_alloc_retries'";
    the fix typed back passes."""
    runs = str(_runs(tmp_path))
    assert _refused(capsys, runs, "--best-by", "all,model") == (
        "python -m analysis: error: argument --best-by: 'all,model': all (every column) is a word of "
        "--columns, not of --best-by, which takes the columns that make a group; give them, e.g. --best-by "
        "model; see python -m analysis --help"
    )
    assert main([runs, "--best-by", "model"]) == 0


def test_an_output_over_a_record_names_the_file_of_its_format(tmp_path: Path, capsys) -> None:
    """#474: the fix of an ``--output`` over a record named ``report.md`` whatever the format."""
    runs = _runs(tmp_path)
    record = str(runs / "0" / "metrics.json")
    assert main([str(runs), "--format", "json", "--output", record]) == 2
    assert capsys.readouterr().err.rstrip().endswith("multirun.yaml (e.g. report.json)")
    assert main([str(runs), "--format", "json", "--output", str(tmp_path / "report.json")]) == 0


def test_an_empty_output_names_the_file_of_its_format(tmp_path: Path, capsys) -> None:
    """#474: ``--output ''`` said ``e.g. report.md`` whatever the format."""
    line = _refused(capsys, str(_runs(tmp_path)), "--output", "", "--format", "csv")
    assert "argument --output: an empty path: name a file, e.g. report.csv ('-': standard output)" in line

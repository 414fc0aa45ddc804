"""Session 39 (docs/reliability-10.md #673): ``--notebook`` (and ``--plot``) replace a file already
there without asking, as docs/analysis.md says, but ``--help`` did not say so beside ``--output``'s
"refused unless --force". Now each option that writes a file says in its help what it does to one
already there, and ``--force`` beside them is refused (it is ``--output``'s alone), as the help says."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]


def _help(option: str) -> str:
    parser = build_parser()
    (action,) = [a for a in parser._actions if option in a.option_strings]
    return " ".join(action.help.split())


def test_every_option_that_writes_a_file_says_what_it_does_to_one_already_there():
    assert "replaced without asking" in _help("--notebook") and "--force is --output's alone" in _help(
        "--notebook"
    )
    assert "replaced without asking" in _help("--plot")
    assert "refused unless --force" in _help("--output")
    said = " ".join((ROOT / "docs" / "analysis.md").read_text(encoding="utf-8").split())
    assert "`--plot` and `--notebook` replace their files" in said


def test_force_beside_the_notebook_is_refused_as_its_help_says(tmp_path: Path, capsys):
    parser = build_parser()
    with pytest.raises(SystemExit) as stop:
        parser.parse_args([str(tmp_path), "--notebook", str(tmp_path / "n.ipynb"), "--force"])
    assert stop.value.code == 2 and "no --output file is named" in capsys.readouterr().err

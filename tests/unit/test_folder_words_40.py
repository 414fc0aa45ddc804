"""Session 40 (docs/reliability-11.md #785): the folder refusals (:mod:`flopsweep.folders`, the plan's
``resume`` check) wrote ``hydra.sweep.dir=PATH`` as is, which for a folder with a comma, a space or a quote is
a sweep of two folders to Hydra, or two words to the shell. Each ``KEY=PATH`` they write is now one word that
the shell and Hydra's parser read back as that folder
(:func:`flopsweep.shown_overrides.folder_word`). Real folders under ``tmp_path``, Hydra's own parser;
no process."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from flopsweep.folders import (
    folder_word,
    home_tilde_problem,
    log_link_problem,
    nested_folder_problem,
    plan_file_problem,
    run_folder_problem,
    run_hydra_files_problem,
)
from flopsweep.override_parsing import parsed_or_none

NAMES = ["a,b", "a b", "it's", 'say "x"', "plain"]
"""Folder names with what Hydra or the shell reads otherwise: a comma (a sweep), a space (two words), a
quote of either kind; and one with none (written as before)."""


def _first_word(text: str) -> str:
    """The first word of ``text`` as a POSIX shell reads it (the rest, prose, is not read)."""
    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace_split = True
    return lexer.get_token()


def _read_back(line: str, key: str) -> str:
    """The folder that ``line``'s leading ``key=...`` word gives when the shell, then Hydra, reads it."""
    word = _first_word(line.removeprefix("Invalid config: "))
    assert word.startswith(key), line
    parsed = parsed_or_none(word.removesuffix(":"))
    assert parsed is not None and not parsed.is_sweep_override(), word
    return str(parsed.value())


@pytest.mark.parametrize("name", NAMES)
def test_folder_word_reads_back_as_the_one_folder(tmp_path: Path, name: str) -> None:
    folder = tmp_path / name
    word = folder_word("hydra.sweep.dir", folder)
    assert len(shlex.split(word)) == 1
    assert parsed_or_none(shlex.split(word)[0]).value() == str(folder)
    if name == "plain":
        assert word == f"hydra.sweep.dir={folder}"  # as before


@pytest.mark.parametrize("name", NAMES)
def test_each_folder_refusal_writes_its_folder_as_it_is_typed_back(tmp_path: Path, name: str) -> None:
    """Was: ``hydra.run.dir=/tmp/a,b is a sweep's folder ...``: typed back, a sweep of ``/tmp/a`` and
    ``b``."""
    sweep = tmp_path / name
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    line = run_folder_problem(sweep)
    assert line is not None and _read_back(line, "hydra.run.dir") == str(sweep)
    inner = sweep / "x"
    line = nested_folder_problem("hydra.sweep.dir", inner, sweep=True)
    assert line is not None and _read_back(line, "hydra.sweep.dir") == str(inner)
    lone = tmp_path / f"{name}-run"
    (lone / ".hydra").mkdir(parents=True)
    (lone / ".hydra" / "config.yaml").write_text("{}\n")
    assert _read_back(run_hydra_files_problem(lone), "hydra.run.dir") == str(lone)
    (lone / "run.log").mkdir()
    assert _read_back(log_link_problem("hydra.run.dir", lone), "hydra.run.dir") == str(lone)
    (lone / "plan.csv").symlink_to(tmp_path / "elsewhere")
    line = plan_file_problem("hydra.run.dir", str(lone), str(lone))
    assert _read_back(line, "hydra.run.dir") == str(lone)


def test_a_single_runs_folder_above_gives_an_example_typed_back(tmp_path: Path) -> None:
    above = tmp_path / "a,b"
    (above / "r1").mkdir(parents=True)
    record = {"status": "ok", "run": {"id": "r1", "job_num": None}, "metrics": {}}
    (above / "r1" / "metrics.json").write_text(json.dumps(record))
    line = run_folder_problem(above)
    example = re.search(r"a folder of its own, e\.g\. (.*)$", line).group(1)
    assert parsed_or_none(_first_word(example)).value() == str(above / "run-2")  # a free folder (#725)
    assert f"python -m analysis {shlex.quote(str(above))}" in line


@pytest.mark.parametrize(
    ("typed", "fix"),
    [
        ("hydra.sweep.dir=~/ab", "hydra.sweep.dir=$HOME/ab"),  # $HOME left to the shell, as before
        ("hydra.sweep.dir=~/a,b", None),  # written out: the shell's $HOME inside Hydra's quotes is no word
        ("hydra.sweep.dir=~/a b", None),
    ],
)
def test_the_home_fix_is_a_word_the_shell_and_hydra_take(typed: str, fix: str | None) -> None:
    line = home_tilde_problem([typed])
    said = line.split("Fix: write the path out, e.g. ")[1]
    if fix is not None:
        assert said == fix
        return
    rest = typed.partition("~/")[2]
    assert parsed_or_none(_first_word(said)).value() == str(Path.home() / rest)


def test_the_plans_refusal_of_another_runs_folder_writes_it_typed_back(tmp_path: Path) -> None:
    """``job.resume.other_run_problem`` with ``plan``: a plan into a run's folder names it the same way."""
    from flopsweep.job.resume import other_run_problem

    folder = tmp_path / "a,b"
    folder.mkdir()
    record = {"status": "ok", "run": {"id": "r", "job_num": None, "overrides": ["seed=1"]}, "metrics": {}}
    (folder / "metrics.json").write_text(json.dumps(record))
    line = other_run_problem(folder / "metrics.json", ["seed=2"], plan=True)
    assert line is not None and _read_back(line, "hydra.run.dir") == str(folder)

"""An override's key is spelled in one place (:mod:`flopsweep.override_parsing`: ``split_override``,
``override_key``, ``set_key``, ``key_values``), and two hand copies that read it wrong
(docs/reliability-14.md #1020: a killed sweep's resume fix kept its ``++resume=false`` and was refused;
#1021: ``~plan=true`` was read as ``plan=true``)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from flopsweep.override_parsing import key_values, override_key, set_key, split_override, typed_values


@pytest.mark.parametrize(
    ("word", "split"),
    [
        ("seed=1", ("", "seed", "1")),
        ("+fault.rank=1", ("+", "fault.rank", "1")),
        ("++model.n_layer=4", ("++", "model.n_layer", "4")),
        ("~seed=1", ("~", "seed", "1")),
        ("~seed", ("~", "seed", "")),  # a deletion: no "="
        ("tag=a=b", ("", "tag", "a=b")),  # the first "=" splits
        ("tag=", ("", "tag", "")),
        ("hydra/launcher=pool", ("", "hydra/launcher", "pool")),
        ("tag=' x '", ("", "tag", "' x '")),  # the value as typed
    ],
)
def test_split_override_gives_the_prefix_the_key_and_the_value_as_typed(word: str, split: tuple) -> None:
    assert split_override(word) == split
    assert override_key(word) == split[1]


@pytest.mark.parametrize(
    ("word", "key"),
    [
        ("seed=1", "seed"),
        ("+seed=1", "seed"),
        ("++seed=1", "seed"),
        ("~seed=1", ""),
        ("~seed", ""),
        ("seed", ""),
    ],
)
def test_set_key_is_the_key_given_a_value_and_empty_for_a_deletion(word: str, key: str) -> None:
    assert set_key(word) == key


def test_key_values_keeps_the_last_of_a_key_and_a_deletion_and_typed_values_leaves_deletions_out() -> None:
    words = ["+a=1", "~b", "c='x'", "++a=2", "~d=3", "-m"]
    assert key_values(words) == {"a": "2", "b": "", "c": "'x'", "d": "3", "-m": ""}
    assert typed_values(words) == {"a": "2", "c": "x"}


def test_a_killed_sweeps_resume_fix_drops_its_own_resume_in_any_spelling(tmp_path: Path) -> None:
    """#1020: the fix was ``flopsweep -m ++resume=false ... resume=true``, which run.py refuses (resume given
    twice); now its own resume is left out and the fix is accepted."""
    import run
    from analysis.missing_jobs import missing_lines

    sweep = tmp_path / "S"
    sweep.mkdir()
    task = ["++resume=false", "model=llama-tiny", "device=cpu", "seed=0,1"]
    hydra = {"overrides": {"task": task}, "sweep": {"dir": str(sweep), "subdir": "${hydra.job.num}"}}
    (sweep / "multirun.yaml").write_text(yaml.safe_dump({"hydra": hydra}))
    (line,) = missing_lines([str(sweep)])
    fix = line.partition("Fix: ")[2].partition(" (re-runs")[0]
    assert fix == f"flopsweep -m model=llama-tiny device=cpu seed=0,1 hydra.sweep.dir={sweep} resume=true"
    assert run.refusal(shlex.split(fix)[1:]) is None


def test_a_deletion_of_plan_is_not_read_as_plan_true() -> None:
    """#1021: ``-m ~plan=true hydra/sweeper=tune`` was refused as ``plan=true`` beside the tuner (``Fix: drop
    plan=true``, not what was typed); now the deletion's own line comes, and its fix is accepted."""
    import run
    from flopsweep.command_line_checks import plan_conflict_problem, plan_folder_problem

    for argv in (
        ["-m", "~plan=true", "hydra/sweeper=tune", "backend=ddp,fsdp"],
        ["-m", "~plan=true", "repeats=3"],
    ):
        assert plan_conflict_problem(argv) is None
        line = run.refusal(argv)
        assert line is not None and line.startswith("Invalid config: ~plan=true: "), line
        assert "Fix: give the value you want, e.g. plan=false (its default)" in line
        assert run.refusal([a.replace("~plan=true", "plan=false") for a in argv]) is None
    assert plan_folder_problem(["~plan=true", "hydra.run.dir=/nonexistent-43"]) is None

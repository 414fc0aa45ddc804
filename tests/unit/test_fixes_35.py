"""Session 35's fixes (docs/reliability-5.md, rows 320 on): the analysis's exit status alike for a table and
a notebook, a ``--filter`` value that matches no record named with what the records hold (``backend=zero3``:
``backend=deepspeed zero_stage=3``), ``--output`` over a file already there refused unless ``--force``, and a
single run refused over a ``.hydra/`` no flopsweep run made."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest
from helpers import ROOT, fixture_record, put

from analysis.filter_hints import SHORTHANDS, SHOWN_VALUES, misses, nothing_matches_line, present
from analysis.output import OutputError, write_atomic
from flopsweep.folders import run_folder_problem, run_hydra_files_problem
from flopsweep.free_folder import another  # the folder a fix names (#725)
from tests.unit.test_analysis_trial import cli  # main's exit code, stdout, stderr

SWEEP = ROOT / "tests" / "fixtures" / "sweep"  # 38 records: fsdp 18, deepspeed 10 (ZeRO-3), ddp 10
RECORDS = ROOT / "tests" / "fixtures" / "records"


# --- #312: one exit status per kind of error, the table's and the notebook's alike ----------------------


def test_a_file_named_that_is_no_record_is_exit_2_for_the_notebook_as_for_the_table(tmp_path, capsys) -> None:
    """Was: the table 2, the notebook 1 (a kernel started, cell 3 failed: ``ValueError: no readable ...``)."""
    notes = tmp_path / "notes.txt"
    notes.write_text("not a record\n")
    table = cli(capsys, notes)
    book = cli(capsys, notes, "--notebook", tmp_path / "n.ipynb")
    assert table[0] == book[0] == 2
    assert "notes.txt is not a record (a job writes its record as metrics.json)" in book[2]
    assert "executing cell" not in book[2] and "starting a kernel" not in book[2]
    assert not (tmp_path / "n.ipynb").exists()


def test_only_unreadable_records_are_exit_1_for_both_with_the_tables_line(tmp_path, capsys) -> None:
    table = cli(capsys, RECORDS / "truncated")
    book = cli(capsys, RECORDS / "truncated", "--notebook", tmp_path / "n.ipynb")
    assert table[0] == book[0] == 1
    assert table[2].splitlines()[-1] == book[2].splitlines()[-1]  # the same line, no failed cell
    assert "starting a kernel" not in book[2]


@pytest.mark.parametrize("option,name", [("--output", "x.md"), ("--notebook", "x.ipynb")])
def test_a_file_name_over_name_max_is_refused_before_any_work(tmp_path, capsys, option, name) -> None:
    """Was: ``--output`` exit 1 after the table was made, ``--notebook`` exit 1 after every cell ran."""
    long = tmp_path / ("a" * 300 + name)
    code, out, err = cli(capsys, SWEEP, option, long)
    assert code == 2 and out == ""
    assert f"its name is {300 + len(name):,} bytes, over the 255 bytes a file name may have (NAME_MAX)" in err
    assert "executing cell" not in err and os.listdir(tmp_path) == []


# --- #313: a --filter value that matches no record ------------------------------------------------------


def test_a_zero3_filter_says_what_zero3_records_hold_and_the_filter_to_give(capsys) -> None:
    code, out, err = cli(capsys, SWEEP, "--filter", "backend=zero3")
    assert code == 2 and out == ""
    assert (
        "--filter backend=zero3 matches no record; ZeRO-3 records have backend=deepspeed zero_stage=3: use "
        "--filter backend=deepspeed --filter zero_stage=3" in err
    )
    code, out, err = cli(capsys, SWEEP, "--filter", "backend=deepspeed", "--filter", "zero_stage=3")
    assert code == 0 and "38 runs" in err and "10 shown" in err


def test_a_value_matching_none_beside_one_that_matches_is_warned_and_the_rest_shown(capsys) -> None:
    """Was: ``backend=zero3,fsdp`` showed the fsdp runs, zero3 dropped in silence."""
    code, _, err = cli(capsys, SWEEP, "--filter", "backend=zero3,fsdp")
    assert code == 0 and "18 shown" in err
    assert "WARNING: --filter backend=zero3 matches no record; ZeRO-3 records have backend=deepspeed" in err


def test_any_value_matching_none_lists_the_values_there_bounded() -> None:
    df = pd.DataFrame({"backend": ["fsdp", "ddp", None], "micro_batch_size": [16, 2, 4]})
    assert misses(df, {"backend": ["fsdp", "nope"]}) == [
        "--filter backend=nope matches no record; backend has: ddp, fsdp"
    ]
    line = nothing_matches_line(df, {"micro_batch_size": "3"})
    assert line == "--filter micro_batch_size=3 matches no record; micro_batch_size has: 2, 4, 16"  # by value
    many = pd.DataFrame({"seed": list(range(25))})
    assert present(many, "seed") == ", ".join(map(str, range(SHOWN_VALUES))) + ", ... (25 in all)"
    assert nothing_matches_line(many, {"seed": ["x", "y"]}).endswith(
        "(25 in all) (and 1 more value matching none)"
    )
    both = nothing_matches_line(
        df, {"backend": "fsdp", "micro_batch_size": "2"}
    )  # each matches, not together
    assert both.startswith(
        "no run matches every --filter at once (each value matches some run); values present:"
    )


def test_a_zero_shorthand_absent_from_the_records_says_so() -> None:
    df = pd.DataFrame({"backend": ["ddp"], "zero_stage": [None]})
    assert misses(df, {"backend": "zero2"}) == [
        "--filter backend=zero2 matches no record; ZeRO-2 records have backend=deepspeed zero_stage=2, "
        "and none is here (backend has: ddp)"
    ]


def test_the_analysis_shorthands_are_the_configs() -> None:
    """The analysis imports no flopsweep config module: its table is held equal to the config's here."""
    import yaml

    from flopsweep.deepspeed_config import ZERO_SHORTHANDS

    assert {value: int(alias["zero_stage"]) for (_, value), alias in SHORTHANDS.items()} == ZERO_SHORTHANDS
    for (group, value), alias in SHORTHANDS.items():
        conf = yaml.safe_load((ROOT / "conf" / group / f"{value}.yaml").read_text())
        assert conf["defaults"][0] == alias["backend"] and str(conf["zero_stage"]) == alias["zero_stage"]


# --- #314: --output never replaces a file unasked -------------------------------------------------------


def test_output_over_a_file_already_there_is_refused_unless_force(tmp_path, capsys) -> None:
    target = tmp_path / "report.md"
    target.write_text("mine\n")
    code, out, err = cli(capsys, SWEEP, "--output", target)
    assert code == 2 and out == "" and target.read_text() == "mine\n"
    assert err.strip().endswith(
        f"--output {target}: a file is already there; the analysis replaces a file only when asked. Fix: add "
        "--force to replace it, or name a new file (e.g. new-report.md)"
    )
    code, _, err = cli(capsys, SWEEP, "--output", target, "--force", "--format", "csv")
    assert code == 0 and target.read_text().startswith('"model",')
    new = tmp_path / "new.csv"
    assert cli(capsys, SWEEP, "--output", new, "--format", "csv")[0] == 0
    assert new.read_text().startswith('"model",')


def test_the_write_itself_never_replaces_what_came_since_the_check(tmp_path) -> None:
    """A file or a dangling link put at the name after the check: ``link`` refuses it, never following it;
    no temporary file is left behind."""
    target = tmp_path / "report.md"
    target.write_text("came since\n")
    with pytest.raises(OutputError, match="a file is already there"):
        write_atomic(target, b"table\n", overwrite=False)
    assert target.read_text() == "came since\n"
    link = tmp_path / "link.md"
    link.symlink_to(tmp_path / "elsewhere.md")
    with pytest.raises(OutputError, match="a file is already there"):
        write_atomic(link, b"table\n", overwrite=False)
    assert link.is_symlink() and not (tmp_path / "elsewhere.md").exists()
    write_atomic(tmp_path / "fresh.md", b"table\n", overwrite=False)
    assert sorted(os.listdir(tmp_path)) == ["fresh.md", "link.md", "report.md"]
    assert (tmp_path / "fresh.md").read_bytes() == b"table\n"


# --- #315: a single run never replaces a .hydra/ no flopsweep run made -------------------------------------


@pytest.mark.parametrize("name", ["config.yaml", "hydra.yaml", "overrides.yaml"])
def test_a_single_run_over_a_users_hydra_files_is_refused(tmp_path, name) -> None:
    (tmp_path / "d" / ".hydra").mkdir(parents=True)
    path = tmp_path / "d" / ".hydra" / name
    path.write_text("mine: 1\n")
    line = run_folder_problem(tmp_path / "d")
    assert (
        line
        == run_hydra_files_problem(tmp_path / "d")
        == (
            f"hydra.run.dir={tmp_path / 'd'}: {path} is already there (no metrics.json or plan.csv of a "
            "flopsweep run beside it); a run never replaces a file it did not make. Fix: "
            f"{another(tmp_path / 'd')}, or remove {path} if it is yours"
        )
    )


def test_a_flopsweep_runs_own_folder_is_run_into_as_before(tmp_path) -> None:
    """A record beside ``.hydra/`` (a run's: its own checks follow), a plan's ``plan.csv``, an empty
    ``.hydra/``, a new folder: no refusal from this check."""
    for folder in ("run", "plan", "empty"):
        (tmp_path / folder / ".hydra").mkdir(parents=True)
    for folder in ("run", "plan"):
        (tmp_path / folder / ".hydra" / "config.yaml").write_text("model: {}\n")
    put(tmp_path / "run", fixture_record())
    (tmp_path / "plan" / "plan.csv").write_text("job\n")
    for folder in ("run", "plan", "empty"):
        assert run_hydra_files_problem(tmp_path / folder) is None, folder
    assert run_hydra_files_problem(tmp_path / "missing") is None
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["status"] == "ok"

"""The session-21 new-user trial (docs/reliability-2.md, rows 137 on): command lines whose answer was a
silent choice, a line without its fix, a count without its total, or the command of another install.

- ``flopsweep-analysis DIR`` on a folder without records (exit 1, no fix), ``--columns ''`` and
  ``--best-by ''`` (the default table, in silence);
- the tuner's and ``plan_clusters``' command lines said ``python run.py`` where the installed command,
  and the README's, is ``flopsweep``; the tuner's progress had no total (``job 3 done``);
- ``plan_clusters`` with ``cost.usd_per_gpu_hour=inf`` (every set-up refused, 24 lines, exit 1);
- ``predict.calibration=''`` (uncalibrated, as documented nowhere; ``plan_gpu=''`` is documented as unset);
- ``hydra/sweeper=nope`` (Hydra's error and its options over 14 lines).

No process starts here; tests/integration/test_new_user_21.py runs the command lines.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from helpers import analysis_cli as _run

from flopsweep.config import ConfigError, RunConfig
from flopsweep.tune import Candidate, planned_jobs, schedule

SWEEP = Path(__file__).resolve().parents[1] / "fixtures" / "sweep"


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err
    return lines[0]


def test_a_folder_without_records_is_one_line_with_its_fix_exit_2(capsys, tmp_path):
    """It said ``no readable metrics.json under DIR; 0 runs`` and exited 1, with nothing to do."""
    (tmp_path / "empty").mkdir()
    code, out, err = _run(capsys, tmp_path / "empty")
    line = _one_error_line(err)
    assert code == 2 and not out and err.count("\n") == 1, err
    assert f"no metrics.json under {tmp_path / 'empty'}" in line and "Fix: name a sweep folder" in line


def test_a_missing_path_names_the_fix_too(capsys, tmp_path):
    code, _, err = _run(capsys, tmp_path / "missing")
    line = _one_error_line(err)
    assert code == 2 and "missing: no such file, directory or glob match. Fix: name a sweep folder" in line


@pytest.mark.parametrize("kind", ["fifo", "link", "empty-record"])
def test_only_unreadable_records_say_why_and_what_to_run_exit_1(capsys, caplog, tmp_path, kind):
    """A FIFO, a dangling link or an empty file where a record should be: skipped with its reason (a
    warning line each), then one error line with the fix; exit 1 (the records exist, they are bad)."""
    job = tmp_path / "sweep" / "0"
    job.mkdir(parents=True)
    record = job / "metrics.json"
    if kind == "fifo":
        os.mkfifo(record)
    elif kind == "link":
        record.symlink_to(tmp_path / "nowhere.json")
    else:
        record.write_bytes(b"")
    # --notebook reads the records as the table does before it starts a kernel: the same warning and line (an
    # empty file was read, and refused, in the kernel: docs/reliability-5.md #312)
    for notebook in [[], ["--notebook", tmp_path / "out.ipynb"]]:
        caplog.clear()
        code, out, err = _run(capsys, tmp_path / "sweep", *notebook)
        line = _one_error_line(err)
        assert code == 1 and not out, err
        assert f"skipping unreadable record {record}: " in caplog.text, caplog.text  # the log's warning line
        assert "starting a kernel" not in err
        assert "no readable metrics.json under" in line and "1 unreadable record skipped" in line
        assert "Fix: re-run those jobs" in line and "resume=true" in line
    assert not (tmp_path / "out.ipynb").exists()


@pytest.mark.parametrize("option", ["--columns", "--best-by"])
@pytest.mark.parametrize("value", ["", " ", ",", "model,,status"])
def test_an_empty_column_list_is_refused_not_the_default(capsys, option, value):
    """``--columns ''`` printed the default columns and ``--best-by ''`` every run, in silence (a shell
    variable left unset)."""
    code, out, err = _run(capsys, SWEEP, option, value)
    assert code == 2 and not out and err.count("\n") == 1, err
    assert f"argument {option}: {value!r}" in err
    assert ("names no column" if not value.strip(" ,") else "an empty name between commas") in err
    assert ("e.g. --columns model,backend" if option == "--columns" else "e.g. --best-by model") in err


def test_a_column_list_still_works(capsys):
    code, out, _ = _run(capsys, SWEEP, "--columns", "model, backend", "--format", "csv")
    assert code == 0 and out.splitlines()[0] == '"model","backend"'
    code, out, _ = _run(capsys, SWEEP, "--best-by", "model", "--format", "csv", "--columns", "model")
    assert code == 0 and len(out.splitlines()) == 4  # the header and gpt-125m, gpt-350m, gpt-1.3b


def test_the_tuners_winner_line_is_the_installed_command():
    """README: ``flopsweep`` is the command (from any folder); ``python run.py`` works only in the
    checkout."""
    from flopsweep import tunereport
    from flopsweep.tune import Budget

    c = Candidate(0, ("device=cpu", "backend=fsdp", "repeats=3", "repeat=1"), "backend=fsdp")
    c.values = [1.0, 1.1, 0.9]
    s = tunereport.summary(
        [c], [c], objective="tokens_per_s", direction="maximize", budget=Budget(10.0),
        rounds=[], stopped="the finalists are measured",
    )  # fmt: skip
    assert s["command"] == "flopsweep device=cpu backend=fsdp"


def test_the_plans_best_line_is_the_installed_command():
    from flopsweep.job.plandecide import override_line
    from flopsweep.plan_assess import Row

    row = Row(cluster="H100:1x8", setup=None, overrides=["backend=fsdp", "nproc_per_node=8", "nnodes=1"])
    assert override_line(row, ["plan=true", "model=llama3.1-8b"]) == (
        "flopsweep model=llama3.1-8b backend=fsdp nproc_per_node=8 nnodes=1"
    )


@pytest.mark.parametrize(
    ("initial", "eta", "finalists", "repeats", "rounds"),
    [(8, 2, 2, 3, 3), (3, 2, 2, 3, 2), (3, 3, 1, 2, 2), (9, 3, 1, 3, 2), (1, 2, 2, 3, 2), (16, 4, 2, 5, 3)],
)
def test_planned_jobs_count_the_schedule_when_no_run_fails(initial, eta, finalists, repeats, rounds):
    """The total the tuner's progress lines give (``3 of 7 jobs done``): the schedule's runs, each set-up
    brought up to its round's repeats, in the rounds that run a job (schedule(9, eta=3, finalists=1)
    lists a last round of 1 x 3 that adds none: the finalist has its 3 runs already)."""
    plan = schedule(initial, eta=eta, finalists=finalists, max_repeats=repeats)
    runs = sum(pool * (reps - (plan[i - 1][1] if i else 0)) for i, (pool, reps) in enumerate(plan))
    kw = {"eta": eta, "finalists": finalists, "max_repeats": repeats}
    assert planned_jobs([0] * initial, 0, **kw) == (runs, rounds)


def test_planned_jobs_from_a_later_round_count_what_each_set_up_lacks():
    kw = {"eta": 2, "finalists": 2, "max_repeats": 3}
    # round 1 after 8 -> 4 survivors (1 run each) and a challenger never measured: 5 brought to 2 runs
    # (4 + 2 jobs), the best 3 of them to 3 runs (3 jobs), and the best 2 are the finalists
    assert planned_jobs([1, 1, 1, 1, 0], 1, **kw) == (9, 2)
    assert planned_jobs([3, 3], 2, **kw) == (0, 1)  # the finalists are measured
    # one run each and no repeats: rounds 1 and 2 run no job, they only cut 5 -> 3 -> 2 -> 1
    assert planned_jobs([0] * 5, 0, eta=2, finalists=1, max_repeats=1) == (5, 3)


def test_the_tuners_round_line_says_of_how_many():
    from flopsweep.tune import round_line

    assert round_line(0, 2, pool=3, target=1, jobs=3, first_job=0, total=7, spent="0/600 GPU-s spent") == (
        "round 0 (1/2): 3 set-ups left, 1 run(s) each, jobs 0-2 (7 in all); 0/600 GPU-s spent"
    )
    assert "round 1 (2/2): 2 set-ups left, 3 run(s) each, jobs 3-6 (7 in all);" in round_line(
        1, 2, pool=2, target=3, jobs=4, first_job=3, total=7, spent=""
    )
    assert "1 run(s) each, job 6 (7 in all);" in round_line(
        2, 3, pool=1, target=1, jobs=1, first_job=6, total=7, spent=""
    )
    assert "2 run(s) each, no job to run (5 in all);" in round_line(
        1, 3, pool=3, target=2, jobs=0, first_job=5, total=5, spent=""
    )


def _cluster_cfg(**changes) -> RunConfig:
    cfg = RunConfig(plan=True, plan_clusters=["H100:8"])
    for key, value in changes.items():
        group, _, name = key.partition(".")
        cfg = dataclasses.replace(cfg, **{group: dataclasses.replace(getattr(cfg, group), **{name: value})})
    return cfg


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("cost.usd_per_gpu_hour", float("inf")),
        ("cost.usd_per_gpu_hour", float("nan")),
        ("budget.tokens", 1e400),
    ],
)
def test_plan_clusters_refuse_a_price_or_budget_that_is_not_finite_once(key, value):
    """Each of 540 set-ups was refused with the same reason, and the plan exited 1 in 24 lines."""
    from flopsweep.job.plandecide import checked

    with pytest.raises(ConfigError) as err:
        checked(_cluster_cfg(**{key: value}))
    assert str(err.value).startswith(f"Invalid config: {key}=") and "must be a finite number" in str(
        err.value
    )


def test_an_empty_calibration_is_unset_as_null_is():
    """``predict.calibration=''`` (``$DIR`` unset) is null, as ``plan_gpu=''`` is (tests/unit/test_plan.py):
    the prediction says ``uncalibrated`` in its source; docs/prediction.md says so."""
    from flopsweep.forecast import calibration_records

    assert calibration_records("") == [] == calibration_records(None)
    text = (Path(__file__).resolve().parents[2] / "docs" / "prediction.md").read_text()
    assert "`predict.calibration=''`" in text


@pytest.mark.parametrize(("group", "near"), [("hydra/sweeper", "tune"), ("hydra/launcher", "pool")])
def test_an_unknown_hydra_group_option_is_one_line_with_the_options(group, near):
    """Hydra printed "Could not find 'hydra/sweeper/nope'", its options and search path: 14 lines."""
    from flopsweep.overrides import group_choice_problem

    line = group_choice_problem(["-m", f"{group}={near}x"])
    assert line is not None and "\n" not in line, line
    assert line.startswith(f"Invalid config: {group}={near}x: {near}x is no option of {group}")
    assert line.endswith(f"e.g. {group}={near}.")
    if group == "hydra/sweeper":  # flopsweep's sweepers; Hydra's own basic is refused at the sweep's start
        assert "Fix: pick one of basic_batched, optuna_objective, tune," in line
    else:  # Hydra's list: its own, the Slurm plug-in's and hydra-submitit-launcher's
        assert "Fix: pick one of basic, pool, slurm, slurm_local, submitit_local, submitit_slurm," in line
    assert group_choice_problem([f"{group}={near}"]) is None
    assert group_choice_problem(["hydra/launcher=submitit_local"]) is None  # a plug-in's, not in conf/


@pytest.mark.parametrize(
    "axis", ["seed=range(0,0)", "seed=range(5,1)", "precision=glob(zzz*)"], ids=["empty", "backwards", "glob"]
)
def test_a_sweep_axis_without_a_value_is_refused_not_zero_jobs(axis):
    """Hydra launched 0 jobs, the summary said ``0 ok, 0 oom, 0 error, 0 invalid`` and the exit was 0."""
    from flopsweep.override_multirun import sweep_size_problem

    line = sweep_size_problem(["-m", "device=cpu", axis])
    assert line is not None and line.startswith(
        f"Invalid config: {axis}: lists no value, so the sweep would run"
    )
    assert f"Fix: give {axis.partition('=')[0]} at least one value" in line
    assert sweep_size_problem(["-m", "seed=range(0,2)", "precision=glob(fp*)"]) is None


@pytest.mark.parametrize(
    "axis", ["seed=range(0,3,0)", "batch.micro_batch_size=range(1,4,0)", "optim.lr=range(0.1,0.5,0.0)"]
)
def test_a_range_of_step_0_is_one_line_not_a_traceback(axis):
    """Session 28's trial: ``seed=range(0,3,0)`` ended in Python's ``range() arg 3 must not be zero``
    traceback inside flopsweep's own reading, a float range in Hydra's ``Invalid range values``; exit 1."""
    from flopsweep.override_multirun import sweep_size_problem

    line = sweep_size_problem(["-m", "device=cpu", axis])
    assert line is not None and "\n" not in line
    assert line.startswith(f"Invalid config: {axis}: a range() of step 0 never reaches its end")
    assert "Fix: give a step that is not 0" in line
    assert sweep_size_problem(["-m", "device=cpu", "seed=range(0,3,1)"]) is None


def test_a_value_of_the_wrong_type_for_hydras_own_key_is_one_line():
    """``hydra.job.chdir=maybe``: Hydra's seven lines ("Value 'maybe' is not a valid bool", full_key,
    reference_type, object_type), exit 1."""
    from flopsweep.hydra_keys import hydra_key_problem

    line = hydra_key_problem(["hydra.job.chdir=maybe"])
    assert line == (
        "Invalid config: hydra.job.chdir=maybe: is not true or false. Fix: set hydra.job.chdir to true or "
        "false, or drop the override."
    )
    assert "e.g. hydra.job.chdir=" not in line  # its default is null: no example to give
    for fine in (
        "hydra.job.chdir=true",
        "hydra.job.chdir=null",
        "hydra.verbose=flopsweep",
        "hydra.job.name=x",
    ):
        assert hydra_key_problem([fine]) is None, fine


def test_the_fix_of_repeats_without_m_is_the_installed_command():
    from run import repeats_problem

    line = repeats_problem(["repeats=2", "device=cpu"])
    assert line is not None and line.endswith("Fix: add -m (flopsweep -m repeats=2 ...).")


def test_a_pivot_of_a_blank_column_says_why_it_is_blank(capsys):
    """``--pivot model:backend:mfu`` of CPU runs showed ``ok`` in every cell and said nothing, where
    ``--sort mfu`` said why MFU is blank (no datasheet peak for the CPU); the fixture sweep has no
    energy, so J/token is blank in each of its ok runs."""
    code, out, err = _run(capsys, SWEEP, "--pivot", "model:backend:joules_per_token")
    assert code == 0 and " ok" in out
    assert "J/token is blank: the record has no metrics.energy_j;" in err


def test_a_path_too_long_to_look_up_is_one_line_not_a_traceback(capsys, tmp_path):
    """A name over 255 bytes (ENAMETOOLONG): ``Path.is_dir`` raised OSError, a 25-line traceback."""
    for path in ("x" * 300, f"{tmp_path}/{'y' * 300}/metrics.json"):
        code, out, err = _run(capsys, path)
        line = _one_error_line(err)
        assert code == 2 and not out and err.count("\n") == 1, err
        assert (
            "...(" in line
            and "characters): cannot be looked up (File name too long). Fix: name a sweep" in line
        )


def test_a_model_config_name_too_long_is_a_config_error():
    """``model=hf model.config=<300 characters>``: an OSError traceback from the shipped-name lookup."""
    from flopsweep.models.hf_files import config_path, is_shipped

    assert is_shipped("q" * 300) is False
    with pytest.raises(ConfigError) as err:
        config_path("q" * 300)
    line = str(err.value)
    assert line.startswith(
        "Invalid config: model.config='qqqqqqqqqqqqqqq...(300 characters): cannot be resolved"
    )
    assert "(File name too long)" in line and "Fix: give a config.json path" in line


@pytest.mark.parametrize(
    "flag", [["--config-name", "nope"], ["-cn", "nope"], ["--config-name=nope"], ["-cn"]]
)
def test_a_config_name_that_names_no_file_is_one_line(flag):
    """``--config-name nope``: Hydra's "Cannot find primary config 'nope'", its search path and the
    full-error hint, 9 lines, exit 1."""
    from run import refusal

    line = refusal([*flag, "device=cpu"])
    assert line is not None and line.startswith(f"Invalid config: {' '.join(flag)}".rstrip()), line
    assert "names no primary config" in line and line.endswith("name one of conf/: config.")
    assert refusal(["--config-name", "config", "device=cpu"]) is None
    assert refusal(["--config-name=config.yaml"]) is None
    # conf/ is the only folder of configs: another --config-dir is refused (flopsweep.flags), and with
    # conf/ itself a name that is no file of it is still this line
    assert "reads its configs from" in refusal(["--config-dir", "/elsewhere", "--config-name", "config"])
    assert "names no primary config" in refusal(["--config-dir", "/elsewhere", "--config-name", "mine"])


def test_a_long_legal_output_name_is_written(capsys, tmp_path):
    """A name of 250 bytes is legal (255 is the limit), but its temporary file ``.NAME.XXXXXXXX.tmp``
    was not: ``cannot write ...: File name too long``, exit 1, for ``--output`` and every atomic write."""
    from flopsweep.files import NAME_MAX, atomic_write_json, fit_prefix, replace_text

    long = "y" * 246 + ".csv"
    code, _, err = _run(capsys, SWEEP, "--format", "csv", "--output", tmp_path / long)
    assert code == 0 and (tmp_path / long).read_text().startswith('"model"'), err
    replace_text(tmp_path / ("t" * 250), "text\n")
    atomic_write_json(tmp_path / ("j" * 250), {"a": 1})
    assert (tmp_path / ("t" * 250)).read_text() == "text\n" and (tmp_path / ("j" * 250)).exists()
    assert sorted(p.name[0] for p in tmp_path.iterdir()) == ["j", "t", "y"]  # no temporary file left
    assert fit_prefix(".short.", ".tmp") == ".short."
    cut_one = fit_prefix("." + "é" * 200 + ".", ".tmp")  # 2 bytes each: cut at a character
    assert len(cut_one.encode()) + 8 + 4 <= NAME_MAX and cut_one.encode().decode() == cut_one


def test_a_micro_batch_beyond_its_bound_in_the_space_is_refused_once():
    """``space.micro_batches=[99999999999]``: each of 108 set-ups pruned with the bound, 19 lines, exit 1."""
    from flopsweep.config import SpaceConfig
    from flopsweep.space import Space

    with pytest.raises(ConfigError) as err:
        Space.from_config(SpaceConfig(micro_batches=[1, 99999999999]))
    assert str(err.value) == (
        "Invalid config: space.micro_batches=[1,99999999999]: lists a micro batch beyond "
        "batch.micro_batch_size's bound of 65536. Fix: list micro batches of at most 65536, "
        "e.g. space.micro_batches=[1,2,4]."
    )
    assert Space.from_config(SpaceConfig(micro_batches=[1, 65536])).micro_batches


def test_a_space_of_too_many_set_ups_is_refused_before_any_is_judged():
    """``space.micro_batches`` of 400 sizes: 36,000 set-ups judged one by one, 88 s before the first
    line of a plan (a tuner composes each with Hydra too); a longer list ran for hours, silently."""
    from flopsweep.config import SpaceConfig
    from flopsweep.job.plandecide import checked
    from flopsweep.space import MAX_SETUPS, Space

    sizes = list(range(1, 1001))
    space = Space.from_config(SpaceConfig(micro_batches=sizes))
    assert space.combinations() == 6 * 6 * 3 * 1 * 1000 > MAX_SETUPS
    with pytest.raises(ConfigError) as err:
        checked(dataclasses.replace(_cluster_cfg(), space=SpaceConfig(micro_batches=sizes)))
    assert str(err.value) == (
        "Invalid config: space.micro_batches='[1000 values]': gives 108000 set-ups to judge on 1 cluster(s), "
        f"over the bound of {MAX_SETUPS}. Fix: list fewer values in space.micro_batches, or split the "
        "question into several plans."
    )
    Space.from_config(SpaceConfig()).size_problem(8)  # the default space on 8 clusters: 4,320


def test_a_tuners_space_times_its_sweep_over_the_bound_is_refused(hydra_compose):
    """The tuner crosses the space with the sweep's combinations (``model=a,b``): the product is bounded.
    250 micro batches are 27,000 set-ups of the default space, within; two combinations, 54,000, are not."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from hydra_plugins.flopsweep_tune import TuneSweeper

    sizes = "[" + ",".join(map(str, range(1, 251))) + "]"
    overrides = ["device=cpu", "nproc_per_node=1", f"space.micro_batches={sizes}"]
    parsed = OverridesParser.create().parse_overrides(overrides)
    sweeper = TuneSweeper()
    sweeper.config = hydra_compose.config(overrides)
    sweeper.space(parsed, combos=1)
    with pytest.raises(ConfigError) as err:
        sweeper.space(parsed, combos=2)
    assert "gives 54000 set-ups to judge over 2 combination(s) of the sweep's axes, over the bound" in str(
        err.value
    )


def test_a_notebook_whose_folder_cannot_take_a_file_is_refused_before_the_kernel(capsys, tmp_path):
    """``--notebook afile/x.ipynb`` said ``cannot write afile: File exists`` after starting a kernel, and
    ``--notebook /proc/x.ipynb`` executed all 12 cells, then named its temporary file (10 s, exit 1)."""
    (tmp_path / "afile").write_text("")
    for target, why in (
        (tmp_path / "afile" / "x.ipynb", f"its folder {tmp_path / 'afile'} is a regular file, not a folder"),
        (tmp_path / "afile" / "y" / "x.ipynb", f"{tmp_path / 'afile'} is a regular file, not a folder"),
    ):
        code, out, err = _run(capsys, SWEEP, "--notebook", target)
        assert code == 2 and not out and err.count("\n") == 1, err
        assert f"--notebook {target}: {why}. Fix: name a file in a folder you can write" in err
        assert "starting a kernel" not in err


@pytest.mark.parametrize(
    "given, dropped",
    [
        (["batch.micro_batch_size=1,2", "batch.micro_batch_size=3"], "batch.micro_batch_size=1,2"),
        (["seed=3", "seed=range(1,3)"], "seed=3"),
        (["model=gpt-tiny,llama-tiny", "model=gpt-tiny"], "model=gpt-tiny,llama-tiny"),
    ],
)
def test_a_key_given_twice_beside_its_sweep_is_one_line(given, dropped):
    """Session 28's trial: ``-m batch.micro_batch_size=1,2 batch.micro_batch_size=3`` ran one job at micro
    batch 3, exit 0: Hydra keeps a key's last override. The same key twice with single values is refused
    too since session 33 (docs/reliability-5.md #302)."""
    from flopsweep.override_sweeps import repeated_sweep_problem

    line = repeated_sweep_problem(["-m", "device=cpu", *given])
    key = given[0].partition("=")[0]
    assert line.startswith(
        f"Invalid config: {given[0]} and {given[1]}: {key} is given twice and Hydra keeps only the last, so "
        f"{dropped} would be dropped without a word. Fix: give {key} once (a sweep lists every value"
    )
    merged = {"batch.micro_batch_size": "=1,2,3", "seed": None, "model": "=gpt-tiny,llama-tiny"}[key]
    if merged is None:  # a range(): the general form
        assert line.endswith(f"(a sweep lists every value: {key}=a,b,c).")
    else:  # session 39 (#525): both sweeps in one, which runs
        assert line.endswith(f"(a sweep lists every value): {key}{merged}.")
        from run import refusal

        assert refusal(["-m", "device=cpu", f"{key}{merged}"]) is None
    assert repeated_sweep_problem(["-m", "device=cpu", "seed=1,2", "model=gpt-tiny,llama-tiny"]) is None

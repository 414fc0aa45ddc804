"""Session 37: a new user's damaged ``conf/config.yaml``, a cluster size written with another sign than
``x``, and a ``hydra.sweep.subdir`` that is the same for every job (docs/reliability-7.md #376-#389). Each
refused before Hydra in one line, exact here; no subprocess (tests/integration/test_conf_37.py runs a few
as typed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import conf_copy

import run
from flopsweep import override_schema
from flopsweep.cluster_prices import sizes_written, times_sign_problem
from flopsweep.root_defaults import root_entries_problem
from flopsweep.start_checks import root_problem
from flopsweep.sweep_subdir import fixed_subdir_problem, subdir_kind, swept_keys

RESTORE = "or restore it from the checkout: git checkout conf/config.yaml."
DAMAGED = "the checkout's root config is damaged. Fix:"


@pytest.fixture
def conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the checkout's ``conf/`` (its ``sweep`` link copied as a folder), the listings pointed at
    it."""
    copy = conf_copy(tmp_path / "conf")
    monkeypatch.setattr(override_schema, "CONF", str(copy))
    return copy


def _damaged(conf: Path, old: str, new: str) -> None:
    root = conf / "config.yaml"
    text = root.read_text()
    assert old in text
    root.write_text(text.replace(old, new, 1))


# 1. conf/config.yaml: its defaults list and keys

ROOT_DAMAGE = [
    (  # Hydra's 14-line "Could not find 'hydra/sweeper/basic_batchd'" block, exit 1
        "- override hydra/sweeper: basic_batched",
        "- override hydra/sweeper: basic_batchd",
        "its defaults list picks override hydra/sweeper: basic_batchd, and there is no option basic_batchd "
        f"of hydra/sweeper (its options: basic_batched, optuna_objective, tune): {DAMAGED} did you mean "
        f"override hydra/sweeper: basic_batched? Write that there, {RESTORE}",
    ),
    (  # Hydra's 15 lines
        "- override hydra/job_logging: flopsweep",
        "- override hydra/job_logging: flopswep",
        "its defaults list picks override hydra/job_logging: flopswep, and there is no option flopswep of "
        f"hydra/job_logging (its options: flopsweep, default, disabled, none, stdout): {DAMAGED} did you "
        f"mean override hydra/job_logging: flopsweep? Write that there, {RESTORE}",
    ),
    (  # a 33-line ValueError traceback: "Unsupported item value in defaults : int"
        "- backend: single ",
        "- backend: 3 ",
        "its defaults list picks backend: 3: an option is the name of a file of backend/, not a number (3) "
        f"(its options: ddp, deepspeed, fsdp, single, zero1, zero2, ...): {DAMAGED} write backend: single "
        f"there, {RESTORE}",
    ),
    (  # "Override 'hydra/help : flopsweep' is defined before ': _selff_'"
        "- _self_",
        "- _selff_",
        "its defaults list names _selff_, which is no config (neither _self_ nor base_config nor a file "
        f"conf/_selff_.yaml): {DAMAGED} did you mean _self_? Write - _self_ there, {RESTORE}",
    ),
    (  # "Key 'defualts' not in 'RunConfig'"
        "hydra:\n",
        "defualts:\n  - model: gpt-tiny\nhydra:\n",
        "its top-level key defualts is no key of the root config (RunConfig's, defaults or hydra): a second "
        f"defaults list, misspelt: {DAMAGED} merge its entries into defaults: and drop defualts, {RESTORE}",
    ),
    (  # "Multiple values for hydra/sweeper"
        "- override hydra/sweeper",
        "- overide hydra/sweeper",
        "its defaults list holds overide hydra/sweeper: basic_batched: overide is no keyword of a defaults "
        'entry (override, optional), and Hydra reads it as a second pick of hydra/sweeper ("Multiple values '
        f'for hydra/sweeper"): {DAMAGED} did you mean override hydra/sweeper: basic_batched? Write that '
        f"there, {RESTORE}",
    ),
    (  # "Multiple values for precision"
        "- precision: bf16",
        "- precision: bf16\n  - precision: fp32",
        "its defaults list picks precision twice (precision: bf16, then precision: fp32): Hydra's \"Multiple "
        f'values for precision": {DAMAGED} keep one of them, {RESTORE}',
    ),
    (  # "has a defaults list that picks no option of precision"
        "- precision: bf16",
        "- precison: bf16",
        "its defaults list picks precison, which is no config group (no folder precison/ in conf/ or "
        f"Hydra's): {DAMAGED} did you mean precision: bf16? Write that there, {RESTORE}",
    ),
    (  # a run of the schema's backend, silently
        "- backend: single ",
        "- backend: null ",
        "its defaults list picks backend: null: a run takes one option of backend, not null (no option) (its "
        f"options: ddp, deepspeed, fsdp, single, zero1, zero2, ...): {DAMAGED} write backend: single there, "
        f"{RESTORE}",
    ),
    (  # Hydra's UserWarning, two lines at every start
        "  - _self_\n",
        "",
        f"its defaults list has no _self_ (Hydra warns of it at every start): {DAMAGED} add - _self_ as its "
        f"last entry, {RESTORE}",
    ),
]


@pytest.mark.parametrize(("old", "new", "line"), ROOT_DAMAGE, ids=[d[1].strip()[:24] for d in ROOT_DAMAGE])
def test_a_damaged_root_defaults_list_is_one_line_naming_the_entry_and_the_fix(
    conf: Path, old: str, new: str, line: str
) -> None:
    _damaged(conf, old, new)
    assert root_problem(["device=cpu"], str(conf)) == f"Invalid config: conf/config.yaml: {line}"


def test_an_entry_below_the_override_entries_is_one_line(conf: Path) -> None:
    text = (conf / "config.yaml").read_text()
    model = next(line for line in text.splitlines(keepends=True) if line.startswith("  - model: gpt-tiny"))
    _damaged(conf, model, "")
    _damaged(
        conf, "  - _self_\n", "  - _self_\n  - model: gpt-tiny\n"
    )  # Hydra: "Overrides must be at the end"
    assert root_problem(["device=cpu"], str(conf)) == (
        "Invalid config: conf/config.yaml: its defaults list holds model: gpt-tiny after override "
        "hydra/sweeper: basic_batched, and Hydra reads overrides only at the end of the list: "
        f"{DAMAGED} move model: gpt-tiny above the override entries, {RESTORE}"
    )


def test_a_choice_the_command_line_makes_itself_is_not_read_but_a_number_is_refused(conf: Path) -> None:
    _damaged(conf, "- override hydra/sweeper: basic_batched", "- override hydra/sweeper: basic_batchd")
    assert root_problem(["-m", "hydra/sweeper=basic_batched", "seed=0,1"], str(conf)) is None
    _damaged(conf, "- override hydra/sweeper: basic_batchd", "- override hydra/sweeper: basic_batched")
    _damaged(conf, "- backend: single ", "- backend: null ")
    assert root_problem(["backend=ddp"], str(conf)) is None  # Hydra never reads the null
    _damaged(conf, "- backend: null ", "- backend: 3 ")
    assert root_problem(["backend=ddp"], str(conf)).startswith(
        "Invalid config: conf/config.yaml: its defaults list picks backend: 3:"
    )  # Hydra's defaults list refuses an int whatever the command line picks
    assert root_entries_problem(["--config-name", "other"], str(conf)) is None


def test_the_root_configs_other_keys_get_a_did_you_mean(conf: Path) -> None:
    _damaged(conf, "defaults:\n", "defualts:\n")  # no defaults list left: was "has no defaults list"
    assert root_problem([], str(conf)) == (
        "Invalid config: conf/config.yaml: its top-level key defualts is no key of the root config "
        f"(RunConfig's, defaults or hydra): {DAMAGED} did you mean defaults? Write that there, {RESTORE}"
    )
    _damaged(conf, "defualts:\n", "defaults:\n")
    _damaged(conf, "hydra:\n", "step:\n  measure: 3\nhydra:\n")
    assert "top-level key step is" in root_problem([], str(conf))
    assert "did you mean steps? Write that there" in root_problem([], str(conf))


def test_the_checkouts_root_config_and_its_defaults_pass() -> None:
    assert root_entries_problem(["device=cpu"]) is None
    assert root_entries_problem(["-m", "+sweep=smoke"]) is None


# 2. plan_clusters: a size joined by another sign than x


@pytest.mark.parametrize(
    ("entry", "said", "fixed"),
    [
        (
            "H100:8✕8",
            "with '✕' (U+2715 MULTIPLICATION X), not the letter x",
            "write x: plan_clusters=[H100:8x8]",
        ),
        ("H100:8X8", "with a capital X, not the letter x", "write x: plan_clusters=[H100:8x8]"),
        ("H100:8*8", "with '*', not the letter x", "write x: plan_clusters=[H100:8x8]"),
        ("H100:8❌8", "with '❌' (U+274C CROSS MARK), not the letter x", "write x: plan_clusters=[H100:8x8]"),
        ("H100:8 x 8", "with spaces around its x", "write it without spaces: plan_clusters=[H100:8x8]"),
        ("MI300X:1X8@2.5", "with a capital X, not the letter x", "write x: plan_clusters=[MI300X:1x8@2.5]"),
    ],
)
def test_a_cluster_size_joined_by_another_sign_says_write_x(entry: str, said: str, fixed: str) -> None:
    assert (
        str(times_sign_problem([entry]))
        == f"Invalid config: plan_clusters='{entry}': its size is written {said}. Fix: {fixed}."
    )


def test_no_fix_writes_a_size_that_is_refused_again() -> None:
    assert run.refusal(["device=cpu", "plan=true", "plan_clusters=[H100:8✕8]"]) == (
        "Invalid config: plan_clusters=[H100:8✕8]: Hydra's override grammar cannot read it ('✕' (U+2715 "
        "MULTIPLICATION X) looks like ASCII 'x'). Fix: did you mean plan_clusters=[H100:8x8]?"
    )  # was: quote each element, 'plan_clusters=["H100:8✕8"]', which then "gives no size"
    assert run.refusal(["device=cpu", "plan=true", "plan_clusters=[H100:8X8,H200:1x8]"]) == (
        "Invalid config: plan_clusters='H100:8X8': its size is written with a capital X, not the letter x. "
        "Fix: write x: plan_clusters=[H100:8x8,H200:1x8]."
    )  # was: its size '8X8' is not a GPU count ... Fix: write the count as a whole number
    assert run.refusal(["device=cpu", "plan=true", "plan_clusters=[H100:8❌8]"]) == (
        "Invalid config: plan_clusters='H100:8❌8': its size is written with '❌' (U+274C CROSS MARK), not "
        "the letter x. Fix: write x: plan_clusters=[H100:8x8]."
    )  # a sign no table folds: the grammar's "quote each element" fix checked again, never offered refused
    assert run.refusal(["device=cpu", "plan=true", "plan_clusters=H100:8X8"]) == (
        "Invalid config: plan_clusters='H100:8X8': is one name, not a list. Fix: write a list: "
        "plan_clusters=[H100:8x8]."
    )
    assert sizes_written("[H100:8X8, H200:2✕8:ib400@3]") == "[H100:8x8,H200:2x8:ib400@3]"
    assert times_sign_problem(["H100:8x8", "MI300X:8", "H200:16:ib400"]) is None


# 3. hydra.sweep.subdir the same for every job

HEAD = "# @package _global_\nhydra:\n  sweeper:\n    params:\n      seed: 0,1\n  sweep:\n    subdir: "
SAME = "every job of the sweep would write into one folder"


def test_a_sweep_files_fixed_subdir_is_refused_naming_the_file(conf: Path) -> None:
    mine = conf / "sweep" / "mine.yaml"
    argv = ["-m", "+sweep=mine", "device=cpu"]
    mine.write_text(HEAD + "x\n")  # was: job 0 ran, job 1 stopped on .../x/metrics.json already exists
    assert fixed_subdir_problem(argv, str(conf)) == (
        f"Invalid config: conf/sweep/mine.yaml: hydra.sweep.subdir: x: {SAME}. Fix: write subdir: "
        "x_${hydra.job.num} under its hydra.sweep, or drop subdir there (the default is ${hydra.job.num})."
    )
    mine.write_text(HEAD + "${now:%H}\n")
    assert fixed_subdir_problem(argv, str(conf)) == (
        "Invalid config: conf/sweep/mine.yaml: hydra.sweep.subdir: ${now:%H}: is the same for every job "
        f"(${{now:...}} is resolved once, as the sweep starts), so {SAME}. Fix: write subdir: "
        "${now:%H}_${hydra.job.num} under its hydra.sweep, or drop subdir there (the default is "
        "${hydra.job.num})."
    )
    mine.write_text(HEAD + ".\n")
    assert fixed_subdir_problem(argv, str(conf)) == (
        f"Invalid config: conf/sweep/mine.yaml: hydra.sweep.subdir: .: is the sweep's folder itself, so "
        f"{SAME}. Fix: drop subdir from its hydra.sweep (the default, ${{hydra.job.num}}, gives each job its "
        "own folder)."
    )
    assert fixed_subdir_problem([*argv, "hydra.sweep.subdir=${hydra.job.num}"], str(conf)) is None  # given
    mine.write_text(HEAD + "${seed}\n")  # the file's own axis
    assert fixed_subdir_problem(argv, str(conf)) is None
    mine.write_text("# @package _global_\ndefaults:\n  - override /hydra/sweeper: tune\n")
    assert fixed_subdir_problem([*argv, "seed=0,1", "hydra.sweep.subdir=${tag}"], str(conf)) is None  # tune


def test_a_fixed_subdir_of_the_root_config_is_the_checkouts_damage(conf: Path) -> None:
    _damaged(conf, "subdir: ${hydra.job.num}", "subdir: x")
    assert fixed_subdir_problem(["-m", "seed=0,1"], str(conf)) == (
        f"Invalid config: conf/config.yaml: hydra.sweep.subdir: x: {SAME}: the checkout's root config is "
        "damaged. Fix: write subdir: x_${hydra.job.num} under its hydra.sweep, or restore it from the "
        "checkout: git checkout conf/config.yaml."
    )
    assert fixed_subdir_problem(["-m", "seed=0"], str(conf)) is None  # one job


def test_a_command_line_subdir_the_same_for_every_job_is_one_line() -> None:
    argv = ["-m", "seed=0,1", "device=cpu"]
    assert fixed_subdir_problem([*argv, "hydra.sweep.subdir=${now:%H}"]) == (
        "Invalid config: hydra.sweep.subdir=${now:%H}: is the same for every job (${now:...} is resolved "
        f"once, as the sweep starts), so {SAME}. Fix: include ${{hydra.job.num}}, e.g. "
        "'hydra.sweep.subdir=${now:%H}_${hydra.job.num}'."
    )
    assert fixed_subdir_problem([*argv, "hydra.sweep.subdir=."]) == (
        f"Invalid config: hydra.sweep.subdir=.: is the sweep's folder itself, so {SAME}. Fix: give each job "
        "its own folder, e.g. 'hydra.sweep.subdir=${hydra.job.num}'."
    )  # was: e.g. 'hydra.sweep.subdir=._${hydra.job.num}'
    assert fixed_subdir_problem([*argv, "hydra.sweep.subdir=${tag}"]) == (
        "Invalid config: hydra.sweep.subdir=${tag}: is the same for every job (no part of it is "
        f"${{hydra.job.num}} or a key the sweep varies), so {SAME}. Fix: include ${{hydra.job.num}}, e.g. "
        "'hydra.sweep.subdir=${tag}_${hydra.job.num}'."
    )
    assert fixed_subdir_problem([*argv, "hydra.sweep.subdir=${seed}"]) is None
    assert fixed_subdir_problem(["-m", "repeats=2", "hydra.sweep.subdir=${repeat}"]) is None


@pytest.mark.parametrize(
    ("value", "argv", "kind"),
    [
        ("x", ["seed=0,1"], "fixed"),
        ("${now:%Y}/${oc.env:USER}", ["seed=0,1"], "fixed"),
        ("${hydra.job.name}", ["seed=0,1"], "fixed"),
        ("${hydra.runtime.choices.model}", ["seed=0,1"], "fixed"),
        ("${hydra.runtime.choices.model}", ["model=gpt-tiny,llama-tiny"], "varies"),
        ("${model.name}", ["model=gpt-tiny,llama-tiny"], "varies"),
        ("${oc.select:seed,0}", ["seed=0,1"], "varies"),
        ("${oc.env:HOME,${hydra.job.id}}", ["seed=0,1"], "varies"),
        ("run_${hydra.job.override_dirname}", ["seed=0,1"], "varies"),
        ("${oc.decode:x}", ["seed=0,1"], None),  # another resolver: left to the jobs
        ("${seed}", ["hydra/sweeper=tune"], None),  # its trials may set any key
        ("${now:%H}", ["hydra/sweeper=tune"], "fixed"),
    ],
)
def test_a_subdir_varies_only_through_the_job_or_a_swept_key(
    value: str, argv: list[str], kind: str | None
) -> None:
    assert subdir_kind(value, swept_keys(["-m", *argv])) == kind


@pytest.mark.parametrize(
    "subdir",
    [
        "${oc.env:HOME}",
        "${oc.env:HOME}_${hydra.job.num}",  # the fixed-subdir line's own fix once suggested this
        "${oc.env:PWD}/x${hydra.job.num}",
        "${hydra.sweep.dir}/x${hydra.job.num}",
        "${oc.env:FLOPSWEEP_NO_SUCH_VAR,/tmp}/x${hydra.job.num}",
        "${oc.env:FLOPSWEEP_NO_SUCH_VAR,..}/x${hydra.job.num}",
    ],
)
def test_a_subdir_outside_the_sweeps_folder_once_interpolated_is_refused(subdir: str) -> None:
    """Re-trial, session 37: ``${oc.env:HOME}_${hydra.job.num}`` wrote /root_0 and /root_1, summary 0 ok."""
    line = fixed_subdir_problem(["-m", "seed=0,1", f"hydra.sweep.subdir={subdir}"])
    assert line is not None and "\n" not in line, line
    assert f"hydra.sweep.subdir={subdir}: names a folder outside hydra.sweep.dir" in line
    fix = line.split("e.g. ")[-1].strip("'.")
    assert fixed_subdir_problem(["-m", "seed=0,1", fix]) is None, fix


def test_a_relative_interpolated_subdir_is_kept() -> None:
    default = "${oc.env:FLOPSWEEP_NO_SUCH_VAR,runs}/${hydra.job.num}"
    for subdir in ("job-${hydra.job.num}", "${seed}", default):
        assert fixed_subdir_problem(["-m", "seed=0,1", f"hydra.sweep.subdir={subdir}"]) is None, subdir

"""Session 37 (docs/reliability-7.md #366-#375): a new user's sweep files and pool values that reached
Hydra, the job or the launcher, refused in one line before Hydra naming the file (or the key), the value
and a fix that the same check passes (:mod:`flopsweep.sweep_file_defaults`, :mod:`flopsweep.pool`,
:data:`flopsweep.lower_bounds.MIN_BY_KEY`, :func:`flopsweep.hydra_keys.hydra_sweep_problem`). The files
are planted in a ``conf/`` of ``tmp_path``, never in the checkout's ``sweep/``."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import SWEEP_ARGV as ARGV
from helpers import SWEEP_SHOWN as SHOWN
from helpers import defaults_text, sweep_conf

from flopsweep.config import ConfigError
from flopsweep.hydra_keys import hydra_sweep_problem
from flopsweep.pool import cpu_pool_problem, pool_devices, settings_problem
from flopsweep.sweep_file_defaults import defaults_problem, pool_problem
from flopsweep.sweep_file_keys import values_problem
from run import FILE_VALUE_CHECKS, refusal

GROUPS = {
    "model": ("gpt-tiny", "gpt-125m"),
    "backend": ("single", "ddp"),
    "batch": ("fixed", "auto/max16"),
}
"""The groups of the small ``conf/`` (:func:`helpers.sweep_conf`), each picked at its first option."""


def _conf(tmp_path: Path, text: str) -> str:
    return sweep_conf(tmp_path, text, GROUPS)


def _line(tmp_path: Path, *entries: str) -> str | None:
    return defaults_problem(ARGV, _conf(tmp_path, defaults_text(*entries)))


@pytest.mark.parametrize(
    ("entry", "line"),
    [
        (
            "override /model:gpt-125m",
            "(defaults: override /model:gpt-125m): is one text, a pick written without a space after its "
            "colon, "
            "which Hydra reads as the name of a config file (Could not load 'sweep/override "
            "/model:gpt-125m'). "
            "Fix: - override /model: gpt-125m.",
        ),
        (
            "override /model/gpt-125m",
            "(defaults: override /model/gpt-125m): is one text, a pick written as a path, which Hydra reads "
            "as "
            "the name of a config file (Could not load 'sweep/override /model/gpt-125m'). Fix: - override "
            "/model: gpt-125m.",
        ),
        (
            "override /batch/auto/max16",
            "(defaults: override /batch/auto/max16): is one text, a pick written as a path, which Hydra "
            "reads "
            "as the name of a config file (Could not load 'sweep/override /batch/auto/max16'). Fix: - "
            "override "
            "/batch: auto/max16.",
        ),
        (  # a misspelt group in it too: the nearest group
            "override /modle:gpt-125m",
            "(defaults: override /modle:gpt-125m): is one text, a pick written without a space after its "
            "colon, which Hydra reads as the name of a config file (Could not load 'sweep/override "
            "/modle:gpt-125m'). Fix: - override /model: gpt-125m.",
        ),
        (  # a misspelt option in a path: the nearest option
            "model/gpt-125n",
            "(defaults: model/gpt-125n): is one text, a pick written as a path, which Hydra reads as the "
            "name "
            "of a config file (Could not load 'sweep/model/gpt-125n'). Fix: - override /model: gpt-125m.",
        ),
    ],
)
def test_a_pick_written_as_one_text_names_the_pick(tmp_path: Path, entry: str, line: str) -> None:
    """#366: Hydra's "Could not load 'sweep/override /model:gpt-125m'" and its search path (exit 1)."""
    assert _line(tmp_path, entry) == f"{SHOWN} {line}"
    fix = line.rpartition("Fix: - ")[2].removesuffix(".")
    assert _line(tmp_path / "fix", fix) is None


def test_an_options_path_or_a_misspelt_sweep_file_is_one_line(tmp_path: Path) -> None:
    """#367: ``- /model/gpt-125m`` merged the option's file as a config of its own, the primary config's
    ``model: gpt-tiny`` kept (the job recorded the mixed model invalid, exit 0); ``- smok`` was Hydra's "Could
    not load 'sweep/smok'". ``- smoke``, ``- _self_`` and a structured config's path pass."""
    assert _line(tmp_path, "/model/gpt-125m") == (
        f"{SHOWN} (defaults: /model/gpt-125m): loads model/gpt-125m.yaml as a config of its own, not as the "
        "pick of model, so the primary config's model stays picked and the two mix. Fix: - override /model: "
        "gpt-125m."
    )
    assert _line(tmp_path / "a", "smok") == (
        f"{SHOWN} (defaults: smok): names no sweep file (no conf/sweep/smok.yaml; Hydra: Could not load "
        "'sweep/smok'). Fix: did you mean - smoke?"
    )
    assert _line(tmp_path / "b", "smoke", "_self_", "/schema/model/base_gpt2") is None


@pytest.mark.parametrize(
    ("entry", "line"),
    [
        (
            "override /model@foo: gpt-125m",
            "(defaults: override /model@foo: gpt-125m): a package (@foo) moves the keys of model to foo, and "
            "each group's keys stay at its own key, model (Hydra: Could not override 'model@foo'). Fix: - "
            "override /model: gpt-125m.",
        ),
        (
            "override /model@_global_: gpt-125m",
            "(defaults: override /model@_global_: gpt-125m): a package (@_global_) moves the keys of model "
            "to "
            "the config's root, and each group's keys stay at its own key, model (Hydra: Could not override "
            "'model@_global_'). Fix: - override /model: gpt-125m.",
        ),
        (  # without override: Hydra's "Key 'extra' not in 'RunConfig'" (5 lines)
            "/model@extra: gpt-125m",
            "(defaults: /model@extra: gpt-125m): a package (@extra) moves the keys of model to extra, and "
            "each "
            "group's keys stay at its own key, model. Fix: - override /model: gpt-125m.",
        ),
        (
            "override /hydra/launcher@x: pool",
            "(defaults: override /hydra/launcher@x: pool): a package (@x) moves the keys of hydra/launcher "
            "to "
            "x, and each group's keys stay at its own key, hydra.launcher (Hydra: Could not override "
            "'hydra/launcher@x'). Fix: - override /hydra/launcher: pool.",
        ),
    ],
)
def test_a_package_on_a_pick_is_one_line(tmp_path: Path, entry: str, line: str) -> None:
    """#368: Hydra's "Could not override 'model@foo'. Did you mean to override model?" (exit 1)."""
    assert _line(tmp_path, entry) == f"{SHOWN} {line}"


@pytest.mark.parametrize(
    ("option", "line"),
    [
        (
            "[gpt-tiny, gpt-125m]",
            "a list of options merges their files into one config, in order (gpt-125m's keys win), and runs "
            "one job, not one job each. Fix: pick one (- override /model: gpt-125m), or sweep them under "
            "hydra.sweeper.params (model: gpt-tiny,gpt-125m).",
        ),
        ("[gpt-125m]", "an option is one name, not a list. Fix: - override /model: gpt-125m."),
        ("[]", "an option is the name of a file of model/, not a list. Fix: - override /model: gpt-tiny."),
    ],
)
def test_a_list_as_the_option_is_one_line(tmp_path: Path, option: str, line: str) -> None:
    """#369: ``- override /model: [gpt-tiny, gpt-125m]`` ran one job of gpt-125m (exit 0), silently."""
    assert (
        _line(tmp_path, f"override /model: {option}")
        == f"{SHOWN} (defaults: override /model: {option}): {line}"
    )


@pytest.mark.parametrize("group", ["/model/", "//model", "/./model", "/../conf/model"])
def test_a_group_path_with_an_empty_dot_or_dotdot_part_names_the_group(tmp_path: Path, group: str) -> None:
    """#370: ``/model/`` got ``no default picks model/ ... Fix: - /model/: gpt-125m`` (a fix Hydra refuses);
    ``//model``: Hydra's "Could not override '/model'"."""
    assert _line(tmp_path, f"override {group}: gpt-125m") == (
        f"{SHOWN} (defaults: override {group}: gpt-125m): {group} is no group's path (folders of conf/ "
        "joined "
        "by single /, with no empty, . or .. part). Fix: - override /model: gpt-125m."
    )


@pytest.mark.parametrize(
    ("entry", "what"), [("[a, b]", "a list"), ("true", "a boolean"), ("1.5", "a number")]
)
def test_an_entry_that_is_a_list_or_a_boolean_says_so(tmp_path: Path, entry: str, what: str) -> None:
    """#371: ``- [a, b]`` said "not a list of ." and ``- true`` "not a number"."""
    assert _line(tmp_path, entry) == (
        f"{SHOWN} (defaults: {entry}): an entry is a pick of a group's option or _self_, not {what}. Fix: "
        "one - override /GROUP: OPTION line each (as conf/sweep/smoke.yaml)."
    )


@pytest.mark.parametrize(
    ("search", "line"),
    [
        (
            "model: largest\n  min_n_layer: 0\n",
            "search.min_n_layer=0: the search starts at a model of at least one block. Fix: set "
            "search: {min_n_layer: 1} in conf/sweep/mine.yaml.",
        ),
        (
            "model: largest\n  max_n_layer: -1\n",
            "search.max_n_layer=-1: the search probes models of at least one block. Fix: set "
            "search: {max_n_layer: 256} in conf/sweep/mine.yaml.",
        ),
        (
            "model: largest\n  grow: seq_len\n  min_seq_len: 0\n",
            "search.min_seq_len=0: the search starts at a sequence of at least one token. Fix: set "
            "search: {min_seq_len: 1024} in conf/sweep/mine.yaml.",
        ),
    ],
)
def test_a_sweep_files_search_bound_below_one_names_the_file(tmp_path: Path, search: str, line: str) -> None:
    """#372: the job refused it, after Hydra made the sweep's folder (an ``invalid`` record, exit 0, the
    file unnamed)."""
    assert (
        values_problem(ARGV, FILE_VALUE_CHECKS, _conf(tmp_path, f"search:\n  {search}")) == f"{SHOWN}: {line}"
    )
    # session 41 (#883): the fix in the file's form, search: {KEY: VALUE} in the file
    key, _, least = line.partition(". Fix: set search: {")[2].partition("}")[0].partition(": ")
    fixed = "".join(
        f"{k}: {least if k == key else v}\n  "
        for k, _, v in (p.partition(": ") for p in search.split("\n  "))
    )
    assert f"{key}: {least}\n" in fixed  # the fix's value in place of the file's
    assert values_problem(ARGV, FILE_VALUE_CHECKS, _conf(tmp_path / "fix", f"search:\n  {fixed}")) is None


def test_the_command_lines_search_bound_below_one_is_refused_before_hydra() -> None:
    """#372: on the command line, a sweep's value too; without ``search.model=largest`` the idle key's
    line, its fix the least (was ``search.model=largest search.min_n_layer=0``, refused in the job)."""
    assert refusal(["search.model=largest", "search.min_n_layer=0"]) == (
        "Invalid config: search.min_n_layer=0: the search starts at a model of at least one block. Fix: set "
        "search.min_n_layer=1."
    )
    assert refusal(["-m", "search.model=largest", "search.min_n_layer=0,2"]) == (
        "Invalid config: search.min_n_layer=0: the search starts at a model of at least one block. Fix: set "
        "search.min_n_layer=1."
    )
    assert refusal(["search.min_n_layer=0"]) == (
        "Invalid config: search.min_n_layer=0: is below 1 (a model has a block or more), and does nothing "
        "without search.model: search.model=none (the default) searches nothing. Fix: write "
        "search.model=largest search.min_n_layer=1, or drop search.min_n_layer."
    )
    assert refusal(["search.model=largest", "search.min_n_layer=1"]) is None


def _pool_file(tmp_path: Path, launcher: str) -> str:
    return _conf(
        tmp_path, defaults_text("override /hydra/launcher: pool") + f"hydra:\n  launcher:\n    {launcher}\n"
    )


@pytest.mark.parametrize(
    ("launcher", "line"),
    [
        (
            'slots: "0,1"',
            "hydra.launcher.slots='0,1': is one text, not a count or a list of device ids. Fix: write it as "
            "a "
            "list in the file: hydra: {launcher: {slots: [0, 1]}}.",
        ),
        (
            'slots: "[0,1]"',
            "hydra.launcher.slots='[0,1]': is one text, not a count or a list of device ids. Fix: write it "
            "as "
            "a list in the file: hydra: {launcher: {slots: [0, 1]}}.",
        ),
        (
            "devices: 2, 3",
            "hydra.launcher.devices='2, 3': is one text, not a count or a list of device ids. Fix: write it "
            "as "
            "a list in the file: hydra: {launcher: {devices: [2, 3]}}.",
        ),
        (
            'timeout_min: "1,2"',  # read back as the sweep 1,2: ChoiceSweep(...) in the line
            "hydra.launcher.timeout_min='1,2': is one text, not a number of minutes (one value for every "
            "job). Fix: write timeout_min: 60 under hydra: launcher: in the file, or set "
            "hydra.launcher.timeout_min=60 (the command line's value replaces the file's).",
        ),
    ],
)
def test_a_text_of_device_ids_in_a_sweep_file_is_one_line(tmp_path: Path, launcher: str, line: str) -> None:
    """#373: ``slots: "0,1"`` was refused with Hydra's ``ChoiceSweep(tags=set(), list=[0, 1], ...)`` in the
    line; ``slots: "[0,1]"`` passed, and the launcher refused it (exit 1, the file unnamed)."""
    assert pool_problem(ARGV, lambda: 0, _pool_file(tmp_path, launcher)) == f"{SHOWN}: {line}"
    if "{launcher: {" in line:
        fixed = line.rpartition("{launcher: {")[2].removesuffix("}}.")
        assert pool_problem(ARGV, lambda: 0, _pool_file(tmp_path / "fix", fixed)) is None


def test_a_quoted_text_of_device_ids_on_the_command_line_is_one_line() -> None:
    """#373: ``'hydra.launcher.slots="0,1"'`` showed the ``ChoiceSweep(...)`` repr (its quotes dropped before
    the grammar read it); ``'[0,1]'`` quoted passed, and the launcher refused it (exit 1)."""
    pool = ["-m", "hydra/launcher=pool", "device=cpu"]
    for typed in ('"0,1"', "'[0,1]'"):
        assert cpu_pool_problem([*pool, f"hydra.launcher.slots={typed}"]) == (
            f"Invalid config: hydra.launcher.slots='{typed[1:-1]}': is one text, not a count or a list of "
            "device "
            "ids. Fix: set hydra.launcher.slots=[0,1] (a list, unquoted)."
        )
    assert cpu_pool_problem([*pool, "hydra.launcher.slots=[0,1]"]) is None


@pytest.mark.parametrize(
    ("slots", "fix", "meant"),
    [
        (["٠"], "[0]", [0]),
        ("٠", "[0]", [0]),
        ("١", "1", 1),
        (["0", "١"], "[0,1]", [0, 1]),
        ("٢,٣", "[2,3]", [2, 3]),
        (["２"], "[2]", [2]),
    ],
)
def test_a_device_id_in_another_scripts_digits_is_refused(slots: object, fix: str, meant: object) -> None:
    """#374: ``slots: [٠]`` ran a job with ``CUDA_VISIBLE_DEVICES=٠`` (``\\d`` matched it), ``"١"`` was a
    count of 1 (``int`` reads it)."""
    with pytest.raises(ConfigError) as err:
        pool_devices(slots, device="cpu")
    assert "in another script's digits" in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).endswith(f"Fix: set hydra.launcher.slots={fix}.")
    assert pool_devices(meant, device="cpu")  # the fix's value


def test_a_visible_device_or_a_pool_setting_in_another_scripts_digits_is_refused(tmp_path: Path) -> None:
    """#374: ``CUDA_VISIBLE_DEVICES=٠,1`` took ``٠`` as a device; ``timeout_min: ٣`` and ``grace_s: "３０"``
    were read by ``float`` as 3 and 30."""
    with pytest.raises(
        ConfigError, match=r"CUDA_VISIBLE_DEVICES='٠,1': names '٠'.*Fix: set CUDA_VISIBLE_DEVICES=0,1\.$"
    ):
        pool_devices(None, device="cuda", visible="٠,1")
    assert str(settings_problem("٣", 30)) == (
        "Invalid config: hydra.launcher.timeout_min='٣': is written in another script's digits ('٣' (U+0663 "
        "ARABIC-INDIC DIGIT THREE)). Fix: set hydra.launcher.timeout_min=3."
    )
    assert settings_problem("3", "30") is None
    line = pool_problem(ARGV, lambda: 0, _pool_file(tmp_path, "slots: [٠]"))
    assert line == (
        f"{SHOWN}: hydra.launcher.slots=['٠']: names '٠', in another script's digits ('٠' (U+0660 "
        "ARABIC-INDIC "
        "DIGIT ZERO)); an id takes digits 0-9. Fix: write slots: [0] under hydra: launcher: in the file, or "
        "set hydra.launcher.slots=[0] (the command line's value replaces the file's)."
    )


def test_a_sweep_of_the_pools_list_names_the_list() -> None:
    """#375: ``hydra.launcher.slots=0,1`` got ``Fix: give one value, e.g. hydra.launcher.slots=0``, and
    ``[0,1],[2]`` the fix ``hydra.launcher.slots=[0`` (cut at the list's comma)."""
    head = "Hydra sweeps the job's config only, not its own hydra.* keys. Fix:"
    assert hydra_sweep_problem(["hydra.launcher.slots=0,1"]) == (
        f"Invalid config: hydra.launcher.slots=0,1: {head} give the pool's devices as one list, "
        "hydra.launcher.slots=[0,1]."
    )
    assert hydra_sweep_problem(["hydra.launcher.slots=[0,1],[2]"]) == (
        f"Invalid config: hydra.launcher.slots=[0,1],[2]: {head} give one value, e.g. "
        "hydra.launcher.slots=[0,1] "
        "(one sweep per value)."
    )
    assert hydra_sweep_problem(["hydra.launcher.slots=[0,1]"]) is None

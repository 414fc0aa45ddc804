"""Session 38 (docs/reliability-8.md #425-#435): a sweep file's picks and values and the command line's own,
checked by one decision before Hydra: a look-alike or ``null`` option in a file's defaults, a number bound
read as the job reads the value (``00``, ``"0"``), ``repeats`` under ``hydra.sweeper.params``, and fixes
that were refused again (``slots=[٠]``, ``min_n_layer=0.0``). Every fix printed is fed back and passes.
The files are planted in a ``conf/`` of ``tmp_path``, never in the checkout's ``sweep/``."""

from __future__ import annotations

from pathlib import Path

import pytest

from flopsweep.conf_files import sweep_file_problem
from flopsweep.option_file_keys import sweep_picks_problem
from flopsweep.sweep_file_defaults import defaults_problem, pool_problem
from flopsweep.sweep_file_keys import values_problem
from run import FILE_VALUE_CHECKS, refusal

HEAD = "# @package _global_\n"
ARGV = ["-m", "+sweep=mine", "device=cpu", "steps.warmup=1", "steps.measure=1"]
SHOWN = "Invalid config: conf/sweep/mine.yaml"


def _conf(tmp_path: Path, text: str) -> str:
    """A ``conf/`` whose primary config picks ``model`` and ``backend``; ``sweep/mine.yaml``: ``text``."""
    conf = tmp_path / "conf"
    for group, options in (("model", ("gpt-tiny", "gpt-125m")), ("backend", ("single", "fsdp"))):
        (conf / group).mkdir(parents=True)
        for option in options:
            (conf / group / f"{option}.yaml").write_text(f"name: {option}\n")
    (conf / "sweep").mkdir()
    (conf / "sweep" / "smoke.yaml").write_text(HEAD + "seed: 1\n")
    (conf / "config.yaml").write_text(
        "defaults:\n  - base_config\n  - model: gpt-tiny\n  - backend: single\n  - _self_\n"
    )
    (conf / "sweep" / "mine.yaml").write_text(HEAD + text)
    return str(conf)


def _defaults(*entries: str) -> str:
    return "defaults:\n" + "".join(f"  - {e}\n" for e in entries)


def _picks(tmp_path: Path, *entries: str) -> str | None:
    conf = _conf(tmp_path, _defaults(*entries))
    return defaults_problem(ARGV, conf) or sweep_picks_problem(ARGV, conf)


@pytest.mark.parametrize(
    ("option", "note", "meant"),
    [
        ("fsdр", "'р' (U+0440 CYRILLIC SMALL LETTER ER) looks like ASCII 'p'", "fsdp"),
        ("ｆｓｄｐ", "'ｆ' (U+FF46 FULLWIDTH LATIN SMALL LETTER F) looks like ASCII 'f'", "fsdp"),
        ("ѕingle", "'ѕ' (U+0455 CYRILLIC SMALL LETTER DZE) looks like ASCII 's'", "single"),
    ],
)
def test_a_look_alike_option_in_a_sweep_files_pick_is_the_command_lines_line(
    tmp_path: Path, option: str, note: str, meant: str
) -> None:
    """#425: Hydra's "In 'config': Could not find 'backend/fsdр'" and its options and search path (exit 1);
    ``backend=fsdр`` on the command line was one line naming the look-alike."""
    line = _picks(tmp_path, f"override /backend: {option}")
    assert line == (
        f"{SHOWN} (defaults: override /backend: {option}): backend='{option}': {option} is no option of "
        f"backend: {note}. Fix: did you mean - override /backend: {meant}?"
    )
    assert refusal([f"backend={option}"]).endswith(f"({note}). Fix: did you mean backend={meant}?")
    fix = line.rpartition("did you mean - ")[2].removesuffix("?")
    assert _picks(tmp_path / "fix", fix) is None


def test_a_look_alike_hyphen_in_a_model_pick_and_in_a_group_are_named(tmp_path: Path) -> None:
    """#425: ``gpt‑tiny`` (U+2011 NON-BREAKING HYPHEN) and ``/bаckend`` (a Cyrillic а)."""
    line = _picks(tmp_path, "override /model: gpt‑tiny")
    assert line is not None and line.endswith(
        "looks like ASCII '-'. Fix: did you mean - override /model: gpt-tiny?"
    )
    line = _picks(tmp_path / "g", "override /bаckend: fsdp")
    assert line == (
        f"{SHOWN} (defaults: override /bаckend: fsdp): bаckend is no config group (no folder bаckend/ in "
        "conf/ or Hydra's; 'а' (U+0430 CYRILLIC SMALL LETTER A) looks like ASCII 'a'). Fix: did you mean - "
        "override /backend: fsdp?"
    )
    assert _picks(tmp_path / "fix", "override /model: gpt-tiny", "override /backend: fsdp") is None


@pytest.mark.parametrize("group", ["backend", "model"])
def test_a_null_pick_in_a_sweep_file_is_refused_as_on_the_command_line(tmp_path: Path, group: str) -> None:
    """#426: ``- override /backend: null`` ran (exit 0) where ``backend=null`` was refused; one rule."""
    line = _picks(tmp_path, f"override /{group}: null")
    said = refusal([f"{group}=null"])
    assert said is not None and said.startswith(f"Invalid config: {group}=null: null is no option of {group}")
    assert line is not None and line.startswith(
        f"{SHOWN} (defaults: override /{group}: null): {group}=null: null is no option of {group}"
    )
    example = line.partition(f"e.g. - override /{group}: ")[2].partition(" ")[0]
    assert line.endswith(f"(several, one job each: {group}: a,b under hydra.sweeper.params).")
    assert _picks(tmp_path / "fix", f"override /{group}: {example}") is None


@pytest.mark.parametrize("typed", ["00", "'0'", '"0"', "0.0"])
def test_a_search_bound_written_as_text_or_a_float_is_read_as_the_job_reads_it(typed: str) -> None:
    """#427, #428: ``00`` and ``'0'`` passed (the job read 0 and refused it, a record); ``0.0``'s fix was
    ``=0``, refused again. Each now gets the bound's line, whose fix passes."""
    line = refusal(["search.model=largest", f"search.min_n_layer={typed}"])
    assert line == (
        f"Invalid config: search.min_n_layer={typed}: the search starts at a model of at least one block. "
        "Fix: set search.min_n_layer=1."
    )
    assert refusal(["search.model=largest", "search.min_n_layer=1"]) is None
    assert refusal(["search.model=largest", "search.min_n_layer=2.0"]).endswith("search.min_n_layer=2.")
    assert refusal(["search.model=largest", "search.min_n_layer=2"]) is None


@pytest.mark.parametrize("written", ['"0"', '"00"', "0.0"])
def test_a_sweep_files_search_bound_written_as_text_is_refused(tmp_path: Path, written: str) -> None:
    """#427: ``min_n_layer: "0"`` in a sweep file ran, and the job recorded it invalid (exit 0)."""
    conf = _conf(tmp_path, f"search:\n  model: largest\n  min_n_layer: {written}\n")
    line = values_problem(ARGV, FILE_VALUE_CHECKS, conf)
    assert line is not None and line.startswith(f"{SHOWN}: search.min_n_layer=")
    assert line.endswith(  # session 41 (#883): the fix in the file's form
        "the search starts at a model of at least one block. Fix: set search: {min_n_layer: 1} in "
        "conf/sweep/mine.yaml."
    )
    fixed = _conf(tmp_path / "fix", "search:\n  model: largest\n  min_n_layer: 1\n")
    assert values_problem(ARGV, FILE_VALUE_CHECKS, fixed) is None


@pytest.mark.parametrize(
    ("value", "fix"),
    [
        ("[٠]", "hydra.launcher.slots=[0]"),
        ('"[٠]"', "hydra.launcher.slots=[0]"),
        ("٢", "hydra.launcher.slots=2"),
    ],
)
def test_the_pools_slots_in_another_scripts_digits_get_a_fix_that_passes(value: str, fix: str) -> None:
    """#429: ``hydra.launcher.slots=[٠]``'s fix was to quote it, which the pool refused again."""
    pool = ["-m", "hydra/launcher=pool", "device=cpu"]
    line = refusal([*pool, f"hydra.launcher.slots={value}"])
    assert line is not None and "in another script's digits" in line
    assert line.endswith(f"Fix: write {fix}.")
    assert refusal([*pool, fix]) is None
    timeout = refusal([*pool, "hydra.launcher.slots=[0]", "hydra.launcher.timeout_min=٣"])
    assert timeout is not None and timeout.endswith(
        "a number of minutes in digits 0-9. Fix: write hydra.launcher.timeout_min=3."
    )
    assert refusal([*pool, "hydra.launcher.slots=[0]", "hydra.launcher.timeout_min=3"]) is None


def test_a_non_digit_in_the_pools_list_gets_the_pools_own_fix() -> None:
    """#429: ``slots=[ä]``'s grammar fix, quoting it, was refused by the pool; the pool's line is said."""
    pool = ["-m", "hydra/launcher=pool", "device=cpu"]
    line = refusal([*pool, "hydra.launcher.slots=[ä]"])
    assert line == (
        "Invalid config: hydra.launcher.slots=[ä]: is one text, not a count or a list of device ids. Fix: "
        "set hydra.launcher.slots=[0,1] (a list, unquoted)."
    )
    assert refusal([*pool, "hydra.launcher.slots=[0,1]"]) is None


@pytest.mark.parametrize(
    ("axis", "said"),
    [
        ("20000", "repeats=20000: must be one whole number from 1 to 100 (repeats is not a sweep axis)"),
        ("1,2", "repeats=1,2: must be one whole number from 1 to 100 (repeats is not a sweep axis)"),
        ("3", "repeats=3: is the count of rounds, not a sweep axis"),
    ],
)
def test_repeats_under_a_sweep_files_params_is_checked_as_the_command_line(
    tmp_path: Path, axis: str, said: str
) -> None:
    """#430: ``repeats`` under ``hydra.sweeper.params`` ran each job once, refused in it ("did not expand
    into rounds", exit 0); ``-m repeats=20000`` on the command line was one line (#404)."""
    params = f"hydra:\n  sweeper:\n    params:\n      repeats: {axis}\n      seed: 0,1\n"
    line = sweep_file_problem(ARGV, _conf(tmp_path, params))
    assert line is not None and line.startswith(f"{SHOWN} (hydra.sweeper.params): {said}")
    count = "3" if not axis.isdigit() or int(axis) > 100 else axis  # the fix's count
    assert line.endswith(
        f"Fix: set it out of hydra.sweeper.params (repeats: {count} beside the file's values), or "
        f"repeats={count} on the command line."
    )
    moved = _conf(tmp_path / "moved", f"repeats: {count}\nhydra:\n  sweeper:\n    params:\n      seed: 0,1\n")
    assert sweep_file_problem(ARGV, moved) is None
    assert values_problem(ARGV, FILE_VALUE_CHECKS, moved) is None
    assert sweep_file_problem([*ARGV, f"repeats={count}"], _conf(tmp_path / "cli", params)) is None
    assert (
        sweep_file_problem(ARGV, _conf(tmp_path / "one", params.replace(f"repeats: {axis}", "repeats: 1")))
        is None
    )


def _pool_file(tmp_path: Path, launcher: str) -> str:
    return _conf(
        tmp_path, _defaults("override /hydra/launcher: pool") + f"hydra:\n  launcher:\n    {launcher}\n"
    )


@pytest.mark.parametrize(
    ("launcher", "key", "said"),
    [
        ('timeout_min: "1,2"', "timeout_min", "='1,2': is one text, not a number of minutes"),
        ("timeout_min: abc", "timeout_min", "='abc': is one text, not a number of minutes"),
        ("grace_s: soon", "grace_s", "='soon': is one text, not a number of seconds"),
    ],
)
def test_a_pool_setting_written_as_text_in_a_sweep_file_says_so(
    tmp_path: Path, launcher: str, key: str, said: str
) -> None:
    """#431: ``timeout_min: "1,2"`` was told "each job's deadline must be positive"; the fix now in the
    file's form too, and both forms pass."""
    line = pool_problem(ARGV, lambda: 0, _pool_file(tmp_path, f"slots: [0]\n    {launcher}"))
    assert line is not None and line.startswith(f"{SHOWN}: hydra.launcher.{key}{said}")
    value = line.partition(f"Fix: write {key}: ")[2].partition(" ")[0]
    assert line.endswith(
        f"under hydra: launcher: in the file, or set hydra.launcher.{key}={value} (the command line's value "
        "replaces the file's)."
    )
    assert (
        pool_problem(ARGV, lambda: 0, _pool_file(tmp_path / "fix", f"slots: [0]\n    {key}: {value}")) is None
    )
    cli = [*ARGV, f"hydra.launcher.{key}={value}"]
    assert pool_problem(cli, lambda: 0, _pool_file(tmp_path / "cli", f"slots: [0]\n    {launcher}")) is None


@pytest.mark.parametrize(
    ("text", "check"),
    [('tag: "a\\tb"\n', "values"), ('hydra:\n  sweeper:\n    params:\n      tag: "a\\tb,c"\n', "axes")],
)
def test_a_tab_in_a_sweep_files_value_is_the_command_lines_line(
    tmp_path: Path, text: str, check: str
) -> None:
    """#432: a tab in a file's ``tag`` ran (exit 0) where ``tag=a<TAB>b`` on the command line was refused."""
    conf = _conf(tmp_path, text)
    if check == "values":
        line = values_problem(ARGV, FILE_VALUE_CHECKS, conf)
    else:
        line = sweep_file_problem(ARGV, conf)
    assert line is not None and "\n" not in line
    assert "its value holds a tab, \\t" in line and line.startswith(SHOWN)
    assert line.endswith("Fix: remove it from the value.")
    fixed = _conf(tmp_path / "fix", text.replace("\\t", ""))
    assert (
        values_problem(ARGV, FILE_VALUE_CHECKS, fixed)
        if check == "values"
        else sweep_file_problem(ARGV, fixed)
    ) is None


def test_a_misspelt_or_repeated_self_is_one_line(tmp_path: Path) -> None:
    """#433, #434: ``- _selff_`` named no fix of its own ("name a file of conf/sweep/, or ..."); ``_self_``
    twice was Hydra's "Duplicate _self_ defined in sweep/mine" (exit 1)."""
    assert _picks(tmp_path, "_selff_") == (
        f"{SHOWN} (defaults: _selff_): names no sweep file (no conf/sweep/_selff_.yaml; Hydra: Could not "
        "load 'sweep/_selff_'). Fix: did you mean - _self_?"
    )
    assert _picks(tmp_path / "a", "_self_", "override /model: gpt-125m", "_self_") == (
        f"{SHOWN} (defaults: _self_): is listed twice (Hydra: Duplicate _self_ defined in sweep/mine). Fix: "
        "keep one - _self_ line (last, for the file's values to win over its picks)."
    )
    assert _picks(tmp_path / "fix", "override /model: gpt-125m", "_self_") is None
    assert _picks(tmp_path / "none", "zzzqq").endswith("(as conf/sweep/smoke.yaml).")


@pytest.mark.parametrize(
    ("entry", "fix"),
    [
        ("/backend: fsdр", "override /backend: fsdp"),
        ("overide /backend: fsdр", "override /backend: fsdp"),
        ("/backend: null", "override /backend: single"),
        ("override /backend: [fsdр]", "override /backend: fsdp"),
    ],
)
def test_a_defaults_fix_never_carries_a_look_alike_or_null(tmp_path: Path, entry: str, fix: str) -> None:
    """#435: the fix of another fault of the entry (no ``override``, a misspelt keyword, a list) wrote
    the look-alike back (``"fsd\\u0440"``, YAML's escape) or ``null``, each refused again."""
    line = _picks(tmp_path, entry)
    assert line is not None and line.startswith(f"{SHOWN} (defaults: {entry})")
    assert "\\u" not in line and line.endswith(f"Fix: - {fix}.")
    assert _picks(tmp_path / "fix", fix) is None

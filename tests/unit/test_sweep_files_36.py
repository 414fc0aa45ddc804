"""Session 36 (docs/reliability-5.md #331-#339): a sweep file's defaults list, its pool values, its search
ranges and the form of its ``hydra.sweeper.params``, refused in one line naming the file before Hydra
composes (:mod:`flopsweep.sweep_file_defaults`, :func:`flopsweep.command_line_checks.search_range_problem`,
:func:`flopsweep.sweep_file_keys.shape_problem`). Each used to end in Hydra's error or traceback (exit 1),
the launcher's line (exit 1, no file named), or a job recorded invalid. The files are planted in a
``conf/`` of ``tmp_path``, never in the checkout's ``sweep/``; each fix passes the same check."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import SWEEP_ARGV as ARGV
from helpers import SWEEP_SHOWN as SHOWN
from helpers import defaults_text, sweep_conf

from flopsweep.command_line_checks import search_range_problem
from flopsweep.pool import cpu_pool_problem
from flopsweep.sweep_file_defaults import defaults_problem, pool_problem
from flopsweep.sweep_file_keys import shape_problem, values_problem
from run import FILE_VALUE_CHECKS

GROUPS = {"model": ("gpt-tiny", "gpt-125m", "llama-tiny"), "backend": ("single", "ddp")}
"""The groups of the small ``conf/`` (:func:`helpers.sweep_conf`), each picked at its first option."""


def _conf(tmp_path: Path, text: str) -> str:
    return sweep_conf(tmp_path, text, GROUPS)


def test_a_misspelt_group_is_one_line_with_its_did_you_mean(tmp_path: Path) -> None:
    """#331: ``- override /modle: gpt-tiny`` was Hydra's "Could not override 'modle'. No match in the
    defaults list." (exit 1)."""
    line = defaults_problem(ARGV, _conf(tmp_path, defaults_text("override /modle: gpt-tiny")))
    assert line == (
        f"{SHOWN} (defaults: override /modle: gpt-tiny): modle is no config group (no folder modle/ in conf/ "
        "or Hydra's). Fix: did you mean - override /model: gpt-tiny?"
    )
    assert defaults_problem(ARGV, _conf(tmp_path / "fix", defaults_text("override /model: gpt-tiny"))) is None


def test_a_pick_without_override_of_a_picked_group_is_one_line(tmp_path: Path) -> None:
    """#332: ``- /model: gpt-tiny`` was Hydra's "Multiple values for model" (exit 1), or, with ``model=``
    on the command line, the file's pick dropped silently."""
    line = defaults_problem(ARGV, _conf(tmp_path, defaults_text("/model: gpt-125m")))
    assert line == (
        f"{SHOWN} (defaults: /model: gpt-125m): the primary config picks model already, and a second pick is "
        'Hydra\'s "Multiple values for model". Fix: - override /model: gpt-125m.'
    )
    assert defaults_problem(ARGV, _conf(tmp_path / "fix", defaults_text("override /model: gpt-125m"))) is None


@pytest.mark.parametrize(
    ("launcher", "line"),
    [
        (
            "slots: abc",
            "hydra.launcher.slots='abc': names 'abc', not a device index or a GPU-/MIG- UUID. Fix: set "
            "hydra.launcher.slots=[0,1] (indexes, or UUIDs as nvidia-smi -L lists them).",
        ),
        (
            "slots: [0, 0]",
            "hydra.launcher.slots=[0, 0]: names a device twice. Fix: list each device once, e.g. "
            "hydra.launcher.slots=[0,1].",
        ),
        (
            "timeout_min: -5",
            "hydra.launcher.timeout_min=-5: each job's deadline must be positive. Fix: write timeout_min: 60 "
            "under hydra: launcher: in the file, or set hydra.launcher.timeout_min=60 (the command line's "
            "value replaces the file's).",
        ),
        (
            "{}",
            "hydra.launcher.slots=null: no GPU was found to pool (device=cpu). Fix: give the pool's devices, "
            "e.g. hydra.launcher.slots=[0,1] (device=cpu: each job gets slots of its own).",
        ),
    ],
)
def test_the_pools_values_in_a_sweep_file_are_the_command_lines_line(
    tmp_path: Path, launcher: str, line: str
) -> None:
    """#333: the launcher refused them at the sweep's start (exit 1), naming no file."""
    text = defaults_text("override /hydra/launcher: pool") + f"hydra:\n  launcher: {launcher}\n"
    if launcher != "{}":
        text = defaults_text("override /hydra/launcher: pool") + f"hydra:\n  launcher:\n    {launcher}\n"
    assert pool_problem(ARGV, lambda: 0, _conf(tmp_path, text)) == f"{SHOWN}: {line}"
    fixed = defaults_text("override /hydra/launcher: pool") + "hydra:\n  launcher:\n    slots: [0, 1]\n"
    assert pool_problem(ARGV, lambda: 0, _conf(tmp_path / "fix", fixed)) is None


def test_the_pools_values_of_a_sweep_file_under_the_command_lines_pool(tmp_path: Path) -> None:
    """#333: ``hydra/launcher=pool`` on the command line, ``grace_s: -1`` in the file; the command line's
    own value replaces the file's and is not blamed on it."""
    conf = _conf(tmp_path, "hydra:\n  launcher:\n    grace_s: -1\n")
    argv = [*ARGV, "hydra/launcher=pool", "hydra.launcher.slots=2"]
    assert pool_problem(argv, lambda: 0, conf) == (
        f"{SHOWN}: hydra.launcher.grace_s=-1: must be zero or more seconds. Fix: write grace_s: 30 under "
        "hydra: launcher: in the file, or set hydra.launcher.grace_s=30 (the command line's value replaces "
        "the file's)."
    )
    assert pool_problem([*argv, "hydra.launcher.grace_s=5"], lambda: 0, conf) is None
    assert pool_problem(ARGV, lambda: 0, conf) is None  # the basic launcher: hydra_key_problem's line


def test_a_sweep_files_slots_count_under_the_command_lines_pool(tmp_path: Path) -> None:
    """#333: ``-m +sweep=mine device=cpu hydra/launcher=pool`` with ``slots: [0, 1]`` in the file was refused
    by the command line's check (``no GPU was found to pool``), the file's slots unread; a file that gives
    none gets the command line's own line, no file named."""
    argv = [*ARGV, "hydra/launcher=pool"]
    assert cpu_pool_problem(argv, environ={}, detected=lambda: 0) is None
    slots = _conf(tmp_path, "hydra:\n  launcher:\n    slots: [0, 1]\n")
    assert pool_problem(argv, lambda: 0, slots) is None
    assert pool_problem(argv, lambda: 0, _conf(tmp_path / "none", "seed: 1\n")) == (
        "Invalid config: hydra.launcher.slots=null: no GPU was found to pool (device=cpu). Fix: give the "
        "pool's devices, e.g. hydra.launcher.slots=[0,1] (device=cpu: each job gets slots of its own)."
    )


@pytest.mark.parametrize(
    ("search", "line"),
    [
        (
            "min_n_layer: 8\n  max_n_layer: 2\n",
            "search.max_n_layer=2: the search needs 1 <= search.min_n_layer <= search.max_n_layer "
            "(min is 8). Fix: set search.min_n_layer=1 and search.max_n_layer to the most blocks to try, "
            "such as 256.",
        ),
        (
            "grow: seq_len\n  min_seq_len: 4096\n  max_seq_len: 1024\n",
            "search.max_seq_len=1024: the search needs search.min_seq_len <= search.max_seq_len "
            "(min is 4096). Fix: set search.max_seq_len to the longest sequence to try, such as 131072.",
        ),
    ],
)
def test_a_sweep_files_search_range_with_min_over_max_names_the_file(
    tmp_path: Path, search: str, line: str
) -> None:
    """#334: the job recorded it invalid (the sweep's folder made), its line naming no file."""
    conf = _conf(tmp_path, f"search:\n  model: largest\n  {search}")
    assert values_problem(ARGV, FILE_VALUE_CHECKS, conf) == f"{SHOWN}: {line}"
    fixed = search.replace("max_n_layer: 2\n", "max_n_layer: 16\n").replace(": 1024", ": 8192")
    fixed_conf = _conf(tmp_path / "fix", f"search:\n  model: largest\n  {fixed}")
    assert values_problem(ARGV, FILE_VALUE_CHECKS, fixed_conf) is None


def test_the_command_lines_search_range_is_the_jobs_line_before_hydra() -> None:
    """#334: on the command line too (the job's line, before the sweep's folder is made); a sweep over
    the range and a default read in its place."""
    assert search_range_problem(["search.min_n_layer=300"]) == (
        "Invalid config: search.max_n_layer=256: the search needs 1 <= search.min_n_layer <= "
        "search.max_n_layer (min is 300). Fix: set search.min_n_layer=1 and search.max_n_layer to the most "
        "blocks to try, such as 256."
    )
    assert search_range_problem(["search.min_n_layer=8", "search.max_n_layer=2,16"]) is None
    assert search_range_problem(["search.min_n_layer=2", "search.max_n_layer=2"]) is None


@pytest.mark.parametrize(
    ("entries", "line"),
    [
        (  # #335: Hydra skipped the word: Multiple values for model
            ("overide /model: gpt-tiny",),
            "(defaults: overide /model: gpt-tiny): overide is no keyword of a defaults entry (override, "
            "optional), and Hydra skips it (a pick of model without override). Fix: - override "
            "/model: gpt-tiny.",
        ),
        (  # #335: read as sweep/model: Hydra's search path, 9 lines
            ("override model: gpt-tiny",),
            "(defaults: override model: gpt-tiny): a group without a leading / is read under the file's own "
            "(sweep/model, no such group). Fix: - override /model: gpt-tiny.",
        ),
        (  # #336: a group path with dots: Could not override 'hydra.launcher'
            ("override /hydra.launcher: pool",),
            "(defaults: override /hydra.launcher: pool): hydra.launcher is no config group (no folder "
            "hydra.launcher/ in conf/ or Hydra's). Fix: did you mean - override /hydra/launcher: pool?",
        ),
        (  # #337: ValueError tracebacks, ~50 lines
            ("3",),
            "(defaults: 3): an entry is a pick of a group's option or _self_, not a number. Fix: one - "
            "override /GROUP: OPTION line each (as conf/sweep/smoke.yaml).",
        ),
        (
            ("override /model: 3",),
            "(defaults: override /model: 3): an option is the name of a file of model/, not a number. Fix: - "
            "override /model: gpt-tiny.",
        ),
        (
            ("{}",),
            "(defaults: {}): names no group. Fix: one - override /GROUP: OPTION line each (as "
            "conf/sweep/smoke.yaml).",
        ),
        (
            ("override /model: gpt-tiny\n    override /backend: ddp",),
            "(defaults: {override /model: gpt-tiny, override /backend: ddp}): holds 2 picks in one entry "
            "(override /model: gpt-tiny, override /backend: ddp). Fix: one - override /GROUP: OPTION line "
            "each (as conf/sweep/smoke.yaml).",
        ),
        (
            ("'': gpt-tiny",),
            "(defaults: : gpt-tiny): names no group. Fix: one - override /GROUP: OPTION line each (as "
            "conf/sweep/smoke.yaml).",
        ),
        (
            ("1: gpt-tiny",),
            "(defaults: 1: gpt-tiny): 1 is no group (a key is text). Fix: one - override /GROUP: OPTION line "
            "each (as conf/sweep/smoke.yaml).",
        ),
        (  # #338: Hydra kept the first pick, silently
            ("override /model: gpt-125m", "override /model: llama-tiny"),
            "(defaults: override /model: llama-tiny): picks model again (after override /model: gpt-125m); "
            "Hydra keeps the first pick and drops this one. Fix: keep one pick of model, and sweep several "
            "under hydra.sweeper.params (model: a,b).",
        ),
        (  # #338: Could not override 'sweep' / Multiple values for sweep
            ("override /sweep: smoke",),
            "(defaults: override /sweep: smoke): the command line adds sweep (+sweep=...), and Hydra "
            "overrides only the primary config's picks (Could not override 'sweep'); another sweep file is "
            "read in by its name. Fix: - smoke.",
        ),
        (
            ("/sweep: smoke",),
            "(defaults: /sweep: smoke): the command line picks sweep already, and a second pick is Hydra's "
            '"Multiple values for sweep". Fix: - smoke.',
        ),
    ],
)
def test_a_defaults_entry_hydra_cannot_read_is_one_line(
    tmp_path: Path, entries: tuple[str, ...], line: str
) -> None:
    assert defaults_problem(ARGV, _conf(tmp_path, defaults_text(*entries))) == f"{SHOWN} {line}"


@pytest.mark.parametrize(
    "entries",
    [
        ("_self_", "override /model: gpt-tiny", "override /backend: ddp"),
        ("smoke",),  # another sweep file read in
        ("override /hydra/launcher: pool", "override /hydra/job_logging: flopsweep"),
        ("optional override /model: gpt-tiny",),
        ("override /model: null",),  # a package (/model@extra) is refused since #368: test_sweep_files_37.py
    ],
)
def test_the_fixes_and_the_shipped_forms_pass(tmp_path: Path, entries: tuple[str, ...]) -> None:
    assert defaults_problem(ARGV, _conf(tmp_path, defaults_text(*entries))) is None


def test_the_shipped_sweep_files_pass() -> None:
    for name in ("smoke", "frontier-fsdp", "seed-fsdp", "tuning", "blocksparse-2k"):
        argv = ["-m", f"+sweep={name}"]
        assert defaults_problem(argv) is None, name
        assert pool_problem(argv, lambda: 0) is None, name


def test_a_mapping_as_an_axis_names_the_key_in_full(tmp_path: Path) -> None:
    """#339: ``params: {steps: {measure: 2}}``: Hydra's sweeper wrote ``steps={'measure': 2}``, and the
    grammar's line told to quote it (a string axis, the wrong fix)."""
    conf = _conf(tmp_path, "hydra:\n  sweeper:\n    params:\n      steps: {measure: '2,3'}\n")
    assert shape_problem(ARGV, conf) == (
        f"{SHOWN}: hydra.sweeper.params: steps: {{measure: '2,3'}}: an axis is one key and its values, not "
        "a mapping (Hydra's sweeper writes it as steps={'measure': '2,3'}, which its grammar cannot read). "
        "Fix: write the key in full, one axis each: steps.measure: 2,3."
    )
    fixed = _conf(tmp_path / "fix", "hydra:\n  sweeper:\n    params:\n      steps.measure: 2,3\n")
    assert shape_problem(ARGV, fixed) is None


def test_a_list_in_place_of_the_axes_says_it_is_a_list(tmp_path: Path) -> None:
    """#339: the line said ``[{seed: '1,2'}]: is a mapping of keys``."""
    conf = _conf(tmp_path, "hydra:\n  sweeper:\n    params:\n      - seed: 1,2\n")
    assert shape_problem(ARGV, conf) == (
        f"{SHOWN}: hydra.sweeper.params: [{{seed: '1,2'}}]: is a list, not a mapping of keys. Fix: write a "
        "sweep's axes as hydra: {sweeper: {params: {KEY: VALUES}}}, one KEY: a,b line each (as "
        "conf/sweep/smoke.yaml)."
    )

"""Session 33's second new-user trial (docs/reliability-5.md, rows 300 on): a ``range()`` of step 0 or a
float step on a whole-number key, fixes that did not run as written (a look-alike of a name a key takes, an
empty ``choice()``, a suggestion rechecked after a trailing flag, a quoted form refused again), a key given
twice with single values, a Slurm launcher with ``nproc_per_node=auto``, and a tuner budget under 1 GPU-s."""

from __future__ import annotations

import pytest

from flopsweep.tune import Budget, budget_stop, gpu_seconds_text
from run import refusal


@pytest.mark.parametrize(
    ("argv", "key", "fix"),
    [
        (["-m", "plan=true", "seed=range(0,4,0)"], "seed=range(0,4,0)", "seed=range(0,4,1)"),
        (["model.n_layer=range(1,3,0)"], "model.n_layer=range(1,3,0)", "model.n_layer=range(1,3,1)"),
        (["plan=true", "seed=sort(range(0,4,0))"], "seed=sort(range(0,4,0))", "seed=range(0,4,1)"),
    ],
)
def test_a_range_of_step_zero_is_one_line_naming_a_non_zero_step(argv, key, fix):
    """#293: Python's ``range()`` raised "arg 3 must not be zero" inside a check, a 20-line traceback."""
    assert refusal(argv) == (
        f"Invalid config: {key}: range() with step 0 lists no values (its step is what is added to each "
        f"value). Fix: give a non-zero step, e.g. {fix}."
    )


def test_a_float_range_on_a_whole_number_key_says_so_and_suggests_a_whole_step():
    """#294 (c): ``seed=range(0,4,0.5)`` was told as ``seed=0.0``, "Fix: seed=0", one value of four."""
    assert refusal(["-m", "plan=true", "seed=range(0,4,0.5)"]) == (
        "Invalid config: seed=range(0,4,0.5): seed takes a whole number, and a range with a float start, "
        "stop or step gives floats (0.0, 0.5, 1.0, ...). Fix: use whole numbers, e.g. seed=range(0,4,1)."
    )
    assert refusal(["-m", "plan=true", "seed=range(0,4,1)"]) is None  # the fix runs
    line = refusal(["-m", "plan=true", "seed=range(1,3.5,1)"])  # a float stop: floats (1.0, 2.0)
    assert line is not None and line.endswith("e.g. seed=range(1,4,1).")
    assert refusal(["-m", "plan=true", "seed=range(1,4,1)"]) is None
    assert refusal(["-m", "plan=true", "plan_gpu_memory_gib=range(40.0,80.0,20.0)"]) is None  # a float key


@pytest.mark.parametrize(
    ("given", "fix"),
    [
        ("plan_gpu=Н100", "did you mean plan_gpu=H100?"),  # a Cyrillic Н, unquoted
        ("device=сpu", "did you mean device=cpu?"),  # a Cyrillic с: a name of value_sets.choices
        (
            "plan_gpu='Н100'",
            "did you mean plan_gpu=H100? ('Н' (U+041D CYRILLIC CAPITAL LETTER EN) looks like ASCII",
        ),
    ],
)
def test_a_look_alike_of_a_name_the_key_takes_suggests_the_ascii_name(given, fix):
    """#294 (a): the fix was "quote it", and the quoted form "is no device of the peak table ... use one of
    those", with no near name."""
    line = refusal(["plan=true", given])
    assert line is not None and fix in line, line
    assert refusal(["plan=true", fix.split()[3].rstrip("?")]) is None  # the fix runs
    assert "quote the value" in refusal(["plan=true", "tag=Н100"])  # a free string keeps its characters


@pytest.mark.parametrize(
    ("given", "fix"),
    [("seed=choice()", "seed=choice(0,1)"), ("tag=sort(choice())", "tag=choice(a,b)")],
)
def test_an_empty_choice_says_a_choice_needs_a_value(given, fix):
    """#294 (b): the fix ``'seed="choice()"'`` made it a string, which ``seed`` refuses."""
    assert refusal(["-m", given]) == (
        f"Invalid config: {given}: a choice needs at least one value. Fix: give its values: {fix}"
    )
    assert refusal(["-m", "device=cpu", fix]) is None


def test_a_suggestion_is_rechecked_where_it_stood_not_after_a_trailing_flag():
    """#294 (d): the suggestion was rechecked after ``--cfg job`` and the recheck's flag-order line nested
    in the fix ("did you mean ... (then: ...: an override after a flag ... Fix: ...)?")."""
    line = refusal(["plan=true", "parallel.pp_schedule=gpipe", "--cfg", "job"])
    assert line == (
        "Invalid config: parallel.pp_schedule='gpipe': must be one of 1F1B, Interleaved1F1B, GPipe. Fix: did "
        "you mean parallel.pp_schedule=GPipe? (options are case-sensitive)."
    )
    assert refusal(["plan=true", "parallel.pp_schedule=GPipe", "--cfg", "job"]) is None


def test_a_value_whose_quoted_form_is_refused_gets_that_refusal_not_quote_it():
    """#294 (e): ``hydra.sweeper.params={seed:0,1}``'s fix quoted it, and the quoted form was refused as
    the axes set as a whole."""
    line = refusal(["-m", "hydra/sweeper=tune", "device=cpu", "hydra.sweeper.params={seed:0,1}"])
    assert line == (
        "Invalid config: hydra.sweeper.params={seed:0,1}: hydra.sweeper.params is set one axis at a time, "
        "not as a whole. Fix: give each axis as hydra.sweeper.params.KEY=VALUES in a sweep file "
        "(conf/sweep/), or sweep it on the command line (-m seed=0,1)."
    )
    assert refusal(["-m", "hydra/sweeper=tune", "device=cpu", "seed=0,1"]) is None


@pytest.mark.parametrize(
    "twice",
    [
        ["steps.measure=1", "steps.measure=2"],
        ["model=gpt-tiny", "model=llama-tiny"],
        ["+steps.measure=1", "++steps.measure=2"],
        ["hydra.sweep.dir=a", "hydra.sweep.dir=b"],
    ],
)
def test_a_key_given_twice_with_single_values_is_one_line(twice):
    """#295: ``device=cpu steps.measure=1 steps.measure=2`` ran with 2, the 1 dropped without a word."""
    key = twice[0].lstrip("+").partition("=")[0]
    assert refusal(["device=cpu", *twice]) == (
        f"Invalid config: {twice[0]} and {twice[1]}: {key} is given twice and Hydra keeps only the last, so "
        f"{twice[0]} would be dropped without a word. Fix: give {key} once: keep one, e.g. {twice[1]} "
        "(the last, which Hydra would run)."
    )
    assert refusal(["device=cpu", twice[1]]) is None


def test_a_slurm_launcher_with_nproc_per_node_auto_is_refused_before_hydra():
    """#296: the launcher's own check ran after Hydra made the sweep's folder: exit 1, no ``flopsweep:``."""
    line = (
        "Invalid config: nproc_per_node='auto': a Slurm launcher needs the ranks per node at submission "
        "(each node agent spawns that many). Fix: set nproc_per_node to the GPUs per node to use, e.g. "
        "nproc_per_node=8 (with device=cpu: the CPU ranks per node, e.g. 2 with backend=ddp, 1 with "
        "backend=single)."
    )
    assert refusal(["-m", "hydra/launcher=slurm_local", "plan=true", "seed=0,1"]) == line
    assert refusal(["-m", "hydra/launcher=slurm", "nproc_per_node=auto", "seed=0,1"]) == line
    assert refusal(["-m", "hydra/launcher=slurm_local", "plan=true", "nproc_per_node=8", "seed=0,1"]) is None


def test_a_budget_under_one_gpu_second_is_not_shown_as_zero():
    """#297: ``hydra.sweeper.budget_gpu_s=1e-300``: "0/0 GPU-s spent" where the final line said 1e-300."""
    assert Budget(1e-300).line() == "0/1e-300 GPU-s spent"
    assert Budget(0.001, spent_s=25.4).line() == "25/0.001 GPU-s spent"
    assert Budget(500.0, spent_s=260.0).line() == "260/500 GPU-s spent"
    assert [gpu_seconds_text(v) for v in (0.0, 0.5, 12.6, -0.25)] == ["0", "0.5", "13", "-0.25"]
    stop = budget_stop(1, pool=2, target=1, challengers=0, jobs=2, cost=3.0, left=0.5)
    assert stop.endswith("would cost about 3 GPU-s, 0.5 left")

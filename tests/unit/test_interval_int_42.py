"""``interval()`` of a whole-number key is said to need ``int(interval(...))``, and that fix passes the
command line's checks (docs/reliability-13.md row 1001). Optuna may not be installed: the decision is
tested, not Optuna."""

from __future__ import annotations

from flopsweep.override_multirun import sweep_function_problem

OPTUNA = "hydra/sweeper=optuna_objective"


def _fix(line: str) -> str:
    return line.partition(" Fix: ")[2]


def test_the_basic_sweeper_s_fix_names_int_interval_for_a_whole_number_key():
    line = sweep_function_problem(
        ["-m", "plan=true", "model=gpt-125m", "batch.micro_batch_size=interval(1,4)"]
    )
    assert line is not None
    assert _fix(line) == (
        "list values, e.g. batch.micro_batch_size=1,4 (its ends), or "
        "'batch.micro_batch_size=int(interval(1,4))' with hydra/sweeper=optuna_objective."
    )
    typed_back = ["-m", "plan=true", "model=gpt-125m", "batch.micro_batch_size=int(interval(1,4))", OPTUNA]
    assert sweep_function_problem(typed_back) is None
    from run import refusal  # every check of the command line: only a missing Optuna may refuse it

    left = refusal(typed_back)
    assert left is None or left.startswith(
        "Invalid config: hydra/sweeper=optuna_objective: needs hydra-optuna"
    )
    assert sweep_function_problem(["-m", "model=gpt-125m", "batch.micro_batch_size=1,4"]) is None


def test_optuna_with_a_float_interval_of_a_whole_number_key_is_refused_with_the_int_fix():
    line = sweep_function_problem(["-m", "model=gpt-125m", "batch.micro_batch_size=interval(1.5,4)", OPTUNA])
    assert line == (
        "Invalid config: batch.micro_batch_size=interval(1.5,4): batch.micro_batch_size is a whole number "
        "and interval() samples floats (e.g. 2.78). Fix: batch.micro_batch_size=int(interval(2,4))."
    )
    fix = _fix(line).removesuffix(".")
    assert sweep_function_problem(["-m", "model=gpt-125m", fix, OPTUNA]) is None


def test_a_float_key_keeps_its_interval():
    assert sweep_function_problem(["-m", "optim.lr=interval(1e-4,1e-3)", OPTUNA]) is None
    line = sweep_function_problem(["-m", "optim.lr=interval(1e-4,1e-3)"])
    assert line is not None and _fix(line).endswith(
        "optim.lr=0.0001,0.001 (its ends), or add " + OPTUNA + "."
    )

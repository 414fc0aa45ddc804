"""``batch.global_batch_size`` below 1 is refused by the value alone, before Hydra, and a global batch
that does not divide names one to type (docs/reliability-9.md #521, #522): under ``plan_clusters``,
``batch.global_batch_size=0`` had planned all 450 set-ups, refused each, and exited 1; a run's fix said
"a multiple of 4" with no value."""

from __future__ import annotations

import pytest


def refusal(argv: list[str]) -> str | None:
    from run import refusal as run_refusal

    return run_refusal(argv)


@pytest.mark.parametrize("value", ["0", "-3", "-1"])
def test_a_global_batch_below_one_is_refused_before_hydra(value: str) -> None:
    line = refusal(
        ["plan=true", "model=llama3.1-8b", "plan_clusters=[H100:8]", f"batch.global_batch_size={value}"]
    )
    assert line == (
        f"Invalid config: batch.global_batch_size={value}: must be a positive number of sequences per "
        "optimizer step, or null. Fix: set batch.global_batch_size=null (the micro batch x the data-parallel "
        "ranks), or a positive multiple of them."
    )
    fixed = ["plan=true", "model=llama3.1-8b", "plan_clusters=[H100:8]", "batch.global_batch_size=null"]
    assert refusal(fixed) is None


def test_the_jobs_check_says_the_same_and_its_fix_validates(hydra_compose) -> None:
    from flopsweep.checks import check_bounds, validate
    from flopsweep.config import ConfigError

    with pytest.raises(ConfigError) as err:
        check_bounds(hydra_compose(["model=gpt-tiny", "device=cpu", "batch.global_batch_size=0"]))
    assert "must be a positive number of sequences per optimizer step, or null" in str(err.value)
    validate(hydra_compose(["model=gpt-tiny", "device=cpu", "batch.global_batch_size=null"]))


@pytest.mark.parametrize(("world", "said"), [(1, "4"), (2, "4 x the data-parallel ranks")])
def test_a_global_batch_that_does_not_divide_names_one_to_type(hydra_compose, world: int, said: str) -> None:
    from flopsweep.checks import validate
    from flopsweep.config import ConfigError

    ctx = ["model=gpt-tiny", "device=cpu", "batch.micro_batch_size=4", f"nproc_per_node={world}"]
    ctx += ["backend=ddp"] if world > 1 else []
    with pytest.raises(ConfigError) as err:
        validate(hydra_compose([*ctx, "batch.global_batch_size=6"]))
    fix = str(err.value).split("Fix: ", 1)[1]
    assert (
        fix
        == f"set batch.global_batch_size to a multiple of {said}, e.g. batch.global_batch_size={4 * world}."
    )
    validate(hydra_compose([*ctx, f"batch.global_batch_size={4 * world}"]))

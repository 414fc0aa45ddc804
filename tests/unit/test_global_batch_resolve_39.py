"""A global batch that the micro batch divides but the micro batch x the data-parallel ranks does not gets
overrides to type as its fix (docs/reliability-10.md #602, session 39's re-trial of #522):
``device=cpu nproc_per_node=2 batch.micro_batch_size=2 batch.global_batch_size=6`` had said ``Fix: set
batch.global_batch_size to a multiple of 4, e.g. 4 or 8``, numbers where #522 had made the other line's an
override."""

from __future__ import annotations

import pytest


def test_a_global_batch_the_data_parallel_ranks_do_not_divide_names_overrides_that_pass(
    hydra_compose,
) -> None:
    from flopsweep.config import ConfigError
    from flopsweep.plan import Environment, plan

    def validate(cfg):  # the job's own check: the rules, then the layout on 2 CPU ranks
        return plan(cfg, Environment(cpu_count=2))

    ctx = ["model=gpt-tiny", "device=cpu", "nproc_per_node=2", "backend=ddp", "batch.micro_batch_size=2"]
    with pytest.raises(ConfigError) as err:
        validate(hydra_compose([*ctx, "batch.global_batch_size=6"]))
    fix = str(err.value).split("Fix: ", 1)[1]
    assert fix == (
        "set batch.global_batch_size to a multiple of 4, e.g. batch.global_batch_size=4 or "
        "batch.global_batch_size=8."
    )
    for typed in ("batch.global_batch_size=4", "batch.global_batch_size=8"):
        validate(hydra_compose([*ctx, typed]))

"""Session 38 (docs/reliability-9.md #477): a job's overrides are shown as typed, not with Hydra's escapes:
``-m seed=0,1 tag='${seed}' plan=true`` printed ``every job: tag=$\\{seed\\}`` below the plan's table."""

from __future__ import annotations

import pytest

from flopsweep.job.planprint import plan_table
from flopsweep.shown_overrides import as_typed

CSV = "job,model,overrides,status\n" + "".join(
    f"{n},gpt-tiny,seed={n} tag=$\\{{seed\\}} plan=True,ok\n" for n in (0, 1)
)
"""A plan.csv of the sweep ``seed=0,1 tag='${seed}'``, its overrides as Hydra's sweeper writes them."""


def test_the_plans_table_shows_every_jobs_override_as_typed() -> None:
    """#477: ``every job: tag=$\\{seed\\}`` -> ``every job: tag=${seed}``; the rows keep their own seed."""
    lines = plan_table("plan.csv", text=CSV).splitlines()
    assert "every job: tag=${seed}" in lines
    assert not any("\\{" in line for line in lines)


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("tag=$\\{seed\\}", "tag=${seed}"),
        ("tag=$\\{oc.env\\:HOME\\}", "tag=${oc.env:HOME}"),
        ("seed=0", "seed=0"),
        ("tag=a\\,b", "tag=a\\,b"),  # a,b unescaped is a sweep of two values: kept
        ("+foo=\\[1\\]", "+foo=\\[1\\]"),  # [1] unescaped is a list: kept
        ("tag=a\\ b", "tag=a\\ b"),  # a space stays escaped: a shown line is split at spaces
    ],
)
def test_an_escape_is_dropped_only_where_hydra_reads_the_same(given: str, shown: str) -> None:
    """#477: the form shown, typed back, is read by Hydra as the job's own override."""
    assert as_typed(given) == shown

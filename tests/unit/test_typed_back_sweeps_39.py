"""Each job of a sweep shows its own value as the sweep typed it (docs/reliability-10.md #604, session 39's
re-trial of #530): ``-m plan=true ... cost.usd_per_gpu_hour=2.50,3 budget.tokens=1e12,2e12`` showed
``cost.usd_per_gpu_hour=2.5`` and ``budget.tokens=1000000000000.0`` in the best command and the job labels:
#530 compared the whole typed sweep (``2.50,3``) with the job's one value, never equal."""

from __future__ import annotations

import pytest

from flopsweep.shown_overrides import typed_back

TYPED = [
    "-m",
    "plan=true",
    "cost.usd_per_gpu_hour=2.50,3",
    "budget.tokens=1e12,2e12",
    "seq=choice(0.50,1)",
    "tag='a,b',c",
    "plan_clusters=[H100:8],[A100-40GB:8]",
]


@pytest.mark.parametrize(
    ("job", "shown"),
    [
        ("cost.usd_per_gpu_hour=2.5", "cost.usd_per_gpu_hour=2.50"),
        ("cost.usd_per_gpu_hour=3", "cost.usd_per_gpu_hour=3"),
        ("budget.tokens=1000000000000.0", "budget.tokens=1e12"),
        ("budget.tokens=2000000000000.0", "budget.tokens=2e12"),
        ("seq=0.5", "seq=0.50"),
        ("tag=a\\,b", "tag='a,b'"),
        ("tag=c", "tag=c"),
        ("plan_clusters=[H100:8]", "plan_clusters=[H100:8]"),
        ("cost.usd_per_gpu_hour=4", "cost.usd_per_gpu_hour=4"),  # no value of the sweep: as it is
    ],
)
def test_a_sweeps_job_shows_its_value_as_the_sweep_typed_it(job: str, shown: str) -> None:
    assert typed_back(job, TYPED) == shown

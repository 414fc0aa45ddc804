"""A sweep's best command and the tuner's winner line give each override as typed (docs/reliability-9.md
#530): ``-m plan=true ... cost.usd_per_gpu_hour=2,3 budget.tokens=1e12`` printed
``budget.tokens=1000000000000.0`` (Hydra's sweeper writes each job's overrides back from their values); a
single plan said ``1e12``."""

from __future__ import annotations

import pytest

from flopsweep.shown_overrides import typed_back

TYPED = [
    "-m",
    "plan=true",
    "budget.tokens=1e12",
    "cost.usd_per_gpu_hour=2,3",
    "tag=${seed}",
    "model=llama3.1-8b",
]


@pytest.mark.parametrize(
    ("job", "shown"),
    [
        ("budget.tokens=1000000000000.0", "budget.tokens=1e12"),
        ("cost.usd_per_gpu_hour=2", "cost.usd_per_gpu_hour=2"),  # one value of a sweep: the job's own
        ("tag=$\\{seed\\}", "tag=${seed}"),
        ("model=llama3.1-8b", "model=llama3.1-8b"),
        ("seed=0", "seed=0"),  # not typed: as it is
    ],
)
def test_a_jobs_override_is_shown_as_the_command_line_typed_it(job: str, shown: str) -> None:
    assert typed_back(job, TYPED) == shown


def test_a_value_hydra_reads_otherwise_is_kept() -> None:
    # not the typed 1e12: its own value, in the compact exact form (docs/reliability-11.md #720)
    assert typed_back("budget.tokens=2000000000000.0", TYPED) == "budget.tokens=2e12"
    assert typed_back("plan=True", ["plan=true"]) == "plan=true"

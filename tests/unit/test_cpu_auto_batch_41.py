"""``plan=true batch=auto device=cpu`` picks the micro batch the launch then accepts: the plan holds the
estimate to the host's available memory less the launch's margin (``hostmem.cpu_need_bytes``: x 1.1 + 0.6 GiB
per rank) through the one rule the CPU probes use (``sizesearch.cpu_allowance``). Reliability row #843
(docs/reliability-12.md). The free memory is fixed (``hostmem.available_bytes``), the estimate and the checks
are real."""

from __future__ import annotations

import re

import pytest

from flopsweep import hostmem
from flopsweep.config import ConfigError

GIB = 2**30
FREE = 12 * GIB
AUTO = ["model=gpt-125m", "device=cpu", "nproc_per_node=1", "batch=auto"]


def _pick(hydra_compose, tmp_path, overrides: list[str]) -> tuple[int, str]:
    """The micro batch ``plan=true``'s row names for ``overrides``, and its note."""
    from flopsweep.job import JobInfo, plan_job

    row = plan_job(hydra_compose(overrides), JobInfo(job_dir=tmp_path, overrides=overrides))["plan"]
    assert row["status"] == "ok", row["note"]
    found = re.match(r"batch=auto: (?:predicted|estimated) at micro batch (\d+)", row["note"])
    assert found is not None, row["note"]
    return int(found.group(1)), row["note"]


def _launch_refuses(hydra_compose, micro_batch: int) -> bool:
    """Whether the launch's check (``job.check_free_host_memory``) refuses the fixed micro batch at FREE."""
    from flopsweep.job import check_free_host_memory
    from flopsweep.plan import Environment, plan

    fixed = [*AUTO[:-1], f"batch.micro_batch_size={micro_batch}"]
    host = Environment(cpu_count=2, host_memory_bytes=16 * GIB)
    try:
        check_free_host_memory(
            plan(hydra_compose(fixed), host), free=FREE, overrides=fixed, cores=2, env=host
        )
    except ConfigError:
        return True
    return False


@pytest.mark.parametrize("budget", [None, 40.0])
def test_the_plans_micro_batch_passes_the_launchs_check_and_one_above_it_does_not(
    hydra_compose, tmp_path, monkeypatch, budget: float | None
) -> None:
    """Was: without ``search.memory_budget_gib`` the row stayed at the search's first size (1), and a budget
    over the host's memory (40 GiB at 12 GiB free) sized it by the bare estimate: a micro batch the launch
    refused. Now the row's size passes the launch's check at the same free memory, the next one fails."""
    monkeypatch.setattr(hostmem, "available_bytes", lambda: FREE)
    extra = [] if budget is None else [f"search.memory_budget_gib={budget}"]
    size, note = _pick(hydra_compose, tmp_path, [*AUTO, *extra])
    assert 1 < size < 256, note  # neither the search's start nor batch.max_micro_batch_size
    assert "GiB (the host's available memory less the CPU's margin)" in note, note
    assert not _launch_refuses(hydra_compose, size)
    assert _launch_refuses(hydra_compose, size + 1)


def test_the_cpu_probes_rule_is_the_plans(hydra_compose, monkeypatch) -> None:
    """The run's probes (``sizesearch.budget_problem``) let the plan's size through and refuse the next, and a
    budget smaller than the host's allowance is the rule where given (deterministic)."""
    import dataclasses

    from flopsweep.memory import peak_bytes
    from flopsweep.plan import Environment, plan
    from flopsweep.sizesearch import budget_problem, cpu_allowance

    monkeypatch.setattr(hostmem, "available_bytes", lambda: FREE)
    p = plan(hydra_compose(AUTO), Environment(cpu_count=2))

    def peak(n: int) -> int:
        return peak_bytes(
            dataclasses.replace(p.cfg, batch=dataclasses.replace(p.cfg.batch, micro_batch_size=n)), p.layout
        )

    allowed, what = cpu_allowance(p.cfg, 1)
    assert allowed == hostmem.cpu_peak_allowed(FREE, 1) and "less the CPU's margin" in what
    size = max(n for n in range(1, 257) if peak(n) <= allowed)
    rule = {"peak": None, "budget": None, "nproc": 1}
    assert budget_problem(p.cfg, estimated=peak(size), **rule) == ""
    assert "over the host's available memory per rank" in budget_problem(
        p.cfg, estimated=peak(size + 1), **rule
    )
    assert cpu_allowance(p.cfg, 1, 2 * GIB)[0] == 2 * GIB  # a smaller budget wins

"""The activation checkpointing policies (flopsweep.checkpointing): the config group, the old
boolean values, and what each policy recomputes and keeps. The FLOPs each policy's wrap really
runs are counted in tests/unit/test_flops_counted.py and tests/unit/test_llama.py."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from helpers import records, run_py, run_py_together


@pytest.mark.slow
def test_a_sweep_over_the_old_values_plans_both_policies(tmp_path: Path) -> None:
    proc = run_py(
        "-m", "activation_checkpointing=true,false", "plan=true", f"hydra.sweep.dir={tmp_path}", timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = list(csv.DictReader((tmp_path / "plan.csv").open()))
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert "activation_checkpointing=full" in proc.stdout and "activation_checkpointing=none" in proc.stdout


def _losses_by_policy(tmp_path: Path, *sweeps: tuple[str, ...]) -> dict[tuple[str, str], dict]:
    """The records of one-rank fp32 sweeps over ``sweeps`` (each its overrides), started together (one
    rank each: CI time), by (model, policy)."""
    common = ("-m", "device=cpu", "precision=fp32", "backend=single", "steps.warmup=1", "steps.measure=2")
    procs = run_py_together(
        *(
            (*common, *overrides, f"hydra.sweep.dir={tmp_path / str(n)}")
            for n, overrides in enumerate(sweeps)
        ),
        timeout=1800,
    )
    for proc in procs:
        assert proc.returncode == 0, proc.stderr[-3000:]
    recs = records(tmp_path)
    assert recs and all(r["status"] == "ok" for r in recs), [r["error"] for r in recs]
    return {(r["config"]["model"]["name"], r["config"]["activation_checkpointing"]["name"]): r for r in recs}


@pytest.mark.slow
def test_every_eager_policy_trains_as_none_does(hydra_compose) -> None:
    """Each policy's trainer (fp32, one rank, the same seed and data): the losses of two steps equal
    those of ``none`` within 1e-5, on gpt-tiny and llama-tiny; each record counts its policy's recompute
    (``flopsweep.metrics.compute_metrics``, as the job makes the record's metrics). The trainers are the
    runs' own (``flopsweep.backends.build_trainer``), the eight cases in one rank (``tests/one_rank.py``;
    CI time: through ``run.py`` they were 8 jobs in two Hydra starts); a real run of a policy is
    test_memory_budget_trains_as_none_does_when_compiled's."""
    from helpers import make_plan
    from one_rank import steps_of

    from flopsweep.metrics import compute_metrics
    from flopsweep.plan import Environment

    common = ["device=cpu", "precision=fp32", "backend=single"]
    plans = {
        (model, name): make_plan(
            hydra_compose([*common, f"model={model}", f"activation_checkpointing={name}"]),
            Environment(cpu_count=4),
        )
        for model in ("gpt-tiny", "llama-tiny")
        for name in ("none", "full", "selective", "every_n")
    }
    found = steps_of({" ".join(key): (plan.cfg, plan.layout) for key, plan in plans.items()})
    assert len(found) == 8
    rank = {"device": "cpu", "step_times_s": [0.1], "losses": [1.0, 1.0], "peak_host_rss_bytes": 2**30}
    rank |= {"peak_cuda_allocated_bytes": None, "peak_cuda_reserved_bytes": None}
    for (model, name), plan in plans.items():
        (got,), (ref,) = found[f"{model} {name}"], found[f"{model} none"]
        assert got["loss"] == pytest.approx(ref["loss"], abs=1e-5), (model, name)
        assert ref["loss"][0] != ref["loss"][1], model  # the first step changed the weights
        m = compute_metrics(plan.cfg, [dict(rank, rank=0)], plan.layout)
        assert m["recompute"] == {"none": "none", "selective": "selective"}.get(name, "early_stop")
        more = m["hardware_flops_per_iteration"] > m["model_flops_per_iteration"]
        assert more == (name != "none")


@pytest.mark.slow
def test_memory_budget_trains_as_none_does_when_compiled(tmp_path: Path) -> None:
    """``memory_budget`` (compile=true, the partitioner's default budget 0.5) against compiled ``none``: the
    same losses within 1e-5; its hardware FLOPs are null with a warning that says why."""
    recs = _losses_by_policy(
        tmp_path, ("model=gpt-tiny", "compile=true", "activation_checkpointing=none,memory_budget")
    )
    budget, ref = recs[("gpt-tiny", "memory_budget")], recs[("gpt-tiny", "none")]
    for key in ("loss_first", "loss_last"):
        assert budget["metrics"][key] == pytest.approx(ref["metrics"][key], abs=1e-5)
    assert (
        budget["metrics"]["recompute"] == "unknown"
        and budget["metrics"]["hardware_flops_per_iteration"] is None
    )
    assert any(w.startswith("recompute_unknown") for w in budget["warnings"])
    assert budget["config"]["activation_checkpointing"] == {"name": "memory_budget", "budget": 0.5}

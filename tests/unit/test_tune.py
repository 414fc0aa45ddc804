"""The tuner's decisions without processes (:mod:`flopsweep.tune`, :mod:`flopsweep.tunereport`): the
halving schedule, the budget accounting, the pruning decision on real configs, the report."""

from __future__ import annotations

import json
import math

import pytest

from flopsweep.tune import (
    Budget,
    Candidate,
    challengers,
    cut,
    keep_count,
    predicted_value,
    prune_reason,
    ranked,
    round_jobs,
    run_gpu_seconds,
    schedule,
    target_repeats,
)


def cand(i: int, *values: float, label: str | None = None, gpu_s: tuple[float, ...] = ()) -> Candidate:
    c = Candidate(i, (f"backend=b{i}", "device=cpu"), label or f"backend=b{i}")
    c.values = list(values)
    c.gpu_s = list(gpu_s) or [10.0] * len(values)
    return c


def test_schedule_halves_the_pool_and_doubles_the_repeats_up_to_the_cap():
    assert schedule(8, eta=2, finalists=2, max_repeats=3) == [(8, 1), (4, 2), (2, 3)]
    assert schedule(3, eta=2, finalists=2, max_repeats=2) == [(3, 1), (2, 2)]
    assert schedule(16, eta=4, finalists=2, max_repeats=5) == [(16, 1), (4, 4), (2, 5)]
    assert schedule(9, eta=3, finalists=1, max_repeats=3) == [(9, 1), (3, 3), (1, 3)]
    assert schedule(1, eta=2, finalists=2, max_repeats=3) == [(1, 1), (1, 3)]
    assert schedule(3, eta=3, finalists=1, max_repeats=2) == [(3, 1), (1, 2)]  # tests/integration's
    for rounds in (schedule(n, eta=2, finalists=2, max_repeats=4) for n in range(2, 40)):
        pools, reps = [p for p, _ in rounds], [r for _, r in rounds]
        assert pools == sorted(pools, reverse=True) and reps == sorted(reps)  # shrink, grow
        assert pools[-1] <= 2 and reps[-1] == 4


def test_keep_count_and_target_repeats():
    assert [keep_count(n, 2, 2) for n in (1, 2, 3, 4, 5, 8)] == [1, 2, 2, 2, 3, 4]
    assert keep_count(10, 3, 1) == 4
    assert [target_repeats(r, 8, eta=2, finalists=2, max_repeats=3) for r in range(4)] == [1, 2, 3, 3]
    assert target_repeats(1, 2, eta=2, finalists=2, max_repeats=5) == 5  # the finalists' round
    assert target_repeats(0, 2, eta=2, finalists=2, max_repeats=5) == 1  # round 0 measures once


def test_round_jobs_bring_every_set_up_to_the_target_round_robin():
    a, b, c = cand(0, 1.0), cand(1, 2.0), cand(2)
    jobs = round_jobs([a, b, c], 2)
    assert [(j.index, k) for j, k in jobs] == [(2, 0), (0, 1), (1, 1), (2, 1)]
    assert round_jobs([a, b], 1) == []


def test_cut_keeps_the_best_medians_and_drops_failed_runs():
    a, b, c, d = cand(0, 5.0, 1.0, 4.0), cand(1, 3.0), cand(2, 9.0, math.nan), cand(3, 2.0)
    c.failed = "oom: out of memory"
    assert a.measured == 4.0
    assert cut([a, b, c, d], "maximize", eta=2, finalists=2) == [a, b]
    assert cut([a, b, c, d], "minimize", eta=2, finalists=1) == [d, b]
    assert ranked([cand(4), b, a], "maximize")[-1].index == 4  # never measured: last


def test_budget_estimates_a_round_from_measured_runs():
    a, b, new = cand(0, 1.0, gpu_s=(100.0, 140.0)), cand(1, 1.0, gpu_s=(20.0,)), cand(2)
    budget = Budget(500.0, spent_s=260.0)
    assert budget.estimate([a, b]) == pytest.approx(140.0)
    assert budget.estimate([a, new]) == pytest.approx(240.0)  # a's mean for both
    assert budget.estimate([a, new], [b]) == pytest.approx(120.0 + (100 + 140 + 20) / 3)
    assert budget.allows(240.0) and not budget.allows(240.5)
    assert Budget(10.0).estimate([new]) == 0.0  # nothing measured yet: unknown, 0
    assert budget.line() == "260/500 GPU-s spent"


def test_run_gpu_seconds_is_wall_time_times_world_size():
    record = {
        "run": {"started_at": "2026-12-04T09:00:00+00:00", "finished_at": "2026-12-04T09:00:30.5+00:00"},
        "system": {"world_size": 4},
    }
    assert run_gpu_seconds(record) == pytest.approx(122.0)
    assert run_gpu_seconds({"run": {"started_at": "2026-12-04T09:00:00Z"}, "system": {"world_size": 4}}) == 0
    assert run_gpu_seconds({"status": "invalid", "run": {}, "system": {}}) == 0.0


def test_pruning_decision_on_real_configs(hydra_compose):
    """The rules' refusal and the memory estimate, as the tuner judges each set-up."""
    from flopsweep.config import ConfigError
    from flopsweep.memory import peak_bytes
    from flopsweep.plan import Environment, resolve, validate

    env = Environment(cpu_count=2)
    base = ["device=cpu", "nproc_per_node=4", "model=gpt-tiny"]
    with pytest.raises(ConfigError) as refused:
        resolve(validate(hydra_compose([*base, "backend=ddp", "parallel.tp=2"])), env)
    reason = prune_reason(str(refused.value), None, None)
    assert reason.startswith("refused: Invalid config: parallel.tp=2") and "Fix:" in reason

    limit = (int(0.05 * 2**30), "hydra.sweeper.memory_gib")
    big = resolve(validate(hydra_compose([*base, "backend=fsdp", "batch.micro_batch_size=64"])), env)
    small = resolve(validate(hydra_compose([*base, "backend=fsdp", "batch.micro_batch_size=1"])), env)
    over = prune_reason(None, peak_bytes(big.cfg, big.layout), limit)
    assert over.startswith("over memory: estimated peak") and "hydra.sweeper.memory_gib" in over
    assert prune_reason(None, peak_bytes(small.cfg, small.layout), limit) is None
    assert prune_reason(None, None, limit) is None and prune_reason(None, 10**12, None) is None


def test_predicted_value_of_each_objective():
    made = {"iteration_time_s": 2.0, "tokens_per_s": 4096.0, "tokens_per_s_per_device": 1024.0, "mfu": 0.4}
    kw = {"model_flops": 8e12, "world_size": 4}
    assert predicted_value(made, "model_tflops_per_device", **kw) == pytest.approx(1.0)
    assert predicted_value(made, "tokens_per_s", **kw) == 4096.0
    assert predicted_value(made, "iteration_time_s_mean", **kw) == 2.0
    assert predicted_value(made, "mfu", **kw) == 0.4
    assert predicted_value(made, "joules_per_token", **kw) is None
    assert predicted_value({"iteration_time_s": None, "source": "no prediction"}, "mfu", **kw) is None


def test_challengers_are_unmeasured_set_ups_predicted_past_the_cut():
    survivors = [cand(0, 10.0), cand(1, 6.0)]
    x, y, z = cand(2), cand(3), cand(4)
    x.predicted, y.predicted, z.predicted = 7.0, 5.0, 9.0
    assert challengers([x, y, z], survivors, "maximize", 5) == [z, x]
    assert challengers([x, y, z], survivors, "maximize", 1) == [z]
    assert challengers([x, y, z], survivors, "minimize", 5) == [y]


def test_report_names_the_winner_runner_up_and_significance():
    from flopsweep import tunereport

    fast = cand(0, 10.0, 10.1, 9.9, label="backend=fsdp")
    slow = cand(1, 5.0, 5.1, 4.9, label="backend=ddp")
    lucky = cand(2, 50.0, label="parallel.tp=2")  # dropped after one run: never the winner
    lucky.dropped_after = 0
    fast.overrides = ("device=cpu", "backend=fsdp", "repeats=3", "repeat=2", "resume=true")
    gone = Candidate(3, ("backend=ddp", "parallel.tp=2"), "backend=ddp parallel.tp=2", pruned="refused: no")
    fast.predicted, fast.held_out = 8.0, 12.0
    rounds = [{"round": 0, "pool": 3, "repeats": 1, "jobs": 3, "spent_gpu_s": 30.0}]
    s = tunereport.summary(
        [fast, slow, lucky, gone], [fast, slow], objective="tokens_per_s", direction="maximize",
        budget=Budget(100.0, spent_s=70.0), rounds=rounds, stopped="the finalists are measured",
    )  # fmt: skip
    json.dumps(s, allow_nan=False)  # strict JSON: tune.json
    assert s["winner"]["label"] == "backend=fsdp" and s["runner_up"]["label"] == "backend=ddp"
    assert s["winner"]["ci_over"] == "repeats" and s["winner"]["ci_low"] < 10.0 < s["winner"]["ci_high"]
    assert s["significant"] is True
    assert s["command"] == "python run.py device=cpu backend=fsdp"
    states = {u["label"]: u["state"] for u in s["setups"]}
    assert states == {
        "backend=fsdp": "winner",
        "backend=ddp": "runner-up",
        "parallel.tp=2": "dropped after round 0",
        "backend=ddp parallel.tp=2": "pruned",
    }
    row = next(u for u in s["setups"] if u["label"] == "backend=fsdp")
    assert row["error"] == pytest.approx(-0.2) and row["held_out_error"] == pytest.approx(0.2)
    text = "\n".join(tunereport.lines(s))
    assert "significant: their 95% intervals do not overlap" in text and "refused: no" in text
    md = tunereport.markdown(s)
    assert "| backend=fsdp | 8 | -20.0% | 12 | +20.0% | 10 | 3 | 30 | winner |" in md

    close = cand(1, 9.0, 11.5, 9.8, label="backend=ddp")
    s = tunereport.summary(
        [fast, close], [fast, close], objective="tokens_per_s", direction="maximize",
        budget=Budget(100.0), rounds=[], stopped="budget",
    )  # fmt: skip
    assert s["significant"] is False and "not significant" in tunereport.verdict(s)


def test_sweeper_parameters_are_refused_in_one_line():
    from hydra_plugins.flopsweep_tune import TuneSweeper

    assert TuneSweeper(budget_gpu_s=10, initial=3)._problem() is None
    line = TuneSweeper(eta=1)._problem()
    assert line == (
        "Invalid config: hydra.sweeper.eta=1: must be a whole number of at least 2. "
        "Fix: set hydra.sweeper.eta to one."
    )
    assert "hydra.sweeper.budget_gpu_s=-1" in TuneSweeper(budget_gpu_s=-1)._problem()
    assert "hydra.sweeper.memory_gib=0" in TuneSweeper(memory_gib=0)._problem()

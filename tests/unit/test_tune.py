"""The tuner's decisions without processes (:mod:`flopsweep.tune`, :mod:`flopsweep.tunereport`): the
halving schedule, the budget accounting, the pruning decision on real configs, the report."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from flopsweep.config import typed_form
from flopsweep.tune import (
    Budget,
    Candidate,
    challengers,
    cut,
    keep_count,
    ranked,
    round_jobs,
    run_gpu_seconds,
    schedule,
    target_repeats,
)


def cand(
    i: int, *values: float, label: str | None = None, gpu_s: tuple[float, ...] = (), objective: str = ""
) -> Candidate:
    """A set-up with those measured values; of a rate ``objective`` (one token a step), its runs' mean
    steps ``1 / value``, as its records would have them."""
    c = Candidate(i, (f"backend=b{i}", "device=cpu"), label or f"backend=b{i}", objective=objective)
    c.values = list(values)
    c.steps = [1 / v for v in values] if objective == "tokens_per_s" else []
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


def test_cut_keeps_the_best_figures_and_drops_failed_runs():
    a, b, c, d = cand(0, 5.0, 1.0, 4.0), cand(1, 3.0), cand(2, 9.0, math.nan), cand(3, 2.0)
    c.failed = "oom: out of memory"
    assert a.measured == pytest.approx(10 / 3)  # its runs' mean (a figure that is no rate), not the median 4
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


TINY = ["device=cpu", "nproc_per_node=4", "model=gpt-tiny"]
SPACE = ["space.backends=[ddp,fsdp]", "space.layouts=[dp,hsdp,tp2,tp8]", "space.micro_batches=[1,64]"]


def cpu_machine(gib: float):
    from flopsweep.plan_space import Machine

    return Machine(
        label="here", nnodes=1, gpus_per_node=4, device_name=None, capacity=(int(gib * 2**30), "memory_gib")
    )


def tuner_space(hydra_compose, overrides: list[str]):
    """What the sweeper makes of ``overrides``: the checked space and the placed set-ups."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from hydra_plugins.flopsweep_tune import TuneSweeper

    parsed = OverridesParser.create().parse_overrides(overrides)
    sweeper = TuneSweeper()  # its config as Hydra's multirun composes it: without the sweep overrides
    sweeper.config = hydra_compose.config([o.input_line for o in parsed if not o.is_sweep_override()])
    return sweeper.space(parsed)


def test_the_tuner_keeps_no_memory_margin_unless_one_is_given(hydra_compose):
    """The tuner prunes only what its estimate puts over the memory (:data:`flopsweep.tune.MIN_HEADROOM`),
    the plan 10% short of it; ``space.min_headroom=`` given, even at the plan's 0.1, is kept, on the
    command line or in ``hydra.sweeper.params``, with or without other ``space.*`` keys."""
    from flopsweep.tune import MIN_HEADROOM

    assert MIN_HEADROOM == 0.0
    assert tuner_space(hydra_compose, [*TINY, *SPACE])[0].min_headroom == 0.0
    assert tuner_space(hydra_compose, [*TINY, "backend=ddp,fsdp"])[0].min_headroom == 0.0
    for given in ("0.1", "0.25"):
        kept = [*TINY, *SPACE, f"space.min_headroom={given}"]
        assert tuner_space(hydra_compose, kept)[0].min_headroom == float(given)
    assert tuner_space(hydra_compose, [*TINY, "space.min_headroom=0.05"])[0].min_headroom == 0.05


def test_plan_and_tuner_take_the_same_set_ups_from_the_same_space_keys(hydra_compose):
    """``space.*`` means the same in both: the sweeper's set-ups are :func:`flopsweep.space.placed`'s,
    the plan's rows on a cluster of the same size the same list, in the same order; each tuner job's
    overrides compose to the config the plan judges (backend, layout, policy, precision, micro batch)."""
    from flopsweep import plan_space as ps
    from flopsweep.clusters import parse_cluster
    from hydra_plugins.flopsweep_tune.tuning import candidates

    space, (setups, nodes) = tuner_space(hydra_compose, [*TINY, *SPACE])
    planned = ps.Space.from_config(hydra_compose([*TINY, *SPACE]).space)
    assert space == dataclasses.replace(planned, min_headroom=0.0) and nodes == (1, 4)
    assert len(setups) == 2 * 2 * 3 * 2  # hsdp on one node is no set-up; tp8 does not divide 4 ranks
    plan = ps.candidates(hydra_compose([*TINY, *SPACE]), space, [parse_cluster("H100:1x4")])
    assert [r.setup for r in plan.rows] == setups
    tuned = candidates([list(TINY)], set(), setups, nodes)
    assert [c.setup for c in tuned] == setups
    assert (
        tuned[1].label == "backend=ddp activation_checkpointing=none precision=bf16 batch.micro_batch_size=64"
    )
    for c in (tuned[1], tuned[-1]):
        mine = hydra_compose(list(c.overrides))
        theirs = ps.setup_config(hydra_compose(TINY), c.setup, parse_cluster("H100:1x4"))
        for key in ("backend", "parallel", "activation_checkpointing"):
            assert getattr(mine, key).name == getattr(theirs, key).name if key != "parallel" else True
        assert mine.parallel.tp == theirs.parallel.tp and mine.batch.micro_batch_size == c.setup.micro_batch
    none, plain = tuner_space(hydra_compose, [*TINY, "backend=ddp,fsdp"])
    assert plain is None and none == ps.Space(
        min_headroom=0.0
    )  # no space.* key: the Hydra combinations are the set-ups
    combos = [[*TINY, f"backend={b}", f"parallel.tp={t}"] for b in ("ddp", "fsdp") for t in (1, 2)]
    hydra = candidates(combos, {"backend", "parallel.tp"}, None, (1, 4))
    assert [c.label for c in hydra][:2] == ["backend=ddp parallel.tp=1", "backend=ddp parallel.tp=2"]
    assert [c.overrides for c in hydra] == [tuple(c) for c in combos] and {c.setup for c in hydra} == {None}
    crossed = candidates(
        [[*TINY[:2], "model=gpt-tiny", "space.layouts=[dp]"], [*TINY[:2], "model=llama-tiny"]],
        {"model"},
        setups[:2],
        nodes,
    )
    assert [c.label.split()[0] for c in crossed] == ["model=gpt-tiny"] * 2 + ["model=llama-tiny"] * 2
    assert crossed[1].overrides[-4:] == tuple(setups[1].setup_overrides(*nodes)) and not any(
        o.startswith("space.") for c in crossed for o in c.overrides
    )


@pytest.mark.parametrize(
    "extra, said",
    [
        (
            ["backend=ddp,fsdp"],
            "Invalid config: backend=ddp,fsdp: a tuning sweep over space.* takes it from the space. Fix",
        ),
        (["parallel.tp=2"], "Fix: give it as space.layouts=[...] (tpN), or drop the space.* overrides."),
        (["parallel.cp=2"], "Fix: give it as space.layouts=[...] (cpN), or drop the space.* overrides."),
        (["batch.micro_batch_size=2"], "Fix: give it as space.micro_batches=[...]"),
        (
            ["nproc_per_node=2,4"],
            "nproc_per_node=2,4: a tuning sweep over space.* takes it from the space (space.layouts: one",
        ),
        (["space.min_headroom=-0.1"], "space.min_headroom=-0.1: is a share in [0, 1)"),
        (["space.layouts=[dp,tp0]"], "space.layouts=[dp,tp0]: takes dp, hsdp, tpN, ppN, cpN and epN"),
        (["objective=hello"], "objective='hello': is not a metric"),
    ],
)
def test_the_tuner_refuses_a_mix_or_a_bad_space_in_one_line(hydra_compose, extra, said):
    from flopsweep.config import ConfigError

    with pytest.raises(ConfigError) as refused:
        tuner_space(hydra_compose, [*TINY, *SPACE, *extra])
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_the_tuner_places_cp_layouts_and_labels_them_apart(hydra_compose):
    """``space.layouts=[dp,cp2,cp4]`` on two ranks: ``dp`` and ``cp2`` placed (``cp4`` does not divide
    them), each job's label naming its ``parallel.cp`` (a key a set-up sets, :data:`SETUP_KEYS`: without
    it ``dp`` and ``cp2`` had the same label), its overrides composing to ``parallel.cp=2``."""
    from hydra_plugins.flopsweep_tune.tuning import candidates

    run = ["device=cpu", "nproc_per_node=2", "model=llama-tiny", "space.backends=[fsdp]"]
    space = ["space.layouts=[dp,cp2,cp4]", "space.checkpointing=[none]", "space.micro_batches=[1]"]
    _, (setups, nodes) = tuner_space(hydra_compose, [*run, *space])
    assert [s.layout for s in setups] == ["dp", "cp2"] and nodes == (1, 2)
    dp, cp2 = candidates([run], set(), setups, nodes)
    assert cp2.label == dp.label + " parallel.cp=2"
    assert hydra_compose(list(cp2.overrides)).parallel.cp == 2


def test_the_shared_judge_prunes_by_rules_and_memory_and_predicts_every_objective(hydra_compose):
    """:func:`flopsweep.plan_assess.assess` on the tuner's composed configs. On CPU ranks with 0.05 GiB
    per rank and 10% headroom: DDP with tensor parallelism refused by the rules, a set-up over memory
    exactly when its estimate passes 0.045 GiB (micro batch 64 on every dp layout, micro batch 1
    never). On an H100 (datasheet peak, 700 W) the tuner reads each objective from the same row."""
    from flopsweep import objective
    from flopsweep.plan import Environment
    from flopsweep.plan_space import Machine, assess
    from hydra_plugins.flopsweep_tune.tuning import candidates, objective_value

    space, (setups, nodes) = tuner_space(hydra_compose, [*TINY, *SPACE])
    env = Environment(cpu_count=2)
    rows = {}
    for c in candidates([[*TINY, "cost.usd_per_gpu_hour=2"]], set(), setups, nodes):
        cfg = hydra_compose(list(c.overrides))
        row, _ = assess(
            cfg, env, cpu_machine(0.05), choices=None, setup=c.setup, overrides=[], min_headroom=0.1
        )
        rows[c.label] = (cfg, c.setup, row)
    status = {k: r.status for k, (_, _, r) in rows.items()}
    refused = {k for k, s in status.items() if s == "refused"}
    assert (
        refused == {k for k in rows if k.startswith("backend=ddp") and "parallel.tp=2" in k}
        and len(refused) == 6
    )
    assert all(rows[k][2].reason.startswith("parallel.tp=2: tensor parallelism") for k in refused)
    for k, (_, _, row) in rows.items():
        if k not in refused:
            assert (status[k] == "over memory") == (row.est_peak_gib_per_rank > 0.9 * 0.05), k
    over = [rows[k][2] for k in rows if status[k] == "over memory"]
    assert {(r.setup.layout, r.setup.micro_batch) for r in over} >= {("dp", 64)} and all(
        r.setup.micro_batch == 64 and "(memory_gib; space.min_headroom=0.1)" in r.reason for r in over
    )
    assert sum(s == "over memory" and rows[k][1].layout == "dp" for k, s in status.items()) == 6
    assert {s for k, s in status.items() if k not in refused and rows[k][1].micro_batch == 1} == {
        "no prediction"
    }

    cfg, setup, _ = rows["backend=fsdp activation_checkpointing=none precision=bf16 batch.micro_batch_size=1"]
    h100 = Machine(
        label="here",
        nnodes=1,
        gpus_per_node=4,
        device_name="H100",
        capacity=(80 * 2**30, "H100"),
        power_w=700,
    )
    row, p = assess(cfg, env, h100, choices=None, setup=setup, overrides=[])
    rate = row.predicted_tokens_per_s
    assert row.status == "ok" and p.world_size == 4 and rate > 0 and 0 < row.predicted_mfu < 1
    assert row.predicted_joules_per_token == pytest.approx(700 * 4 / rate)
    assert row.predicted_usd_per_million_tokens == pytest.approx(2 * 4 / 3600 / rate * 1e6)
    for name in ("tokens_per_s", "mfu", "joules_per_token", "usd_per_million_tokens"):
        assert objective_value(row, name) == getattr(row, objective.PLANNED[name]) is not None
    assert objective_value(row, "hfu") is None  # measured by a run, predicted by neither


def test_a_global_batch_that_the_layout_cannot_split_is_refused_in_both(hydra_compose):
    """``batch.global_batch_size`` fixed: a set-up whose micro batch x data-parallel degree does not
    divide it is refused by the shared judge, in the plan and in the tuner alike."""
    from flopsweep import plan_space as ps
    from flopsweep.clusters import parse_cluster
    from flopsweep.plan import Environment

    base = [*TINY, "batch.global_batch_size=8"]
    space = ps.Space(backends=("fsdp",), layouts=("dp", "tp2"), checkpointing=("none",), micro_batches=(1, 4))
    plan = {
        (r.setup.layout, r.setup.micro_batch): r
        for r in ps.candidates(hydra_compose(base), space, [parse_cluster("H100:1x4")]).rows
    }
    for setup in ps.placed(space, 1, 4):
        cfg = hydra_compose([*base, *setup.setup_overrides(1, 4)])
        row, _ = ps.assess(
            cfg, Environment(cpu_count=2), cpu_machine(64), choices=None, setup=setup, overrides=[]
        )
        mine = plan[(setup.layout, setup.micro_batch)]
        assert (row.status == "refused") == (mine.status == "refused"), (setup, row.reason, mine.reason)
        if setup.micro_batch == 4 and setup.layout == "dp":  # 4 x 4 ranks = 16 > 8
            assert row.status == "refused" and row.reason.startswith("batch.global_batch_size=8")
        else:
            assert row.status != "refused" and row.global_batch == mine.global_batch == 8


def test_challengers_are_unmeasured_set_ups_predicted_past_the_cut():
    survivors = [cand(0, 10.0), cand(1, 6.0)]
    x, y, z = cand(2), cand(3), cand(4)
    x.predicted, y.predicted, z.predicted = 7.0, 5.0, 9.0
    assert challengers([x, y, z], survivors, "maximize", 5) == [z, x]
    assert challengers([x, y, z], survivors, "maximize", 1) == [z]
    assert challengers([x, y, z], survivors, "minimize", 5) == [y]


def test_report_names_the_winner_runner_up_and_significance():
    from flopsweep import tunereport

    fast = cand(0, 10.0, 10.1, 9.9, label="backend=fsdp", objective="tokens_per_s")
    slow = cand(1, 5.0, 5.1, 4.9, label="backend=ddp", objective="tokens_per_s")
    lucky = cand(2, 50.0, label="parallel.tp=2", objective="tokens_per_s")  # dropped after one run
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
    assert s["command"] == "flopsweep device=cpu backend=fsdp"
    states = {u["label"]: u["state"] for u in s["setups"]}
    assert states == {
        "backend=fsdp": "winner",
        "backend=ddp": "runner-up",
        "parallel.tp=2": "dropped after round 0",
        "backend=ddp parallel.tp=2": "pruned",
    }
    row = next(u for u in s["setups"] if u["label"] == "backend=fsdp")
    # its figure is 1 / the mean of its steps 0.1, 1/10.1, 1/9.9 s (0.1000067 s): 9.99933 tokens/s, not the
    # median 10; the errors are 8 / 9.99933 - 1 = -0.199947 and 12 / 9.99933 - 1 = 0.20008
    assert s["winner"]["value"] == pytest.approx(3 / (0.1 + 1 / 10.1 + 1 / 9.9))
    assert row["error"] == pytest.approx(-0.199947, rel=1e-5)
    assert row["held_out_error"] == pytest.approx(0.20008, rel=1e-5)
    text = "\n".join(tunereport.lines(s))
    assert "significant: their 95% intervals do not overlap" in text and "refused: no" in text
    md = tunereport.markdown(s)
    assert "| backend=fsdp | 8 | -20.0% | 12 | +20.0% | 9.999 | 3 | 30 | winner |" in md

    close = cand(1, 9.0, 11.5, 9.8, label="backend=ddp", objective="tokens_per_s")
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
        "Fix: set hydra.sweeper.eta=2 (its default), or another such value."
    )
    assert "hydra.sweeper.budget_gpu_s=-1" in TuneSweeper(budget_gpu_s=-1)._problem()
    assert "hydra.sweeper.memory_gib=0" in TuneSweeper(memory_gib=0)._problem()
    assert (
        TuneSweeper(memory_gib=-5)
        ._problem()
        .startswith("Invalid config: hydra.sweeper.memory_gib=-5: must be a finite number above 0")
    )
    # a budget of nothing was accepted and overspent ("18/0 GPU-s spent", "-18 left")
    for bad in (0, -0.0, float("nan"), float("inf"), "1h"):
        line = TuneSweeper(budget_gpu_s=bad)._problem()
        assert line == (
            f"Invalid config: hydra.sweeper.budget_gpu_s={typed_form(bad)}: must be a finite number above 0. "
            "Fix: set hydra.sweeper.budget_gpu_s=3600.0 (its default), or another such value."
        ), line
    assert TuneSweeper(budget_gpu_s=0.5)._problem() is None
    # jobs per launch: 0 raised in range(), below 0 launched none
    for bad in (0, -1, 1.5):
        assert (
            TuneSweeper(max_batch_size=bad)
            ._problem()
            .startswith(
                f"Invalid config: hydra.sweeper.max_batch_size={bad!r}: must be a whole number of at least 1."
            )
        )
    assert (
        TuneSweeper(max_batch_size=1)._problem() is None
        and TuneSweeper(max_batch_size=None)._problem() is None
    )

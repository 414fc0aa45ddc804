"""Context parallel without processes: the load-balanced split and its positions, the refusals
before launch, the memory estimate and the step-time term, and ``cpN`` in the plan's and the tuner's
``space.layouts`` (the same-loss runs on gloo ranks are in tests/integration/test_context_parallel.py)."""

from __future__ import annotations

import dataclasses

import pytest

from flopsweep import context_parallel as cp
from flopsweep.config import ConfigError
from flopsweep.layout import Layout


@pytest.mark.parametrize("degree", [1, 2, 3, 4, 8])
def test_each_rank_holds_chunks_i_and_2cp_1_i_and_together_the_whole_sequence(degree: int) -> None:
    seq = 16 * degree
    size = seq // (2 * degree)
    held = [cp.shard_positions(seq, degree, r) for r in range(degree)]
    for r, positions in enumerate(held):
        assert cp.chunks(degree, r) == (r, 2 * degree - 1 - r)
        first, last = r * size, (2 * degree - 1 - r) * size
        assert positions == [*range(first, first + size), *range(last, last + size)]
    assert sorted(p for positions in held for p in positions) == list(range(seq))
    assert cp.gathered_order(seq, degree) == [p for positions in held for p in positions]


def test_the_positions_of_a_shard_are_not_0_to_s_over_cp() -> None:
    """Rank 1 of 2 over 8 tokens holds positions 2, 3, 4, 5: RoPE and learned positions use them."""
    assert cp.shard_positions(8, 2, 0) == [0, 1, 6, 7]
    assert cp.shard_positions(8, 2, 1) == [2, 3, 4, 5]


@pytest.mark.parametrize("degree", [2, 4, 8])
def test_the_split_balances_causal_attention_and_a_contiguous_split_would_not(degree: int) -> None:
    seq = 64 * degree
    balanced = {cp.causal_pairs(cp.shard_positions(seq, degree, r)) for r in range(degree)}
    assert len(balanced) == 1  # every rank the same (query, key) pairs
    assert balanced.pop() * degree == seq * (seq + 1) // 2
    part = seq // degree
    contiguous = [cp.causal_pairs(list(range(r * part, (r + 1) * part))) for r in range(degree)]
    assert contiguous[-1] > 2 * contiguous[0]


def test_a_sequence_that_does_not_split_and_a_bad_rank_raise() -> None:
    with pytest.raises(ValueError, match="4 equal chunks"):
        cp.shard_positions(10, 2, 0)
    with pytest.raises(ValueError, match=r"\[0, 2\)"):
        cp.chunks(2, 2)


BASE = ["model=llama-tiny", "device=cpu", "backend=fsdp", "precision=fp32"]

REFUSED = {
    "kernel": (
        ["attention=blocksparse", "attention.block_size=16", "parallel.cp=2"],
        "attention",
        "attention=sdpa",
    ),
    "heads": (["parallel.cp=3", "nproc_per_node=3"], "parallel.cp", "model.n_head=4"),
    "heads over tp": (["parallel.cp=4", "parallel.tp=2", "nproc_per_node=8"], "parallel.cp", "parallel.tp x"),
    "sequence": (["parallel.cp=2", "model.seq_len=66"], "parallel.cp", "model.seq_len to a multiple of 4"),
    "pipeline": (["parallel.cp=2", "parallel.pp=2", "nproc_per_node=4"], "parallel.cp", "parallel.pp=1"),
    "hf": (["model=hf", "attention=sdpa", "parallel.cp=2"], "parallel.cp", "pick a gpt2 or llama model"),
    "backend": (["parallel.cp=2", "backend=ddp"], "parallel.cp", "backend=fsdp"),
}


@pytest.mark.parametrize("case", list(REFUSED.values()), ids=list(REFUSED))
def test_what_cp_cannot_run_is_refused_in_one_line(hydra_compose, case) -> None:
    """Each refusal names the key, the value and the fix, on one line, before any rank starts."""
    from flopsweep.plan import Environment, plan

    overrides, key, fix = case
    nproc = [] if any(o.startswith("nproc_per_node") for o in overrides) else ["nproc_per_node=2"]
    with pytest.raises(ConfigError) as err:
        plan(hydra_compose([*BASE, *nproc, *overrides]), Environment(cpu_count=8))
    assert err.value.key == key and fix in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


def test_cp_with_fsdp_and_tp_passes_and_its_layout_is_named(hydra_compose) -> None:
    from flopsweep.plan import Environment, plan

    env = Environment(cpu_count=8)
    got = plan(hydra_compose([*BASE, "nproc_per_node=4", "parallel.cp=2"]), env)
    assert got.layout == Layout(dp_shard=2, cp=2) and got.layout.label() == "dp2 cp2"
    # 2 KV heads per tp rank is 1, fewer than cp: repeated to the query heads, so not refused
    got = plan(hydra_compose([*BASE, "nproc_per_node=4", "parallel.cp=2", "parallel.tp=2"]), env)
    assert got.layout.label() == "cp2 tp2" and got.layout.state_shards == 2


def test_the_memory_estimate_divides_activations_and_logits_over_cp(hydra_compose) -> None:
    from flopsweep import memory
    from flopsweep.plan import Environment, plan

    cfg = plan(hydra_compose([*BASE, "nproc_per_node=2", "parallel.cp=2"]), Environment(cpu_count=8)).cfg
    one, two = memory.activation_bytes(cfg, Layout(dp_shard=2)), memory.activation_bytes(cfg, Layout(cp=2))
    assert two[0] == one[0] // 2 and two[1] == one[1] // 2 and one[1] > 0


def test_the_step_time_counts_the_all_to_alls(hydra_compose) -> None:
    """Four all-to-alls of ``micro x s / cp x h x b`` per layer forward, four backward, over ``cp``;
    none at cp 1; the link's bandwidth is the probed collectives' mean."""
    from flopsweep.forecast import workload
    from flopsweep.plan import Environment, plan
    from flopsweep.steptime import Link, comm_seconds, transfers

    got = plan(hydra_compose([*BASE, "nproc_per_node=2", "parallel.cp=2"]), Environment(cpu_count=8))
    w = workload(got.cfg, got.layout)
    (a2a,) = [t for t in transfers(w, gpus_per_node=8) if t.collective == "all_to_all"]
    m, b = got.cfg.model, got.cfg.batch
    assert a2a.group == 2 and not a2a.overlappable and not a2a.across_nodes
    assert a2a.bytes == 4 * b.micro_batch_size * m.seq_len / 2 * m.n_embd * 4  # fp32
    assert a2a.count == 2 * m.n_layer * b.grad_accum
    link = Link(intra={"all_gather": 10.0, "all_reduce": 30.0})
    assert comm_seconds([a2a], link)[1] == pytest.approx(a2a.count * a2a.bytes * 0.5 / 20e9)
    one = dataclasses.replace(w, degrees={**w.degrees, "cp": 1, "dp_shard": 2})
    assert not [t for t in transfers(one, gpus_per_node=8) if t.collective == "all_to_all"]


def test_the_analysis_shows_the_cp_column_and_layout_label(tmp_path) -> None:
    """A record of CP 2 x FSDP 2 on four ranks: ``cp`` 2, ``dp`` 2 and the label ``dp2 cp2``,
    read from ``system.parallel``."""
    import json
    from pathlib import Path

    from helpers import fit_clock, rescaled

    import analysis

    root = Path(__file__).resolve().parents[2]
    base = json.loads((root / "tests/fixtures/records/v2-ok/metrics.json").read_text())
    r = rescaled(base, world=4, tokens_per_device=800.0)
    r["system"]["parallel"] = Layout(dp_shard=2, cp=2).as_dict()
    r["config"]["backend"]["name"] = "fsdp"
    r["config"]["parallel"] = {**r["config"].get("parallel", {}), "cp": 2}
    (tmp_path / "cp").mkdir()
    (tmp_path / "cp" / "metrics.json").write_text(json.dumps(fit_clock(r)))
    row = analysis.load(tmp_path).iloc[0]
    assert (row["cp"], row["dp"], row["layout"]) == (2, 2, "dp2 cp2")


def test_the_space_takes_cp_layouts_each_cp_group_in_a_node_and_fsdp2_over_every_rank() -> None:
    """``space.layouts=[cpN]`` (plan and tuner): ``parallel.cp=N``, ``dp_shard`` the ranks left, the
    ``cp`` group ``N`` consecutive ranks (in a node where ``N`` divides its GPUs) and FSDP2's shard
    group every rank (torchtitan's FSDP x CP); a degree that does not divide the ranks is no set-up."""
    from flopsweep import space as sp
    from flopsweep.clusters import parse_cluster
    from flopsweep.degrees import span

    layouts = ("dp", "cp2", "cp4", "cp8", "cp3", "cp16")
    space = sp.Space(backends=("fsdp",), layouts=layouts, checkpointing=("full",), micro_batches=(1,))
    space.check()
    assert [s.layout for s in sp.placed(space, 1, 8)] == ["dp", "cp2", "cp4", "cp8"]
    assert sp.unplaced(space, 1, 8)[0].startswith("space.layouts: cp3 needs its degree 3 to divide the 8")
    h200 = parse_cluster("H200:2x8")
    for n in (2, 4, 8, 16):
        setup = sp.Setup(
            backend="fsdp", layout=f"cp{n}", checkpointing="full", precision="bf16", micro_batch=1
        )
        layout = Layout.resolve(setup.parallel(h200), 16)
        assert (layout.cp, layout.dp_shard, layout.state_shards) == (n, 16 // n, 16)
        assert (span(layout, "cp") > 8) == (n == 16)  # the all-to-all crosses nodes only at 16
        assert setup.setup_overrides(2, 8)[-1] == f"parallel.cp={n}" and "parallel.cp" in sp.SETUP_KEYS
    for bad in ("cp0", "cp", "cpx2"):
        with pytest.raises(ConfigError) as err:
            sp.Space(layouts=("dp", bad)).check()
        assert "takes dp, hsdp, tpN, ppN, cpN and epN" in str(err.value)


LLAMA8B_64K = ["model=llama3.1-8b", "model.seq_len=65536"]


def test_the_plan_refuses_cp_set_ups_with_the_rules_lines_and_names_the_space_lists(hydra_compose) -> None:
    """The plan's rows are validated as a run is: ``cpN`` off FSDP2, with a kernel without context
    parallel, or over a sequence not of ``2N`` equal chunks is ``refused`` with
    :func:`flopsweep.context_parallel.check`'s (or the backend rule's) line; the fix of a space that
    leaves nothing names the ``space.*`` lists, not ``parallel.cp``."""
    from flopsweep import plan_space as ps
    from flopsweep import space as sp
    from flopsweep.clusters import parse_cluster

    h100 = [parse_cluster("H100:1x8")]
    one = {"checkpointing": ("full",), "micro_batches": (1,)}
    cases = [
        (["model=llama3.1-8b"], ("ddp", "zero3"), "context parallelism runs on backend=fsdp"),
        (["model=llama3.1-8b", "attention=blocksparse"], ("fsdp",), "attention='blocksparse': does not take"),
        (["model=llama3.1-8b", "model.seq_len=4100"], ("fsdp",), "model.seq_len=4100 does not split into 8"),
    ]
    for overrides, backends, said in cases:
        space = sp.Space(backends=backends, layouts=("cp4",), **one)
        rows = ps.candidates(hydra_compose(overrides), space, h100).rows
        assert {r.status for r in rows} == {"refused"} and all(said in r.reason for r in rows), rows[0].reason
    reason = f"refused: {rows[0].reason}"
    line = ps.nothing_line([reason], who="plan", headline="nothing", fix="f", space=space)
    assert line.endswith(
        "Fix: set model.seq_len to a multiple of 8, or drop cp4 from space.layouts (space.layouts=[dp])"
    )
    off = (
        "refused: parallel.cp=2: runs on backend=fsdp. Fix: set parallel.cp=1, or backend=fsdp parallel.cp=2"
    )
    space = sp.Space(backends=("ddp",), layouts=("cp2",), **one)
    assert ps.nothing_line([off], who="plan", headline="h", fix="f", space=space).endswith(
        "Fix: drop cp2 from space.layouts (space.layouts=[dp]), or list fsdp in space.backends "
        "(space.backends=[ddp,fsdp])"
    )


def test_the_plan_of_llama8b_at_64k_keeps_the_cp_rows_that_fit_and_predicts_their_all_to_alls(
    hydra_compose,
) -> None:
    """docs/layouts.md's example: at 64K tokens the memory per rank falls with ``cp`` (activations and
    logits over ``cp``; the states over every rank in each), so FSDP2 ``dp`` is over memory on an H100 and
    an H200 and CP 4 and 8 fit both; each ok row's exposed communication holds the all-to-alls
    (:func:`flopsweep.context_parallel.transfers`) and, at CP 8 on 8 ranks (one data-parallel rank), FSDP2's
    gathers over the ``cp`` ranks."""
    from flopsweep import plan_space as ps
    from flopsweep import space as sp
    from flopsweep.clusters import parse_cluster
    from flopsweep.comm_time import comm_seconds
    from flopsweep.forecast import workload
    from flopsweep.steptime import Link, transfers

    space = sp.Space(
        backends=("fsdp",), layouts=("dp", "cp2", "cp4", "cp8"), checkpointing=("full",), micro_batches=(1,)
    )
    cfg = hydra_compose(LLAMA8B_64K)
    result = ps.candidates(cfg, space, [parse_cluster("H100:1x8"), parse_cluster("H200:1x8")])
    status = {(r.cluster.split(":")[0], r.setup.layout): r.status for r in result.rows}
    assert len(status) == 8 and status[("H100", "dp")] == status[("H200", "dp")] == "over memory"
    assert {status[(gpu, lay)] for gpu in ("H100", "H200") for lay in ("cp4", "cp8")} == {"ok"}
    assert status[("H200", "cp2")] == "ok"  # 74 GiB: over 90% of an H100's 79.6, within an H200's
    h200 = [r for r in result.rows if r.cluster.startswith("H200")]
    peaks = [r.est_peak_gib_per_rank for r in h200]
    saved = [a - b for a, b in zip(peaks, peaks[1:], strict=False)]  # the states' part is the same in each
    assert saved[0] == pytest.approx(2 * saved[1], rel=0.05)
    assert saved[1] == pytest.approx(2 * saved[2], rel=0.05) and peaks[-1] < peaks[0] / 4
    assert [r.layout for r in h200] == ["dp8", "dp4 cp2", "dp2 cp4", "cp8"]
    cluster = parse_cluster("H200:1x8")
    for row in h200[1:]:
        one = ps.setup_config(cfg, row.setup, cluster)
        w = workload(one, Layout.resolve(one.parallel, 8))
        kinds = {t.collective for t in transfers(w, gpus_per_node=8)}  # cp8 too: FSDP2 over the cp ranks
        assert kinds == {"all_gather", "reduce_scatter", "all_to_all"}, kinds
        a2a = [t for t in transfers(w, gpus_per_node=8) if t.collective == "all_to_all"]
        _, alone = comm_seconds(a2a, Link(intra={"all_to_all": 315.0}))
        assert row.predicted_exposed_comm_s >= alone > 0

"""Context parallel without processes: the load-balanced split and its positions, the refusals
before launch, the memory estimate and the step-time term (the same-loss runs on gloo ranks are in
tests/integration/test_context_parallel.py)."""

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

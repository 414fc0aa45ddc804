"""Expert parallel without processes: the experts each rank holds, the refusals before launch, the
routing imbalance, the memory and step-time terms and the tuner's ``epN`` layouts (the same-loss run
on gloo ranks and the record are in tests/integration/test_expert_parallel.py)."""

from __future__ import annotations

import dataclasses

import pytest

from flopsweep import expert_parallel as ep
from flopsweep.config import ConfigError
from flopsweep.layout import Layout

BASE = [
    "model=hf",
    "model.config=olmoe-tiny",
    "model.seq_len=32",
    "device=cpu",
    "backend=fsdp",
    "precision=fp32",
]
"""OLMoE's tiny config: 8 experts of width 64, top 2, hidden 128, two layers."""


@pytest.mark.parametrize("degree", [1, 2, 4, 8])
def test_each_rank_holds_a_contiguous_share_and_together_every_expert(degree: int) -> None:
    held = [ep.local_experts(8, degree, r) for r in range(degree)]
    assert all(len(h) == 8 // degree for h in held)
    assert [e for h in held for e in h] == list(range(8))
    with pytest.raises(ValueError, match="do not split"):
        ep.local_experts(8, 3, 0)
    with pytest.raises(ValueError, match="do not split"):
        ep.local_experts(8, degree, degree)


def test_the_imbalance_is_the_busiest_expert_over_the_mean_summed_over_ranks_worst_layer() -> None:
    even = [[[2, 2, 2, 2], [1, 1, 1, 1]], [[2, 2, 2, 2], [1, 1, 1, 1]]]
    assert ep.imbalance(even) == 1.0
    # layer 1 summed over ranks: [4, 0, 2, 2], mean 2, busiest 4
    skewed = [[[2, 2, 2, 2], [3, 0, 1, 0]], [[2, 2, 2, 2], [1, 0, 1, 2]]]
    assert ep.imbalance(skewed) == 2.0
    assert ep.imbalance([[], []]) is None and ep.imbalance([[[0, 0]]]) is None
    assert ep.imbalance([[[1, 1]], [[1, 1, 1]]]) is None  # ranks that disagree on the experts


def test_the_experts_and_top_k_are_read_from_the_config(hydra_compose) -> None:
    from flopsweep.plan import Environment, plan

    cfg = plan(hydra_compose([*BASE, "nproc_per_node=2", "parallel.ep=2"]), Environment(cpu_count=8)).cfg
    assert ep.top_k(cfg.model) == 2
    assert ep.expert_params(cfg.model) == 8 * 3 * 128 * 64
    assert ep.n_experts({"n_routed_experts": 64}) == 64 and ep.n_experts({"num_experts": True}) == 0


REFUSED = {
    "experts": (
        ["parallel.ep=3", "nproc_per_node=3"],
        "parallel.ep",
        "one of [2, 4, 8] on a world size it divides: nproc_per_node=2 parallel.ep=2",
    ),
    "experts_here": (
        ["parallel.ep=3", "nproc_per_node=4"],
        "parallel.ep",
        "set parallel.ep=2 (or 4)",
    ),
    "dense": (["model.config=qwen3-tiny", "parallel.ep=2"], "parallel.ep", "pick an MoE config"),
    "native": (["model=llama-tiny", "parallel.ep=2"], "parallel.ep", "model=hf model.config=olmoe-tiny"),
    "tp": (["parallel.ep=2", "parallel.tp=2", "nproc_per_node=4"], "parallel.tp", "parallel.tp=1"),
    "borrowed": (["parallel.ep=4"], "parallel.ep", "parallel.ep"),
    "backend": (["parallel.ep=2", "backend=ddp"], "parallel.ep", "backend=fsdp"),
}


@pytest.mark.parametrize("case", list(REFUSED.values()), ids=list(REFUSED))
def test_what_ep_cannot_run_is_refused_in_one_line(hydra_compose, case) -> None:
    """Each refusal names the key, the value and the fix, on one line, before any rank starts."""
    from flopsweep.plan import Environment, plan

    overrides, key, fix = case
    nproc = [] if any(o.startswith("nproc_per_node") for o in overrides) else ["nproc_per_node=2"]
    with pytest.raises(ConfigError) as err:
        base = BASE[2:] if overrides[0].startswith("model=") else BASE  # another model than OLMoE
        plan(hydra_compose([*base, *nproc, *overrides]), Environment(cpu_count=8))
    assert err.value.key == key and fix in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


def test_ep_over_fsdp_passes_and_its_layout_is_named(hydra_compose) -> None:
    from flopsweep.plan import Environment, plan

    got = plan(hydra_compose([*BASE, "nproc_per_node=4", "parallel.ep=2"]), Environment(cpu_count=8))
    assert got.layout == Layout(dp_shard=4, ep=2) and got.layout.label() == "dp4 ep2"


def test_the_memory_estimate_gathers_only_the_ranks_experts(hydra_compose) -> None:
    """FSDP2's gathered block holds ``1 / ep`` of the routed experts; the sharded states do not change."""
    from flopsweep import memory
    from flopsweep.plan import Environment, plan

    cfg = plan(hydra_compose([*BASE, "nproc_per_node=4", "parallel.ep=2"]), Environment(cpu_count=8)).cfg
    one, two = Layout(dp_shard=4), Layout(dp_shard=4, ep=2)
    cut = 8 * 3 * 128 * 64 // 2
    assert memory.fsdp_groups(cfg, one)[0] - memory.fsdp_groups(cfg, two)[0] == cut
    assert memory.fsdp_gathered_bytes(cfg, two) < memory.fsdp_gathered_bytes(cfg, one)
    assert memory.estimate(cfg, two).total < memory.estimate(cfg, one).total


def test_the_step_time_counts_the_dispatch_and_combine(hydra_compose) -> None:
    """Per MoE layer and micro batch: dispatch and combine of ``micro x s x top_k`` hidden states,
    forward and backward, over ``ep``; none at ep 1 or on a dense model."""
    from flopsweep.forecast import workload
    from flopsweep.plan import Environment, plan
    from flopsweep.steptime import transfers

    got = plan(hydra_compose([*BASE, "nproc_per_node=4", "parallel.ep=2"]), Environment(cpu_count=8))
    w = workload(got.cfg, got.layout)
    assert w.top_k == 2
    (a2a,) = [t for t in transfers(w, gpus_per_node=8) if t.collective == "all_to_all"]
    m, b = got.cfg.model, got.cfg.batch
    assert a2a.group == 2 and not a2a.overlappable and not a2a.across_nodes
    assert a2a.bytes == b.micro_batch_size * m.seq_len * 2 * m.n_embd * 4  # top 2, fp32
    assert a2a.count == 4 * m.n_layer * b.grad_accum
    assert transfers(w, gpus_per_node=1)[-1].across_nodes
    for other in (dataclasses.replace(w, degrees={**w.degrees, "ep": 1}), dataclasses.replace(w, top_k=0)):
        assert not [t for t in transfers(other, gpus_per_node=8) if t.collective == "all_to_all"]


def test_the_tuner_space_takes_ep_layouts() -> None:
    from flopsweep.clusters import parse_cluster
    from flopsweep.space import Setup
    from flopsweep.space_values import LAYOUT

    assert LAYOUT.fullmatch("ep4")
    setup = Setup(backend="fsdp", layout="ep2", checkpointing="none", precision="bf16", micro_batch=1)
    cluster = parse_cluster("H200:1x8")
    assert setup.parallel(cluster).ep == 2
    assert "parallel.ep=2" in setup.overrides(cluster)
    assert dataclasses.replace(setup, layout="ep16").parallel(cluster) is None

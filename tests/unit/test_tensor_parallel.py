"""HSDP and tensor parallelism (FSDP2 x TP with sequence parallelism) against one rank.

Four gloo ranks on the CPU, fp32, real FSDP2 and real DTensor tensor parallelism: each layout gives
the first-step loss and gradient norm of the same model trained on one rank over the same global
batch, within 1e-4; and through ``run.py`` each writes an ``ok`` record with its layout.
"""

from __future__ import annotations

import pytest

from flopsweep.layout import Layout


@pytest.mark.parametrize(
    ("overrides", "key", "words"),
    [
        (["model=gpt-tiny", "parallel.tp=8"], "parallel.tp", "does not divide model.n_head=4"),
        (["model=llama-tiny", "parallel.tp=4"], "parallel.tp", "does not divide model.n_kv_head=2"),
        (["model=llama-tiny", "parallel.tp=2", "model.ffn_dim=385"], "parallel.tp", "model.ffn_dim=385"),
        (["model=gpt-tiny", "parallel.tp=2", "model.vocab_size=511"], "parallel.tp", "model.vocab_size=511"),
        (["model=hf", "model.config=qwen3-tiny", "parallel.tp=2"], "parallel.tp", "no tensor-parallel plan"),
        (
            ["model=gpt-tiny", "parallel.tp=2", "precision=fp8"],
            "precision",
            "not wired into the tensor-parallel",
        ),
        (["model=gpt-tiny", "parallel.tp=2", "backend=ddp"], "parallel.tp", "replicate-only"),
        (["model=gpt-tiny", "parallel.tp=2", "backend=zero3"], "parallel.tp", "stays data-parallel"),
        (
            ["model=gpt-tiny", "parallel.dp_replicate=2", "backend=single"],
            "parallel.dp_replicate",
            "one rank",
        ),
    ],
)
def test_a_layout_that_cannot_run_is_refused_in_one_line(hydra_compose, overrides, key, words) -> None:
    from flopsweep.config import ConfigError
    from flopsweep.plan import validate

    base = ["backend=fsdp"] if not any(o.startswith("backend=") for o in overrides) else []
    cfg = hydra_compose([*base, *overrides])
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    message = str(err.value)
    assert err.value.key == key and words in message, message
    assert "Fix:" in message and "\n" not in message


def test_tensor_parallel_across_nodes_is_a_warning() -> None:
    from flopsweep.layout import tp_across_nodes

    assert tp_across_nodes(Layout(dp_shard=2, tp=4), 4) is None
    assert tp_across_nodes(Layout(dp_shard=8), 4) is None
    line = tp_across_nodes(Layout(dp_shard=1, tp=8), 4)
    assert line is not None and "parallel.tp=8" in line and "4 ranks" in line and "\n" not in line
    assert tp_across_nodes(Layout(dp_shard=2, tp=3), 6) is None
    assert tp_across_nodes(Layout(dp_shard=3, tp=2), 3) is not None  # pairs straddle the nodes of 3


def test_memory_divides_the_model_states_by_shard_and_tp(hydra_compose) -> None:
    from flopsweep.memory import model_states_floor

    cfg = hydra_compose(["model=gpt-tiny", "backend=fsdp"])
    full = model_states_floor(cfg, Layout(dp_shard=1))
    assert model_states_floor(cfg, Layout(dp_shard=2, tp=2)) == full // 4
    assert model_states_floor(cfg, Layout(dp_replicate=2, dp_shard=2)) == full // 2  # replicas hold copies


def test_the_profile_counts_tensor_parallel_collectives_as_communication() -> None:
    """DTensor's functional collectives (the names a CPU trace of a TP step holds) are communication."""
    from flopsweep.profile import COMM_PATTERN

    for name in (
        "_c10d_functional::all_gather_into_tensor",
        "_c10d_functional::reduce_scatter_tensor",
        "_c10d_functional::all_reduce",
        "_c10d_functional::wait_tensor",
    ):
        assert COMM_PATTERN.search(name), name
    assert not COMM_PATTERN.search("aten::mm")


def test_the_families_plans_come_from_one_helper() -> None:
    """``sequence_parallel_plan`` writes the styles once: GPT-2's plan (tied head, learned positions)
    and Llama's (tied or separate head, ``freqs_cis`` passed through) hold its values."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        PrepareModuleOutput,
        RowwiseParallel,
        SequenceParallel,
    )

    from flopsweep.models import gpt2, llama
    from flopsweep.tensor_parallel import Sublayer, sequence_parallel_plan

    branch = Sublayer(norm="n", module="m", colwise=("a", "b"), rowwise=("o",))
    small = sequence_parallel_plan(embedding="e", blocks="x.*", sublayers=[branch], norm="f", head="out")
    assert list(small) == ["e", "x.*.n", "x.*.m", "x.*.m.a", "x.*.m.b", "x.*.m.o", "f", "out"]
    plan = gpt2.TENSOR_PARALLEL_PLAN(None)
    assert list(plan)[:3] == ["wte", "wpe", "h.*.ln_1"] and list(plan)[-1] == "ln_f"
    assert plan["wpe"].output_layouts == (Shard(0),) and plan["wte"].output_layouts == (Shard(1),)
    assert isinstance(plan["h.*.mlp.c_fc"], ColwiseParallel) and isinstance(
        plan["h.*.ln_2"], SequenceParallel
    )
    assert plan["h.*.attn.c_proj"].output_layouts == (Shard(1),) and isinstance(
        plan["h.*.attn.c_proj"], RowwiseParallel
    )
    norm, gather = plan["ln_f"]  # tied head: the final norm's output gathered
    assert isinstance(norm, SequenceParallel) and isinstance(gather, PrepareModuleOutput)
    assert gather.desired_output_layouts == (Replicate(),)

    tied = llama.TENSOR_PARALLEL_PLAN(type("Tied", (), {"output": None}))
    untied = llama.TENSOR_PARALLEL_PLAN(type("Untied", (), {"output": object()}))
    attention = untied["layers.*.attention"]
    assert isinstance(attention, PrepareModuleInput)
    assert attention.input_layouts == (Shard(1), None) and attention.desired_input_layouts == (
        Replicate(),
        None,
    )
    assert isinstance(tied["norm"], tuple) and "output" not in tied
    assert isinstance(untied["norm"], SequenceParallel) and untied["output"].output_layouts == (Shard(-1),)
    assert [k for k in untied if k.startswith("layers.*.feed_forward.")] == [
        f"layers.*.feed_forward.{w}" for w in ("w1", "w3", "w2")
    ]

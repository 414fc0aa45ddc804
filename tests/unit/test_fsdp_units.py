"""``backend.end_units`` (flopsweep.fsdp_units): the units FSDP2 makes on one gloo rank, the same
training with and without them, the refusals, and the memory estimate's terms."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from one_rank import in_process

from flopsweep.config import ConfigError
from flopsweep.layout import Layout

BASE = [
    "model=llama-tiny",
    "model.tie_embeddings=false",
    "device=cpu",
    "precision=fp32",
    "backend=fsdp",
    "nproc_per_node=1",
]


def test_end_units_shard_the_ends_apart_and_train_as_the_root(hydra_compose, tmp_path: Path) -> None:
    """On one gloo rank (FSDP2's world of 1, as on one GPU): the embedding and the final norm with
    the head are FSDP2 modules of their own, the root manages no parameter, and two steps give the
    losses and gradient norm of the root's group (1e-6)."""
    import torch.distributed as dist
    from helpers import validate
    from torch.distributed.fsdp import FSDPModule

    off = validate(hydra_compose(BASE))
    on = validate(hydra_compose([*BASE, "backend.end_units=true"]))
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        want, want_norm, root = in_process(off)
        got, got_norm, model = in_process(on)
    finally:
        dist.destroy_process_group()
    ends = (model.tok_embeddings, model.norm, model.output)
    assert all(isinstance(m, FSDPModule) for m in ends)
    assert not any(isinstance(m, FSDPModule) for m in (root.tok_embeddings, root.norm, root.output))
    assert model._get_fsdp_state()._fsdp_param_group is None  # every parameter is in a unit below
    assert root._get_fsdp_state()._fsdp_param_group is not None
    assert got == pytest.approx(want, abs=1e-6) and got_norm == pytest.approx(want_norm, rel=1e-6)
    assert want[0] != want[1] and want_norm > 0


REFUSED = {
    "gpt2 ties": (
        ["model=gpt-tiny"],
        "ties the LM head to the token embedding",
        "model.tie_embeddings=false",
    ),
    "tied llama": (["model.tie_embeddings=true"], "one matrix in both ends", "pick a llama model"),
    "chunked loss": (["loss.chunk_tokens=64"], "outside the head's forward", "set loss.chunk_tokens=0"),
    "pipeline": (["nproc_per_node=2", "parallel.pp=2"], "parallel.pp=2", "set parallel.pp=1"),
    "tensor parallel": (["nproc_per_node=2", "parallel.tp=2"], "parallel.tp=2", "set parallel.tp=1"),
}


@pytest.mark.parametrize("case", list(REFUSED.values()), ids=list(REFUSED))
def test_what_end_units_cannot_shard_is_refused_in_one_line(hydra_compose, case) -> None:
    from flopsweep.plan import validate

    overrides, words, fix = case
    keys = {x.split("=")[0] for x in overrides}
    args = [
        o for o in BASE if o.split("=")[0] not in keys and not ("model" in keys and o.startswith("model."))
    ]
    with pytest.raises(ConfigError) as err:
        validate(hydra_compose([*args, *overrides, "backend.end_units=true"]))
    text = str(err.value)
    assert err.value.key == "backend.end_units" and words in text and fix in text
    assert "backend.end_units=false" in text and "\n" not in text


def _estimate(hydra_compose, *overrides: str, w: int = 1):
    from flopsweep import memory

    cfg = hydra_compose(["model=llama3.1-8b", "backend=fsdp", "compile=true", *overrides])
    cfg = dataclasses.replace(cfg, device="cuda", nproc_per_node=str(w))
    return memory.estimate(cfg, Layout(dp_shard=w)), cfg


@pytest.mark.parametrize("w", [1, 8])
def test_the_estimate_moves_the_heads_reduce_early_and_keeps_the_embeddings_at_the_end(
    hydra_compose, w
) -> None:
    """Llama 3.1 8B (``E = V h``, ``H = V h + h``, nothing left in the root): the start of backward
    holds ``c E`` less gathered (the embedding resharded after forward) and, where the logits were,
    the larger of the logits and the head's reduce-scatter (its fp32 input kept through the last
    block's backward, beside that block's gradients); the end of backward reduces ``E`` instead
    of ``R = E + H``. At ``W = 1``: ``16 P + 4 E``, 1.96 GiB below the root's ``16 P + 4 R``."""
    from flopsweep.memory import block_params

    off, cfg = _estimate(hydra_compose, "batch.micro_batch_size=3", w=w)
    on, _ = _estimate(hydra_compose, "batch.micro_batch_size=3", "backend.end_units=true", w=w)
    m = cfg.model
    e, h = m.vocab_size * m.n_embd, m.vocab_size * m.n_embd + m.n_embd
    assert off.model_states - on.model_states == 2 * e
    assert on.step_states == off.step_states and on.activations == off.activations
    block = block_params(m)  # the last block's bf16 gradients beside the head's kept fp32 input
    head = max(6 * h, 4 * h * (1 + 1 / w), 4 * h * (1 + 1 / w) + 2 * block)
    assert off.head_reduce == 0 and on.head_reduce == math.ceil(head)
    at_loss = off.logits + off.head_gradient_at_loss  # compiled: the head's gradient beside the logits
    assert on.backward_start == off.backward_start - 2 * e - at_loss + max(at_loss, on.head_reduce)
    assert on.reduce_buffers == int(max(6 * e, 4 * e * (1 + 1 / w)) - 4 * e / w)
    assert off.reduce_buffers == int(max(6 * (e + h), 4 * (e + h) * (1 + 1 / w)) - 4 * (e + h) / w)
    if w == 1:
        assert off.total == off.end_of_backward == off.step_states + 4 * (e + h)
        assert on.total == on.end_of_backward == on.step_states + 4 * e
        assert (off.total - on.total) / 2**30 == pytest.approx(1.957, abs=1e-3)


def test_without_reshard_after_forward_the_embedding_stays_gathered(hydra_compose) -> None:
    off, _ = _estimate(hydra_compose, "backend.reshard_after_forward=false")
    on, _ = _estimate(hydra_compose, "backend.reshard_after_forward=false", "backend.end_units=true")
    assert on.model_states == off.model_states

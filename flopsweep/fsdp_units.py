"""``backend.end_units``: FSDP2 units of their own for the model's two ends, as torchtitan's
``apply_fsdp`` makes them, instead of leaving them in the root's parameter group.

Off (default): ``fully_shard`` each block, then the root, whose group holds the token embedding, the
final norm and the LM head (``R``): FSDP2 never reshards the root after forward, so ``R`` stays
all-gathered from forward to the end of backward, and the root's gradients are reduce-scattered last,
``R`` at once in fp32 (Llama 3.1 8B on one H200: ``16 P + 4 R`` = 123.57 GiB against ``single``'s
119.74).

On: the embedding (``embedding_children``) is a unit resharded after forward as the blocks are
(``backend.reshard_after_forward``), and the final norm with the LM head (``head_children``) one unit
kept after forward (its backward comes first: torchtitan's default). The head's gradients are then
reduce-scattered right after its backward, early in backward, when the logits are freed (its fp32
input kept through the last block's backward: :func:`head_reduce_bytes`), and the embedding's alone
at the end (``4 E`` instead of ``4 R``); the start of backward holds ``c (H + 2 B)`` gathered
instead of ``c (R + 2 B)``. Same arithmetic: the same gradients reduced in the same dtype, in
smaller groups.

Built-in families with an untied head only (``llama``; a tied head is one matrix in both ends), no
``loss.chunk_tokens`` (its fused loss reads the head's weight outside the head's forward, where FSDP2
would not have gathered it), no pipeline and no tensor parallel (untested).
"""

from __future__ import annotations

import math
from typing import Any

from flopsweep.config import ConfigError

END_UNIT_FAMILIES = ("llama",)
"""Families whose embedding and head are separate modules (with ``tie_embeddings=false``)."""


def enabled(cfg: Any) -> bool:
    """``backend.end_units`` is set (FSDP2 only: no other backend has the key)."""
    return bool(getattr(cfg.backend, "end_units", False))


def check(cfg: Any) -> None:
    """``backend.end_units`` needs an untied built-in family, the whole LM head in its forward and
    no pipeline or tensor parallel (:data:`flopsweep.rules.RULES`).

    Raises:
        ConfigError: naming the key, the value and the fix.
    """
    if not enabled(cfg):
        return
    fix = "or set backend.end_units=false"
    m = cfg.model
    if m.arch not in END_UNIT_FAMILIES or getattr(m, "tie_embeddings", False):
        why = (
            "ties the LM head to the token embedding: one matrix in both ends"
            if m.arch == "gpt2" or getattr(m, "tie_embeddings", False)
            else "is untested with end units"
        )
        raise ConfigError(
            "backend.end_units",
            True,
            f"model={m.arch} {why}",
            f"pick a llama model with model.tie_embeddings=false (model=llama3.1-8b), {fix}",
        )
    if cfg.loss.chunk_tokens:
        raise ConfigError(
            "backend.end_units",
            True,
            f"loss.chunk_tokens={cfg.loss.chunk_tokens} reads the head's weight outside the head's forward, "
            "where FSDP2 has not gathered it",
            f"set loss.chunk_tokens=0, {fix}",
        )
    for degree in ("pp", "tp"):
        if (value := getattr(cfg.parallel, degree)) > 1:
            raise ConfigError(
                "backend.end_units",
                True,
                f"is untested with parallel.{degree}={value}",
                f"set parallel.{degree}=1, {fix}",
            )


def end_modules(model: Any) -> tuple[list[Any], list[Any]]:
    """``(embedding modules, head modules)`` of a built model: its family's ``embedding_children``
    and ``head_children`` (:class:`flopsweep.models.layers.CausalLM`), as FSDP2 units take them."""
    return (
        [model.get_submodule(n) for n in model.embedding_children],
        [model.get_submodule(n) for n in model.head_children],
    )


def end_groups(cfg: Any, root: int) -> tuple[int, int, int]:
    """``(E, H, rest)``: the embedding's unit, the head's (final norm and LM head) and what stays in
    the root's group, in parameters (``rest`` = ``root - E - H``, 0 for Llama), from the root's
    group ``root`` (:func:`flopsweep.memory_terms.fsdp_groups`)."""
    m = cfg.model
    embedding = m.vocab_size * m.n_embd
    head = m.vocab_size * m.n_embd + m.n_embd  # output (V x h) and the final RMSNorm's weight
    return embedding, head, max(0, root - embedding - head)


def reduce_moment(group: int, compute: int, shards: int) -> float:
    """The bytes of one FSDP2 unit's gradient reduce-scatter (``foreach_reduce``) for a unit of
    ``group`` parameters over ``shards`` ranks: its compute-dtype gradients with the fp32 input
    (``(c + 4) G``), or the fp32 input with its output shard (``4 G + 4 G / W``), whichever is larger."""
    return max(compute * group + 4 * group, 4 * group * (1 + 1 / shards))


def head_reduce_bytes(t: Any) -> int:
    """The head unit's reduce-scatter early in backward, on top of the start of backward's states and
    activations, where the logits were (freed before FSDP2's post-backward hook runs); 0 without
    ``backend.end_units``. The larger of its own moment (:func:`reduce_moment` of ``H``) and the last
    block's backward that follows: FSDP2 keeps one reduce-scatter input until the next unit's
    post-backward (``reduce_scatter_max_input_buffers`` 1, ``FSDPParamGroup.post_backward``), so the
    head's fp32 input ``4 H`` and its gradient shard ``4 H / W`` live beside the block's compute-dtype
    gradients ``c B`` (its weights are among the gathered blocks, its recompute among the
    activations). The gradient shard is one the start of backward's states do not count."""
    if not enabled(t.cfg):
        return 0
    _, head, _ = end_groups(t.cfg, t.root)
    w = t.layout.state_shards
    kept = 4 * head * (1 + 1 / w) + t.compute * t.block
    return math.ceil(max(reduce_moment(head, t.compute, w), kept))

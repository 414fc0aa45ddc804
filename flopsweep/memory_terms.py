"""The counts of one rank that the memory estimate (:mod:`flopsweep.memory`) and the backend specs'
memory terms (:mod:`flopsweep.backend_specs`) read, torch-free: the parameters the busiest rank
holds (:func:`stage_params`, over ``tp`` and its pipeline stage; :func:`block_params`, the family's
count of one block), the parameters whose autocast copies backward keeps (:func:`autocast_cached`),
FSDP2's parameter groups (:func:`fsdp_groups`) and :class:`Terms`, the rank's counts computed on
first use, which a spec's ``model_states``, ``gathered_bytes``, ``reduce_bytes``,
``lowest_block_bytes`` and ``in_backward_gradients`` are given. :mod:`flopsweep.memory` re-exports
every name.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

from flopsweep import checkpointing
from flopsweep.activation_memory import bytes_per_token, fp8_shape, in_flight_microbatches
from flopsweep.backend_specs import BACKEND_SPECS
from flopsweep.expert_parallel import gathered_expert_cut
from flopsweep.layout import Layout
from flopsweep.models import family


class Terms:
    """The counts of one rank that the backend specs' memory terms read
    (:mod:`flopsweep.backend_specs`), each computed on first use."""

    def __init__(self, cfg: Any, layout: Layout) -> None:
        self.cfg, self.layout = cfg, layout
        self.spec = BACKEND_SPECS[cfg.backend.name]

    @functools.cached_property
    def offload(self) -> Any:
        return self.spec.offload(self.cfg.backend)

    @functools.cached_property
    def held(self) -> int:
        return stage_params(self.cfg, self.layout)

    @functools.cached_property
    def accumulated(self) -> int:  # the last micro batch's fp32 gradients
        return 4 * self.held if self.cfg.batch.grad_accum > 1 else 0

    @functools.cached_property
    def autocast_copies(self) -> int:
        return 2 * autocast_cached(self.cfg, self.layout) if self.cfg.precision.name != "fp32" else 0

    @functools.cached_property
    def forward_copies(self) -> int:  # autocast's cache at the end of forward, beyond autocast_copies
        if self.cfg.precision.name == "fp32" or not self.spec.autocast_fp32_weights or self.cfg.compile:
            return 0
        return 2 * forward_autocast_cached(self.cfg, self.layout) - self.autocast_copies

    @functools.cached_property
    def compute(self) -> int:
        return 4 if self.cfg.precision.name == "fp32" else 2

    @functools.cached_property
    def _groups(self) -> tuple[int, int]:
        return fsdp_groups(self.cfg, self.layout)

    @property
    def block(self) -> int:
        return self._groups[0]

    @property
    def root(self) -> int:
        return self._groups[1]

    @property
    def head(self) -> int:
        return math.ceil(self.cfg.model.vocab_size * self.cfg.model.n_embd / self.layout.tp)

    @functools.cached_property
    def activations(self) -> int:  # the lowest block's, one pipeline micro-batch
        _, layer = bytes_per_token(self.cfg, self.layout)
        _, per = in_flight_microbatches(self.cfg, self.layout)
        return per * self.cfg.model.seq_len * layer // (self.layout.tp * self.layout.cp)

    @functools.cached_property
    def model_block(self) -> int:
        return block_params(self.cfg.model)

    @property
    def rest(self) -> int:
        m = self.cfg.model
        return family(m).n_params(m) - m.n_layer * self.model_block

    @property
    def largest(self) -> int:
        return family(self.cfg.model).memory(self.cfg.model)["largest_layer_params"]


def block_params(model: Any) -> int:
    """One block's parameters: ``n_params(n_layer=2) - n_params(n_layer=1)`` of the model's family,
    so that every family counts its own (0 for a family whose count ignores ``n_layer``)."""
    fam = family(model)
    return fam.n_params(dataclasses.replace(model, n_layer=2)) - fam.n_params(
        dataclasses.replace(model, n_layer=1)
    )


def stage_params(cfg: Any, layout: Layout) -> int:
    """The parameters of the rank that holds the most: its pipeline stage's ``ceil(n_layer / pp)``
    blocks and the parameters outside the blocks that it keeps (embedding, head, final norm),
    over ``tp``. Under ``pp > 1`` the first stage holds the embedding and the last the head: the
    larger half of the rest for an untied head, all of it for a tied one (both ends keep the
    shared matrix). ``model=hf`` (whose count comes from its file, whatever ``n_layer`` says) is
    counted as untied, its rest the two ``V x h`` matrices."""
    m = cfg.model
    total = family(m).n_params(m)
    if layout.pp == 1:
        return math.ceil(total / layout.tp)
    tied = m.arch == "gpt2" or bool(getattr(m, "tie_embeddings", False))
    block = block_params(m)
    if block <= 0:  # a family whose count ignores n_layer (model=hf reads its file): V h per end
        block = max(0, total - m.vocab_size * m.n_embd * (1 if tied else 2)) // max(1, m.n_layer)
    rest = total - m.n_layer * block
    held = math.ceil(m.n_layer / layout.pp) * block + (rest if tied else math.ceil(rest / 2))
    return math.ceil(held / layout.tp)


def autocast_cached(cfg: Any, layout: Layout) -> int:
    """Parameters whose bf16 autocast copies backward keeps (single, DDP): the rank's ``P_r``, in the
    share of its blocks that torch's checkpoint does not wrap. A wrapped block (``full``,
    ``selective``'s per-operator policy, ``every_n``'s checkpointed ones) keeps only its input and
    the outputs its policy saves, and casts its weights again when backward recomputes it: 0 for
    ``full`` and ``selective`` (Llama 3.2 1B with ``full`` is within 3% without the copies, 9% over
    with them; Llama 3.1 8B ``selective`` compiled at micro batch 4 peaks at the step, 120.0 GiB,
    where the copies would put the start of backward at 126.6), ``P_r (l - k) / l`` for
    ``every_n``'s ``k`` of ``l``; all of ``P_r`` for ``none`` and ``memory_budget`` 1 (the compiler's
    partitioner, no checkpoint wrapper; 0 for ``memory_budget`` below 1, whose partitioner recomputes the
    casts from the fp32 weights, the compiled loss's head included:
    :attr:`flopsweep.checkpointing.CheckpointPolicy.compiler_budget`, counted on the CPU: no bf16 weight
    saved at budget 0.5, every block's and the head's at ``none``); for ``casts``, which keeps every
    activation but casts each block's weights again in backward (counted:
    ``benchmarks/saved_per_block.py``, fixed 0 bytes a block, eager and compiled), the output head's
    ``V h / tp`` only (outside the blocks, its copy stays: tests/integration/test_casts_checkpointing.py); for
    ``offload`` the same (``saves_on_host``: the
    blocks' copies backward keeps are host copies, and autocast's cache, the only device reference, is
    cleared after the loss; Llama 3.2 1B eager micro batch 7 on one H100: 34.85 GiB against 35.08
    measured, 38.22 with the copies and a block's activations). Under fp8 less the unwrapped blocks'
    converted Linear weights (the family's ``fp8_linear_params`` per block, over ``tp``): torchao casts
    them to float8 itself, so autocast keeps copies of the rest only (the LM head, norms, biases, the
    embedding; :data:`flopsweep.fp8.FP8_MEMORY_KEYS`)."""
    held = stage_params(cfg, layout)
    blocks = math.ceil(cfg.model.n_layer / layout.pp)
    ac = cfg.activation_checkpointing
    unwrapped = blocks
    policy = checkpointing.policy(ac)
    if policy.recasts_weights or policy.saves_on_host:  # casts, offload: only the head's copy on the device
        return min(held, math.ceil(cfg.model.vocab_size * cfg.model.n_embd / layout.tp))
    budget = policy.compiler_budget(ac)
    if budget is not None and budget < 1:  # the partitioner recomputes every cast, the head's too
        return 0
    if policy.recompute(bool(cfg.compile)) not in ("none", "unknown"):
        unwrapped = blocks - len(checkpointing.checkpointed_blocks(ac, blocks))
    converted = fp8_shape(cfg).get("fp8_linear_params", 0) * unwrapped // layout.tp
    return max(0, held * unwrapped // max(1, blocks) - converted)


def forward_autocast_cached(cfg: Any, layout: Layout) -> int:
    """Parameters whose bf16 copies autocast's cache holds when forward ends (``single``, DDP): every
    weight cast in forward, checkpointed or not (``P_r``, less fp8's converted weights), as under ``none``.
    torch keeps each cast copy of a weight in its cache until the outermost ``torch.autocast`` exits
    (``torch.amp.autocast.__exit__``: ``clear_autocast_cache``), and flopsweep's trainer exits it after the
    loss (``TorchTrainer.step``), so a checkpointed block, whose copies backward does not keep
    (:func:`autocast_cached`), still holds them until then. Eager only (``Terms.forward_copies``): a
    compiled block casts inside its graph, without the cache (Llama 3.1 8B ``selective`` compiled at micro
    batch 4 peaks at the step, 120.0 GiB, below what the cache would hold at the end of forward, 124.2).
    ``casts`` turns the cache off while its eager blocks run: :func:`autocast_cached`, as backward."""
    if checkpointing.policy(cfg.activation_checkpointing).recasts_weights:
        return autocast_cached(cfg, layout)  # casts: its eager blocks run with autocast's cache off
    none = dataclasses.replace(
        cfg, activation_checkpointing=dataclasses.replace(cfg.activation_checkpointing, name="none")
    )
    return autocast_cached(none, layout)


def fsdp_groups(cfg: Any, layout: Layout) -> tuple[int, int]:
    """``(block, root)``: the parameters of one block and of the root's parameter group (embedding,
    output head, final norm: what :func:`stage_params` holds outside the blocks), on one rank
    before sharding over ``dp_shard``, over ``tp``. ``model=hf``: the blocks' mean from
    :func:`stage_params`'s split. Under expert parallel a block holds ``1 / ep`` of its routed experts
    (:func:`flopsweep.expert_parallel.gathered_expert_cut`)."""
    m = cfg.model
    block = block_params(m)
    if block <= 0:  # a family whose count ignores n_layer (model=hf reads its file): V h per end
        tied = m.arch == "gpt2" or bool(getattr(m, "tie_embeddings", False))
        total = family(m).n_params(m)
        block = max(0, total - m.vocab_size * m.n_embd * (1 if tied else 2)) // max(1, m.n_layer)
    root = stage_params(cfg, layout) * layout.tp - math.ceil(m.n_layer / layout.pp) * block
    block -= gathered_expert_cut(m, layout.ep)  # expert parallel: the rank gathers its own experts only
    return math.ceil(block / layout.tp), math.ceil(max(0, root) / layout.tp)

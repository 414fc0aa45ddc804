"""Activation checkpointing policies: the ``activation_checkpointing=`` config group.

``POLICIES`` is the registry: one :class:`CheckpointPolicy` per option
(``conf/activation_checkpointing/<name>.yaml``), and each policy owns the three facts
that used to be spread over the backends, the metrics and the memory estimate:

- **how it is applied** (:meth:`CheckpointPolicy.apply`, code in
  :mod:`flopsweep.checkpointing_apply`): it replaces entries of the
  model family's block list (``ModelFamily.blocks``) in place, before
  :func:`flopsweep.backends.wrap_blocks` compiles each block, so that the recompute sits
  inside the compiled graph (as torchtitan does);
- **what it recomputes** (:attr:`CheckpointPolicy.recompute`): the mode that
  ``ModelFamily.hardware_flops`` counts (``none``; ``early_stop``: eager blocks under
  non-reentrant ``torch.utils.checkpoint``, which stops once every saved tensor is back, and compiled
  blocks, whose partitioner re-runs only what backward reads; ``selective``: the unsaved matmuls
  backward needs; ``unknown``: the compiler's partitioner decides), on the blocks
  :func:`checkpointed_blocks` names, so hardware FLOPs, HFU and ``metrics.recompute`` come from
  the policy (:func:`flopsweep.metrics.hardware_flops`);
- **what it saves** (:attr:`CheckpointPolicy.activations`): one rank's activation bytes kept
  for backward, for :mod:`flopsweep.memory`.

The policies: ``none``; ``full`` (every block); ``selective`` (per-operator selective
checkpointing, torchtitan's ``SelectiveAC`` op mode); ``every_n`` (``full`` on every N-th block,
``activation_checkpointing.every``); ``memory_budget`` (the compiler's
``activation_memory_budget``, ``activation_checkpointing.budget``, compiled runs only); ``offload``
(every block's saved activations in host memory, torch's ``offload_wrapper``, eager blocks only); ``casts``
(every activation as ``none``; backward casts the blocks' fp32 weights to bf16 again instead of keeping
autocast's copies, 2 bytes a parameter: its recompute is no matmul, so hardware FLOPs equal model FLOPs and
HFU equals MFU; autocast over fp32 weights only, ``single`` and ``ddp``). Adding a
policy is a spec here, its ``apply_*`` function in :mod:`flopsweep.checkpointing_apply` (torch,
loaded on the rank), its config subclass in :mod:`flopsweep.options` when it has knobs (stored
as ``schema/activation_checkpointing/base_<name>``), and one YAML file. This module imports no
torch, so validation, the estimators and ``run.py`` read the registry without it.

The old boolean values stay accepted on the command line: Hydra refuses a boolean as a
config-group choice ("Config group override must be a string or a list. Got bool"), so
``run.py`` rewrites ``activation_checkpointing=true``/``false`` (and ``true,false`` sweeps,
``choice(...)``) to ``full``/``none`` before Hydra parses them (:func:`normalize_overrides`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, MutableSequence
from dataclasses import dataclass
from typing import Any

from flopsweep import lazy
from flopsweep.config import CheckpointingConfig, ConfigError
from flopsweep.options import EveryNConfig, MemoryBudgetConfig

GROUP = "activation_checkpointing"
"""The config group and the ``RunConfig`` field."""

LEGACY_VALUES = {"true": "full", "false": "none", "1": "full", "0": "none"}
"""The boolean values of the key before it became a group (and 1/0, which Hydra would refuse as a
group's value with a traceback), and the policy each now means."""


SAC_SAVED_ATTENTION = (
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_fused_attention_overrideable",
    "_scaled_dot_product_flash_attention_for_cpu",
)
"""``selective``: the ``aten`` attention ops whose outputs are saved (torchtitan's ``SelectiveAC`` list,
plus SDPA's CPU kernel). ``attention=sdpa``, ``sdpa-flash``, ``sdpa-efficient`` and ``sdpa-cudnn`` run one
of them; the other kernels' attention decomposes into ops that would be recomputed uncounted, so
``selective`` refuses them (:data:`SAC_KERNELS`)."""

SAC_MATMULS = ("mm", "addmm")
"""``selective``: the ``aten`` matmuls of which every second one is recomputed (the 1st, 3rd, ... of a
block's forward are saved). torchtitan counts ``aten.mm`` only; GPT-2's biased ``Linear`` runs
``aten.addmm``, so both count here."""

SAC_KERNELS = ("sdpa", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn")
"""``attention=`` options whose attention output ``selective`` saves."""


def checkpointed_blocks(cfg: CheckpointingConfig, n_layer: int) -> list[int]:
    """The 0-based indices of the blocks ``every_n`` wraps: every ``every``-th block counted from 1
    (blocks ``every - 1``, ``2 every - 1``, ...; torchtitan's ``selective_ac_option`` counts the same
    way), so ``n_layer // every`` of them. Other policies: every block, or none for ``none``."""
    if cfg.name == "none":
        return []
    every = getattr(cfg, "every", 1)
    return [i for i in range(n_layer) if (i + 1) % every == 0]


def compiler_settings(cfg: CheckpointingConfig) -> dict[str, Any]:
    """``torch._functorch.config`` values the policy needs while blocks compile and run:
    ``{"activation_memory_budget": budget}`` for ``memory_budget`` (0 recomputes all it can, 1 saves
    what the default partitioner saves), else empty. torch reads the value when it compiles a graph,
    which happens at the first step, so ``backends.wrap_blocks`` sets it for the whole run of the
    rank's process."""
    if cfg.name == "memory_budget":
        return {"activation_memory_budget": float(getattr(cfg, "budget", 0.5))}
    return {}


def _keep_all(cfg: CheckpointingConfig, tokens: int, n_layer: int, boundary: int, layer: int) -> int:
    """Every block keeps its activations for backward: ``tokens l a`` bytes."""
    return tokens * n_layer * layer


def _keep_blocks(tokens: int, n_layer: int, checkpointed: list[int], boundary: int, layer: int) -> int:
    """Block checkpointing (``full``, ``every_n``): each checkpointed block keeps its input ``b``, the
    others all ``a`` they save. The peak is the larger of two moments: the start of backward (all
    kept) and backward rebuilding the topmost checkpointed block ``j``, when the blocks above it
    have freed theirs: ``sum_{i<j} kept_i + a`` (the rebuilt block's ``a`` includes its input).
    So ``full`` is ``(l - 1) b + a`` and ``every_n`` lies between it and ``none``'s ``l a``.

    Args:
        tokens: tokens of the micro batch; n_layer: blocks; checkpointed: their 0-based indices
            (:func:`checkpointed_blocks`); boundary, layer: bytes per token of a block's input and
            of all it keeps.

    Returns:
        Bytes kept for backward at the peak.
    """
    ckpt = set(checkpointed)
    kept = [boundary if i in ckpt else layer for i in range(n_layer)]
    rebuild = sum(kept[: max(ckpt)]) + layer if ckpt else 0
    return tokens * max(sum(kept), rebuild)


def _keep_inputs(cfg: CheckpointingConfig, tokens: int, n_layer: int, boundary: int, layer: int) -> int:
    """Each block keeps only its input, and backward rebuilds one block's activations at a time:
    ``tokens ((l - 1) b + a)`` (:func:`_keep_blocks`)."""
    return _keep_blocks(tokens, n_layer, list(range(n_layer)), boundary, layer)


def _keep_selective(cfg: CheckpointingConfig, tokens: int, n_layer: int, boundary: int, layer: int) -> int:
    """Each block keeps its input and the outputs it saves (attention, every second matmul): an
    estimate of half of what it keeps beyond its input, ``tokens l (b + (a - b) / 2)``, plus the
    recomputed half of one block while backward rebuilds it (``+ tokens (a - b) / 2``). A family that names
    what its block keeps (``selective_eager``, ``selective_compiled``) is counted by
    :func:`flopsweep.activation_memory.selective_bytes` instead (Llama 3.2 1B eager: 38,016 bytes a token and
    block, where this says 62,528)."""
    half = (layer - boundary) // 2
    return tokens * (n_layer * (boundary + half) + half)


def _forward_end_blocks(
    cfg: CheckpointingConfig, tokens: int, n_layer: int, boundary: int, layer: int
) -> int:
    """Block checkpointing (``full``, ``every_n``) when forward ends, before backward rebuilds a block:
    each checkpointed block's input, the others' all, ``tokens sum(kept)`` (:func:`_keep_blocks`
    without the rebuild)."""
    ckpt = set(checkpointed_blocks(cfg, n_layer)) if cfg.name == "every_n" else set(range(n_layer))
    return tokens * sum(boundary if i in ckpt else layer for i in range(n_layer))


def _forward_end_selective(
    cfg: CheckpointingConfig, tokens: int, n_layer: int, boundary: int, layer: int
) -> int:
    """``selective`` when forward ends: every block's input and saved half, ``tokens l (b + (a - b) / 2)``
    (:func:`_keep_selective` without the recomputed half of the block being rebuilt)."""
    return tokens * n_layer * (boundary + (layer - boundary) // 2)


def _keep_every_n(cfg: CheckpointingConfig, tokens: int, n_layer: int, boundary: int, layer: int) -> int:
    """The ``k = l // every`` checkpointed blocks keep their input, the others everything, and
    backward rebuilds the checkpointed ones one at a time (:func:`_keep_blocks`): between ``full``
    and ``none``, equal to ``none`` when the only checkpointed block is the top one."""
    return _keep_blocks(tokens, n_layer, checkpointed_blocks(cfg, n_layer), boundary, layer)


def _keep_budget(cfg: CheckpointingConfig, tokens: int, n_layer: int, boundary: int, layer: int) -> int:
    """An estimate: the partitioner keeps the share ``budget`` of what a block keeps beyond its input
    (``budget`` 1: all of it, as ``none``; 0: the input only, as ``full``):
    ``tokens l (b + budget (a - b))``. What it really keeps is the min-cut's choice per graph."""
    budget = float(getattr(cfg, "budget", 0.5))
    return tokens * n_layer * boundary + int(tokens * n_layer * budget * (layer - boundary))


def _keep_one_block(cfg: CheckpointingConfig, tokens: int, n_layer: int, boundary: int, layer: int) -> int:
    """``offload``: every saved activation is copied to the host as it is saved and back when backward
    needs it, so the device holds about one block's: ``tokens a`` (the block backward runs through;
    its copies come back one by one, freed after use). The host holds :func:`_host_all`."""
    return tokens * layer


def _host_all(cfg: CheckpointingConfig, tokens: int, n_layer: int, boundary: int, layer: int) -> int:
    """``offload``'s host bytes: every block's saved activations, ``tokens l a`` (what ``none`` keeps
    on the device)."""
    return tokens * n_layer * layer


def _none_on_device(cfg: CheckpointingConfig, tokens: int, n_layer: int, boundary: int, layer: int) -> int:
    """``offload`` when forward ends: every saved tensor is already a host copy (``saves_on_host``), 0."""
    return 0


def _no_budget(cfg: CheckpointingConfig) -> float | None:
    """A policy without the compiler's activation memory budget: None."""
    return None


def _budget(cfg: CheckpointingConfig) -> float | None:
    """``memory_budget``: its ``activation_checkpointing.budget`` (0.5 unless set)."""
    return float(getattr(cfg, "budget", 0.5))


def _no_host(cfg: CheckpointingConfig, tokens: int, n_layer: int, boundary: int, layer: int) -> int:
    """The policies that keep their activations on the device put none on the host."""
    return 0


def _no_recompute(compiled: bool) -> str:
    return "none"


def _block_recompute(compiled: bool) -> str:
    """``early_stop``, eager or compiled: an eager block under non-reentrant checkpoint stops once every
    saved tensor is back; a compiled block's backward graph keeps only the forward nodes backward reads
    (the partitioner), so its last projection, whose output only the residual add takes, never runs again
    either (:mod:`flopsweep.recompute_read`; before session 30 a compiled block counted ``full``)."""
    return "early_stop"


def _selective_recompute(compiled: bool) -> str:
    """``selective``: the unsaved matmuls whose outputs backward needs, and no attention, eager
    (early stop) or compiled (the partitioner recomputes only what backward needs) alike."""
    return "selective"


def _partitioner_recompute(compiled: bool) -> str:
    """``unknown``: the compiler's partitioner picks what to recompute per graph; no formula says it."""
    return "unknown"


def _no_check(cfg: CheckpointingConfig) -> None:
    """A policy without knobs has nothing to check."""


def _check_every(cfg: CheckpointingConfig) -> None:
    """``activation_checkpointing.every`` is a whole number >= 1."""
    every = getattr(cfg, "every", 2)
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise ConfigError(
            f"{GROUP}.every",
            every,
            "must be a whole number >= 1 (checkpoint every N-th block; 1 is every block)",
            f"set {GROUP}.every=2",
        )


def _check_budget(cfg: CheckpointingConfig) -> None:
    """``activation_checkpointing.budget`` is within 0..1."""
    budget = getattr(cfg, "budget", 0.5)
    if isinstance(budget, bool) or not isinstance(budget, int | float) or not 0.0 <= budget <= 1.0:
        raise ConfigError(
            f"{GROUP}.budget",
            budget,
            "must be within 0..1 (the share of activation memory kept: 0 recomputes all, 1 none)",
            f"set {GROUP}.budget=0.5",
        )


APPLY_MODULE = "flopsweep.checkpointing_apply"
"""The module (torch) of every policy's ``apply_*`` function."""


@dataclass(frozen=True, kw_only=True)
class CheckpointPolicy:
    """One ``activation_checkpointing=`` option.

    Attributes:
        config: its schema, :class:`~flopsweep.config.CheckpointingConfig` or a subclass with
            the policy's knobs.
        description: one line for the README and ``plan.csv`` readers.
        apply_fn: the name of its ``(blocks, cfg) -> None`` in :data:`APPLY_MODULE` (torch), which
            replaces entries of the model's block list in place (before compile); called through
            :meth:`apply`, which loads it on the rank.
        recompute: ``compiled_blocks -> mode``: what backward re-runs, the ``recompute``
            argument of ``ModelFamily.hardware_flops`` (``none``, ``early_stop``, ``full``,
            ``selective``), or ``unknown`` (the compiler decides: no hardware FLOPs).
        recomputes_forward: eq. 3 counts a recomputed forward (``f = 4``) for this policy.
        activations: ``(cfg, tokens, n_layer, boundary, layer) -> bytes`` kept for backward on
            one rank, from the bytes per token of one block's input (``boundary``) and of all it
            keeps without checkpointing (``layer``).
        check: ``cfg -> None``; raises ``ConfigError`` for an impossible knob. Rules across
            groups (``selective`` needs an SDPA kernel, ``memory_budget`` needs ``compile=true``,
            ``offload`` eager blocks) are in :mod:`flopsweep.rules`.
    """

    config: type[CheckpointingConfig] = CheckpointingConfig
    description: str
    apply_fn: str
    recompute: Callable[[bool], str]
    recomputes_forward: bool
    activations: Callable[[CheckpointingConfig, int, int, int, int], int]
    check: Callable[[CheckpointingConfig], None] = _no_check
    recasts_weights: bool = False
    """Backward casts the blocks' fp32 weights to the compute dtype again instead of keeping autocast's
    copies (``casts``): :func:`flopsweep.memory_terms.autocast_cached` counts none for the blocks."""
    host_activations: Callable[[CheckpointingConfig, int, int, int, int], int] = _no_host
    """As :attr:`activations`, the bytes it puts in host memory instead (``offload``; 0 for the others):
    :func:`flopsweep.memory.offload_host_bytes` counts them."""
    saves_on_host: bool = False
    """Every tensor a block saves for backward goes to host memory as it is saved (``offload``:
    ``torch.autograd.graph.save_on_cpu``'s ``pack_to_cpu`` copies it into a host tensor and returns only
    that copy; ``unpack_from_cpu`` brings it back when its node's backward runs). So the device keeps
    none of the blocks' autocast weight copies past the loss (autocast's cache, cleared when the trainer's
    autocast exits, held the only device reference: :func:`flopsweep.memory_terms.autocast_cached` counts
    the output head's), no saved activation when forward ends (:attr:`forward_end` 0), and none beside the
    loss's bytes at the start of backward (:attr:`flopsweep.memory.MemoryEstimate.backward_start`)."""
    compiler_budget: Callable[[CheckpointingConfig], float | None] = _no_budget
    """``cfg -> budget``: the ``activation_memory_budget`` the compiler's partitioner saves under
    (``memory_budget``), None for the other policies. torch's ``choose_saved_values_set``
    (``torch/_functorch/partitioners.py``) measures a budget below 1 between the graph's inputs (the block's
    fp32 weights under autocast, 4 bytes a parameter, and its input) and what the default min-cut saves
    (the weights' bf16 casts, 2 bytes a parameter, and the activations), and recomputes the casts from the
    fp32 weights it holds anyway: :func:`flopsweep.memory_terms.autocast_cached` counts no copy, and
    :func:`flopsweep.activation_memory.activation_bytes` the budget's share of the activations less its
    share of the 2 bytes a parameter by which the casts are smaller than the inputs' weights."""
    forward_end: Callable[[CheckpointingConfig, int, int, int, int], int] | None = None
    """As :attr:`activations`, the bytes kept when forward ends and the loss's logits are live, before
    backward rebuilds any block (``full``, ``every_n``, ``selective``; ``offload``: 0, on the host); None:
    :attr:`activations`, for a policy that rebuilds nothing
    (:func:`flopsweep.activation_memory.forward_end_bytes`)."""

    def apply(self, blocks: MutableSequence[Any], cfg: CheckpointingConfig) -> None:
        """Wrap ``blocks`` (the family's block list, in place) for ``cfg``, with :attr:`apply_fn`
        of :data:`APPLY_MODULE` (imports torch)."""
        getattr(lazy.module(APPLY_MODULE), self.apply_fn)(blocks, cfg)


POLICIES: dict[str, CheckpointPolicy] = {
    "none": CheckpointPolicy(
        description="keep every activation for backward",
        apply_fn="apply_none",
        recompute=_no_recompute,
        recomputes_forward=False,
        activations=_keep_all,
    ),
    "full": CheckpointPolicy(
        description="recompute each block's forward in backward (non-reentrant checkpoint_wrapper)",
        apply_fn="apply_full",
        recompute=_block_recompute,
        recomputes_forward=True,
        activations=_keep_inputs,
        forward_end=_forward_end_blocks,
    ),
    "selective": CheckpointPolicy(
        description="per-operator selective checkpointing: save attention and every second matmul, "
        "recompute the rest (torchtitan's SelectiveAC op mode)",
        apply_fn="apply_selective",
        recompute=_selective_recompute,
        recomputes_forward=False,
        activations=_keep_selective,
        forward_end=_forward_end_selective,
    ),
    "every_n": CheckpointPolicy(
        config=EveryNConfig,
        description="full checkpointing on every N-th block (activation_checkpointing.every)",
        apply_fn="apply_every_n",
        recompute=_block_recompute,
        recomputes_forward=False,
        activations=_keep_every_n,
        forward_end=_forward_end_blocks,
        check=_check_every,
    ),
    "memory_budget": CheckpointPolicy(
        config=MemoryBudgetConfig,
        description="the compiler's activation memory budget (compile=true): its partitioner picks "
        "what to recompute",
        apply_fn="apply_memory_budget",
        recompute=_partitioner_recompute,
        recomputes_forward=False,
        activations=_keep_budget,
        check=_check_budget,
        compiler_budget=_budget,
    ),
    "offload": CheckpointPolicy(
        description="offload every block's saved activations to host memory and bring them back in "
        "backward (torch's offload_wrapper: autograd.graph.save_on_cpu, pinned on CUDA); no recompute",
        apply_fn="apply_offload",
        recompute=_no_recompute,
        recomputes_forward=False,
        activations=_keep_one_block,
        host_activations=_host_all,
        saves_on_host=True,
        forward_end=_none_on_device,
    ),
    "casts": CheckpointPolicy(
        description="save every activation as none does; backward recomputes the bf16 casts of the "
        "blocks' fp32 weights instead of keeping them (2 bytes a parameter; no matmul recomputed)",
        apply_fn="apply_casts",
        recompute=_no_recompute,
        recomputes_forward=False,
        activations=_keep_all,
        recasts_weights=True,
    ),
}
"""Checkpointing policies by ``activation_checkpointing.name``."""


def policy(cfg: CheckpointingConfig) -> CheckpointPolicy:
    """The policy of ``cfg`` (``cfg.name``).

    Raises:
        ConfigError: for a name that is no policy (validation has normally refused it).
    """
    if cfg.name not in POLICIES:
        raise ConfigError(
            f"{GROUP}.name",
            cfg.name,
            f"must be one of {', '.join(POLICIES)}",
            f"pick one of those, e.g. {GROUP}=full",
        )
    return POLICIES[cfg.name]


def recompute_mode(run: Any) -> str:
    """What backward re-runs for a ``RunConfig`` (its policy, and whether blocks are compiled)."""
    return policy(run.activation_checkpointing).recompute(bool(run.compile))


_OVERRIDE = re.compile(rf"^({GROUP})=(.*)$", re.DOTALL)
_LEGACY = re.compile(r"\b(true|false|1|0)\b", re.IGNORECASE)


def normalize_override(override: str) -> str:
    """``activation_checkpointing=true`` -> ``activation_checkpointing=full`` (and ``false`` ->
    ``none``), also inside a sweep (``true,false``) or a sweep function (``choice(true, false)``);
    any other override unchanged. No policy name contains ``true`` or ``false``."""
    match = _OVERRIDE.match(override)
    if not match:
        return override
    value = _LEGACY.sub(lambda m: LEGACY_VALUES[m.group(1).lower()], match.group(2))
    return f"{match.group(1)}={value}"


def normalize_overrides(overrides: list[str]) -> list[str]:
    """:func:`normalize_override` of each command-line override."""
    return [normalize_override(o) for o in overrides]

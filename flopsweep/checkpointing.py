"""Activation checkpointing policies: the ``activation_checkpointing=`` config group.

``POLICIES`` is the registry: one :class:`CheckpointPolicy` per option
(``conf/activation_checkpointing/<name>.yaml``), and each policy owns the three facts
that used to be spread over the backends, the metrics and the memory estimate:

- **how it is applied** (:attr:`CheckpointPolicy.apply`): it replaces entries of the
  model family's block list (``ModelFamily.blocks``) in place, before
  :func:`flopsweep.backends.wrap_blocks` compiles each block, so that the recompute sits
  inside the compiled graph (as torchtitan does);
- **what it recomputes** (:attr:`CheckpointPolicy.recompute`): the mode that
  ``ModelFamily.hardware_flops`` counts (``none``; ``early_stop``: eager blocks under
  non-reentrant ``torch.utils.checkpoint``, which stops once every saved tensor is back;
  ``full``: a compiled block is one graph and re-runs whole), so hardware FLOPs, HFU and
  ``metrics.recompute`` come from the policy;
- **what it saves** (:attr:`CheckpointPolicy.activations`): one rank's activation bytes kept
  for backward, for :mod:`flopsweep.memory`.

Adding a policy (``selective``, ``every_n``, ``memory_budget``) is a spec here, its config
subclass in :mod:`flopsweep.options` when it has knobs (stored as
``schema/activation_checkpointing/base_<name>``), and one YAML file. This module imports torch
only inside :attr:`CheckpointPolicy.apply`, so validation and ``run.py`` can read the registry
without it.

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

from flopsweep.config import CheckpointingConfig, ConfigError

GROUP = "activation_checkpointing"
"""The config group and the ``RunConfig`` field."""

LEGACY_VALUES = {"true": "full", "false": "none", "1": "full", "0": "none"}
"""The boolean values of the key before it became a group (and 1/0, which Hydra would refuse as a
group's value with a traceback), and the policy each now means."""


def _apply_none(blocks: MutableSequence[Any], cfg: CheckpointingConfig) -> None:
    """Keep every block as it is."""


def _apply_full(blocks: MutableSequence[Any], cfg: CheckpointingConfig) -> None:
    """Wrap each block in torch's non-reentrant ``checkpoint_wrapper``: backward re-runs the
    block's forward from its saved input. ``preserve_rng_state=False``: no block draws random
    numbers (no dropout), and saving the RNG state costs a device sync per block."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    for i, block in enumerate(blocks):
        blocks[i] = checkpoint_wrapper(block, preserve_rng_state=False)


def _keep_all(tokens: int, n_layer: int, boundary: int, layer: int) -> int:
    """Every block keeps its activations for backward: ``tokens l a`` bytes."""
    return tokens * n_layer * layer


def _keep_inputs(tokens: int, n_layer: int, boundary: int, layer: int) -> int:
    """Each block keeps only its input (``tokens l b``), and backward rebuilds one block's
    activations at a time (``+ tokens a``)."""
    return tokens * (n_layer * boundary + layer)


def _no_recompute(compiled: bool) -> str:
    return "none"


def _block_recompute(compiled: bool) -> str:
    """A compiled block is one graph and re-runs whole (``full``); an eager block under
    non-reentrant checkpoint stops once every saved tensor is back (``early_stop``)."""
    return "full" if compiled else "early_stop"


def _no_check(cfg: CheckpointingConfig) -> None:
    """A policy without knobs has nothing to check."""


@dataclass(frozen=True, kw_only=True)
class CheckpointPolicy:
    """One ``activation_checkpointing=`` option.

    Attributes:
        config: its schema, :class:`~flopsweep.config.CheckpointingConfig` or a subclass with
            the policy's knobs.
        description: one line for the README and ``plan.csv`` readers.
        apply: ``(blocks, cfg) -> None``: replace entries of the model's block list in place
            (before compile).
        recompute: ``compiled_blocks -> mode``: what backward re-runs, the ``recompute``
            argument of ``ModelFamily.hardware_flops`` (``none``, ``early_stop``, ``full``).
        recomputes_forward: eq. 3 counts a recomputed forward (``f = 4``) for this policy.
        activations: ``(tokens, n_layer, boundary, layer) -> bytes`` kept for backward on one
            rank, from the bytes per token of one block's input (``boundary``) and of all it
            keeps without checkpointing (``layer``).
        check: ``cfg -> None``; raises ``ConfigError`` for an impossible knob.
    """

    config: type[CheckpointingConfig] = CheckpointingConfig
    description: str
    apply: Callable[[MutableSequence[Any], CheckpointingConfig], None]
    recompute: Callable[[bool], str]
    recomputes_forward: bool
    activations: Callable[[int, int, int, int], int]
    check: Callable[[CheckpointingConfig], None] = _no_check


POLICIES: dict[str, CheckpointPolicy] = {
    "none": CheckpointPolicy(
        description="keep every activation for backward",
        apply=_apply_none,
        recompute=_no_recompute,
        recomputes_forward=False,
        activations=_keep_all,
    ),
    "full": CheckpointPolicy(
        description="recompute each block's forward in backward (non-reentrant checkpoint_wrapper)",
        apply=_apply_full,
        recompute=_block_recompute,
        recomputes_forward=True,
        activations=_keep_inputs,
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

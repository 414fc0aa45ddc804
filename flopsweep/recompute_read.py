"""The recompute a record's step ran, where the record counted more: records before session 30 counted a
compiled checkpointed block's recompute as a whole forward (``metrics.recompute`` ``full``). Torch-free.

The compiler's partitioner (``min_cut_rematerialization_partition``) keeps in the backward graph only the
forward nodes backward reads, so a checkpointed block's last projection (Llama's ``w2``, GPT-2's MLP
``c_proj``), whose output only the residual add takes, never runs again, as under eager non-reentrant
checkpointing (``early_stop``): checked on the CPU with torch 2.13, a checkpointed Llama block compiled
through ``aot_autograd`` with that partitioner runs 20 matmuls in its backward graph (14 of backward, 6 of its
7 forward matmuls again). Since session 30 a compiled block's policy counts ``early_stop``
(:func:`flopsweep.checkpointing.recompute_mode`), so a new record's ``metrics.hardware_flops_per_iteration``
is what ran; an older one's (``metrics.recompute`` ``full``, or no ``metrics.recompute`` and a compiled
``full``/``every_n`` run) is read at the family's ``early_stop`` over ``full`` share (:func:`ran_share`;
Llama 3.1 8B 0.75) by :func:`flopsweep.predict.workload_from_record`, whose workload every prediction reads.
"""

from __future__ import annotations

from typing import Any

from flopsweep.record import value_at

BLOCK_POLICIES = ("full", "every_n")
"""The policies that checkpoint whole blocks: before session 30 counted ``full`` when compiled."""


def counted_mode(record: dict[str, Any]) -> str | None:
    """The recompute mode ``record``'s hardware FLOPs counted: ``metrics.recompute`` where it says one, else
    the rule of the records before that key (``full`` for a compiled ``full``/``every_n`` run); None where
    neither says."""
    said = value_at(record, ("metrics", "recompute"))
    if isinstance(said, str):
        return said
    policy = value_at(record, ("config", "activation_checkpointing", "name"))
    if policy in BLOCK_POLICIES and value_at(record, ("config", "compile")) is True:
        return "full"
    return None


def ran_share(record: dict[str, Any]) -> float:
    """The share of ``record``'s counted recompute that ran: the family's ``early_stop`` recompute over its
    ``full`` one (Llama 3.1 8B 0.75, 3.2 3B 0.778) where the record counted ``full`` (:func:`counted_mode`);
    1 for every other record, an unknown family and ``hf`` (its counts need torch)."""
    if counted_mode(record) != "full":
        return 1.0
    from flopsweep.models import recorded_config

    found = recorded_config(value_at(record, ("config", "model")))
    if found is None:
        return 1.0
    fam, cfg = found
    try:
        base, full, read = (
            fam.hardware_flops(cfg, cfg.seq_len, 1.0, r) for r in ("none", "full", "early_stop")
        )
    except (TypeError, ValueError):
        return 1.0
    return (read - base) / (full - base) if full > base else 1.0


def ran_flops(record: dict[str, Any], hardware: float, model: float) -> float:
    """``hardware`` FLOPs of ``record`` (any scale: per step, per rank) with the recompute over ``model``
    counted as what ran (:func:`ran_share`)."""
    return model + (hardware - model) * ran_share(record)

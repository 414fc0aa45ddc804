"""The least value of each key whose lower bound the value alone decides (:data:`MIN_BY_KEY`), beside the
largest (:data:`flopsweep.limits.MAX_BY_KEY`); both read by :func:`flopsweep.checks.check_number`, before
Hydra and first in the job. Torch-free, standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class LowerBound:
    """The least value a key takes, whatever the rest of the config (:data:`MIN_BY_KEY`)."""

    least: float
    """The bound: the value must be at least it (``strict``: above it)."""
    strict: bool = False
    problem: str = "must be a positive integer"
    """What the refusal says of the value."""
    fix: str = ""
    """The refusal's fix; empty: ``set KEY to a positive integer``."""
    also: tuple[float, ...] = ()
    """Values below the bound that the key takes all the same (``parallel.dp_shard=-1``: the rest)."""

    def refuses(self, value: float) -> bool:
        """Whether ``value`` is below the bound (at it, when ``strict``) and none of :attr:`also`."""
        below = value <= self.least if self.strict else value < self.least
        return below and value not in self.also


MIN_BY_KEY: dict[str, LowerBound] = {
    "timeout_s": LowerBound(0, True, "must be a finite number of seconds > 0", "set e.g. timeout_s=1800"),
    "seed": LowerBound(0, False, "must be in [0, 2**32) (it seeds torch generators)", "set e.g. seed=0"),
    "nnodes": LowerBound(1, fix="set nnodes=1"),
    "model.seq_len": LowerBound(1, fix="set e.g. model.seq_len=2048 (tokens)"),
    "batch.micro_batch_size": LowerBound(1, fix="set batch.micro_batch_size=1"),
    "batch.grad_accum": LowerBound(1, fix="set batch.grad_accum=1"),
    "batch.global_batch_size": LowerBound(
        1,
        False,
        "must be a positive number of sequences per optimizer step, or null",
        "set batch.global_batch_size=null (the micro batch x the data-parallel ranks), or a positive "
        "multiple of them",
    ),
    "steps.measure": LowerBound(1, fix="set steps.measure=1"),
    "steps.warmup": LowerBound(0, False, "must be >= 0", "set steps.warmup=0"),
    "steps.max_extra_warmup": LowerBound(0, False, "must be >= 0", "set steps.max_extra_warmup=0"),
    "steps.gc_freq": LowerBound(
        0, False, "must be >= 0", "set steps.gc_freq=50 (or 0: Python's automatic collection)"
    ),
    "search.memory_budget_gib": LowerBound(
        0,
        True,
        "must be a positive number of GiB",
        "set search.memory_budget_gib=null (the device's memory), or a number of GiB such as 80",
    ),
    "search.min_n_layer": LowerBound(
        1, False, "the search starts at a model of at least one block", "set search.min_n_layer=1"
    ),
    "search.max_n_layer": LowerBound(
        1, False, "the search probes models of at least one block", "set search.max_n_layer=256"
    ),
    "search.min_seq_len": LowerBound(
        1, False, "the search starts at a sequence of at least one token", "set search.min_seq_len=1024"
    ),
    "search.max_seq_len": LowerBound(
        1, False, "the search probes sequences of at least one token", "set search.max_seq_len=131072"
    ),
    "search.seq_len_multiple": LowerBound(
        1,
        False,
        "must be a positive number of tokens",
        "set search.seq_len_multiple=1 (any length) or a round step such as 1024",
    ),
    "loss.chunk_tokens": LowerBound(
        0,
        False,
        "is negative",
        "set a chunk of tokens, e.g. loss.chunk_tokens=4096, or loss.chunk_tokens=0 (the whole logits)",
    ),
    "parallel.pp_microbatches": LowerBound(
        1, False, "must be a positive integer or null", "set parallel.pp_microbatches=null"
    ),
    "activation_checkpointing.every": LowerBound(
        1,
        False,
        "must be a whole number >= 1 (checkpoint every N-th block; 1 is every block)",
        "set activation_checkpointing.every=2",
    ),
    "parallel.dp_shard": LowerBound(
        1,
        False,
        "must be a positive integer, or -1 for the ranks the other degrees leave",
        "set parallel.dp_shard=-1",
        also=(-1,),
    ),
    "repeat": LowerBound(
        0,
        False,
        "must be a round of repeats (0 to repeats - 1)",
        "drop repeat=: the sweeper sets it from repeats=",
    ),
    "batch.max_micro_batch_size": LowerBound(
        1, fix="set batch.max_micro_batch_size=256 (batch=auto's, at least batch.micro_batch_size)"
    ),
    **{
        f"parallel.{d}": LowerBound(1, fix=f"set parallel.{d}=1")
        for d in ("dp_replicate", "tp", "pp", "cp", "ep")
    },
    **{f"attention.{k}": LowerBound(1) for k in ("block_size", "window_blocks", "stride_blocks")},
    **{
        f"attention.{k}": LowerBound(0, False, "must be >= 0 blocks", f"set attention.{k}=0")
        for k in ("global_blocks", "random_blocks")
    },
}
"""The least value of each key whose lower bound the value alone decides, whatever the options picked and
the other keys, checked with :data:`MAX_BY_KEY` (:func:`flopsweep.checks.check_number`): before Hydra
(``timeout_s=0``, ``steps.measure=0`` had made a job folder and been refused in the job) and first in the
job, in the job's words (``parallel.dp_shard``: positive or ``-1``, :meth:`flopsweep.layout.Layout.resolve`'s;
``repeat``, :func:`flopsweep.checks.check_repeats`'). Not here: a bound that depends on the option
(``model.n_layer=0`` is "read it from the file" under ``model=hf``: :mod:`flopsweep.value_sets` refuses it
before Hydra on the other families) or on other keys (``repeat`` below ``repeats``; the search's
min <= max)."""


def outside(key: str, value: int | float) -> bool:
    """Whether :func:`flopsweep.checks.check_number` refuses ``value`` of ``key`` (not finite, below
    :data:`MIN_BY_KEY`, beyond :data:`flopsweep.limits.MAX_BY_KEY`): for the checks that must leave such a
    value to its own line (:func:`flopsweep.key_needs.idle_key_problem`) without importing the checks."""
    from flopsweep.limits import MAX_BY_KEY, MAX_FLOAT, MAX_INT

    if isinstance(value, float) and not math.isfinite(value):
        return True
    low = MIN_BY_KEY.get(key)
    if low is not None and low.refuses(value):
        return True
    return abs(value) > MAX_BY_KEY.get(key, MAX_INT if isinstance(value, int) else MAX_FLOAT)

"""The search's rules (``search.*``), torch-free: which searches a config may ask for, and the sequence
lengths ``search.grow=seq_len`` probes.

:func:`model_search` is one of :data:`flopsweep.rules.RULES` (the convention there: a rule returns
nothing and raises :class:`~flopsweep.config.ConfigError` naming the key, the value and the fix);
:func:`seq_len_step` and :func:`seq_len_bounds` are also read by the search itself
(:mod:`flopsweep.seqsearch`), the plan (:mod:`flopsweep.plan`) and the dry run
(:mod:`flopsweep.job.dryrun`). Imported by those; it imports none of them.
"""

from __future__ import annotations

import math
from typing import Any

from flopsweep.choices import require_choice
from flopsweep.config import ConfigError, RunConfig
from flopsweep.limits import SEARCH_GROW, SEARCH_MODES, SEARCH_RANGES


def model_search(cfg: RunConfig) -> None:
    """``search.*``: known values, a range of blocks that is not empty, a positive budget read by a
    search (``search.model=largest`` or ``batch=auto``: nothing else reads it), and a model whose
    ``n_layer`` may change (``model=hf`` reads it from its ``config.json``)."""
    s = cfg.search
    require_choice("search.model", s.model, SEARCH_MODES, "search.model")
    require_choice("search.grow", s.grow, SEARCH_GROW, "search.grow")
    _search_range(s, "n_layer", "a model of at least one block", "set search.min_n_layer=1")
    if s.grow == "seq_len":
        seq_len_range(cfg)
    if s.memory_budget_gib is not None and s.memory_budget_gib <= 0:
        raise ConfigError(
            "search.memory_budget_gib",
            s.memory_budget_gib,
            "must be a positive number of GiB",
            "set it such as search.memory_budget_gib=80, or null for the device's memory",
        )
    if s.memory_budget_gib is not None and s.model != "largest" and cfg.batch.name != "auto":
        raise ConfigError(
            "search.memory_budget_gib",
            s.memory_budget_gib,
            "is the budget of the probes of search.model=largest and batch=auto, and this run searches "
            "neither",
            "add search.model=largest or batch=auto, or drop search.memory_budget_gib (null)",
        )
    if s.grow != "n_layer" and s.model != "largest":
        raise ConfigError(
            "search.grow",
            s.grow,
            "says what search.model=largest grows, and this run searches nothing",
            "add search.model=largest, or drop search.grow (n_layer)",
        )
    if s.model == "largest" and s.grow == "n_layer" and cfg.parallel.pp > 1:
        raise ConfigError(
            "search.model",
            "largest",
            f"grows n_layer one block at a time, and parallel.pp={cfg.parallel.pp} needs a multiple of "
            "its stages",
            "search without a pipeline (parallel.pp=1), then plan the pipeline at the size found",
        )
    if s.model == "largest" and cfg.model.arch == "hf":
        raise (
            ConfigError(
                "search.model",
                "largest",
                "model=hf takes n_layer from its config.json, so the search cannot grow it",
                "search a flopsweep family (model=llama3.2-1b, gpt-1.3b), or set search.model=none",
            )
            if s.grow == "n_layer"
            else ConfigError(
                "search.grow",
                "seq_len",
                "model=hf bounds the sequence by its config.json's positions, which the search does not read",
                "search a flopsweep family (model=llama3.1-8b, gpt-1.3b), or set search.model=none",
            )
        )


def _search_range(s: Any, axis: str, least: str, fix: str) -> None:
    """``1 <= search.min_<axis> <= search.max_<axis>`` (``axis``: ``n_layer`` or ``seq_len``; ``s``: the
    ``search`` section). Raises :class:`ConfigError` naming ``search.min_<axis>`` below 1 (the search starts
    at ``least``; ``fix``), else ``search.max_<axis>`` below it (:data:`flopsweep.limits.SEARCH_RANGES`'
    why and fix)."""
    low, high = getattr(s, f"min_{axis}"), getattr(s, f"max_{axis}")
    if low < 1:
        raise ConfigError(f"search.min_{axis}", low, f"the search starts at {least}", fix)
    if high < low:
        _, _, _, why, high_fix = SEARCH_RANGES[f"search.max_{axis}"]
        raise ConfigError(f"search.max_{axis}", high, why.format(low=low), high_fix)


def seq_len_step(cfg: Any) -> int:
    """The tokens between two sequence lengths the search probes: the least common multiple of what
    the set-up divides ``model.seq_len`` by: ``2 cp`` (context parallelism's ``2 cp`` chunks,
    ``flopsweep.context_parallel.check``), ``tp cp`` (sequence parallelism's shards of each rank's
    ``s / cp`` tokens; the families' ``tensor_parallel_dims``) and a block-sparse kernel's
    ``attention.block_size`` (whole blocks, no padded one), and ``search.seq_len_multiple``. 1 for a
    plain single-GPU set-up at the default multiple."""
    cp, tp = int(cfg.parallel.cp), int(cfg.parallel.tp)
    step = math.lcm(2 * cp if cp > 1 else 1, max(1, tp * cp))
    block = getattr(cfg.attention, "block_size", None)
    if isinstance(block, int) and block > 0:
        step = math.lcm(step, block)
    return math.lcm(step, max(1, int(cfg.search.seq_len_multiple)))


def seq_len_bounds(cfg: Any) -> tuple[int, int]:
    """``(first, last)`` sequence lengths probed: ``search.min_seq_len`` rounded up and
    ``search.max_seq_len`` rounded down to :func:`seq_len_step`; ``first > last`` when no multiple
    of the step lies between them (validation refuses that, :func:`seq_len_range`)."""
    step = seq_len_step(cfg)
    return -(-cfg.search.min_seq_len // step) * step, cfg.search.max_seq_len // step * step


def seq_len_range(cfg: RunConfig) -> None:
    """``search.grow=seq_len``: ``1 <= search.min_seq_len <= search.max_seq_len``, and a length
    between them that the set-up divides by (:func:`seq_len_step`)."""
    s = cfg.search
    if s.seq_len_multiple < 1:
        raise ConfigError(
            "search.seq_len_multiple",
            s.seq_len_multiple,
            "must be a positive number of tokens",
            "set search.seq_len_multiple=1 (any length) or a round step such as 1024",
        )
    _search_range(s, "seq_len", "a sequence of at least one token", "set search.min_seq_len=1024")
    first, last = seq_len_bounds(cfg)
    if first > last:
        step = seq_len_step(cfg)
        raise ConfigError(
            "search.max_seq_len",
            s.max_seq_len,
            f"no multiple of {step} tokens (what parallel.cp, parallel.tp and the attention's block size "
            f"divide the sequence by) lies between search.min_seq_len={s.min_seq_len} and it",
            f"set search.max_seq_len={first} or more",
        )

"""``search.model=largest search.grow=seq_len``: the longest sequence that trains on a set-up.

The twin of the depth search (:mod:`flopsweep.modelsearch`): the same
:class:`flopsweep.sizesearch.SizeSearch` grows ``model.seq_len`` at the model's blocks, from
``search.min_seq_len`` to ``search.max_seq_len`` tokens, in steps of
:func:`flopsweep.search_rules.seq_len_step` (what the set-up needs the sequence to divide by: ``2 cp`` and
``tp cp`` for context parallelism's chunks and sequence parallelism's shards, the block-sparse
``attention.block_size``). Each probe is :func:`flopsweep.sizesearch.run_probe` at the start micro batch,
validated at its length
(:func:`at_seq_len`: a length the set-up refuses is ``refused``), in ``model_search/T<tokens>/``.

What guides it is the memory estimate (:func:`flopsweep.memory.peak_bytes`), scaled by what the
largest probe that fit measured against its estimate (:func:`predicted_longest`): the estimate knows
how memory grows with the sequence (linearly for the fused attention kernels, with ``s^2`` for the
kernels that materialise the scores, ``standard`` and ``sdpa-math``), which a line through two
probes would not. On the CPU the estimate is also the rule of what fits, against
``search.memory_budget_gib``, as in the depth search. A wrong prediction costs probes, never the result.

The record is ``run.model_search`` with ``grow: seq_len``: the probes carry ``seq_len`` (and
``n_layer``, ``n_params``), the ``result`` is the longest sequence in tokens, ``step`` the tokens
between two sizes probed. The memory levers that matter at long sequences are other axes of the
set-up: ``activation_checkpointing`` (``full``, ``selective``, ``offload``: the saved activations
on the host), ``loss.chunk_tokens`` (the fused chunked loss: no ``tokens x vocab`` logits), the
attention kernel and ``parallel.cp``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

# the depth search's folder (model_search/T<seq_len>/), refused probe and probe entry, re-exported
from flopsweep.modelsearch import SEARCH_DIR as SEARCH_DIR
from flopsweep.modelsearch import ModelAxis, probe_notes
from flopsweep.modelsearch import probe_entry as probe_entry
from flopsweep.modelsearch import refused as refused
from flopsweep.plan import Environment
from flopsweep.plan import plan as resolve_plan
from flopsweep.search_rules import seq_len_bounds, seq_len_step
from flopsweep.sizesearch import Probe, SizeSearch, search_max
from flopsweep.text import format_count

if TYPE_CHECKING:
    from flopsweep.config import RunConfig
    from flopsweep.layout import Plan


def with_seq_len(cfg: RunConfig, seq_len: int) -> RunConfig:
    """``cfg`` at ``seq_len`` tokens per sequence, not validated (what the memory estimate reads)."""
    return dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, seq_len=seq_len))


def at_seq_len(plan: Plan, seq_len: int, env: Environment) -> Plan:
    """``plan`` at ``seq_len`` tokens per sequence, validated and resolved again on ``env`` (the
    attention kernel's resolution and density depend on the length; a length the set-up refuses
    raises). The model keeps its name: the record's ``config.model.seq_len`` says the length.

    Raises:
        ConfigError: when validation refuses the length.
    """
    return resolve_plan(with_seq_len(plan.cfg, seq_len), env)


def predicted_longest(search: SizeSearch) -> int | None:
    """The longest sequence (tokens, a multiple of :func:`seq_len_step`) the search should reach: the
    longest whose estimated peak per rank (:func:`flopsweep.memory.peak_bytes`) times the ratio of
    the memory that guided the longest probe that fit to its estimate (1 on the CPU, where the
    estimate guides) is within ``headroom x capacity``. None before a probe fit or without a capacity."""
    from flopsweep.memory import peak_bytes

    if not search.points or not search.capacity:
        return None
    cfg, layout = search.plan.cfg, search.plan.layout
    fit, guide = max(search.points)
    estimated = peak_bytes(with_seq_len(cfg, fit), layout)
    ratio = guide / estimated if estimated else 1.0
    room = search.headroom * search.capacity
    step = seq_len_step(cfg)
    last = seq_len_bounds(cfg)[1]
    fits = lambda u: peak_bytes(with_seq_len(cfg, u * step), layout) * ratio <= room  # noqa: E731
    found, _ = search_max(fits, fit // step, last // step)
    return None if found is None else found * step


def estimated_longest_seq_len(cfg: Any, layout: Any, capacity: int) -> int | None:
    """The longest sequence the search should reach by the memory estimate alone: the longest of
    :func:`seq_len_bounds` whose estimated peak per rank is within ``capacity`` bytes (what
    ``plan=true`` shows for a ``search.grow=seq_len`` job). None when even the first is over it."""
    from flopsweep.sizesearch import estimated_largest

    return estimated_largest(SEQ_LEN, cfg, layout, capacity)


@dataclasses.dataclass(frozen=True)
class SeqLen(ModelAxis):
    """The sequence length as :class:`flopsweep.sizesearch.SizeAxis`: probes of
    :func:`seq_len_bounds` in steps of :func:`seq_len_step` at the start micro batch, each validated
    at its length on ``env`` (this machine's when None) and run in ``model_search/T<tokens>/``."""

    name = "search.grow=seq_len"
    size_key = "seq_len"
    folder = "T"
    sizes = ("seq_len", "n_layer")
    limit_key = "search.max_seq_len"

    def bounds(self, cfg: RunConfig) -> tuple[int, int]:
        return seq_len_bounds(cfg)

    def step(self, cfg: RunConfig) -> int:
        return seq_len_step(cfg)

    def predict(self, search: SizeSearch) -> int | None:
        return predicted_longest(search)

    def least(self, cfg: RunConfig) -> str:
        return f"seq_len={seq_len_bounds(cfg)[0]}"

    def same(self, cfg: RunConfig) -> dict[str, Any]:
        """What a resumed record's search must share to lend its probes: what grew, the micro batch
        and the blocks it probed at."""
        return {
            "grow": cfg.search.grow,
            "micro_batch_size": cfg.batch.micro_batch_size,
            "n_layer": cfg.model.n_layer,
        }

    def at(self, cfg: RunConfig, n: int) -> RunConfig:
        return with_seq_len(cfg, n)

    def resolved(self, plan: Plan, n: int, env: Environment) -> Plan:
        return at_seq_len(plan, n, env)

    def as_asked(self, plan: Plan, n: int) -> Plan:
        return dataclasses.replace(plan, cfg=with_seq_len(plan.cfg, n))

    def probe_line(self, count: int, n: int, entry: dict[str, Any], probe: Probe) -> str:
        return f"search.grow=seq_len: probe {count}: seq_len={n} -> {probe.status}{probe_notes(entry, probe)}"

    def found_line(self, found: int, record: dict[str, Any], probes: int) -> str:
        return (
            f"search.grow=seq_len: the longest sequence that trains is seq_len={found} "
            f"({format_count(found)} tokens), after {probes} probes"
        )

    def record_sizes(self, cfg: RunConfig) -> dict[str, Any]:
        """``step`` (tokens between two sizes probed), the micro batch and the blocks the probes ran at."""
        return {
            "step": seq_len_step(cfg),
            "micro_batch_size": cfg.batch.micro_batch_size,
            "n_layer": cfg.model.n_layer,
        }


SEQ_LEN = SeqLen()
"""``search.grow=seq_len``'s axis of :class:`flopsweep.sizesearch.SizeSearch`."""


find_longest_sequence = SEQ_LEN.find
"""The longest ``model.seq_len`` of ``plan.cfg`` (validated, ``search.grow == "seq_len"``) that trains at
the start micro batch on the plan's layout, and the record of the search: :meth:`ModelAxis.find
<flopsweep.modelsearch.ModelAxis.find>` of :data:`SEQ_LEN` (``on_probe``, ``reuse`` by ``seq_len``); the
record is ``metrics.json["run"]["model_search"]`` (:meth:`SeqLen.record`)."""

"""``search.model=largest search.grow=seq_len``: the longest sequence that trains on a set-up.

The twin of the depth search (:mod:`flopsweep.modelsearch`): the same
:class:`flopsweep.sizesearch.SizeSearch` grows ``model.seq_len`` at the model's blocks, from
``search.min_seq_len`` to ``search.max_seq_len`` tokens, in steps of :func:`flopsweep.rules.seq_len_step`
(what the set-up needs the sequence to divide by: ``2 cp`` and ``tp cp`` for context parallelism's chunks and
sequence parallelism's shards, the block-sparse ``attention.block_size``). Each probe is
:func:`flopsweep.sizesearch.run_probe` at the start micro batch, validated at its length
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
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flopsweep.config import ConfigError
from flopsweep.models import family
from flopsweep.plan import Environment
from flopsweep.plan import plan as resolve_plan
from flopsweep.rules import seq_len_bounds, seq_len_step
from flopsweep.sizesearch import Probe, SizeSearch, run_probe, search_max
from flopsweep.text import format_count

if TYPE_CHECKING:
    from flopsweep.config import RunConfig
    from flopsweep.layout import Plan

log = logging.getLogger("flopsweep")

SEARCH_DIR = "model_search"
"""The job directory's folder of the probes, one ``T<seq_len>/`` each (the depth search's folder)."""


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


def refused(reason: str) -> Probe:
    """The probe of a length that validation refused (status ``refused``; nothing ran)."""
    return Probe(
        status="refused",
        outcome=None,
        peak_cuda_allocated_bytes=None,
        estimated_peak_bytes=None,
        step_time_s=None,
        reason=reason,
    )


def probe_entry(plan: Plan, probe: Probe) -> dict[str, Any]:
    """One probe of ``run.model_search.probes`` of a sequence search: ``seq_len`` (tokens), the
    model's ``n_layer`` and parameters, status, memory (bytes) and the tokens/s of its one measured
    step (indicative: one step after one warm-up)."""
    m = plan.cfg.model
    tokens = plan.layout.global_batch(plan.cfg.batch.micro_batch_size, plan.cfg.batch.grad_accum) * m.seq_len
    entry = {
        "seq_len": m.seq_len,
        "n_layer": m.n_layer,
        "n_params": family(m).n_params(m),
        "status": probe.status,
        "peak_cuda_allocated_bytes": probe.peak_cuda_allocated_bytes,
        "estimated_peak_bytes": probe.estimated_peak_bytes,
        "tokens_per_s": tokens / probe.step_time_s if probe.step_time_s else None,
    }
    if probe.reason and not probe.fits:
        entry["reason"] = probe.reason
    return entry


@dataclasses.dataclass(frozen=True)
class SeqLen:
    """The sequence length as :class:`flopsweep.sizesearch.SizeAxis`: probes of
    :func:`seq_len_bounds` in steps of :func:`seq_len_step` at the start micro batch, each validated
    at its length on ``env`` (this machine's when None) and run in ``model_search/T<tokens>/``."""

    env: Environment | None = None

    name = "search.grow=seq_len"
    key = SEARCH_DIR
    size_key = "seq_len"

    def wanted(self, cfg: RunConfig) -> bool:
        return cfg.search.model == "largest" and cfg.search.grow == "seq_len"

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

    def probe(self, plan: Plan, n: int, probe_dir: Path, budget: int | None) -> tuple[dict[str, Any], Probe]:
        try:
            sized = at_seq_len(plan, n, self.env or Environment.detect())
            probe = run_probe(sized, probe_dir / f"T{n}", budget)
        except ConfigError as exc:
            sized = dataclasses.replace(plan, cfg=with_seq_len(plan.cfg, n))
            probe = refused(str(exc))
        return probe_entry(sized, probe), probe

    def reused_estimate(self, plan: Plan, n: int) -> int | None:
        return None  # a sequence search's entries keep their estimate

    def probe_line(self, count: int, n: int, entry: dict[str, Any], probe: Probe) -> str:
        return (
            f"search.grow=seq_len: probe {count}: seq_len={n} -> {probe.status}"
            f"{f' ({probe.reason})' if probe.reason and not probe.fits else ''}"
            f"{' (reused: resume=true)' if entry.get('reused') else ''}"
        )

    def record(self, search: SizeSearch, result: int | None, **found: Any) -> dict[str, Any]:
        """``run.model_search`` of a sequence search: ``{method, grow, start, limit, step,
        micro_batch_size, n_layer, memory_budget_gib, gpu_memory_bytes, probes, result, n_params}``
        (``start``, ``limit``, ``step``, ``result``: tokens per sequence)."""
        cfg = search.plan.cfg
        fit = next((p for p in search.probes if p["seq_len"] == result), None)
        first, last = seq_len_bounds(cfg)
        return {
            "method": search.method,
            "grow": cfg.search.grow,
            "start": first,
            "limit": last,
            "step": seq_len_step(cfg),
            "micro_batch_size": cfg.batch.micro_batch_size,
            "n_layer": cfg.model.n_layer,
            "memory_budget_gib": cfg.search.memory_budget_gib,
            "gpu_memory_bytes": search.gpu_memory,
            "probes": search.probes,
            "result": result,
            "n_params": fit["n_params"] if fit else None,
        }

    def find(
        self,
        plan: Plan,
        job_dir: Path,
        *,
        on_probe: Callable[[dict[str, Any]], None] | None = None,
        reuse: dict[int, dict[str, Any]] | None = None,
    ) -> tuple[Plan, dict[str, Any]]:
        """:func:`find_longest_sequence`."""
        return find_longest_sequence(plan, job_dir, on_probe=on_probe, reuse=reuse)


SEQ_LEN = SeqLen()
"""``search.grow=seq_len``'s axis of :class:`flopsweep.sizesearch.SizeSearch`."""


def find_longest_sequence(
    plan: Plan,
    job_dir: Path,
    *,
    on_probe: Callable[[dict[str, Any]], None] | None = None,
    reuse: dict[int, dict[str, Any]] | None = None,
) -> tuple[Plan, dict[str, Any]]:
    """The longest ``model.seq_len`` of ``plan.cfg`` (validated, ``search.grow == "seq_len"``) that
    trains at the start micro batch on the plan's layout, and the record of the search; as
    :func:`flopsweep.modelsearch.find_largest_model` (``on_probe``, ``reuse`` by ``seq_len``).

    Returns:
        ``(plan at the length found, record)``; the record is ``metrics.json["run"]["model_search"]``
        (:meth:`SeqLen.record`).

    Raises:
        NothingFits: when even the first length does not fit (its probe's outcome).
        ProbeFailed: when a probe fails otherwise than by being too large.
    """
    env = Environment.detect()
    search = SizeSearch.start(SeqLen(env), plan, job_dir, on_probe=on_probe, reuse=reuse)
    found = search.largest()
    result = search.record(found)
    if on_probe is not None:
        on_probe(result)
    log.info(
        "search.grow=seq_len: the longest sequence that trains is seq_len=%d (%s tokens), after %d probes",
        found,
        format_count(found),
        len(search.probes),
    )
    if found == seq_len_bounds(plan.cfg)[1]:
        log.info("search.grow=seq_len: search.max_seq_len=%d fits; raise it to search further", found)
    return at_seq_len(plan, found, env), result

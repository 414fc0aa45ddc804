"""``search.model=largest``: the largest model of a family that trains on a set-up.

The search grows the blocks at the family's width (``model.n_layer``; ``search.grow=n_layer``)
with :func:`flopsweep.autobatch.search_max`, the search of ``batch=auto``: from
``search.min_n_layer`` it doubles, then bisects, up to ``search.max_n_layer``. Each probe is
:func:`flopsweep.autobatch.run_probe` at the start micro batch (``batch.micro_batch_size``): one
warm-up and one measured step in fresh workers, an out-of-memory probe recorded as ``oom``. The
memory of the probes that fit guides it (:func:`flopsweep.autobatch.predict_largest`: a line
through the two largest, peak memory being linear in the blocks): on CUDA their measured peak
allocated memory against the GPU's memory (or ``search.memory_budget_gib``); on the CPU their
estimated peak (``flopsweep.memory.estimate``) against the budget, which is then also the rule
of what fits, so that a CPU search is deterministic. A wrong prediction costs probes, never the
result. The model keeps its family's name with the blocks found (``llama3.2-1b-L40``).

The job (:func:`flopsweep.job.launch_run`) then runs ``batch=auto``'s micro-batch search at that
size when ``batch=auto`` is picked, and measures there. The record keeps the search under
``run.model_search``: every probe (blocks, parameters, status, peak and estimated memory, the
probe's tokens/s), the result and the budget. The job holds the search so far after every probe
(``on_probe``, result null), so that a run interrupted during the search (SIGTERM, Ctrl-C, a Slurm
time limit) keeps in its error record every probe that finished, and a rerun with ``resume=true``
takes them over (``reuse``, :mod:`flopsweep.reuse`): a size probed already is not probed again.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flopsweep.autobatch import (
    DOES_NOT_FIT,
    NothingFits,
    Probe,
    ProbeFailed,
    budget_bytes,
    cuda_capacity,
    guide_capacity,
    largest_within,
    predict_largest,
    reused_probe,
    run_probe,
    search_max,
    search_method,
    unrun_outcome,
)
from flopsweep.config import ConfigError
from flopsweep.launch import Outcome
from flopsweep.models import family
from flopsweep.plan import Environment
from flopsweep.plan import plan as resolve_plan
from flopsweep.text import format_count

if TYPE_CHECKING:
    from flopsweep.layout import Plan

log = logging.getLogger("flopsweep")

SEARCH_DIR = "model_search"
"""The job directory's folder of the probes, one ``L<n_layer>/`` each."""


def at_n_layer(plan: Plan, n_layer: int, base_name: str, env: Environment) -> Plan:
    """``plan`` with ``n_layer`` blocks at the same width, validated and resolved again on ``env``
    (so that a size whose model states, offloaded or not, cannot fit the host is refused as a run of
    that size would be); the model is named ``<base>-L<n>`` (a table must not show a 40-block model
    under the 16-block model's name).

    Raises:
        ConfigError: when validation refuses the size.
    """
    model = dataclasses.replace(plan.cfg.model, n_layer=n_layer, name=f"{base_name}-L{n_layer}")
    return resolve_plan(dataclasses.replace(plan.cfg, model=model), env)


def at_n_layer_unchecked(plan: Plan, n_layer: int, base_name: str) -> Plan:
    """:func:`at_n_layer` without validation: the size as asked, for the record of a refused probe."""
    model = dataclasses.replace(plan.cfg.model, n_layer=n_layer, name=f"{base_name}-L{n_layer}")
    return dataclasses.replace(plan, cfg=dataclasses.replace(plan.cfg, model=model))


def estimated_largest_n_layer(cfg: Any, layout: Any, capacity: int) -> int | None:
    """The blocks the search should reach by the memory estimate: the largest ``model.n_layer`` from
    ``search.min_n_layer`` to ``search.max_n_layer`` whose estimated peak per rank
    (:func:`flopsweep.memory.peak_bytes`, at the probes' micro batch ``batch.micro_batch_size``; on the
    CPU with the offloaded states, as the probes are held to) is within
    ``capacity`` (bytes per rank: the GPU's memory, or ``search.memory_budget_gib``'s when smaller),
    searched as the probes are (:func:`flopsweep.autobatch.largest_within`). ``plan=true`` estimates a
    ``search.model=largest`` job there (:func:`flopsweep.job.search_size`), as it predicts ``batch=auto``
    at :func:`flopsweep.autobatch.estimated_largest`; the run's probes, which measure, decide.

    Returns:
        The blocks, or None when even ``search.min_n_layer`` is estimated over ``capacity``.
    """
    return largest_within(
        lambda n: dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, n_layer=n)),
        layout,
        capacity,
        cfg.search.min_n_layer,
        cfg.search.max_n_layer,
    )


def refused(reason: str) -> Probe:
    """The probe of a size that validation refused (status ``refused``; nothing ran)."""
    return Probe(
        status="refused",
        outcome=None,
        peak_cuda_allocated_bytes=None,
        estimated_peak_bytes=None,
        step_time_s=None,
        reason=reason,
    )


def probe_entry(plan: Plan, probe: Probe) -> dict[str, Any]:
    """One probe of ``run.model_search.probes``: blocks, parameters, status and memory (bytes),
    and the tokens/s of its one measured step (indicative: one step after one warm-up)."""
    m = plan.cfg.model
    tokens = plan.layout.global_batch(plan.cfg.batch.micro_batch_size, plan.cfg.batch.grad_accum) * m.seq_len
    entry = {
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


def find_largest_model(
    plan: Plan,
    job_dir: Path,
    *,
    on_probe: Callable[[dict[str, Any]], None] | None = None,
    reuse: dict[int, dict[str, Any]] | None = None,
) -> tuple[Plan, dict[str, Any]]:
    """The largest ``model.n_layer`` of ``plan.cfg`` (validated, ``search.model == "largest"``) that
    trains at the start micro batch on the plan's layout, and the record of the search.

    Probes run in ``job_dir/model_search/L<n>/``; each prints one progress line.

    Args:
        on_probe: called after every probe with the record of the search so far (``result`` and
            ``n_params`` null), before the search goes on, and with the whole record once it has
            found its size: what a run interrupted before this returns records.
        reuse: probes of the record that ``resume=true`` runs again, by ``n_layer``
            (:func:`flopsweep.reuse.reusable_probes`): such a size is not probed again; its entry
            is taken over with ``"reused": true`` and its outcome stands.

    Returns:
        ``(plan at the size found, record)``; the record is ``metrics.json["run"]["model_search"]``:
        ``{method, grow, start, limit, micro_batch_size, memory_budget_gib, gpu_memory_bytes, probes,
        result, n_params}`` (``gpu_memory_bytes``: the first GPU's, null off CUDA; what a resumed
        search compares before it reuses the probes).

    Raises:
        NothingFits: when even ``search.min_n_layer`` blocks do not fit (its probe's outcome).
        ProbeFailed: when a probe fails otherwise than by being too large (its status is not in
            :data:`flopsweep.autobatch.DOES_NOT_FIT`: an ``error``): the search cannot tell whether
            a larger model fits.
    """
    cfg, search = plan.cfg, plan.cfg.search
    env = Environment.detect()
    budget = budget_bytes(cfg)
    capacity, headroom = guide_capacity(cfg.device, budget)
    gpu_memory = cuda_capacity(cfg.device)
    probes: list[dict[str, Any]] = []
    points: list[tuple[int, int]] = []  # (n_layer, memory) of the probes that fit
    outcomes: dict[int, Outcome] = {}

    def record(n_layer: int | None) -> dict[str, Any]:
        fit = next((p for p in probes if p["n_layer"] == n_layer), None)
        return {
            "method": search_method(cfg.device, capacity),
            "grow": search.grow,
            "start": search.min_n_layer,
            "limit": search.max_n_layer,
            "micro_batch_size": cfg.batch.micro_batch_size,
            "memory_budget_gib": search.memory_budget_gib,
            "gpu_memory_bytes": gpu_memory,
            "probes": probes,
            "result": n_layer,
            "n_params": fit["n_params"] if fit else None,
        }

    def fits(n: int) -> bool:
        if n in (reuse or {}):
            entry, probe = {**reuse[n], "reused": True}, reused_probe(reuse[n])
        else:
            try:
                sized = at_n_layer(plan, n, cfg.model.name, env)
                probe = run_probe(sized, Path(job_dir) / SEARCH_DIR / f"L{n}", budget)
            except ConfigError as exc:
                sized, probe = at_n_layer_unchecked(plan, n, cfg.model.name), refused(str(exc))
            entry = probe_entry(sized, probe)
        outcomes[n] = probe.outcome or unrun_outcome(probe)
        probes.append(entry)
        if on_probe is not None:
            on_probe(record(None))
        if probe.fits and probe.guide_bytes:
            points.append((n, probe.guide_bytes))
        log.info(
            "search.model=largest: probe %d: n_layer=%d (%s parameters) -> %s%s%s",
            len(probes),
            n,
            format_count(entry["n_params"]),
            probe.status,
            f" ({probe.reason})" if probe.reason and not probe.fits else "",
            " (reused: resume=true)" if entry.get("reused") else "",
        )
        if probe.status not in ("ok", *DOES_NOT_FIT):
            raise ProbeFailed(outcomes[n], record(None))
        return probe.fits

    predict = (lambda: predict_largest(points, capacity, headroom)) if capacity else None
    found, _ = search_max(fits, search.min_n_layer, search.max_n_layer, predict)
    if found is None:
        raise NothingFits(outcomes[search.min_n_layer], record(None))
    result = record(found)
    if on_probe is not None:
        on_probe(result)
    log.info(
        "search.model=largest: the largest that trains has n_layer=%d (%s parameters), after %d probes",
        found,
        format_count(result["n_params"]),
        len(probes),
    )
    if found == search.max_n_layer:
        log.info("search.model=largest: search.max_n_layer=%d fits; raise it to search further", found)
    return at_n_layer(plan, found, cfg.model.name, env), result

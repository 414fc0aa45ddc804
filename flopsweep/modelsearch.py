"""``search.model=largest``: the largest model of a family that trains on a set-up.

The search grows the blocks at the family's width (``model.n_layer``; ``search.grow=n_layer``)
along :data:`N_LAYER` with :class:`flopsweep.sizesearch.SizeSearch`, the one search of
``batch=auto`` too: from ``search.min_n_layer`` it doubles, then bisects, up to
``search.max_n_layer``. Each probe is :func:`flopsweep.sizesearch.run_probe` at the start micro batch
(``batch.micro_batch_size``): one warm-up and one measured step in fresh workers, an out-of-memory
probe recorded as ``oom``. The memory of the probes that fit guides it
(:func:`flopsweep.sizesearch.predict_largest`: a line through the two largest, peak memory being
linear in the blocks): on CUDA their measured peak allocated memory against the GPU's memory (or
``search.memory_budget_gib``); on the CPU their estimated peak (``flopsweep.memory.estimate``)
against the budget, which is then also the rule of what fits, so that a CPU search is
deterministic. A wrong prediction costs probes, never the result. The model keeps its family's
name with the blocks found (``llama3.2-1b-L40``).

The job's sized step (:func:`flopsweep.job.lifecycle.sized`) then runs ``batch=auto``'s micro-batch
search at that size when ``batch=auto`` is picked, and measures there. The record keeps the search
under ``run.model_search``: every probe (blocks, parameters, status, peak and estimated memory, the
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

from flopsweep.config import ConfigError
from flopsweep.models import family
from flopsweep.plan import Environment
from flopsweep.plan import plan as resolve_plan
from flopsweep.sizesearch import Probe, SizeSearch, run_probe
from flopsweep.sizesearch import estimated_largest as estimated_size
from flopsweep.text import format_count

if TYPE_CHECKING:
    from flopsweep.config import RunConfig
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
    searched as the probes are (:func:`flopsweep.sizesearch.estimated_largest`). ``plan=true``
    estimates a ``search.model=largest`` job there (:func:`flopsweep.job.dryrun.search_size`), as it
    predicts ``batch=auto`` at :func:`flopsweep.autobatch.estimated_largest`; the run's probes, which
    measure, decide.

    Returns:
        The blocks, or None when even ``search.min_n_layer`` is estimated over ``capacity``.
    """
    return estimated_size(N_LAYER, cfg, layout, capacity)


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


@dataclasses.dataclass(frozen=True)
class NLayer:
    """The blocks as :class:`flopsweep.sizesearch.SizeAxis`: probes from ``search.min_n_layer`` to
    ``search.max_n_layer`` at the start micro batch, each validated at its size on ``env``
    (:func:`at_n_layer`, this machine's when None; a size validation refuses is ``refused``) and run
    in ``model_search/L<n>/``."""

    env: Environment | None = None

    name = "search.model=largest"
    key = SEARCH_DIR
    size_key = "n_layer"

    def wanted(self, cfg: RunConfig) -> bool:
        return cfg.search.model == "largest" and cfg.search.grow == "n_layer"

    def bounds(self, cfg: RunConfig) -> tuple[int, int]:
        return cfg.search.min_n_layer, cfg.search.max_n_layer

    def step(self, cfg: RunConfig) -> int:
        return 1

    def least(self, cfg: RunConfig) -> str:
        return f"n_layer={cfg.search.min_n_layer}"

    def same(self, cfg: RunConfig) -> dict[str, Any]:
        """What a resumed record's search must share to lend its probes: how it grew the model and
        the micro batch it probed at."""
        return {"grow": cfg.search.grow, "micro_batch_size": cfg.batch.micro_batch_size}

    def at(self, cfg: RunConfig, n: int) -> RunConfig:
        return dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, n_layer=n))

    def probe(self, plan: Plan, n: int, probe_dir: Path, budget: int | None) -> tuple[dict[str, Any], Probe]:
        name = plan.cfg.model.name
        try:
            sized = at_n_layer(plan, n, name, self.env or Environment.detect())
            probe = run_probe(sized, probe_dir / f"L{n}", budget)
        except ConfigError as exc:
            sized, probe = at_n_layer_unchecked(plan, n, name), refused(str(exc))
        return probe_entry(sized, probe), probe

    def reused_estimate(self, plan: Plan, n: int) -> int | None:
        return None  # a model search's entries keep their estimate

    def probe_line(self, count: int, n: int, entry: dict[str, Any], probe: Probe) -> str:
        return (
            f"search.model=largest: probe {count}: n_layer={n} ({format_count(entry['n_params'])} "
            f"parameters) -> {probe.status}{f' ({probe.reason})' if probe.reason and not probe.fits else ''}"
            f"{' (reused: resume=true)' if entry.get('reused') else ''}"
        )

    def record(self, search: SizeSearch, result: int | None, **found: Any) -> dict[str, Any]:
        """``run.model_search``: ``{method, grow, start, limit, micro_batch_size, memory_budget_gib,
        gpu_memory_bytes, probes, result, n_params}``."""
        cfg = search.plan.cfg
        fit = next((p for p in search.probes if p["n_layer"] == result), None)
        return {
            "method": search.method,
            "grow": cfg.search.grow,
            "start": cfg.search.min_n_layer,
            "limit": cfg.search.max_n_layer,
            "micro_batch_size": cfg.batch.micro_batch_size,
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
        """:func:`find_largest_model`."""
        return find_largest_model(plan, job_dir, on_probe=on_probe, reuse=reuse)


N_LAYER = NLayer()
"""``search.model=largest``'s axis of :class:`flopsweep.sizesearch.SizeSearch`."""


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
            :data:`flopsweep.sizesearch.DOES_NOT_FIT`: an ``error``): the search cannot tell whether
            a larger model fits.
    """
    env = Environment.detect()
    search = SizeSearch.start(NLayer(env), plan, job_dir, on_probe=on_probe, reuse=reuse)
    found = search.largest()
    result = search.record(found)
    if on_probe is not None:
        on_probe(result)
    log.info(
        "search.model=largest: the largest that trains has n_layer=%d (%s parameters), after %d probes",
        found,
        format_count(result["n_params"]),
        len(search.probes),
    )
    if found == plan.cfg.search.max_n_layer:
        log.info("search.model=largest: search.max_n_layer=%d fits; raise it to search further", found)
    return at_n_layer(plan, found, plan.cfg.model.name, env), result

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

The sequence search (``search.grow=seq_len``, :mod:`flopsweep.seqsearch`) is the same search along
another size: both axes are a :class:`ModelAxis` (a size validated, probed in ``model_search/``, its
entry :func:`probe_entry`, the record ``run.model_search``) and run through one driver,
:func:`grow_model`.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from flopsweep.config import ConfigError
from flopsweep.models import family
from flopsweep.plan import Environment
from flopsweep.plan import plan as resolve_plan
from flopsweep.sizesearch import OnProbe, Probe, ReusedProbes, SizeSearch, run_probe
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


def probe_entry(plan: Plan, probe: Probe, sizes: tuple[str, ...] = ("n_layer",)) -> dict[str, Any]:
    """One probe of ``run.model_search.probes``: the model's ``sizes`` (``n_layer``; a sequence
    search's ``seq_len`` and ``n_layer``), parameters, status and memory (bytes), and the tokens/s of
    its one measured step (indicative: one step after one warm-up)."""
    m = plan.cfg.model
    tokens = plan.layout.global_batch(plan.cfg.batch.micro_batch_size, plan.cfg.batch.grad_accum) * m.seq_len
    entry = {
        **{key: getattr(m, key) for key in sizes},
        "n_params": family(m).n_params(m),
        "status": probe.status,
        "peak_cuda_allocated_bytes": probe.peak_cuda_allocated_bytes,
        "estimated_peak_bytes": probe.estimated_peak_bytes,
        "tokens_per_s": tokens / probe.step_time_s if probe.step_time_s else None,
    }
    if probe.reason and not probe.fits:
        entry["reason"] = probe.reason
    return entry


def probe_notes(entry: dict[str, Any], probe: Probe) -> str:
    """The end of a probe's log line: why it does not fit, and whether it was reused."""
    why = f" ({probe.reason})" if probe.reason and not probe.fits else ""
    return why + (" (reused: resume=true)" if entry.get("reused") else "")


@dataclasses.dataclass(frozen=True)
class ModelAxis:
    """What the two searches of ``search.model=largest`` share as a
    :class:`flopsweep.sizesearch.SizeAxis` (the depth, :class:`NLayer`; the sequence,
    :class:`flopsweep.seqsearch.SeqLen`): each size validated on ``env`` (this machine's when None;
    a size validation refuses is ``refused``) and probed in ``model_search/<folder><n>/``, the record
    ``run.model_search``, and the driver :func:`grow_model`. A subclass names its size
    (``size_key``, ``folder``, ``sizes``, ``limit_key``) and gives :meth:`resolved`, :meth:`as_asked`,
    :meth:`found_line` and :meth:`record_sizes`."""

    env: Environment | None = None

    name: ClassVar[str]
    key: ClassVar[str] = SEARCH_DIR
    size_key: ClassVar[str]
    """The model key that grows, ``search.grow``'s value: ``n_layer``, ``seq_len``."""
    folder: ClassVar[str]
    """The probe folder's prefix: ``L<n_layer>``, ``T<seq_len>``."""
    sizes: ClassVar[tuple[str, ...]]
    """The model keys a probe entry carries."""
    limit_key: ClassVar[str]
    """The key that bounds the search, named when the largest size fits."""

    def wanted(self, cfg: RunConfig) -> bool:
        return cfg.search.model == "largest" and cfg.search.grow == self.size_key

    def bounds(self, cfg: RunConfig) -> tuple[int, int]:
        """The first size probed and the most (:meth:`flopsweep.sizesearch.SizeAxis.bounds`)."""
        raise NotImplementedError

    def resolved(self, plan: Plan, n: int, env: Environment) -> Plan:
        """``plan`` at size ``n``, validated and resolved on ``env``; raises ``ConfigError``."""
        raise NotImplementedError

    def as_asked(self, plan: Plan, n: int) -> Plan:
        """``plan`` at size ``n``, not validated: the record of a refused probe."""
        raise NotImplementedError

    def found_line(self, found: int, record: dict[str, Any], probes: int) -> str:
        """The log line of the size found after ``probes`` probes."""
        raise NotImplementedError

    def record_sizes(self, cfg: RunConfig) -> dict[str, Any]:
        """The record's keys between ``limit`` and ``memory_budget_gib``: the sizes held fixed."""
        raise NotImplementedError

    def probe(self, plan: Plan, n: int, probe_dir: Path, budget: int | None) -> tuple[dict[str, Any], Probe]:
        try:
            sized = self.resolved(plan, n, self.env or Environment.detect())
            probe = run_probe(sized, probe_dir / f"{self.folder}{n}", budget)
        except ConfigError as exc:
            sized, probe = self.as_asked(plan, n), refused(str(exc))
        return probe_entry(sized, probe, self.sizes), probe

    def reused_estimate(self, plan: Plan, n: int) -> int | None:
        return None  # a model search's entries keep their estimate

    def record(self, search: SizeSearch, result: int | None, **found: Any) -> dict[str, Any]:
        """``run.model_search``: ``{method, grow, start, limit, <record_sizes>, memory_budget_gib,
        gpu_memory_bytes, probes, result, n_params}`` (``start``, ``limit``, ``result``: the axis's
        bounds and the size found, null until the search ends)."""
        cfg = search.plan.cfg
        first, last = self.bounds(cfg)
        fit = next((p for p in search.probes if p[self.size_key] == result), None)
        return {
            "method": search.method,
            "grow": cfg.search.grow,
            "start": first,
            "limit": last,
            **self.record_sizes(cfg),
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
        on_probe: OnProbe | None = None,
        reuse: ReusedProbes | None = None,
    ) -> tuple[Plan, dict[str, Any]]:
        """:func:`grow_model` along this axis: ``plan`` at the largest size that trains, and the search's
        record; each probe prints one progress line.

        Args:
            on_probe: called after every probe with the record of the search so far (``result`` and
                ``n_params`` null), before the search goes on, and with the whole record once it has
                found its size: what a run interrupted before this returns records.
            reuse: probes of the record that ``resume=true`` runs again, by size
                (:func:`flopsweep.reuse.reusable_probes`): such a size is not probed again; its entry
                is taken over with ``"reused": true`` and its outcome stands.

        Raises:
            NothingFits: when even the first size does not fit (its probe's outcome).
            ProbeFailed: when a probe fails otherwise than by being too large (its status is not in
                :data:`flopsweep.sizesearch.DOES_NOT_FIT`: an ``error``): the search cannot tell whether
                a larger size fits.
        """
        return grow_model(self, plan, job_dir, on_probe=on_probe, reuse=reuse)


def grow_model(
    axis: ModelAxis,
    plan: Plan,
    job_dir: Path,
    *,
    on_probe: OnProbe | None = None,
    reuse: ReusedProbes | None = None,
) -> tuple[Plan, dict[str, Any]]:
    """The largest size of ``axis`` that trains, the one driver of :func:`find_largest_model` and
    :func:`flopsweep.seqsearch.find_longest_sequence`: the search on this machine
    (:meth:`SizeSearch.largest`), ``on_probe`` given the whole record once it has found its size, one
    log line for the size found (and one when it is the axis's most), and ``plan`` at that size,
    validated again.

    Returns:
        ``(plan at the size found, record)``; the record is ``metrics.json["run"]["model_search"]``.

    Raises:
        NothingFits, ProbeFailed: see :meth:`flopsweep.sizesearch.SizeSearch.largest`.
    """
    env = Environment.detect()
    axis = dataclasses.replace(axis, env=env)
    search = SizeSearch.start(axis, plan, job_dir, on_probe=on_probe, reuse=reuse)
    found = search.largest()
    result = search.record(found)
    if on_probe is not None:
        on_probe(result)
    log.info("%s", axis.found_line(found, result, len(search.probes)))
    if found == axis.bounds(plan.cfg)[1]:
        log.info("%s: %s=%d fits; raise it to search further", axis.name, axis.limit_key, found)
    return axis.resolved(plan, found, env), result


@dataclasses.dataclass(frozen=True)
class NLayer(ModelAxis):
    """The blocks as :class:`flopsweep.sizesearch.SizeAxis`: probes from ``search.min_n_layer`` to
    ``search.max_n_layer`` at the start micro batch, each validated at its size on ``env``
    (:func:`at_n_layer`, this machine's when None; a size validation refuses is ``refused``) and run
    in ``model_search/L<n>/``."""

    name = "search.model=largest"
    size_key = "n_layer"
    folder = "L"
    sizes = ("n_layer",)
    limit_key = "search.max_n_layer"

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

    def resolved(self, plan: Plan, n: int, env: Environment) -> Plan:
        return at_n_layer(plan, n, plan.cfg.model.name, env)

    def as_asked(self, plan: Plan, n: int) -> Plan:
        return at_n_layer_unchecked(plan, n, plan.cfg.model.name)

    def probe_line(self, count: int, n: int, entry: dict[str, Any], probe: Probe) -> str:
        return (
            f"search.model=largest: probe {count}: n_layer={n} ({format_count(entry['n_params'])} "
            f"parameters) -> {probe.status}{probe_notes(entry, probe)}"
        )

    def found_line(self, found: int, record: dict[str, Any], probes: int) -> str:
        return (
            f"search.model=largest: the largest that trains has n_layer={found} "
            f"({format_count(record['n_params'])} parameters), after {probes} probes"
        )

    def record_sizes(self, cfg: RunConfig) -> dict[str, Any]:
        """The micro batch the probes ran at."""
        return {"micro_batch_size": cfg.batch.micro_batch_size}


N_LAYER = NLayer()
"""``search.model=largest``'s axis of :class:`flopsweep.sizesearch.SizeSearch`."""


find_largest_model = N_LAYER.find
"""The largest ``model.n_layer`` of ``plan.cfg`` (validated, ``search.model == "largest"``) that trains at
the start micro batch on the plan's layout, and the record of the search: :meth:`ModelAxis.find` of
:data:`N_LAYER` (``find_largest_model(plan, job_dir, on_probe=..., reuse=...)``), probes in
``job_dir/model_search/L<n>/``; the record is ``metrics.json["run"]["model_search"]``: ``{method, grow,
start, limit, micro_batch_size, memory_budget_gib, gpu_memory_bytes, probes, result, n_params}``
(``gpu_memory_bytes``: the first GPU's, null off CUDA; what a resumed search compares before it reuses the
probes)."""

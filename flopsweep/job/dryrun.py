"""``plan=true``, the dry run: validate the job and estimate it, start nothing, write no record;
one row of ``plan.csv`` (:mod:`flopsweep.job.plantable`) per job.

A searched job (``batch=auto``, ``search.model=largest``) is estimated at the size its search
should reach by the memory estimate (:func:`flopsweep.sizesearch.estimated_largest`, the search
the probes make, over the estimate); the run's probes, which measure, decide what it measures.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
import sys
from pathlib import Path
from typing import Any

from flopsweep import cost, forecast
from flopsweep.autobatch import estimated_largest
from flopsweep.clusters import plans_gpu
from flopsweep.config import ConfigError, RunConfig
from flopsweep.hydrafiles import to_job_log
from flopsweep.job.placement import (
    NO_GPU_NOTE,
    nvme_path_note,
    offload_host_note,
    package_note,
    plan_environment,
    torch_device_name,
)
from flopsweep.job.planprint import plan_table
from flopsweep.job.plantable import (
    PLAN_COLUMNS,
    PLAN_FILE,
    append_plan_row,
    plan_csv,
    sweep_plan_file,
    unwritten_line,
    write_plan,
)
from flopsweep.job.result import JobInfo
from flopsweep.layout import Layout, Plan
from flopsweep.models import family
from flopsweep.modelsearch import at_n_layer, at_n_layer_unchecked, estimated_largest_n_layer
from flopsweep.plan import Environment, plan
from flopsweep.sizesearch import budget_bytes, cpu_allowance
from flopsweep.text import figure, plural, significant

log = logging.getLogger("flopsweep")


def plan_job(cfg: RunConfig, info: JobInfo) -> dict[str, Any]:
    """``plan=true``: validate the job and estimate it, start nothing, write no record.

    The job is placed on the machine it is planned for (:func:`plan_environment`: GPUs that are not
    here, several nodes). ``fits`` compares the estimate with ``plan_gpu``'s or
    ``plan_gpu_memory_gib``'s memory, else this machine's GPU, else (CPU) the estimate times the
    ranks with the host's available memory; blank for a GPU job placed on a machine without GPUs;
    ``fits_on`` says which. A ``search.model=largest`` job is estimated at the blocks the memory estimate
    fits (:func:`search_size`), a ``batch=auto`` job at the micro batch it fits
    (:func:`auto_batch_size`). Under ``-m`` appends one row (``model`` names the model,
    ``layout`` its parallel layout: :meth:`flopsweep.layout.Layout.label`) to ``plan.csv`` beside
    the job directories (the sweep directory, whose callback started the file afresh:
    :func:`flopsweep.job.plantable.start_plan_file`); a single run writes its ``plan.csv`` afresh, atomically,
    unless its row is ``invalid`` (a refusal, exit 2: no file written, an earlier plan's kept; the row's CSV
    in ``plan_csv``).

    With ``plan_clusters``: :func:`flopsweep.job.plandecide.decide_job` (every set-up of ``space``
    on each named cluster, ranked by ``objective``).

    Returns:
        ``{"status": "plan", "plan": row}``; ``row["status"]`` is ``ok`` or ``invalid``; an
        ``invalid`` row's ``reason`` is the run's one line (``Invalid config: KEY=VALUE: ... Fix: ...``)
        and its ``note`` says, apart, where the job was placed (``no GPU here: placed as an H100 SXM
        (capability 9.0, bf16)``), which the refusal may follow from (fp8 on an A100). A single
        plan whose GPU is refused (:func:`planned_gpu_problem`): ``{"status": "invalid", "error":
        {"message": line}}``, as ``run.py`` reports a refused run (exit 2).
    """
    if cfg.model.arch == "hf":  # a plan far below the file's context length says so (session 43)
        from flopsweep.models.hf import short_sequence_note

        with contextlib.suppress(ConfigError):  # a file the job refuses: its own line, below
            if note := short_sequence_note(cfg.model, info.overrides):
                print(note, file=sys.stderr, flush=True)
    if cfg.plan_clusters:  # the plan that decides: every set-up of space on each named cluster
        from flopsweep.job.plandecide import decide_job

        return decide_job(cfg, info)
    if info.job_num is None and (
        problem := planned_gpu_problem(cfg)
    ):  # the plan's own keys, not the set-up's
        return {"status": "invalid", "error": {"message": problem}, "plan": {}}
    asked, (cfg, on_cluster) = cfg.predict, predicted_cluster(cfg)
    env = Environment.detect()
    cfg, env, placed = plan_environment(cfg, env, torch_device_name() if env.cuda_available else None)
    placed = [*placed, *on_cluster]
    elsewhere = NO_GPU_NOTE in placed or env.planned_gpu is not None  # not this machine's GPU
    row = dict.fromkeys(PLAN_COLUMNS, "")
    row.update(
        job=info.job_num if info.job_num is not None else "",
        model=cfg.model.name or getattr(cfg.model, "config", ""),  # model=hf: check fills the name
        overrides=" ".join(info.overrides),
    )
    try:
        p, searched = search_size(plan(cfg, env, choices=info.choices), env, placed=elsewhere)
        p, batched = auto_batch_size(p, env, placed=elsewhere)
        calibrations = forecast.prediction_records(p.cfg)  # as a run reads them
    except ConfigError as exc:  # the run's one line; where it was planned (the GPU's capability) apart
        reason = predict_keys_said(str(exc), asked) if on_cluster else str(exc)
        row.update(status="invalid", reason=reason, note="; ".join(placed))
    else:
        row.update(plan_estimate(p, env, placed=elsewhere))
        asked_gpu = cfg.plan_gpu is not None or cfg.plan_gpu_memory_gib is not None
        other_hosts = (offload_host_note(p), nvme_path_note(p.cfg), package_note(p.cfg)) if asked_gpu else ()
        notes = (*placed, batched, searched, row["note"], *other_hosts)
        row["note"] = "; ".join(n for n in notes if n)
        here = env.cuda_available and p.device == "cuda" and not elsewhere
        gpu_name = (torch_device_name() if here else None) or cfg.plan_gpu  # its datasheet and NVLink
        row.update(plan_prediction(p, gpu_name, calibrations))
    out: dict[str, Any] = {"status": "plan", "plan": row}
    if info.job_num is None:  # a single run: its one row, never over a plan.csv there (the callback's check)
        path = Path(info.job_dir) / PLAN_FILE
        ranked = row.get("status") == "ok" and row.get("fits") is not False  # as rank_plan_file ranks
        row["rank"] = 1 if ranked and row.get("predicted_tokens_per_s_per_device") not in ("", None) else ""
        if (
            row.get("status") == "invalid"
        ):  # refused (run.py: its line, exit 2): no plan.csv, an earlier one kept
            out.update(plan_csv=plan_csv([row]))
        elif unwritten := write_plan(
            path, [row], overwrite=False
        ):  # the table still prints, from the row: run.py
            out.update(unwritten=unwritten, plan_csv=plan_csv([row]))
    else:
        path = sweep_plan_file(info)
        try:
            append_plan_row(path, row)
        except OSError as exc:  # the sweep's table is the callback's; this job's row is in its log
            log.warning("%s", unwritten_line(path, exc).removeprefix("flopsweep: "))
        to_job_log(plan_table(str(path), plans_gpu(cfg.plan_gpu), text=plan_csv([row])))
    return {**out, "plan_file": str(path)}


NO_PREDICTION = "no prediction: "
"""How a plan row's ``prediction_source`` begins where the step model gives none; then the house form
``KEY=VALUE: why. Fix: fix`` (:func:`no_prediction`)."""
INVALID = "Invalid config: "


def no_prediction(key: str, value: object, why: str, fix: str) -> str:
    """A plan row's ``prediction_source`` where it predicts nothing, in the house form of a refusal:
    ``no prediction: backend=single: runs one rank, ... Fix: pick backend=ddp or backend=fsdp``
    (:class:`flopsweep.config.ConfigError`'s words, its ``Invalid config:`` head replaced)."""
    return NO_PREDICTION + str(ConfigError(key, value, why, fix)).removeprefix(INVALID).replace(
        f"{key}={value!r}", f"{key}={value}", 1
    ).rstrip(".")


def predict_keys_said(reason: str, predict: Any) -> str:
    """A refusal of a job placed on ``predict.gpus_per_node`` x ``predict.nnodes`` (:func:`predicted_cluster`)
    in the keys the user gave: ``nproc_per_node`` there is ``predict.gpus_per_node`` and ``nnodes``
    ``predict.nnodes``, where set (``backend='single': runs at most 1 rank but predict.gpus_per_node x
    nnodes = 8. Fix: set predict.gpus_per_node=1, ...``; it said ``set nproc_per_node=1``, a key the
    command line never gave)."""
    if predict.gpus_per_node is not None:
        reason = re.sub(r"(?<![\w.])nproc_per_node\b", "predict.gpus_per_node", reason)
    if predict.nnodes is not None:
        reason = re.sub(r"(?<![\w.])nnodes\b", "predict.nnodes", reason)
    return reason


def planned_gpu_problem(cfg: RunConfig) -> str | None:
    """The line refusing the GPU a single plan plans for (``plan_gpu``, ``plan_gpu_memory_gib``:
    :func:`flopsweep.gpu_memory.planned_gpu_bytes`), else None. Not a set-up's refusal but the
    plan's own: its one row would be ``invalid`` for it, the line printed twice, exit 0. ``run.py``
    refuses the command line's before Hydra starts; this is a value from a file or an interpolation."""
    from flopsweep.gpu_memory import planned_gpu_bytes

    try:
        planned_gpu_bytes(cfg.plan_gpu, cfg.plan_gpu_memory_gib)
    except ConfigError as exc:
        return str(exc)
    return None


def predicted_cluster(cfg: RunConfig) -> tuple[RunConfig, list[str]]:
    """``cfg`` placed on the cluster ``predict.gpus_per_node`` x ``predict.nnodes`` names, when either
    is set (``nproc_per_node``, ``nnodes``), with the note that says so: the row's world size,
    layout, memory and ``fits`` then agree with its prediction (they once showed ``world_size 1``
    and ``fits False`` beside a 64-GPU prediction). ``(cfg, [])`` when neither is set."""
    from flopsweep.checks import check_bounds, validate_predict

    p = cfg.predict
    if p.gpus_per_node is None and p.nnodes is None:
        return cfg, []
    try:  # a value out of range stays where it is: validation refuses it by its own name
        check_bounds(cfg)
        validate_predict(cfg)
    except ConfigError:
        return cfg, []
    per_node = str(p.gpus_per_node) if p.gpus_per_node else cfg.nproc_per_node
    nodes = p.nnodes or cfg.nnodes
    cfg = dataclasses.replace(cfg, nproc_per_node=per_node, nnodes=nodes)
    return cfg, [f"placed on predict.nnodes x predict.gpus_per_node = {nodes} x {per_node}"]


def plan_estimate(p: Plan, env: Environment, *, placed: bool) -> dict[str, Any]:
    """The estimated columns of an ``ok`` plan row (status, model, world size, layout, counts, the
    peak per rank, ``fits``), and in ``note`` the estimate's method (:func:`flopsweep.memory.estimate`).
    The peak is :func:`flopsweep.memory.peak_bytes` (on the CPU the offloaded states too), the
    figure the launch refuses a CPU run by (:func:`flopsweep.job.hostcheck.check_free_host_memory`).
    ``memory_fix``: a GPU row that does not fit, the levers its config has not pulled, each estimated on
    that GPU, leaving the memory edge's margin free (:func:`flopsweep.memory_fix.gpu_memory_fix`). A GPU
    row that fits with under
    :data:`flopsweep.memory_edge.EDGE_HEADROOM` of the memory free has the memory edge's flag in ``note``
    (:func:`flopsweep.memory_edge.edge_note`): its predicted step counts no allocator retry."""
    from flopsweep.memory import estimate, peak_bytes
    from flopsweep.memory_edge import EDGE_HEADROOM, edge_note
    from flopsweep.memory_fix import gpu_memory_fix

    m = p.cfg.model
    est = estimate(p.cfg, p.layout)
    peak = peak_bytes(p.cfg, p.layout, est)
    tokens = p.layout.global_batch(p.cfg.batch.micro_batch_size, p.cfg.batch.grad_accum) * m.seq_len
    flops = family(m).model_flops(m, tokens, p.cfg.attention.density or 1.0)
    fits, fits_on = _fits(p, peak, env, placed=placed)
    on = plan_gpu_capacity(p, env, placed=placed) if p.device == "cuda" else None
    edge = edge_note(peak, on[0], p.cfg.backend.name) if on is not None and fits is True else ""
    gpu = on if fits is False else None
    return dict(
        memory_fix=gpu_memory_fix(p.cfg, gpu[0], margin=EDGE_HEADROOM)
        if gpu
        else "",  # the levers this config has left
        status="ok",
        model=m.name,
        world_size=p.world_size,
        layout=p.layout.label(p.cfg.parallel.pp_schedule),
        seq_len=m.seq_len,  # model=hf's default is 128, not its config.json's context
        n_params=family(m).n_params(m),
        model_flops_per_step=f"{flops:.4g}",
        est_peak_gib_per_rank=significant(peak / 2**30),  # a tiny model's 0.0123, not 0.0
        fits=fits,
        fits_on=fits_on,
        note="; ".join(n for n in (est.method, edge) if n),
    )


def _fits(p: Plan, peak: int, env: Environment, *, placed: bool) -> tuple[Any, str]:
    """``(fits, fits_on)`` of a plan row: whether the estimated peak per rank ``peak`` (bytes) fits
    the GPU's memory (:func:`plan_gpu_capacity`), else (CPU) the host's available memory for every
    rank of a node (``nproc_per_node``; with ``nnodes`` > 1 each node is taken to be like this host)
    with the launch's margin (:func:`flopsweep.hostmem.cpu_need_bytes`);
    blank when there is nothing to compare with (a GPU job ``placed`` on a machine without GPUs)."""
    gpu = plan_gpu_capacity(p, env, placed=placed)
    if gpu is not None:
        return peak <= gpu[0], gpu[1]
    if p.device == "cpu":  # every rank of this machine shares its memory
        from flopsweep import hostmem

        free = hostmem.available_bytes()
        shared = plural(p.nproc_per_node, "rank") + (" a node" if p.nnodes > 1 else "")
        fits = hostmem.cpu_need_bytes(peak, p.nproc_per_node) <= free  # the launch's margin, the same figure
        # free now, not the limit the checks hold a process to (plan._host_phrase's "23.5 GiB this machine
        # lets a process use"): a sweep's lines said both without saying which was which
        return fits, f"host ({free / 2**30:.1f} GiB free now for {shared})"
    return "", ""


_HOST_MARGIN = " (the host's available memory less the CPU's margin)"
"""How a CPU row's note names the memory its size is estimated within, without a smaller budget."""


def plan_search_capacity(p: Plan, env: Environment, *, placed: bool) -> tuple[int, str] | None:
    """The memory per rank a plan row's ``batch=auto`` or ``search.model=largest`` size is estimated
    within, ``(bytes, "N GiB" label)``: the GPU's (:func:`plan_gpu_capacity`) or
    ``search.memory_budget_gib``'s when smaller (the probes' budget, labelled
    ``(search.memory_budget_gib)``); on the CPU the probes' and the launch's own
    (:func:`flopsweep.sizesearch.cpu_allowance`: the host's available memory per rank less the launch's
    margin, ``(the host's available memory less the CPU's margin)``, or the budget where smaller), so
    that the size a CPU row names passes the launch's check (it had compared the bare estimate with the
    budget, and without one named the search's first size). None when no memory is known."""
    limits = []
    if (gpu := plan_gpu_capacity(p, env, placed=placed)) is not None:
        limits.append((gpu[0], ""))
    budget = budget_bytes(p.cfg)
    if p.device == "cpu" and gpu is None:
        allowed, _ = cpu_allowance(p.cfg, p.nproc_per_node, budget)
        limits.append((allowed, " (search.memory_budget_gib)" if allowed == budget else _HOST_MARGIN))
    elif budget is not None:
        limits.append((budget, " (search.memory_budget_gib)"))
    if not limits:
        return None
    capacity, which = min(limits)
    return capacity, f"{significant(capacity / 2**30)} GiB{which}"


def plan_gpu_capacity(p: Plan, env: Environment, *, placed: bool) -> tuple[int, str] | None:
    """The GPU memory a plan row is compared with, ``(bytes, label)`` (the label is ``fits_on``):
    the GPU asked for (``plan_gpu``, ``plan_gpu_memory_gib``:
    :func:`flopsweep.memory.planned_gpu_bytes`), else this machine's GPU 0; None for a CPU job and
    for a GPU job ``placed`` on a machine without GPUs (:func:`plan_environment`)."""
    from flopsweep.memory import planned_gpu_bytes

    asked = planned_gpu_bytes(p.cfg.plan_gpu, p.cfg.plan_gpu_memory_gib)
    if asked is not None:
        return asked
    if env.cuda_available and p.device == "cuda" and not placed:
        import torch

        props = torch.cuda.get_device_properties(0)
        return props.total_memory, f"{props.name} ({props.total_memory / 2**30:.1f} GiB)"
    return None


def auto_batch_size(p: Plan, env: Environment, *, placed: bool) -> tuple[Plan, str]:
    """A ``batch=auto`` plan at the micro batch its row is estimated and predicted at, and the note
    that says so; ``(p, "")`` for ``batch=fixed``.

    The search measures the largest micro batch that fits (without ``cudaMalloc`` retries), found
    only by running; the row takes the largest that the memory estimate fits
    (:func:`flopsweep.autobatch.estimated_largest`, at most ``batch.max_micro_batch_size``) in the
    GPU's memory (:func:`plan_gpu_capacity`), or in ``search.memory_budget_gib`` when that is smaller
    (the probes' budget; on the CPU the only memory known). Without either (a CPU plan without a
    budget, a GPU job placed on a machine without GPUs), or when even the search's first size
    (``batch.micro_batch_size``) is estimated over it, the row stays at that first size.
    """
    batch = p.cfg.batch
    if batch.name != "auto":
        return p, ""
    start = f"batch=auto: estimated at micro batch {batch.micro_batch_size}, the search's start"
    if (limit := plan_search_capacity(p, env, placed=placed)) is None:
        return p, start
    capacity, memory = limit
    size = estimated_largest(p.cfg, p.layout, capacity)
    if size is None:
        return p, f"{start}; even that is estimated over {memory}"
    cfg = dataclasses.replace(p.cfg, batch=dataclasses.replace(batch, micro_batch_size=size))
    largest = (
        "batch.max_micro_batch_size, which the estimate fits"
        if size == batch.max_micro_batch_size
        else "the largest the estimate fits"
    )
    measures = (  # a CPU probe is held to its estimate (sizesearch.budget_problem); no cudaMalloc there
        "the largest its probes fit, each held to its estimated peak within the same memory (the CPU has no "
        "cudaMalloc retries to count)"
        if p.device == "cpu"
        else "the largest its probes fit without cudaMalloc retries"
    )
    note = f"batch=auto: predicted at micro batch {size}, {largest} in {memory}; the run measures {measures}"
    return dataclasses.replace(p, cfg=cfg), note


def search_size(p: Plan, env: Environment, *, placed: bool = False) -> tuple[Plan, str]:
    """A ``search.model=largest`` plan at the size its row is estimated at, and the note that says
    so; ``(p, "")`` without a search. The search probes ``search.min_n_layer`` to
    ``search.max_n_layer`` blocks (:mod:`flopsweep.modelsearch`, from the first) and the size it
    measures is found only by running. As :func:`auto_batch_size` treats a micro batch, the row takes
    the largest size the memory estimate fits
    (:func:`flopsweep.modelsearch.estimated_largest_n_layer`) in the GPU's memory
    (:func:`plan_gpu_capacity`, blank for a GPU job ``placed`` on a machine without GPUs), or in
    ``search.memory_budget_gib`` when that is smaller (the probes' budget; on the CPU the only memory
    known); when even ``search.min_n_layer`` is estimated over it, that first probe. Without either
    memory a configured ``model.n_layer`` in that range is kept, one outside it is clamped into it
    (below: the search's first probe; above: the most it probes). A size other than ``model.n_layer``
    is validated again at that size. Either way the row's model is named ``<model>-L<n>``, as the
    search's probes and the run's record name it (:func:`flopsweep.modelsearch.at_n_layer`).

    Raises:
        ConfigError: when validation refuses the size (the search's probe would be refused).
    """
    s, n = p.cfg.search, p.cfg.model.n_layer
    if s.model != "largest":
        return p, ""
    if s.grow == "seq_len":
        return search_seq_len(p, env, placed=placed)
    span = f"{s.min_n_layer} to {s.max_n_layer} blocks"
    if (limit := plan_search_capacity(p, env, placed=placed)) is not None:
        capacity, memory = limit
        size = estimated_largest_n_layer(p.cfg, p.layout, capacity)
        if size is None:
            size = s.min_n_layer
            note = (
                f"search.model=largest: estimated at n_layer={size}, the search's first probe; even that "
                f"is estimated over {memory}"
            )
        else:
            largest = (
                "search.max_n_layer, which the estimate fits"
                if size == s.max_n_layer
                else "the largest the estimate fits"
            )
            note = (
                f"search.model=largest: estimated at n_layer={size}, {largest} in {memory}; the search "
                f"probes {span} and measures the largest that fits"
            )
    elif s.min_n_layer <= n <= s.max_n_layer:  # p is validated at n: only the name changes
        size, note = n, f"search.model=largest: estimated at model.n_layer={n}; the search probes {span}"
    else:
        size = min(max(n, s.min_n_layer), s.max_n_layer)
        which = "the search's first probe" if n < s.min_n_layer else "the most the search probes"
        note = (
            f"search.model=largest: estimated at n_layer={size}, {which} (model.n_layer={n} is outside "
            f"the {span} it probes)"
        )
    if size == n:
        return at_n_layer_unchecked(p, n, p.cfg.model.name), note
    return at_n_layer(p, size, p.cfg.model.name, env), note


def search_seq_len(p: Plan, env: Environment, *, placed: bool = False) -> tuple[Plan, str]:
    """A ``search.grow=seq_len`` plan at the sequence its row is estimated at, and the note that says
    so: the longest the memory estimate fits (:func:`flopsweep.seqsearch.estimated_longest_seq_len`)
    in the GPU's memory or ``search.memory_budget_gib`` (:func:`plan_search_capacity`), else the
    search's first length. A length other than ``model.seq_len`` is validated again.

    Raises:
        ConfigError: when validation refuses the length (the search's probe would be refused).
    """
    from flopsweep.search_rules import seq_len_bounds
    from flopsweep.seqsearch import at_seq_len, estimated_longest_seq_len

    first, last = seq_len_bounds(p.cfg)
    span = f"{first} to {last} tokens"
    limit = plan_search_capacity(p, env, placed=placed)
    size = estimated_longest_seq_len(p.cfg, p.layout, limit[0]) if limit is not None else None
    if size is None:
        size = first
        over = f"; even that is estimated over {limit[1]}" if limit is not None else ""
        note = f"search.grow=seq_len: estimated at seq_len={size}, the search's first probe{over}"
    else:
        note = (
            f"search.grow=seq_len: estimated at seq_len={size}, the longest the estimate fits in {limit[1]}; "
            f"the search probes {span} and measures the longest that fits"
        )
    if size == p.cfg.model.seq_len:
        return p, note
    return at_seq_len(p, size, env), note


def plan_prediction(
    p: Plan, device_name: str | None, records: list[tuple[str, dict[str, Any]]] | None = None
) -> dict[str, Any]:
    """``plan=true``'s predicted columns: the step time of the job on the cluster of
    ``predict.gpus_per_node`` x ``predict.nnodes`` (each null: the job's own), with its source
    (:func:`flopsweep.forecast.prediction`; no probe here: bandwidths from ``predict.*``, the
    calibration record's probe, profiled records or the NVLink of the GPU,
    :func:`flopsweep.forecast_link.link`),
    and the bandwidth's source after the compute's. The GPU is ``plan_gpu``'s when it is not this
    machine's, else this machine's, else the calibration record's. ``records``: the
    ``predict.calibration`` records already read (the plan row reads them as a run does,
    :func:`flopsweep.calibration_files.calibration_records`); None reads them."""
    cfg = p.cfg
    nodes = cfg.predict.nnodes or cfg.nnodes
    per_node = cfg.predict.gpus_per_node or p.nproc_per_node
    out: dict[str, Any] = {"predicted_world_size": per_node * nodes, "predicted_nnodes": nodes}
    if cfg.backend.name == "single" and per_node * nodes > 1:  # a Plan not placed on its cluster
        why = (
            f"runs one rank, and the prediction is of {per_node * nodes} (predict.nnodes={nodes} x "
            f"predict.gpus_per_node={per_node})"
        )
        fix = "pick backend=ddp or backend=fsdp, or set predict.gpus_per_node=1 and predict.nnodes=1"
        return {**out, "prediction_source": no_prediction("backend", "single", why, fix)}
    try:
        layout = (
            p.layout if per_node * nodes == p.world_size else Layout.resolve(cfg.parallel, per_node * nodes)
        )
        records = forecast.prediction_records(cfg) if records is None else records
    except ConfigError as exc:
        return {**out, "prediction_source": f"{NO_PREDICTION}{str(exc).removeprefix(INVALID)}"}
    network = ""
    if nodes > 1 and not (cfg.predict.inter_node_gbps or cfg.predict.intra_node_gbps):
        cfg, network = _default_network(cfg, device_name)
    unprobed = {"fallback": "plan=true runs no compute probe (a run with predict.probe=true does)"}
    shallow = {"fallback": "plan=true runs no layer probe (a run with predict.layer_probe=true does)"}
    made = forecast.prediction(
        cfg,
        layout,
        records,
        gpus_per_node=per_node,
        device_name=device_name,
        compute_probe=unprobed,
        layer_probe=shallow,
        device_given=p.device_given,
    )
    rate = made.get("tokens_per_s")
    spent = cost.budget(
        cfg.budget.tokens,
        tokens_per_s=rate or 0,
        world=per_node * nodes,
        joules_per_token=None,
        usd_per_gpu_hour=cfg.cost.usd_per_gpu_hour,
    )
    price = cfg.cost.usd_per_gpu_hour
    usd_mtok = cost.usd_per_million_tokens(price, world=per_node * nodes, tokens_per_s=rate or 0)
    fmt = lambda v, spec: "" if v is None else format(v, spec)  # noqa: E731
    return {
        **out,
        "predicted_iteration_time_s": fmt(made["iteration_time_s"], ".4g"),
        "predicted_tokens_per_s_per_device": fmt(made.get("tokens_per_s_per_device"), ".5g"),
        "predicted_mfu": fmt(made.get("mfu"), ".3f"),
        "predicted_budget_gpu_hours": fmt(made.get("budget_gpu_hours"), ".4g"),
        "predicted_budget_days": fmt(spent and spent["days"], ".4g"),
        "predicted_budget_usd": fmt(spent and spent["usd"], ".4g"),
        "predicted_usd_per_million_tokens": fmt(usd_mtok, ".4g"),
        "prediction_source": "; ".join(
            [
                made["source"],
                *([f"bandwidth {made['bandwidth_source']}"] if made.get("bandwidth_source") else []),
                *([network] if network else []),
            ]
        ),
    }


def _default_network(cfg: RunConfig, device_name: str | None) -> tuple[RunConfig, str]:
    """A multi-node prediction without ``predict.inter_node_gbps``: the bus bandwidth across nodes of
    the GPU's default network (:func:`flopsweep.clusters.default_network`: ``ib400`` for H100/H200,
    ``eth100`` for a PCIe inference card), and why it is the GPU's,
    and the words that name it; ``(cfg, "")`` for a GPU the peak table does not know."""
    from flopsweep.clusters import default_network, default_network_why
    from flopsweep.peaks import lookup

    row = lookup(device_name) if device_name else None
    if row is None:
        return cfg, ""
    net = default_network(row)
    predict = dataclasses.replace(cfg.predict, inter_node_gbps=net.inter_node_gbps)
    said = (
        f"across nodes the default network of {row.name}: {net.name}, "
        f"{figure(net.inter_node_gbps, 6)} GB/s busbw per "
        f"GPU ({net.source}; the default of {default_network_why(row)}; predict.inter_node_gbps= or "
        "plan_clusters=GPU:NxG:NETWORK names another)"
    )
    return dataclasses.replace(cfg, predict=predict), said

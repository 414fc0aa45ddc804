"""The pipeline's torch-free part (``parallel.pp > 1``): its rules on the config (a cross-axis rule of
:data:`flopsweep.rules.RULES`), the batch split it resolves before launch (:func:`resolve`, in
``plan.resolve``) and the stage arithmetic (:func:`stage_ids`, :func:`stage_layers`). The stages,
the schedule and the trainer are :mod:`flopsweep.pipeline` (torch), which re-exports these names.
Validation imports this module, never :mod:`flopsweep.pipeline`; the step-time model loads the
``pp`` degree's communication term from here (:func:`transfers`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from flopsweep.config import ConfigError, RunConfig
from flopsweep.layout import Layout, pipeline_keys, smaller_degree, stated_world_size
from flopsweep.limits import MAX_BY_KEY, MAX_INT

ARCHS = ("gpt2", "llama")
"""Model families whose modules have the pipeline parts (``embed``, ``block_args``, ``logits``,
``embedding_children``, ``head_children``)."""
MULTI_STAGE = ("Interleaved1F1B",)
"""Schedules that run several stages per rank."""
INTERLEAVED_STAGES_PER_RANK = 2
"""``parallel.pp_stages_per_rank`` when null for ``Interleaved1F1B`` (torchtitan's default)."""


def stages_per_rank(pp_schedule: str, pp_stages_per_rank: int | None) -> int:
    """Stages each pipeline rank holds: the key, else 2 for ``Interleaved1F1B`` and 1 otherwise."""
    if pp_stages_per_rank is not None:
        return pp_stages_per_rank
    return INTERLEAVED_STAGES_PER_RANK if pp_schedule in MULTI_STAGE else 1


def microbatches(cfg: RunConfig) -> int:
    """Pipeline micro-batches per optimizer step: ``parallel.pp_microbatches``, else one per stage."""
    p = cfg.parallel
    return p.pp_microbatches or p.pp * stages_per_rank(p.pp_schedule, p.pp_stages_per_rank)


def stage_ids(pp_rank: int, pp: int, per_rank: int) -> list[int]:
    """The stages of pipeline rank ``pp_rank``: ``pp_rank, pp_rank + pp, ...`` (torch's loop
    placement, ``generate_stage_to_rank_mapping(style="loop")``)."""
    return [pp_rank + k * pp for k in range(per_rank)]


def stage_layers(n_layer: int, n_stages: int, stage: int) -> range:
    """The block indices of ``stage`` in an even split of ``n_layer`` blocks into ``n_stages``.

    Raises:
        ValueError: when ``n_stages`` does not divide ``n_layer`` (validation refuses that first).
    """
    if n_layer % n_stages:
        raise ValueError(f"{n_stages} stages do not divide {n_layer} layers")
    per = n_layer // n_stages
    return range(stage * per, (stage + 1) * per)


def transfers(w: Any, *, gpus_per_node: int) -> list[Any]:
    """The ``pp`` degree's communication per optimizer step (:func:`flopsweep.steptime.transfers`),
    none at ``pp`` 1: at each stage boundary one send of a pipeline micro batch's activations
    (``s x h x b / tp`` per sequence) forward and one of its gradients backward per micro batch,
    never overlapped; a send counts as an all-gather of two ranks' worth of bytes (``bytes x 1/2`` at
    the bus bandwidth). The pipeline's group reaches every rank of the mesh (``pp`` varies slowest)."""
    from flopsweep.degrees import span
    from flopsweep.workload import Transfer

    if w.degree("pp") == 1:
        return []
    act = w.pp_microbatch_sequences * w.seq_len * w.n_embd * w.param_bytes / w.degree("tp")
    return [
        Transfer(
            what="pipeline activation send (forward and backward)",
            collective="all_gather",
            bytes=2 * act,
            count=2 * (w.pp_microbatches or w.grad_accum),
            group=2,
            across_nodes=span(w.degrees, "pp") > gpus_per_node,
            overlappable=False,
        )
    ]


def check(cfg: RunConfig) -> None:
    """The pipeline's rules on the config alone (a cross-axis rule of :data:`flopsweep.rules.RULES`).

    With ``parallel.pp=1`` a pipeline key is refused (the user expects it to matter). With
    ``pp > 1`` (``backend=fsdp`` only: :func:`flopsweep.layout.check_built`, which runs first, is the
    one place that refuses the other backends): a family with pipeline parts, stages
    (``pp x pp_stages_per_rank``) that divide ``model.n_layer``, more stages per rank only for
    ``Interleaved1F1B``, at least as many micro-batches as stages (and, interleaved, a multiple of
    ``max(1, m // pp)``: torch's rounds),
    no fp16 (its loss scaling is not in the schedule's backward) and no ``batch=auto``.

    Raises:
        ConfigError: naming the key, the value and the fix.
    """
    p = cfg.parallel
    if p.pp == 1:
        _check_unused(cfg)
        return
    if cfg.model.arch not in ARCHS:
        raise ConfigError(
            "parallel.pp",
            p.pp,
            f"model.arch={cfg.model.arch} has no pipeline split (built for {', '.join(ARCHS)})",
            "set parallel.pp=1, or pick a gpt2 or llama model",
        )
    _check_stages(cfg)
    _check_microbatches(cfg)
    if cfg.precision.name == "fp16":
        raise ConfigError(
            "precision",
            "fp16",
            "fp16 loss scaling is not built into the pipeline schedule's backward",
            "set precision=bf16 (no loss scaling), or parallel.pp=1",
        )
    if getattr(cfg.backend, "cpu_offload", False):
        raise ConfigError(
            "backend.cpu_offload",
            True,
            "FSDP2's CPU offload is not built into the pipeline's stages",
            "set backend.cpu_offload=false, or parallel.pp=1",
        )
    if cfg.batch.name == "auto":
        raise ConfigError(
            "batch",
            "auto",
            "the micro-batch search is not built for pipeline runs",
            "set batch=fixed with batch.micro_batch_size, or parallel.pp=1",
        )


def _check_unused(cfg: RunConfig) -> None:
    if keys := pipeline_keys(cfg.parallel):
        key = keys[0]  # the first one set
        raise ConfigError(
            key,
            getattr(cfg.parallel, key.removeprefix("parallel.")),
            "only matters for a pipeline, and parallel.pp=1 runs none",
            f"set parallel.pp=2 or more, or leave {key} out",
        )


def _check_stages(cfg: RunConfig) -> None:
    p, n_layer = cfg.parallel, cfg.model.n_layer
    v = stages_per_rank(p.pp_schedule, p.pp_stages_per_rank)
    if v < 1:
        raise ConfigError(
            "parallel.pp_stages_per_rank", v, "must be a positive integer", "leave it out (null)"
        )
    if v > 1 and p.pp_schedule not in MULTI_STAGE:
        raise ConfigError(
            "parallel.pp_stages_per_rank",
            v,
            f"parallel.pp_schedule={p.pp_schedule} runs one stage per rank",
            "set parallel.pp_schedule=Interleaved1F1B, or leave parallel.pp_stages_per_rank out",
        )
    if n_layer % p.pp:
        # A pp whose stages (pp x v) divide n_layer; pp=1 only when no pipeline key is set.
        keys = pipeline_keys(p)
        world = stated_world_size(cfg.nproc_per_node, cfg.nnodes)
        sizes = [n_layer // v] if n_layer % v == 0 else [n_layer]
        fix = smaller_degree("pp", p, world, sizes, least=2 if keys else 1)
        fixes = [fix, _n_layer_fix("set model.n_layer", p.pp * v) if _fits_world(p, world) else ""]
        raise ConfigError(
            "parallel.pp",
            p.pp,
            f"does not divide model.n_layer={n_layer} into equal stages",
            ", or ".join(f for f in fixes if f) or f"set parallel.pp to a divisor of {n_layer}",
        )
    if n_layer % (p.pp * v):
        # pp x d stages divide n_layer, so d <= n_layer / pp: a bounded search for any v (1 at least,
        # as pp divides n_layer)
        fewer = max(d for d in range(1, min(v, n_layer // p.pp + 1)) if n_layer % (p.pp * d) == 0)
        raise ConfigError(
            "parallel.pp_stages_per_rank",
            v,
            f"{p.pp} pipeline ranks x {v} stages per rank = {p.pp * v} stages do not divide "
            f"model.n_layer={n_layer}",
            ", or ".join(
                f
                for f in (
                    f"set parallel.pp_stages_per_rank={fewer}",
                    _n_layer_fix("model.n_layer", p.pp * v)
                    if _fits_world(p, stated_world_size(cfg.nproc_per_node, cfg.nnodes))
                    else "",
                )
                if f
            ),
        )


def _fits_world(parallel: Any, world_size: int | None) -> bool:
    """Whether the degrees as given resolve on ``world_size`` (:meth:`Layout.resolve`; True while it is
    ``auto``): a fix that changes only ``model.n_layer`` is offered only then. Was: ``backend=fsdp
    nproc_per_node=4 parallel.pp=3`` offered ``set model.n_layer to a multiple of 3``, and ``n_layer=3``
    was then refused because 3 does not divide the world size 4."""
    if world_size is None:
        return True
    try:
        Layout.resolve(parallel, world_size)
    except ConfigError:
        return False
    return True


def _n_layer_fix(verb: str, stages: int) -> str:
    """``"<verb> to a multiple of <stages>"`` when such an ``model.n_layer`` is inside its bound
    (:data:`flopsweep.limits.MAX_BY_KEY`), else "" (a fix must propose only values a run may ask for)."""
    return f"{verb} to a multiple of {stages}" if stages <= MAX_BY_KEY["model.n_layer"] else ""


def _check_microbatches(cfg: RunConfig) -> None:
    p = cfg.parallel
    stages = p.pp * stages_per_rank(p.pp_schedule, p.pp_stages_per_rank)
    m = microbatches(cfg)
    if m < stages:
        raise ConfigError(
            "parallel.pp_microbatches",
            m,
            f"is fewer pipeline micro-batches than the {stages} stages (some stage would idle a whole step)",
            f"set parallel.pp_microbatches={stages} or more, or leave it out ({stages})",
        )
    rounds = max(1, m // p.pp)
    if p.pp_schedule in MULTI_STAGE and m % rounds:
        near = p.pp * (m // p.pp)  # k x pp runs k rounds; >= the stages (a multiple of pp, <= m)
        raise ConfigError(
            "parallel.pp_microbatches",
            m,
            f"Interleaved1F1B runs max(1, micro-batches // pp) = {rounds} rounds, which must divide it",
            f"set parallel.pp_microbatches={near} (a multiple of parallel.pp={p.pp})",
        )


def resolve(cfg: RunConfig) -> RunConfig:
    """``cfg`` with the pipeline's derived values filled in (``parallel.pp_microbatches`` and
    ``parallel.pp_stages_per_rank``, so that the record says what ran), once ``batch.grad_accum`` is
    final (:func:`flopsweep.plan.resolve`); unchanged without a pipeline.

    Raises:
        ConfigError: when each step's local batch (``micro_batch_size x grad_accum`` sequences,
            ``grad_accum`` as ``batch.global_batch_size`` set it) does not split into the pipeline
            micro-batches; naming ``parallel.pp_microbatches``, the local batch and the fix.
    """
    p = cfg.parallel
    if p.pp == 1:
        return cfg
    m, b = microbatches(cfg), cfg.batch
    local = b.micro_batch_size * b.grad_accum
    if local % m:
        if b.global_batch_size is not None:  # it set grad_accum: the fix is a global batch
            dp = b.global_batch_size // local  # the data-parallel ranks: global = local x dp
            step = dp * math.lcm(b.micro_batch_size, m)
            change = (
                f"set batch.global_batch_size to a multiple of {step} (data-parallel ranks {dp} x "
                f"lcm(batch.micro_batch_size, {m}))"
            )
            change = change if step <= MAX_INT else ""
        else:  # grad_accum=m (or a multiple of m) makes one: offered only where it is in bounds
            change = f"set batch.micro_batch_size x batch.grad_accum to a multiple of {m}"
            change = change if m <= MAX_BY_KEY["batch.grad_accum"] else ""
        raise ConfigError(
            "parallel.pp_microbatches",
            m,
            f"does not split the local batch batch.micro_batch_size x batch.grad_accum = "
            f"{b.micro_batch_size} x {b.grad_accum} = {local} sequences into equal pipeline micro-batches",
            f"{change + ', or ' if change else 'set '}parallel.pp_microbatches to a divisor of {local} "
            "(at least the number of stages)",
        )
    v = stages_per_rank(p.pp_schedule, p.pp_stages_per_rank)
    return dataclasses.replace(cfg, parallel=dataclasses.replace(p, pp_microbatches=m, pp_stages_per_rank=v))

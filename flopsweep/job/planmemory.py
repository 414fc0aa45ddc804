"""The fix of a ``plan_clusters`` plan whose set-ups the rules accept are all over memory
(:func:`memory_fix`, the over-memory fix of :func:`flopsweep.job.planwhy.nothing_line`): each fix
evaluated on a cluster before it is said (:func:`flopsweep.plan_space.evaluate`), in the space's terms
(``space.*`` lists, ``plan_clusters``), and a job key beside them (``loss.chunk_tokens=4096``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from flopsweep.clusters import Cluster
from flopsweep.config import RunConfig
from flopsweep.dropped import CAUSE_FIXES, OVER_MEMORY
from flopsweep.plan_space import Row
from flopsweep.space import Space
from flopsweep.text import figure


def memory_fix(cfg: RunConfig, space: Space, clusters: list[Cluster], records: list) -> str:
    """The fix of a plan whose set-ups the rules accept are all over memory, itself checked by
    evaluating it (a fix that would not fit either is not suggested), the first of: the rule's own line
    where the rules refuse the set-up of least memory on every cluster (``compile_mode=max-autotune``
    refuses FSDP2 and ZeRO-3: listing them again is no fix); the set-up of least memory per rank
    (:data:`LEAST_MEMORY`: FSDP2, full checkpointing, micro batch 1, data parallel; the space's ``compile``
    where it lists one) on a named cluster where it fits (list it in ``space.*``); the levers of the named
    GPUs (:func:`lever_fixes`: ``loss.chunk_tokens=4096``, a job key beside the space, and context
    parallel, ``cpN`` in ``space.layouts``), each where it fits, with its estimate; the first cluster's
    GPU in more nodes of 8 (doubling up to ``nnodes``' bound; with the chunked loss where it is a lever
    the rules accept) where it fits and the rules accept it, at the cluster's own ``@PRICE``
    (``plan_clusters=[L4:2x8:eth100@0.8]``: without it ``objective=usd_per_million_tokens`` refused the
    fix); else none fits, said."""
    from flopsweep.limits import MAX_BY_KEY
    from flopsweep.plan_space import evaluate, same_gpu
    from flopsweep.space import Setup

    one_compile = space.compile[0] if len(set(space.compile)) == 1 else None  # space.compile=[true]: compiled
    least = Setup(**{**LEAST_MEMORY, "precision": space.precisions[0], "compile": one_compile})

    def on(c: Cluster, setup: Setup = least, job: RunConfig = cfg) -> Row | None:
        return evaluate(job, setup, c, same_gpu(records, c), min_headroom=space.min_headroom)

    said, lists = least_said(least), least_lists(least, space)
    first, refused = None, None
    for c in clusters:
        row = on(c)
        if refused is None and row is not None and row.status == "refused" and row.reason:
            refused = row.reason.rstrip(". ")
        if row is not None and row.status == "ok":
            gib = row.est_peak_gib_per_rank or 0
            return (
                f"list the set-up of least memory, {said}, which fits on {c.label} ({figure(gib)} GiB per "
                "rank): " + lists
            )
        if first is None and row is not None and row.status == OVER_MEMORY:
            first = (c, row)
    if first is None and refused is not None:  # the rules refuse it (compile_mode=max-autotune on fsdp)
        return f"the set-up of least memory, {said}, is refused by the rules, not by memory: {refused}"
    if first is None:  # unplaced everywhere: the placing's lines say why
        return CAUSE_FIXES[OVER_MEMORY]
    levers, chunked = lever_fixes(cfg, least, clusters, on, space)
    if levers:
        return levers
    c, row = first
    if chunked is not None and (again := on(c, least, chunked)) is not None and again.status == OVER_MEMORY:
        cfg, row = chunked, again  # the more GPUs with the loss over chunks
        said, lists = f"{said} with {CHUNK_KEY}", f"{CHUNK_KEY} {lists}"
    per = max(c.gpus_per_node, 8)
    nodes = 1
    while nodes <= MAX_BY_KEY["nnodes"]:
        if nodes * per > c.world_size:
            bigger = dataclasses.replace(c, nnodes=nodes, gpus_per_node=per)
            found = on(bigger, least, cfg)
            if found is not None and found.status == "ok":
                gib = found.est_peak_gib_per_rank or 0
                priced = bigger.label + ("" if c.usd_per_gpu_hour is None else f"@{c.usd_per_gpu_hour:.15g}")
                return (
                    f"name more GPUs in plan_clusters: {said} needs {figure(row.est_peak_gib_per_rank)} "
                    "GiB per "
                    f"rank on {c.label} (not the least of the space: the set-up whose memory per rank falls "
                    f"as GPUs are added); on {bigger.label} it fits ({figure(gib)} GiB per rank): "
                    f"plan_clusters=[{priced}] with {lists}"
                )
        nodes *= 2
    tried = "" if chunked is None else f" (and {CHUNK_KEY} with context parallel on its GPUs)"
    return (
        f"none found: even {said} needs {figure(row.est_peak_gib_per_rank)} GiB per rank on "
        f"{c.label}{tried}, "
        f"and no cluster of {c.gpu} up to {int(MAX_BY_KEY['nnodes'])}x{per} fits it and passes the rules; "
        "name GPUs with more memory in plan_clusters"
    )


def least_said(setup: Any) -> str:
    """A set-up of least memory in words: ``fsdp dp, full checkpointing, micro batch 1``."""
    what = f"{setup.checkpointing} checkpointing, micro batch {setup.micro_batch}"
    return f"{setup.backend} {setup.layout}, {what}"


def least_lists(setup: Any, space: Space) -> str:
    """The ``space.*`` overrides that add ``setup`` to ``space``, as typed back: each list that lacks the
    set-up's value, in full with it added (``space.backends=[single,fsdp]``, ``space.micro_batches=[1,2,4]``;
    a fix had said ``space.backends=[...,fsdp]``, which no one can type); every list in full where none
    lacks it."""
    pairs = [
        ("layouts", setup.layout),
        ("backends", setup.backend),
        ("checkpointing", setup.checkpointing),
        ("micro_batches", setup.micro_batch),
    ]
    out, full = [], []
    for key, value in pairs:
        have = list(dict.fromkeys(getattr(space, key)))
        listed = sorted({*have, value}) if key == "micro_batches" else [*have, value]
        full.append(f"space.{key}=[{','.join(map(str, listed if value not in have else have))}]")
        if value not in have:
            out.append(full[-1])
    return " ".join(out or full)


def lever_fixes(
    cfg: RunConfig, least: Any, clusters: list[Cluster], on: Any, space: Space
) -> tuple[str, RunConfig | None]:
    """The levers that make the set-up of least memory fit the named clusters' GPUs, tried before more
    or bigger GPUs (each the first cluster and step where it is ``ok``): ``loss.chunk_tokens=4096``
    (:data:`flopsweep.memory_fix.LOSS_CHUNK_TOKENS`) where it is a lever
    (:func:`flopsweep.memory_fix.chunk_lowers` at micro batch 1), a job key set beside the space; context
    parallel, ``cpN`` in ``space.layouts`` for ``N`` = 2, 4, ... up to a cluster's GPUs per node while a
    rank keeps :data:`flopsweep.memory_fix.CP_MIN_TOKENS` of the sequence; the two together where neither
    alone fits. ``on(cluster, setup, cfg)`` evaluates a set-up (the rules, the memory estimate within
    ``(1 - space.min_headroom)``); ``space`` the plan's (:func:`least_lists`). Returns the fixes joined
    by ``; or`` (``""``: none fits) and the config with the chunked loss (None where it is no lever)."""
    from flopsweep.memory_fix import CP_MIN_TOKENS, LOSS_CHUNK_TOKENS, chunk_lowers

    m, loss = cfg.model, cfg.loss
    chunked = None
    if chunk_lowers(m.seq_len, loss.chunk_tokens, m.vocab_size):
        chunked = dataclasses.replace(cfg, loss=dataclasses.replace(loss, chunk_tokens=LOSS_CHUNK_TOKENS))
    widest = max(c.gpus_per_node for c in clusters)
    degrees = [2**k for k in range(1, 8) if 2**k <= widest and m.seq_len // 2**k >= CP_MIN_TOKENS]
    cps = [dataclasses.replace(least, layout=f"cp{n}") for n in degrees]

    def fits(job: RunConfig | None, setups: list[Any], key: str = "") -> str:
        for setup in setups if job is not None else []:
            for c in clusters:
                row = on(c, setup, job)
                if row is not None and row.status == "ok":
                    gib, lists = row.est_peak_gib_per_rank or 0, least_lists(setup, space)
                    set_key = (
                        f"set {key} (a job key, beside the space: the loss over chunks) and " if key else ""
                    )
                    return (
                        f"{set_key}list {least_said(setup)}, which {'then ' * bool(key)}fits on {c.label} "
                        f"({figure(gib)} GiB per rank): {key + ' ' if key else ''}{lists}"
                    )
        return ""

    found = [fits(chunked, [least], CHUNK_KEY), fits(cfg, cps)]
    if not any(found):
        found.append(fits(chunked, cps, CHUNK_KEY))
    return "; or ".join(f for f in found if f), chunked


CHUNK_KEY = "loss.chunk_tokens=4096"
"""The chunked loss :func:`lever_fixes` sets beside the space
(:data:`flopsweep.memory_fix.LOSS_CHUNK_TOKENS`)."""


LEAST_MEMORY = {"backend": "fsdp", "layout": "dp", "checkpointing": "full", "micro_batch": 1}
"""The set-up of least memory per rank :func:`memory_fix` checks: FSDP2 shards the parameters,
gradients and optimizer state over every rank, full checkpointing keeps one block's activations."""

"""The memory edge: a set-up whose estimated peak leaves little of the GPU's memory free, where the CUDA
caching allocator is likely to free its cache and retry ``cudaMalloc`` (``metrics.cuda_alloc_retries``)
in every step, a cost the step-time model (:mod:`flopsweep.steptime`) does not count. Torch-free,
imports nothing of flopsweep at import.

The rule (issue 41; ``benchmarks/memory_edge.py`` derives it from every committed record): a set-up whose
predicted headroom, ``(capacity - estimate) / capacity`` (the estimate :func:`flopsweep.memory.peak_bytes`,
the capacity the GPU's memory as the peak table or the driver gives it), is under :data:`EDGE_HEADROOM` is
at the memory edge. The prediction says so in its ``source`` (:func:`mark`): ``metrics.predicted.source`` of
a run, ``plan=true``'s ``note`` and ``prediction_source``, the tuner's ranking line, with the records' count
of its backend (:data:`RETRIED`). No step-time penalty is added: of the 63 flagged records only 16 retried
(FSDP2: 15 of 33), and a penalty learnt from the others (their median measured over predicted step,
1.04) raises the leave-one-out median error of the flagged records from 17.8% to 21.7%, while it lowers
that of the ones that retried only from 54.6% to 52.8% (``benchmarks/memory_edge.py``, 2026-12-06).
"""

from __future__ import annotations

from typing import Any

EDGE_HEADROOM = 0.13
"""The predicted headroom (a share of the GPU's memory) under which a set-up is at the memory edge.
Of 289 ok CUDA records with ``cuda_alloc_retries`` (``benchmarks/memory_edge.py``), 17 retried; each of
them whose estimate was within 5% of its measured peak had a headroom of at most 12.0% (Llama 3.1 8B
under FSDP2 on one H200: 123.6 of 140.4 GiB), and above 13% only one retried, its estimate 5.4% under its
peak (a mixture-of-experts model, 24.3%); 13% is the next whole share above 12.0%."""

EDGE_WORDS = "at the memory edge: allocator retries possible"
"""How a prediction's ``source`` (and a plan row's ``note``) begins the flag (:func:`edge_note`)."""

RETRIED = {"fsdp": (15, 33), "deepspeed": (1, 14), "single": (0, 15), "ddp": (0, 1), None: (16, 63)}
"""Of the committed ok CUDA records under :data:`EDGE_HEADROOM` (``benchmarks/memory_edge.py``'s table),
how many retried and how many there were, per ``backend.name`` (None: every backend)."""

RETRY_COST = "2 or more times a step, up to 0.7 s a step over their prediction"
"""What the records say retries cost (``benchmarks/memory_edge.py``), in the flag's words."""


def retried_words(backend: str | None) -> str:
    """The records' count for ``backend`` (``backend.name``) in the flag's words, with every backend's
    beside it: ``15 of 33 committed fsdp records so close retried (all backends: 16 of 63)``; a backend
    without such a record says so."""
    every = RETRIED[None]
    if backend is None or backend not in RETRIED:
        return f"{every[0]} of {every[1]} committed records so close retried"
    n, of = RETRIED[backend]
    if of == 0:
        return f"no committed {backend} record so close (all backends: {every[0]} of {every[1]} retried)"
    return (
        f"{n} of {of} committed {backend} records so close retried (all backends: {every[0]} of {every[1]})"
    )


EDGE_MARGIN = 0.05
"""How far behind a ranked set-up at the memory edge one off it may be, a share of the objective's value,
and still be picked as its cluster's best (:func:`off_edge_pick`): 5%, the smallest expected error of a
prediction (``flopsweep.plan_assess.EXPECTED_ERROR``: calibrated, probed or the nearest measured set-up),
so a gap under it is one the prediction cannot tell apart, while the edge's retries cost up to 0.7 s a
step (:data:`RETRY_COST`)."""


def off_edge_pick(ranked: list[tuple[tuple[float, ...], bool]]) -> int:
    """The index of a cluster's best among ``ranked``: ``(figures, at the memory edge)`` of its rows, best
    first, ``figures`` the objective's value and the predicted tokens per second (what ranks ties: every
    row's dollars tie at a price of 0). 0, unless the first is at the edge and a later row off it has each
    figure within :data:`EDGE_MARGIN` of the first's (``|value - first| <= EDGE_MARGIN x |first|``, either
    direction of better: the rows are ranked already): then the first such row. ``[]`` raises IndexError."""
    first, edge = ranked[0]
    if not edge:
        return 0
    for i, (values, at) in enumerate(ranked[1:], 1):
        near = all(abs(v - f) <= EDGE_MARGIN * abs(f) for v, f in zip(values, first, strict=True))
        if near and not at:
            return i
    return 0


GIB = 2**30


def headroom(peak_bytes: float, capacity_bytes: float) -> float:
    """The predicted headroom: ``(capacity - peak) / capacity``, a share of the GPU's memory (below 0
    for an estimate over the memory).

    Raises:
        ValueError: a capacity that is not positive.
    """
    if not capacity_bytes > 0:
        raise ValueError(f"capacity_bytes={capacity_bytes!r}: must be positive (the GPU's memory in bytes)")
    return (capacity_bytes - peak_bytes) / capacity_bytes


def at_edge(
    peak_bytes: float | None, capacity_bytes: float | None, *, threshold: float = EDGE_HEADROOM
) -> bool:
    """Whether an estimated peak of ``peak_bytes`` per rank on a GPU of ``capacity_bytes`` is at the
    memory edge: its :func:`headroom` under ``threshold`` (:data:`EDGE_HEADROOM`). False when either is
    unknown (None) or the capacity is not positive."""
    if peak_bytes is None or capacity_bytes is None or not capacity_bytes > 0:
        return False
    return headroom(peak_bytes, capacity_bytes) < threshold


def edge_note(peak_bytes: float | None, capacity_bytes: float | None, backend: str | None = None) -> str:
    """The flag of a set-up at the memory edge (:func:`at_edge`), one line: ``at the memory edge:
    allocator retries possible (estimated 123.6 of 140.4 GiB per rank, 12.0% free, under 13%; ...): the
    predicted step counts none``, the records' count that of ``backend`` (:func:`retried_words`);
    ``""`` when it is not at the edge or a figure is unknown."""
    if not at_edge(peak_bytes, capacity_bytes):
        return ""
    assert peak_bytes is not None and capacity_bytes is not None  # at_edge said both are known
    free = headroom(peak_bytes, capacity_bytes)
    return (
        f"{EDGE_WORDS} (estimated {peak_bytes / GIB:.1f} of {capacity_bytes / GIB:.1f} GiB per rank, "
        f"{free:.1%} free, under {EDGE_HEADROOM:.0%}; {retried_words(backend)}, {RETRY_COST}): "
        "the predicted step counts no retry"
    )


def mark(
    predicted: dict[str, Any],
    peak_bytes: float | None,
    capacity_bytes: float | None,
    backend: str | None = None,
) -> dict[str, Any]:
    """``predicted`` (``metrics.predicted``, :func:`flopsweep.forecast.prediction`) with :func:`edge_note`
    (of ``backend``) after its ``source`` where the set-up is at the memory edge and it has a predicted
    step; else as given. Never twice (a source that has the flag already is kept)."""
    note = edge_note(peak_bytes, capacity_bytes, backend)
    source = str(predicted.get("source") or "")
    if not note or not predicted.get("iteration_time_s") or EDGE_WORDS in source:
        return predicted
    return {**predicted, "source": f"{source}; {note}" if source else note}


def device_capacity_bytes(device_name: str | None) -> int | None:
    """The memory of the GPU named ``device_name`` (``NVIDIA H200``, ``NVIDIA H100 80GB HBM3``) as the
    peak table gives it (:func:`flopsweep.gpu_memory.planned_gpu_bytes`), in bytes; None for a name
    the table does not know, one of several sizes without a size in it, or no name."""
    if not device_name:
        return None
    from flopsweep.config import ConfigError
    from flopsweep.gpu_memory import planned_gpu_bytes

    try:
        found = planned_gpu_bytes(device_name, None)
    except ConfigError:
        return None
    return None if found is None else found[0]

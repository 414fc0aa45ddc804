"""The communication of a step (:mod:`flopsweep.steptime`), torch-free: every degree's collectives
(:func:`transfers`; data parallel's, from the backend spec: :func:`data_parallel_transfers`), their
seconds at a :class:`~flopsweep.workload.Link`'s bus bandwidths (:func:`comm_seconds`, with
nccl-tests' :func:`busbw_factor`), where the bandwidths come from (the probe's
:func:`link_from_probe`, else :func:`assumed_link`: a share of the GPU's NVLink) and how much of the
data-parallel communication compute hides (:func:`calibrated_overlap` from profiled records, else
the backend's :func:`default_overlap`). :mod:`flopsweep.steptime` re-exports every name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from flopsweep import degrees as fdegrees
from flopsweep.backend_specs import BACKEND_SPECS, backend_spec
from flopsweep.degrees import STATE_SHARD_DEGREES, span
from flopsweep.peaks import PEAK_TABLE, lookup, node_link
from flopsweep.text import figure
from flopsweep.workload import COLLECTIVES, MODELLED, Link, PredictionError, Transfer, Workload

NVLINK_GBPS = {row.name: row.nvlink_gbps for row in PEAK_TABLE if row.nvlink_gbps is not None}
"""NVLink bandwidth per GPU and direction, GB/s, by :mod:`flopsweep.peaks` row name (a view of
:attr:`flopsweep.peak_row.PeakRow.nvlink_gbps`). A ring's bus bandwidth cannot exceed it. Every row's
link in a node, NVLink or not, by form factor: :attr:`flopsweep.peak_row.PeakRow.links`."""

ASSUMED_NVLINK_SHARE = 0.7
"""Without a probe, a configured bandwidth or profiled records, the bus bandwidth inside a node is
assumed to be this share of the GPUs' link per direction (:mod:`flopsweep.node_links`; nccl-tests
reach about 0.8 of it on an idle H100 node, 350-370 GB/s; inside a training step the collectives
share the GPU with compute): stated in ``bandwidth_source``."""

DEFAULT_OVERLAP = {name: spec.default_overlap for name, spec in BACKEND_SPECS.items()}
"""Share of the data-parallel communication hidden behind compute when no profiled record
(``metrics.breakdown``) of the backend calibrates it: assumed, and named ``assumed`` in
``overlap_source`` (:attr:`flopsweep.backend_specs.BackendSpec.default_overlap`; a backend no
spec knows: :data:`UNKNOWN_OVERLAP`)."""

NO_INTRA_NODE_FIX = (
    "set predict.intra_node_gbps=GBPS (the bus bandwidth in a node, nccl-tests' busbw: the GPU's link "
    "figure is not known here), or run on the ranks (the probe measures it)"
)
"""The fix a collective inside a node with no bandwidth names (:func:`comm_seconds`); the closing
line of a plan whose set-ups it left unpredicted says it too (:func:`flopsweep.plan_space.nothing_line`)."""
NO_INTER_NODE_FIX = (
    "set predict.inter_node_gbps=GBPS (the bus bandwidth across nodes per GPU, nccl-tests' busbw), "
    "or name the network in the cluster (plan_clusters=[GPU:NxG:ib400])"
)
"""The fix a collective across nodes with no bandwidth names (:func:`comm_seconds`)."""

UNKNOWN_OVERLAP = 0.5
"""The assumed overlap of a record's backend that no spec knows."""


def default_overlap(backend: str) -> float:
    """:data:`DEFAULT_OVERLAP` of ``backend``, :data:`UNKNOWN_OVERLAP` for a name no spec has."""
    spec = backend_spec(backend)
    return spec.default_overlap if spec else UNKNOWN_OVERLAP


def busbw_factor(collective: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor (``doc/PERFORMANCE.md``): busbw = algbw x factor, so the
    time of a call of ``bytes`` is ``bytes x factor / busbw``. ``(n-1)/n`` for all-gather,
    reduce-scatter and all-to-all (:data:`MODELLED`), ``2(n-1)/n`` for all-reduce; 0 for one rank.

    Raises:
        ValueError: an unknown collective or ``n < 1``.
    """
    if collective not in MODELLED or n < 1:
        raise ValueError(f"busbw_factor: collective {collective!r} over {n} ranks")
    base = (n - 1) / n
    return 2 * base if collective == "all_reduce" else base


def transfers(w: Workload, *, gpus_per_node: int) -> list[Transfer]:
    """The collectives of one optimizer step of ``w``, per rank (docs/prediction.md): every
    degree's term (:attr:`flopsweep.degrees.DegreeSpec.transfers`, in the table's order), summed.

    Data parallel (``dp_shard``'s term, :func:`data_parallel_transfers`: the backend spec's
    collectives). Tensor parallel (:func:`flopsweep.tensor_parallel.transfers`: sequence parallel's
    all-gathers and reduce-scatters of activations, per layer and micro batch, never overlapped).
    Pipeline (:func:`flopsweep.pipeline_plan.transfers`: a pipeline micro batch's activations sent
    forward and its gradients backward at each stage boundary, never overlapped). The mesh is
    ``(pp, dp_replicate, dp_shard, cp, tp)`` with ``tp`` innermost (:mod:`flopsweep.mesh`): a group
    spans nodes when the ranks it reaches (:func:`flopsweep.degrees.span`) pass ``gpus_per_node``.
    """
    out: list[Transfer] = []
    for spec in fdegrees.DEGREE_SPECS:
        term = spec.resolve("transfers")
        if term is not None:
            out += term(w, gpus_per_node=gpus_per_node)
    return out


def data_parallel_transfers(w: Workload, *, gpus_per_node: int) -> list[Transfer]:
    """The data-parallel collectives of one step (``dp_shard``'s term; none where neither the batches
    nor the backend's group span ranks: FSDP2 shards over ``dp_shard x cp``, so ``cp`` 8 on 8 ranks,
    one data-parallel rank, still gathers and reduce-scatters over 8): the backend spec's
    (:meth:`flopsweep.backend_specs.BackendSpec.collectives`) over its group
    (:meth:`~flopsweep.backend_specs.BackendSpec.dp_group`), or over the replicas.

    DDP all-reduces ``4P`` (fp32 gradients) over ``dp``; FSDP2 all-gathers ``bP`` (``b`` =
    :data:`PARAM_BYTES`) per micro batch in forward and again in backward (``reshard_after_forward``)
    and reduce-scatters ``4P``, over its shard group, and with ``dp_replicate > 1`` (HSDP) all-reduces
    its ``4P / shards`` gradient shard over the replicas; ZeRO-1/2 reduce-scatter ``bP`` gradients and
    all-gather ``bP`` updated parameters; ZeRO-3 all-gathers ``bP`` forward and backward per micro
    batch and reduce-scatters ``bP``. ``P`` is the parameters of one rank's part of the weights
    (over ``tp x pp``); under a pipeline a stage gathers once per step."""
    spec = backend_spec(w.backend)
    if spec is None or max(w.dp, spec.dp_group(w)) <= 1:
        return []
    p = w.n_params / w.weight_split
    micro = w.grad_accum if w.degree("pp") == 1 else 1  # with a pipeline, the stage gathers once per step
    group = spec.dp_group(w)
    inner = STATE_SHARD_DEGREES[-1]  # the shard group is strided by the dimensions inside it
    stride = span(w.degrees, inner) // w.degree(inner)
    replicate = w.replicas
    return [
        Transfer(
            what=c.what,
            collective=c.collective,
            bytes=c.bytes,
            count=c.count,
            group=replicate if c.across_replicas else group,
            across_nodes=stride * group * (replicate if c.across_replicas else 1) > gpus_per_node,
        )
        for c in spec.collectives(w, p=p, b=w.param_bytes, micro=micro)
    ]


def comm_seconds(items: Iterable[Transfer], link: Link) -> tuple[float, float]:
    """``(overlappable, critical)`` seconds of ``items`` at ``link``'s bus bandwidths.

    Raises:
        PredictionError: a collective over several ranks with no bandwidth known for it, in one line
            ``predict.intra_node_gbps=null: no bus bandwidth for all_gather (in a node). Fix: ...``
            (``predict.inter_node_gbps`` across nodes).
    """
    soft = hard = 0.0
    for x in items:
        bw = link.busbw_gbps(x.collective, across_nodes=x.across_nodes)
        if bw is None or bw <= 0:  # the key that gives it is unset (a set one is the link's figure)
            key, where, fix = (
                ("predict.inter_node_gbps", "across nodes", NO_INTER_NODE_FIX)
                if x.across_nodes
                else ("predict.intra_node_gbps", "in a node", NO_INTRA_NODE_FIX)
            )
            raise PredictionError(f"{key}=null: no bus bandwidth for {x.collective} ({where}). Fix: {fix}")
        seconds = x.count * x.bytes * busbw_factor(x.collective, x.group) / (bw * 1e9)
        if x.overlappable:
            soft += seconds
        else:
            hard += seconds
    return soft, hard


def link_from_probe(entries: Sequence[dict[str, Any]] | None, *, source: str) -> Link:
    """A :class:`Link` from ``system.interconnect`` entries (``{collective, bytes, busbw_gbps}``):
    per collective the bandwidth at its largest measured size (the closest to a run's
    parameter-sized messages). The probe's ranks count as one node."""
    best: dict[str, tuple[float, float]] = {}
    for e in entries or []:
        c, n, bw = e.get("collective"), e.get("bytes"), e.get("busbw_gbps")
        if c in COLLECTIVES and isinstance(n, int | float) and isinstance(bw, int | float) and bw > 0:
            if c not in best or n > best[c][0]:
                best[c] = (float(n), float(bw))
    return Link(intra={c: bw for c, (_, bw) in best.items()}, source=source)


def calibrated_overlap(breakdowns: Iterable[tuple[str, dict[str, Any]]]) -> tuple[float, str] | None:
    """The overlap ``1 - exposed_comm_s / comm_s``, median over profiled multi-rank records
    (``(name, metrics.breakdown)`` pairs with ``comm_s > 0``), and which records; None without any."""
    pairs = [
        (name, 1 - b["exposed_comm_s"] / b["comm_s"])
        for name, b in breakdowns
        if isinstance(b, dict) and (b.get("comm_s") or 0) > 0 and b.get("exposed_comm_s") is not None
    ]
    if not pairs:
        return None
    values = sorted(max(0.0, min(1.0, v)) for _, v in pairs)
    mid = len(values) // 2
    median = values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2
    return median, f"profiled: median of {len(pairs)} ({', '.join(n for n, _ in pairs[:3])})"


def assumed_link(device_name: str | None) -> Link | None:
    """The bus bandwidth assumed inside a node of ``device_name`` GPUs when nothing measured it:
    :data:`ASSUMED_NVLINK_SHARE` of the link between its GPUs per direction
    (:func:`flopsweep.peaks.node_link`: NVLink on SXM/OAM boards, the PCIe slot on PCIe cards,
    Infinity Fabric on MI300X; the vendor's datasheet), for every collective; None for a device the
    peak table does not know. ``source`` names the link and any form assumed (``A100-80GB``: SXM4).
    Nothing is assumed across nodes (``predict.inter_node_gbps``)."""
    found = node_link(device_name)
    if found is None:
        return None
    bw = ASSUMED_NVLINK_SHARE * found.gbps
    assumed = f" ({found.assumed})" if found.assumed else ""
    return Link(
        intra=dict.fromkeys(COLLECTIVES, bw),
        inter=dict.fromkeys(COLLECTIVES, 0.0),  # unknown: comm_seconds asks for predict.inter_node_gbps
        source=f"assumed: {figure(ASSUMED_NVLINK_SHARE, 6)} x {found.said} {figure(found.gbps, 6)} "
        f"GB/s per direction "
        f"= {figure(bw, 6)} GB/s busbw in a node{assumed}",
    )


def foreign_bandwidth(record: dict[str, Any], device_name: str | None, *, what: str = "probe") -> str | None:
    """Why the bandwidth ``record`` measured (its interconnect probe, ``what="probe"``, or its
    profiled collectives, ``"profile"``) is not the link of a run on ``device_name``, else None: a
    CPU record (``config.device`` or ``system.device_name`` ``cpu``: gloo over shared memory) for a
    GPU, a GPU record for the CPU, or a record of another GPU kind of the peak table (an A100's
    NVLink for an H100; its link is the named GPU's, :func:`assumed_link`). None without
    ``device_name``, or when the record names no device."""
    if not isinstance(device_name, str) or not device_name.strip():
        return None
    config, system = record.get("config") or {}, record.get("system") or {}
    theirs = system.get("device_name") if isinstance(system, dict) else None
    theirs = theirs if isinstance(theirs, str) and theirs.strip() else None
    device = config.get("device") if isinstance(config, dict) else None
    on_cpu = "cpu" in (str(device).lower(), str(theirs).strip().lower())
    mine_cpu = device_name.strip().lower() == "cpu"
    if on_cpu != mine_cpu and (on_cpu or theirs):
        return (
            f"a CPU record's {what} is not this GPU's link"
            if on_cpu
            else f"a GPU record's {what} is not a CPU's"
        )
    if mine_cpu or theirs is None:
        return None
    row, mine = (lookup(theirs), lookup(device_name))
    if row is not None and mine is not None and row is not mine:
        return f"a record of {row.name} GPUs: its {what} is not the {mine.name}'s link"
    return None

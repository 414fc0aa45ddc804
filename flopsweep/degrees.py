"""The degree table: one :class:`DegreeSpec` per kind of parallelism, everything the code knows of it.

A degree (``dp_replicate``, ``dp_shard``, ``tp``, ``pp``, ``cp``, ``ep``) is one line of
:data:`DEGREE_SPECS`: its key, its words in a message, the backends that build it, whether it is
built, its place in the device mesh (or the ranks it borrows), its role in data parallelism and in
FSDP2's mesh, and by import path its applier (the step of :func:`flopsweep.parallelize.parallelize`),
its communication per step (:func:`flopsweep.steptime.transfers`) and its per-micro-batch hook
(:func:`flopsweep.trainers.micro_context`). ``parallelize``, :mod:`flopsweep.mesh`, the trainers and
the step-time model iterate the table and name no degree; the lists below derive from it.
:mod:`flopsweep.layout` re-exports every name here.

Torch-free, and imports nothing of flopsweep but :mod:`flopsweep.lazy` (when a path is resolved).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

PHASES = ("model", "split", "data")
"""When a degree's applier runs in :func:`flopsweep.parallelize.parallelize`: ``model`` on the whole
model before activation checkpointing and compile (tensor, context, expert parallel), ``split``
after compile (the pipeline's stage), ``data`` last (the data-parallel wrapper); in
:data:`DEGREE_SPECS` order within a phase."""


@dataclass(frozen=True, kw_only=True)
class DegreeSpec:
    """One kind of parallelism: a ``parallel.<name>`` key, a ``system.parallel`` key, a
    :class:`Layout` field, and everything the code does with it. The torch code it names (applier,
    micro-batch hook) and its step-time term are ``"flopsweep.<module>:<function>"`` paths, loaded
    by :mod:`flopsweep.lazy` when called, so that this table stays torch-free."""

    name: str
    """The key: ``parallel.<name>`` in the config, ``system.parallel.<name>`` in the record, and its
    dimension's name in the device mesh (:mod:`flopsweep.mesh`)."""
    what: str
    """What it is called in a message (``tensor parallelism``)."""
    backends: tuple[str, ...] | None = ("fsdp",)
    """The backends that build it above 1; None: every backend (data parallelism)."""
    built: bool = True
    """False: a value above 1 is refused before launch, on any backend (:func:`check_built`), and
    stops on the rank (:func:`flopsweep.parallelize.parallelize`)."""
    mesh_position: float | None = None
    """Its place in the world mesh, a sort key, slowest-varying first (:func:`mesh_order`): a mesh
    dimension and a factor of the world size. None: no dimension of its own (``ep`` borrows the
    ranks of others)."""
    borrows: tuple[str, ...] = ()
    """The mesh degrees whose ranks it splits instead (``ep``: ``dp_shard x cp x tp``, torchtitan's
    ``efsdp x ep``): its value must divide their product (:meth:`Layout.resolve`), and the mesh
    makes its sub-mesh from them (:func:`flopsweep.mesh.build_mesh`)."""
    batches: bool = False
    """Its ranks see different batches (data parallelism: :attr:`Layout.dp`); the other mesh degrees
    split the work of one batch (:attr:`Layout.non_data_parallel_size`)."""
    fsdp: str | None = None
    """Its place in FSDP2's mesh (:attr:`flopsweep.mesh.WorldMesh.fsdp`): ``replicate`` (HSDP's replicas),
    ``shard`` (the model states are sharded over it: ``dp_shard``, and ``cp``, whose ranks hold the
    same parameters, torchtitan's ``dp_shard_cp``), or None (not in it)."""
    splits_weights: bool = False
    """Each of its ranks holds a part of the model's weights (tensor parallel, pipeline stages)."""
    phase: str = "model"
    """When its applier runs (:data:`PHASES`)."""
    apply: str | None = None
    """``module:function`` of its applier, ``(model, step) -> model`` (``step``: a
    :class:`flopsweep.parallelize.DegreeStep`), called at every degree (at 1 it leaves the model as
    it is); None: nothing of its own to apply (``dp_replicate``: FSDP2's mesh holds it)."""
    transfers: str | None = None
    """``module:function`` of its communication in one optimizer step, ``(w, *, gpus_per_node) ->
    [Transfer]`` (``w``: a :class:`flopsweep.steptime.Workload`), called at every degree;
    :func:`flopsweep.steptime.transfers` sums every degree's. Its module imports no torch."""
    micro_context: str | None = None
    """``module:function`` ``(layout, mesh) -> hook or None``, the hook ``(micro_batch) -> context
    manager`` that each micro batch's forward and backward run in (tensor parallel's
    ``loss_parallel``; context parallel's sequence shard), :func:`flopsweep.trainers.micro_context`."""
    varies_shapes: bool = False
    """Its tensors' shapes change from step to step (``ep``: the tokens a rank's experts receive follow the
    router's choices, so the experts' matmuls meet new row counts). A CPU's matmul library (oneDNN) builds a
    kernel per new shape and keeps it: the layer probe's copies, first in the process, pay those builds at
    every step and the run, which replays their shapes, does not (:func:`flopsweep.layer_probe.replays`)."""
    header: str = ""
    """Its column header in the analysis tables (the name when empty)."""
    column: bool = True
    """An analysis column of its own (:data:`COLUMN_DEGREES`); the degrees not built yet are not."""

    @property
    def short(self) -> str:
        """The column header: :attr:`header`, else the name."""
        return self.header or self.name

    @property
    def mesh(self) -> bool:
        """A dimension of the world mesh (:attr:`mesh_position` set), a factor of the world size."""
        return self.mesh_position is not None

    def resolve(self, field: str) -> Any:
        """The function its ``field`` (``apply``, ``transfers``, ``micro_context``) names, imported
        now (:func:`flopsweep.lazy.resolve`); None when it names none."""
        from flopsweep import lazy

        path = getattr(self, field)
        return lazy.resolve(path) if path else None


DEGREE_SPECS: tuple[DegreeSpec, ...] = (
    DegreeSpec(
        name="dp_replicate",
        what="HSDP (replicas of sharded groups)",
        header="dp_rep",
        mesh_position=1,
        batches=True,
        fsdp="replicate",
        phase="data",
    ),
    DegreeSpec(
        name="dp_shard",
        what="data parallelism",
        backends=None,
        mesh_position=2,
        batches=True,
        fsdp="shard",
        phase="data",
        apply="flopsweep.parallelize:apply_data_parallel",
        transfers="flopsweep.steptime:data_parallel_transfers",
    ),
    DegreeSpec(
        name="tp",
        what="tensor parallelism",
        mesh_position=4,
        splits_weights=True,
        apply="flopsweep.tensor_parallel:apply_degree",
        transfers="flopsweep.tensor_parallel:transfers",
        micro_context="flopsweep.tensor_parallel:micro_context",
    ),
    DegreeSpec(
        name="pp",
        what="pipeline parallelism",
        mesh_position=0,
        splits_weights=True,
        phase="split",
        apply="flopsweep.pipeline:apply_split",
        transfers="flopsweep.pipeline_plan:transfers",
    ),
    DegreeSpec(
        name="cp",
        what="context parallelism",
        mesh_position=3,
        fsdp="shard",
        apply="flopsweep.context_parallel:apply_degree",
        transfers="flopsweep.context_parallel:transfers",
        micro_context="flopsweep.context_parallel:micro_context",
    ),
    DegreeSpec(
        name="ep",
        what="expert parallelism",
        borrows=("dp_shard", "cp", "tp"),
        apply="flopsweep.expert_parallel:apply_degree",
        transfers="flopsweep.expert_parallel:transfers",
        varies_shapes=True,
    ),
)
"""The degrees, in ``system.parallel``'s key order. A new degree is one line here (naming its
applier, step-time term and micro-batch hook, which live in its own module), one :class:`Layout`
field and one :class:`~flopsweep.config.ParallelConfig` key: ``parallelize``, the mesh, the trainers
and the step-time model read this table, never a degree's name (docs/extending.md, "What a change
costs")."""
DEGREE = {spec.name: spec for spec in DEGREE_SPECS}
""":data:`DEGREE_SPECS` by name."""
DEGREES = tuple(spec.name for spec in DEGREE_SPECS)
"""The degree names, as ``parallel.<name>`` keys and ``system.parallel`` keys."""
MESH_DEGREES = tuple(spec.name for spec in DEGREE_SPECS if spec.mesh)
"""The degrees whose product is the world size (all but ``ep``), in :data:`DEGREES` order."""
COLUMN_DEGREES = tuple(spec.name for spec in DEGREE_SPECS if spec.column)
"""The degrees the analysis shows as columns (``flopsweep.columns``, ``analysis.fields``)."""


def mesh_order(specs: Iterable[DegreeSpec] | None = None) -> tuple[str, ...]:
    """The mesh degrees of ``specs`` (default: :data:`DEGREE_SPECS` as it is when called) by
    :attr:`DegreeSpec.mesh_position`, from slowest to fastest varying over the global rank."""
    specs = DEGREE_SPECS if specs is None else specs
    return tuple(s.name for s in sorted((s for s in specs if s.mesh), key=lambda s: s.mesh_position))


MESH_ORDER = mesh_order()
""":data:`MESH_DEGREES` as mesh dimensions, from slowest to fastest varying over the global rank:
torchtitan's ``(pp, dp_replicate, dp_shard, cp, tp)``, ``tp`` fastest."""
DATA_DEGREES = tuple(spec.name for spec in DEGREE_SPECS if spec.batches)
"""The degrees whose ranks see different batches (:attr:`Layout.dp`)."""
SAME_BATCH_DEGREES = tuple(spec.name for spec in DEGREE_SPECS if spec.mesh and not spec.batches)
"""The mesh degrees whose ranks share a batch and split its work (:attr:`Layout.non_data_parallel_size`)."""
STATE_SHARD_DEGREES = tuple(spec.name for spec in DEGREE_SPECS if spec.fsdp == "shard")
"""The degrees FSDP2 shards the model states over (:attr:`Layout.state_shards`, FSDP2's shard mesh)."""
REPLICA_DEGREES = tuple(spec.name for spec in DEGREE_SPECS if spec.fsdp == "replicate")
"""The degrees FSDP2 replicates over (HSDP's replicas), outside its shard mesh."""
SHAPE_VARYING_DEGREES = tuple(spec.name for spec in DEGREE_SPECS if spec.varies_shapes)
"""The degrees whose step's tensor shapes change from step to step (:attr:`DegreeSpec.varies_shapes`)."""
WEIGHT_SPLIT_DEGREES = tuple(spec.name for spec in DEGREE_SPECS if spec.splits_weights)
"""The degrees over which each rank holds a part of the weights (tensor parallel, pipeline)."""


def product(degrees: Mapping[str, Any] | Any, names: Iterable[str]) -> int:
    """The product of the degrees ``names`` in ``degrees``: a mapping (a record's
    ``system.parallel``, a :class:`flopsweep.steptime.Workload`'s) or an object holding them as
    attributes (a :class:`Layout`); a name it lacks (a record from before the degree) counts 1."""
    if isinstance(degrees, Mapping):
        return math.prod(int(degrees.get(n, 1) or 1) for n in names)
    return math.prod(int(getattr(degrees, n, 1) or 1) for n in names)


def span(degrees: Mapping[str, Any] | Any, outermost: str) -> int:
    """Consecutive global ranks that a group reaches whose slowest-varying mesh dimension is
    ``outermost``: the product of ``outermost`` and every dimension that varies faster
    (:data:`MESH_ORDER`, row-major). A group spans nodes when this passes the ranks per node."""
    return product(degrees, MESH_ORDER[MESH_ORDER.index(outermost) :])


BUILT = {spec.name: 1 for spec in DEGREE_SPECS if not spec.built}
"""Degrees that may not exceed these values yet, on any backend (none: every degree is built;
``flopsweep.pipeline.check`` has the pipeline's own rules)."""
LAYOUT_BACKENDS = {spec.name: spec.backends for spec in DEGREE_SPECS if spec.backends is not None}
"""The backends that build each degree above 1: FSDP2 on the device mesh (HSDP, tensor parallel).
DDP is replicate-only data parallelism and ``single`` one rank: a layout on either is refused;
DeepSpeed stays data-parallel (ZeRO, ZeRO++)."""
HSDP_BACKENDS = LAYOUT_BACKENDS["dp_replicate"]
"""Backends that build HSDP (``parallel.dp_replicate > 1``)."""

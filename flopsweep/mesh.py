"""The device mesh of a run, built from the degree table (:data:`flopsweep.degrees.DEGREE_SPECS`).

:func:`build_mesh` makes one ``DeviceMesh`` over all ranks per rank, a dimension for each degree
with a :attr:`~flopsweep.degrees.DegreeSpec.mesh_position` (degree 1 included, so that code asks
for a dimension by name whatever the layout), in that order: torchtitan's ``(pp, dp_replicate,
dp_shard, cp, tp)``, ``tp`` varying fastest, so that tensor-parallel peers are neighbouring ranks.
Beside it, it keeps the sub-meshes the specs declare, by name (:class:`WorldMesh`):

- FSDP2's mesh (:attr:`WorldMesh.fsdp`): the ``shard`` degrees above 1 flattened into one
  dimension (torchtitan's ``dp_shard_cp``; ``dp_shard`` alone while ``cp`` is 1), after the
  ``replicate`` degrees above 1 (HSDP: 2-D);
- a borrowing degree's meshes (``ep`` above 1): the ranks of the degrees it borrows, flattened and
  split into ``(<name>_rest, <name>)``, the degree fastest (``mesh["ep"]``, and ``mesh["ep_rest"]``,
  the ranks it leaves: torchtitan's ``efsdp``, over which the experts are sharded).

A flattened or split dimension is made only where two degrees above 1 share it, so a layout that
needs none makes no process group beyond ``init_device_mesh``'s. Nothing here names a degree: a new
one is a line of the table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from flopsweep import degrees as fdegrees

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh


def _size(layout: Any, name: str) -> int:
    """``name``'s degree in ``layout``; 1 for a degree the layout has no field for."""
    return int(getattr(layout, name, 1))


def fsdp_dims(layout: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(replicate, shard)``: the degrees of FSDP2's mesh on ``layout``: the ``replicate`` degrees
    above 1, and the ``shard`` degrees above 1 (the first ``shard`` degree, ``dp_shard``, when none
    is), in mesh order (:attr:`~flopsweep.degrees.DegreeSpec.fsdp`)."""
    order = fdegrees.mesh_order()
    specs = sorted((s for s in fdegrees.DEGREE_SPECS if s.fsdp and s.mesh), key=lambda s: order.index(s.name))
    replicate = tuple(s.name for s in specs if s.fsdp == "replicate" and _size(layout, s.name) > 1)
    shards = [s.name for s in specs if s.fsdp == "shard"]
    shard = tuple(n for n in shards if _size(layout, n) > 1) or tuple(shards[:1])
    return replicate, shard


@dataclass
class WorldMesh:
    """The world ``DeviceMesh`` (:attr:`world`) and the sub-meshes the degree table declares, by name.

    ``mesh[name]`` is a degree's 1-D sub-mesh (a mesh dimension, or a borrowing degree's own),
    ``mesh[name, name]`` several dimensions of the world mesh; :attr:`fsdp` is FSDP2's mesh.
    """

    world: DeviceMesh
    fsdp: DeviceMesh
    """FSDP2's mesh: 1-D over the state-shard degrees, or 2-D ``(replicate, shard)`` for HSDP."""
    named: dict[str, DeviceMesh] = field(default_factory=dict)
    """The flattened and borrowed sub-meshes, by name (``dp_shard_cp``, ``ep``)."""

    def __getitem__(self, names: str | tuple[str, ...]) -> DeviceMesh:
        if isinstance(names, str) and names in self.named:
            return self.named[names]
        return self.world[names]

    @property
    def mesh(self) -> Any:
        """The world mesh's rank tensor (``DeviceMesh.mesh``), in mesh order."""
        return self.world.mesh

    @property
    def device_type(self) -> str:
        return self.world.device_type


def build_mesh(layout: Any, device_type: str) -> WorldMesh:
    """The world mesh of ``layout`` and its declared sub-meshes (module docstring).

    The process group must be initialised, with ``layout.world_size`` ranks.

    Raises:
        ValueError: when the world size of the process group is not the product of the mesh degrees.
    """
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    order = fdegrees.mesh_order()
    shape = tuple(_size(layout, name) for name in order)
    world = dist.get_world_size()
    if world != math.prod(shape):
        raise ValueError(f"the layout {layout.as_dict()} has {math.prod(shape)} ranks; the world has {world}")
    mesh = init_device_mesh(device_type, shape, mesh_dim_names=order)
    named: dict[str, DeviceMesh] = {}
    replicate, shard = fsdp_dims(layout)
    if len(shard) > 1:  # torchtitan's dp_shard_cp: the ranks that hold the same parameters
        flat = "_".join(shard)
        named[flat] = _flattened(mesh, shard, ((flat, None),))
        fsdp = named[flat]
        if replicate:  # HSDP over it: (replicas, the flattened shard dimension)
            fsdp = _flattened(
                mesh, replicate + shard, (*((n, _size(layout, n)) for n in replicate), (flat, None))
            )
    else:
        fsdp = mesh[replicate + shard] if replicate else mesh[shard[0]]
    for spec in fdegrees.DEGREE_SPECS:
        size = _size(layout, spec.name)
        if spec.borrows and size > 1:  # its ranks split the borrowed ones, the degree fastest
            dims = tuple(d for d in order if d in spec.borrows)
            rest = f"{spec.name}_rest"  # the ranks it leaves (torchtitan's efsdp for the experts)
            split = _flattened(mesh, dims, ((rest, None), (spec.name, size)))
            named[spec.name], named[rest] = split[spec.name], split[rest]
    return WorldMesh(world=mesh, fsdp=fsdp, named=named)


def _flattened(mesh: DeviceMesh, dims: tuple[str, ...], into: Any) -> DeviceMesh:
    """``dims`` of ``mesh`` (adjacent in mesh order) flattened into one dimension, then split into
    ``into``: ``(name, size)`` pairs, one size None (the rest). One pair: the flattened mesh."""
    sub = mesh[dims] if len(dims) > 1 else mesh[dims[0]]
    total = sub.size()
    names = tuple(n for n, _ in into)
    known = math.prod(s for _, s in into if s is not None)
    sizes = tuple(total // known if s is None else s for _, s in into)
    flat = sub._flatten("_".join(dims) + "_flat" if len(into) > 1 else names[0])
    return flat if len(into) == 1 else flat._unflatten(0, sizes, names)

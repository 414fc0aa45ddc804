"""The device mesh of a run: one ``DeviceMesh`` over all ranks, named by :data:`flopsweep.layout.MESH_ORDER`.

:func:`build_mesh` makes the world mesh of a :class:`~flopsweep.layout.Layout` once per rank, with
every dimension present (degree 1 included), so that code asks for a dimension by name whatever the
layout. The sub-meshes that the parallel APIs take come from :func:`dp_mesh` (FSDP2's
``fully_shard``: 1-D ``dp_shard``, or 2-D ``(dp_replicate, dp_shard)`` for HSDP), :func:`tp_mesh`
(``parallelize_module``) and :func:`pp_mesh` (``torch.distributed.pipelining`` stages).

The rank order is torchtitan's (``torchtitan/distributed/parallel_dims.py``): ``tp`` varies
fastest, so that tensor-parallel peers are neighbouring ranks, on one node when ``tp`` divides the
ranks per node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flopsweep.layout import MESH_ORDER, Layout

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh


def build_mesh(layout: Layout, device_type: str) -> DeviceMesh:
    """The world mesh, shape ``(pp, dp_replicate, dp_shard, cp, tp)``, dims named as :data:`MESH_ORDER`.

    The process group must be initialised, with ``layout.world_size`` ranks.

    Raises:
        ValueError: when the world size of the process group is not ``layout.world_size``.
    """
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    world = dist.get_world_size()
    if world != layout.world_size:
        raise ValueError(
            f"the layout {layout.as_dict()} has {layout.world_size} ranks; the world has {world}"
        )
    shape = tuple(getattr(layout, name) for name in MESH_ORDER)
    return init_device_mesh(device_type, shape, mesh_dim_names=MESH_ORDER)


def dp_mesh(mesh: DeviceMesh, layout: Layout) -> DeviceMesh:
    """The mesh FSDP2 shards over: ``mesh["dp_shard"]`` (1-D), or ``mesh["dp_replicate", "dp_shard"]``
    (2-D: HSDP, replicate across the first dimension, shard within the second) when
    ``layout.dp_replicate > 1``."""
    if layout.dp_replicate > 1:
        return mesh["dp_replicate", "dp_shard"]
    return mesh["dp_shard"]


def tp_mesh(mesh: DeviceMesh) -> DeviceMesh:
    """The 1-D tensor-parallel sub-mesh (this rank's ``tp`` peers)."""
    return mesh["tp"]


def pp_mesh(mesh: DeviceMesh) -> DeviceMesh:
    """The 1-D pipeline sub-mesh (this rank's stage peers); its group carries the stage sends."""
    return mesh["pp"]

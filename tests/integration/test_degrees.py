"""The degree table is the one place a degree lives: a :class:`DegreeSpec` registered here, at test
time, is applied by ``parallelize`` in its phase, gets its mesh dimension, its micro-batch hook and
its step-time term, with no edit of ``parallelize.py``, ``mesh.py``, ``trainers.py`` or
``steptime.py``; and the mesh's sub-meshes (FSDP2's flattened shard group, a borrowing degree's)
come from the specs' declarations (four gloo ranks, slow)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from flopsweep.layout import Layout

TESTS = Path(__file__).resolve().parents[1]  # tests/: the spawned ranks import integration.<this module>


MESHES = {
    4: {
        "fsdp2xtp2": Layout(dp_shard=2, tp=2),
        "pp2xhsdp": Layout(pp=2, dp_replicate=2),
        "dp2xcp2": Layout(dp_shard=2, cp=2),  # cp is not built; its mesh is: FSDP2's group is dp_shard x cp
        "hsdp2xcp2": Layout(dp_replicate=2, cp=2),
        "dp4xep2": Layout(dp_shard=4, ep=2),  # ep borrows dp_shard x cp x tp
    },
    8: {
        "hsdp2x2xcp2": Layout(dp_replicate=2, dp_shard=2, cp=2),  # HSDP over the flattened dp_shard x cp
        "dp2xcp2xtp2xep4": Layout(dp_shard=2, cp=2, tp=2, ep=4),
    },
}
"""Layouts by world size (the mesh does not check that a degree is built)."""


def _mesh_rank(rank: int, world: int, store: str, out: str) -> None:
    import torch.distributed as dist

    from flopsweep.mesh import build_mesh

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    found = {}
    for name, layout in MESHES[world].items():
        mesh = build_mesh(layout, "cpu")
        found[name] = {
            "fsdp": mesh.fsdp.mesh.tolist(),
            "fsdp_dims": list(mesh.fsdp.mesh_dim_names),
            **{d: mesh[d].mesh.tolist() for d in ("tp", "pp", "dp_shard", "cp")},
            **({d: mesh[d].mesh.tolist() for d in ("ep", "ep_rest")} if layout.ep > 1 else {}),
        }
    Path(out, f"rank{rank}.json").write_text(json.dumps(found))
    dist.destroy_process_group()


def _peers(layout: Layout, rank: int, dims: tuple[str, ...]) -> list[int]:
    """The ranks whose mesh coordinates equal ``rank``'s outside ``dims``, in rank order."""
    mine = layout.coordinates(rank)
    return [
        r
        for r in range(layout.world_size)
        if all(v == mine[k] for k, v in layout.coordinates(r).items() if k not in dims)
    ]


@pytest.mark.slow
@pytest.mark.parametrize("world", sorted(MESHES))
def test_the_mesh_builds_the_sub_meshes_the_specs_declare(world: int, tmp_path: Path) -> None:
    """FSDP2's group is the ``shard`` degrees (``dp_shard x cp``, flattened when both are above 1),
    HSDP's 2-D mesh puts the replicas first; ``ep``'s group splits the ranks it borrows, the degree
    fastest; a degree's own dimension is its peers along it."""
    import torch.multiprocessing as mp

    sys.path.insert(0, str(TESTS))
    args = (world, str(tmp_path / "store"), str(tmp_path))
    mp.start_processes(_mesh_rank, args=args, nprocs=world, start_method="spawn")
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]
    for rank, found in enumerate(ranks):
        for name, layout in MESHES[world].items():
            got = found[name]
            for dim in ("tp", "pp", "dp_shard", "cp"):
                assert got[dim] == _peers(layout, rank, (dim,)), (name, dim)
            shard = ("dp_shard", "cp")
            if layout.dp_replicate > 1:  # 2-D: a row of shard peers per replica
                rows = [_peers(layout, q, shard) for q in _peers(layout, rank, ("dp_replicate",))]
                assert got["fsdp"] == rows, name
            else:
                assert got["fsdp"] == _peers(layout, rank, shard), name
            if layout.ep > 1:  # consecutive runs of ep among the borrowed ranks
                borrowed = _peers(layout, rank, ("dp_shard", "cp", "tp"))
                at = borrowed.index(rank) // layout.ep * layout.ep
                assert got["ep"] == borrowed[at : at + layout.ep], name
                assert got["ep_rest"] == borrowed[borrowed.index(rank) % layout.ep :: layout.ep], name
        if world == 4:
            assert found["dp2xcp2"]["fsdp_dims"] == ["dp_shard_cp"]
            assert found["fsdp2xtp2"]["fsdp_dims"] == ["dp_shard"]
            assert found["hsdp2xcp2"]["fsdp_dims"] == ["dp_replicate", "cp"]
        else:
            assert found["hsdp2x2xcp2"]["fsdp_dims"] == ["dp_replicate", "dp_shard_cp"]

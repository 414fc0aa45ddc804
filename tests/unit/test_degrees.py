"""The degree table is the one place a degree lives: a :class:`DegreeSpec` registered here, at test
time, is applied by ``parallelize`` in its phase, gets its mesh dimension, its micro-batch hook and
its step-time term, with no edit of ``parallelize.py``, ``mesh.py``, ``trainers.py`` or
``steptime.py``; and the mesh's sub-meshes (FSDP2's flattened shard group, a borrowing degree's)
come from the specs' declarations (four gloo ranks, slow)."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

import pytest
import torch
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper

from flopsweep import degrees
from flopsweep.config import BackendConfig, BatchConfig, CheckpointingConfig, PrecisionConfig, RunConfig
from flopsweep.degrees import DEGREE_SPECS, DegreeSpec
from flopsweep.layout import Layout
from flopsweep.models import family
from flopsweep.parallelize import make_model, parallelize

CPU = torch.device("cpu")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ToyLayout(Layout):
    """A layout with the toy degree's field (a new degree is also a :class:`Layout` field)."""

    toy: int = 1


def _register(monkeypatch, *specs: DegreeSpec, **functions) -> None:
    """Append ``specs`` to the degree table and put ``functions`` where their paths point
    (``flopsweep.degrees:<name>``: :mod:`flopsweep.lazy` loads only flopsweep's modules)."""
    for name, fn in functions.items():
        monkeypatch.setattr(degrees, name, fn, raising=False)
    monkeypatch.setattr(degrees, "DEGREE_SPECS", (*DEGREE_SPECS, *specs))


def test_every_path_the_table_names_resolves() -> None:
    """Each degree's applier, step-time term and micro-batch hook exist where its spec says; its
    phase is one of :data:`~flopsweep.degrees.PHASES`; its mesh position is unique; what it borrows
    are mesh degrees."""
    for spec in DEGREE_SPECS:
        assert spec.phase in degrees.PHASES, spec.name
        for field in ("apply", "transfers", "micro_context"):
            assert (spec.resolve(field) is None) == (getattr(spec, field) is None), (spec.name, field)
            assert getattr(spec, field) is None or callable(spec.resolve(field)), (spec.name, field)
        assert set(spec.borrows) <= set(degrees.MESH_DEGREES), spec.name
    positions = [s.mesh_position for s in DEGREE_SPECS if s.mesh]
    assert len(set(positions)) == len(positions)
    assert degrees.MESH_ORDER == ("pp", "dp_replicate", "dp_shard", "cp", "tp")  # torchtitan's


def test_a_registered_degree_is_applied_in_its_phase(monkeypatch) -> None:
    """Three toy degrees, one per phase: ``parallelize`` calls each in its place among the built
    ones (before checkpointing; after compile, beside the pipeline split; after the data-parallel
    step), each with its own spec and size."""
    cfg = RunConfig(activation_checkpointing=CheckpointingConfig(name="full"))
    seen: list[tuple[str, bool, int]] = []

    def wrapped(model: torch.nn.Module) -> bool:
        inner = model[0] if isinstance(model, torch.nn.Sequential) else model
        return all(isinstance(b, CheckpointWrapper) for b in family(cfg.model).blocks(inner))

    def toy(model, step):
        seen.append((step.spec.name, wrapped(model), step.size))
        return model

    def split(model):
        seen.append(("split", wrapped(model), 0))
        return model

    def data_parallel(model):
        seen.append(("data_parallel", wrapped(model), 0))
        return torch.nn.Sequential(model)

    specs = [
        DegreeSpec(name=f"toy_{phase}", what=f"toy {phase}", phase=phase, apply="flopsweep.degrees:toy_apply")
        for phase in degrees.PHASES
    ]
    _register(monkeypatch, *specs, toy_apply=toy)
    layout = dataclasses.make_dataclass(
        "Toys", [(s.name, int, 3) for s in specs], bases=(Layout,), frozen=True, kw_only=True
    )()
    out = parallelize(make_model(cfg, CPU), cfg, layout, split=split, data_parallel=data_parallel)
    assert seen == [
        ("toy_model", False, 3),  # with tp, cp, ep: before the blocks are wrapped
        ("split", True, 0),  # the pp degree's applier: the backend's split
        ("toy_split", True, 3),
        ("data_parallel", True, 0),  # the dp_shard degree's applier: the backend's wrapper
        ("toy_data", True, 3),
    ]
    assert isinstance(out, torch.nn.Sequential)


def test_a_built_degree_goes_through_the_table(monkeypatch) -> None:
    """``parallelize`` names no degree: pointing the ``tp`` spec at another applier runs that one."""
    calls = []
    spec = degrees.DEGREE["tp"]
    table = tuple(
        dataclasses.replace(s, apply="flopsweep.degrees:other_tp") if s is spec else s for s in DEGREE_SPECS
    )
    monkeypatch.setattr(
        degrees, "other_tp", lambda model, step: calls.append(step.size) or model, raising=False
    )
    monkeypatch.setattr(degrees, "DEGREE_SPECS", table)
    cfg = RunConfig()
    parallelize(make_model(cfg, CPU), cfg, Layout(tp=2))
    assert calls == [2]


def test_a_registered_degree_not_built_stops_on_the_rank(monkeypatch) -> None:
    _register(monkeypatch, DegreeSpec(name="toy", what="toy parallelism", built=False))
    cfg = RunConfig()
    with pytest.raises(NotImplementedError, match=r"toy parallelism \(parallel.toy > 1\) is not built"):
        parallelize(make_model(cfg, CPU), cfg, ToyLayout(toy=2))
    parallelize(make_model(cfg, CPU), cfg, ToyLayout(toy=1))  # at 1: nothing to build


def test_a_registered_degree_hook_runs_around_each_micro_batch(monkeypatch) -> None:
    """The trainer enters every degree's micro-batch hook around each micro batch's forward and
    backward; a hook may hand the model the sequence's inputs, targets and positions (what context
    parallel's shard does), and the whole sequence's give the loss of ``model(tokens)`` exactly."""
    from flopsweep.backends import build_trainer

    entered = []

    @contextlib.contextmanager
    def hook(batch):
        batch.args = batch.whole()
        entered.append(tuple(a.shape for a in batch.args))
        yield

    def factory(layout, mesh):
        return hook if layout.toy > 1 else None

    cfg = RunConfig(
        backend=BackendConfig(name="single"),
        precision=PrecisionConfig(name="fp32"),
        batch=BatchConfig(micro_batch_size=2, grad_accum=2),
    )
    tokens = torch.randint(
        0, cfg.model.vocab_size, (2, cfg.model.seq_len + 1), generator=torch.Generator().manual_seed(0)
    )
    plain = build_trainer(cfg, CPU, Layout()).step([tokens, tokens])
    _register(
        monkeypatch,
        DegreeSpec(name="toy", what="toy", micro_context="flopsweep.degrees:toy_hook"),
        toy_hook=factory,
    )
    assert build_trainer(cfg, CPU, ToyLayout(toy=1)).step([tokens, tokens]).item() == plain.item()
    assert entered == []
    hooked = build_trainer(cfg, CPU, ToyLayout(toy=2)).step([tokens, tokens])
    seq = cfg.model.seq_len
    assert entered == [((2, seq), (2, seq), (seq,))] * 2
    assert hooked.item() == plain.item()


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_the_model_takes_the_positions_it_is_given(arch: str) -> None:
    """Learned positions and RoPE read the position tensor: the default is ``0 .. T-1``; other
    distances change the loss (a shard of a longer sequence passes its own positions)."""
    from flopsweep.models.gpt2 import GPT2Config
    from flopsweep.models.llama import LlamaConfig
    from flopsweep.trainers import MicroBatch

    model_cfg = GPT2Config(name="gpt-tiny") if arch == "gpt2" else LlamaConfig(name="llama-tiny")
    model = make_model(RunConfig(model=model_cfg), CPU)
    tokens = torch.randint(0, model_cfg.vocab_size, (2, 17), generator=torch.Generator().manual_seed(1))
    inputs, targets, positions = MicroBatch(tokens).whole()
    assert torch.equal(model(tokens), model(inputs, targets, positions))
    assert not torch.equal(model(tokens), model(inputs, targets, positions * 3))  # RoPE: only distances count


def test_a_registered_degree_gets_its_mesh_dimension(monkeypatch, tmp_path: Path) -> None:
    """``build_mesh`` on one gloo rank: the toy degree's dimension sits at its ``mesh_position``."""
    import torch.distributed as dist

    from flopsweep.mesh import build_mesh

    _register(monkeypatch, DegreeSpec(name="toy", what="toy", mesh_position=2.5))
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        mesh = build_mesh(ToyLayout(), "cpu")
        assert mesh.world.mesh_dim_names == ("pp", "dp_replicate", "dp_shard", "toy", "cp", "tp")
        assert mesh["toy"].size() == 1 and mesh.fsdp.mesh_dim_names == ("dp_shard",)
    finally:
        dist.destroy_process_group()


def test_a_registered_degree_adds_its_step_time_term(monkeypatch) -> None:
    """``steptime.transfers`` sums every degree's term: a toy degree's transfer is counted, in the
    table's order, and its critical seconds add to the step."""
    from flopsweep import steptime

    w = steptime.Workload(
        backend="fsdp",
        n_params=10**9,
        n_layer=8,
        n_embd=1024,
        seq_len=1024,
        micro_batch_size=2,
        degrees={"dp_shard": 2, "tp": 2},
        model_flops=1e15,
        hardware_flops=1e15,
    )
    link = steptime.Link(intra=dict.fromkeys(steptime.COLLECTIVES, 100.0), source="test")
    compute = steptime.Compute(compute_s=1.0, optimizer_s=0.0, source="test")
    before = steptime.predict(w, compute, link, gpus_per_node=8)
    toy = steptime.Transfer(
        what="toy", collective="all_reduce", bytes=1e9, count=1, group=2, across_nodes=False
    )
    toy = dataclasses.replace(toy, overlappable=False)
    _register(
        monkeypatch,
        DegreeSpec(name="toy", what="toy", transfers="flopsweep.degrees:toy_term"),
        toy_term=lambda w, *, gpus_per_node: [toy],
    )
    kinds = [t.what.split()[0] for t in steptime.transfers(w, gpus_per_node=8)]
    assert kinds == ["fsdp", "fsdp", "tensor-parallel", "toy"]
    after = steptime.predict(w, compute, link, gpus_per_node=8)
    assert after.comm_s - before.comm_s == pytest.approx(1e9 * 1.0 / 100e9)  # all-reduce of 2: factor 1
    assert after.iteration_time_s - before.iteration_time_s == pytest.approx(0.01)

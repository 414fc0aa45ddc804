"""The parallel layout: degrees, ``dp_shard=-1``, the product check, refusals, the data-parallel
rank of each global rank, ``batch.global_batch_size``, and ``system.parallel`` in the record."""

from __future__ import annotations

import dataclasses
import math

import pytest

from flopsweep.config import BackendConfig, BatchConfig, ConfigError, ParallelConfig, RunConfig
from flopsweep.layout import DEGREE_SPECS, DEGREES, MESH_ORDER, Layout, check_built, grad_accum_for
from flopsweep.options import DeepSpeedConfig, FSDPConfig
from flopsweep.plan import Environment, plan, validate

CPU4 = Environment(cpu_count=4)


def _backend(name: str) -> BackendConfig:
    """The schema of ``backend=name`` at its defaults."""
    return {"fsdp": FSDPConfig(), "deepspeed": DeepSpeedConfig()}.get(name, BackendConfig(name=name))


def test_dp_shard_minus_one_takes_the_rest_of_the_world() -> None:
    assert Layout.resolve(ParallelConfig(), 8) == Layout(dp_shard=8)
    lay = Layout.resolve(ParallelConfig(dp_replicate=2, tp=2), 8)
    assert (lay.dp_replicate, lay.dp_shard, lay.tp, lay.pp, lay.cp) == (2, 2, 2, 1, 1)
    assert (lay.world_size, lay.dp, lay.non_data_parallel_size) == (8, 4, 2)
    assert Layout.resolve(ParallelConfig(), 1).as_dict() == dict.fromkeys(
        ("dp_replicate", "dp_shard", "tp", "pp", "cp", "ep"), 1
    )


@pytest.mark.parametrize(
    ("parallel", "world", "key", "words"),
    [
        (ParallelConfig(dp_shard=3), 4, "parallel", "product of the degrees is 3, not the world size 4"),
        (ParallelConfig(tp=3), 4, "parallel", "does not divide the world size 4"),
        (ParallelConfig(dp_shard=0), 2, "parallel.dp_shard", "or -1"),
        (ParallelConfig(pp=0), 2, "parallel.pp", "positive integer"),
    ],
)
def test_degrees_that_do_not_make_the_world_are_refused(parallel, world, key, words) -> None:
    with pytest.raises(ConfigError) as err:
        Layout.resolve(parallel, world)
    assert err.value.key == key and words in str(err.value) and "Fix:" in str(err.value)
    assert "\n" not in str(err.value)


def test_the_degrees_are_one_list_that_the_schema_and_the_layout_follow() -> None:
    """Every degree of :data:`DEGREE_SPECS` is a ``parallel.*`` key and a :class:`Layout` field, in
    ``system.parallel``'s order; the mesh degrees (all but ``ep``) multiply to the world size."""
    fields = [f.name for f in dataclasses.fields(Layout)]
    assert fields == list(DEGREES) == [s.name for s in DEGREE_SPECS]
    assert set(DEGREES) <= {f.name for f in dataclasses.fields(ParallelConfig)}
    assert set(DEGREES) - set(MESH_ORDER) == {"ep"}
    assert Layout(dp_shard=4, tp=2, ep=4).world_size == 8


def test_expert_parallel_borrows_data_and_tensor_parallel_ranks() -> None:
    """``ep`` splits ``dp_shard x cp x tp`` (torchtitan's ``efsdp x ep``): a divisor of them
    resolves, anything else is refused naming ``parallel.ep``."""
    assert Layout.resolve(ParallelConfig(tp=2, ep=4), 8) == Layout(dp_shard=4, tp=2, ep=4)
    with pytest.raises(ConfigError) as err:
        Layout.resolve(ParallelConfig(pp=2, ep=4), 4)
    assert err.value.key == "parallel.ep" and "dp_shard x cp x tp = 2" in str(err.value)


def test_a_layout_of_a_degree_below_one_cannot_be_made() -> None:
    with pytest.raises(ConfigError, match="parallel.tp"):
        Layout(tp=0)


def test_data_parallel_rank_follows_torchtitans_mesh_order() -> None:
    """Mesh (pp, dp_replicate, dp_shard, cp, tp), tp fastest: tensor-parallel peers share a batch."""
    lay = Layout(dp_replicate=2, dp_shard=2, tp=2)
    assert [lay.dp_rank(r) for r in range(8)] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert lay.coordinates(5) == {"tp": 1, "cp": 0, "dp_shard": 0, "dp_replicate": 1, "pp": 0}
    pipe = Layout(pp=2, dp_shard=2)
    assert [pipe.dp_rank(r) for r in range(4)] == [0, 1, 0, 1]
    assert [Layout.data_parallel(4).dp_rank(r) for r in range(4)] == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="rank 4"):
        Layout.data_parallel(4).dp_rank(4)


def test_the_batch_a_rank_sees_comes_from_its_data_parallel_rank() -> None:
    import torch

    from flopsweep.worker import make_batches

    cfg = RunConfig(batch=BatchConfig(micro_batch_size=2, grad_accum=1))
    cpu = torch.device("cpu")
    tp2 = Layout(dp_shard=2, tp=2)
    batches = [make_batches(cfg, tp2, r, cpu)[0] for r in range(4)]
    assert torch.equal(batches[0], batches[1]) and torch.equal(batches[2], batches[3])
    assert not torch.equal(batches[0], batches[2])
    # The seed is the data-parallel rank: pure data-parallel rank 1 sees what tp pair 1 sees.
    assert torch.equal(make_batches(cfg, Layout.data_parallel(4), 1, cpu)[0], batches[2])


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ({"ep": 2}, "parallel.ep"),
    ],
)
@pytest.mark.parametrize("backend", ["fsdp", "single", "ddp", "deepspeed"])
def test_degrees_not_built_yet_are_refused_before_launch(monkeypatch, override, key, backend) -> None:
    """On every backend the one fix is the degree at 1 (no backend builds it yet: the refusal never
    sends the user to ``backend=fsdp``, which would refuse it next). Every degree is built now: the
    table's ``built=False`` is stood in for by :data:`flopsweep.layout.BUILT` (what ``check_built`` reads)."""
    import flopsweep.layout

    monkeypatch.setattr(flopsweep.layout, "BUILT", {name: 1 for name in override})
    cfg = RunConfig(backend=_backend(backend), parallel=ParallelConfig(**override))
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    value = next(iter(override.values()))
    assert err.value.key == key and "not built yet" in str(err.value)
    assert f"set {key}=1" in str(err.value) and str(err.value).count("\n") == 0
    assert "backend=" not in str(err.value)
    assert err.value.value == value


@pytest.mark.parametrize("backend", ["single", "ddp", "deepspeed"])
@pytest.mark.parametrize("degree", ["tp", "dp_replicate", "pp", "cp"])
def test_a_layout_on_a_data_parallel_backend_is_refused(backend: str, degree: str) -> None:
    """HSDP and tensor parallelism run on FSDP2's mesh only: single runs one rank, DDP replicates,
    DeepSpeed stays data-parallel (ZeRO); each refusal is one line naming the key and backend=fsdp."""
    cfg = RunConfig(backend=_backend(backend), parallel=ParallelConfig(**{degree: 2}))
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    assert err.value.key == f"parallel.{degree}" and err.value.value == 2
    assert f"backend={backend}" in str(err.value) and "backend=fsdp" in str(err.value)
    assert str(err.value).count("\n") == 0


def test_hsdp_and_tensor_parallel_pass_validation_on_fsdp() -> None:
    fsdp = _backend("fsdp")
    for parallel in (
        ParallelConfig(tp=2),
        ParallelConfig(dp_replicate=2),
        ParallelConfig(dp_replicate=2, tp=2),
    ):
        validate(RunConfig(backend=fsdp, parallel=parallel))
    cfg = RunConfig(
        device="cpu", nproc_per_node="4", backend=fsdp, parallel=ParallelConfig(dp_replicate=2, tp=2)
    )
    assert plan(cfg, CPU4).layout == Layout(dp_replicate=2, dp_shard=1, tp=2)


def test_pipeline_keys_are_checked() -> None:
    with pytest.raises(ConfigError, match="parallel.pp_schedule='ZB'.*1F1B, Interleaved1F1B, GPipe"):
        check_built(ParallelConfig(pp_schedule="ZB"), "fsdp")
    with pytest.raises(ConfigError, match="parallel.pp_microbatches=0"):
        check_built(ParallelConfig(pp_microbatches=0), "fsdp")
    check_built(ParallelConfig(pp_schedule="GPipe", pp_microbatches=4), "fsdp")


def test_the_plan_keeps_the_layout_and_an_int_rank_count() -> None:
    cfg = RunConfig(
        device="cpu", nproc_per_node="2", backend=dataclasses.replace(RunConfig().backend, name="ddp")
    )
    p = plan(cfg, CPU4)
    # DDP is replicate-only data parallelism: dp_replicate = W, dp_shard = 1 (torchtitan's convention).
    assert (p.nproc_per_node, p.world_size, p.layout) == (2, 2, Layout(dp_replicate=2, dp_shard=1))
    assert p.layout.dp == 2 and [p.layout.dp_rank(r) for r in range(2)] == [0, 1]
    assert math.prod(p.layout.as_dict().values()) == p.world_size
    assert p.cfg.parallel.dp_shard == -1  # the config keeps what was asked; the layout what it means


def test_single_runs_one_rank() -> None:
    with pytest.raises(ConfigError, match="backend='single': runs at most 1 rank"):
        plan(RunConfig(device="cpu", nproc_per_node="2"), CPU4)
    assert plan(RunConfig(device="cpu"), CPU4).layout == Layout()


def test_parallel_keys_compose(hydra_compose) -> None:
    cfg = hydra_compose([])
    assert cfg.parallel == ParallelConfig()
    assert (cfg.parallel.dp_shard, cfg.parallel.pp_schedule, cfg.parallel.pp_microbatches) == (
        -1,
        "1F1B",
        None,
    )
    assert cfg.batch.global_batch_size is None
    cfg = hydra_compose(["parallel.dp_shard=2", "parallel.pp_schedule=GPipe", "batch.global_batch_size=16"])
    assert (cfg.parallel.dp_shard, cfg.parallel.pp_schedule, cfg.batch.global_batch_size) == (2, "GPipe", 16)


def test_global_batch_sets_grad_accum() -> None:
    four = Layout(dp_shard=4)
    assert grad_accum_for(BatchConfig(micro_batch_size=2, global_batch_size=32), four) == 4
    assert grad_accum_for(BatchConfig(micro_batch_size=2, grad_accum=4, global_batch_size=32), four) == 4
    assert grad_accum_for(BatchConfig(micro_batch_size=2, grad_accum=3), four) == 3  # no global batch
    with pytest.raises(ConfigError) as err:
        grad_accum_for(BatchConfig(micro_batch_size=2, global_batch_size=12), four)
    assert err.value.key == "batch.global_batch_size" and "2 x 4 = 8" in str(err.value)
    with pytest.raises(ConfigError) as err:
        grad_accum_for(BatchConfig(micro_batch_size=2, grad_accum=2, global_batch_size=32), four)
    assert err.value.key == "batch.grad_accum" and "needs grad_accum=4" in str(err.value)


def test_the_plan_sets_grad_accum_from_the_global_batch() -> None:
    ddp = dataclasses.replace(RunConfig().backend, name="ddp")
    cfg = RunConfig(device="cpu", nproc_per_node="2", backend=ddp, batch=BatchConfig(global_batch_size=16))
    assert plan(cfg, CPU4).cfg.batch.grad_accum == 2  # 16 / (micro 4 x 2 ranks)
    with pytest.raises(ConfigError, match="batch.micro_batch_size=4"):
        validate(RunConfig(batch=BatchConfig(global_batch_size=6)))
    with pytest.raises(ConfigError, match="micro_batch_size x data-parallel ranks"):
        plan(dataclasses.replace(cfg, batch=BatchConfig(global_batch_size=12)), CPU4)


def test_old_records_read_as_pure_data_parallel() -> None:
    from analysis.load import parallel_degrees, setup_id

    old = {"config": {"nproc_per_node": "2", "batch": {"grad_accum": 1}}, "system": {"world_size": 2}}
    assert parallel_degrees(old) == {"dp_replicate": 1, "dp_shard": 2, "tp": 1, "pp": 1, "cp": 1}
    assert parallel_degrees({"system": {"world_size": None}}) is None
    new_cfg = {
        **old["config"],
        "batch": {"grad_accum": 1, "global_batch_size": None},
        "parallel": dataclasses.asdict(ParallelConfig()),
    }
    new = {"config": new_cfg, "system": {"world_size": 2, "parallel": Layout(dp_shard=2).as_dict()}}
    assert setup_id(new) == setup_id(old)  # the same set-up, before and after the keys existed
    tp = {**new, "config": {**new_cfg, "parallel": {**new_cfg["parallel"], "tp": 2}}}
    assert setup_id(tp) != setup_id(old)


# (overrides, key refused): each refusal's Fix names values (``set parallel.X=D``) that, fed back,
# the whole of validation (``plan.plan``: validate, then the layout on the world) accepts.
SUGGESTING = [
    (["model=gpt-tiny", "parallel.tp=8"], "parallel.tp"),  # n_head 4: tp=4, which the world holds
    (["model=gpt-tiny", "model.n_head=6", "model.n_embd=96", "parallel.tp=4"], "parallel.tp"),  # not 3
    (["model=llama-tiny", "parallel.tp=4"], "parallel.tp"),  # n_kv_head 2
    (["model=gpt-tiny", "parallel.dp_replicate=3"], "parallel"),  # 3 does not divide 4
    (["model=gpt-tiny", "parallel.dp_shard=3"], "parallel"),
    (["model=gpt-tiny", "parallel.tp=2", "parallel.dp_shard=4"], "parallel"),
    (["model=gpt-tiny", "model.n_layer=4", "parallel.pp=3"], "parallel.pp"),  # not 1: 2 divides both
    (["model=gpt-tiny", "model.n_layer=6", "parallel.pp=3", "parallel.tp=2"], "parallel"),
    (["model=gpt-tiny", "model.n_layer=4", "parallel.pp=3", "parallel.pp_schedule=GPipe"], "parallel.pp"),
    (
        ["model=gpt-tiny", "model.n_layer=4", "parallel.pp=4", "parallel.tp=2", "parallel.pp_schedule=GPipe"],
        "parallel",
    ),
    (
        ["model=gpt-tiny", "model.n_layer=4", "parallel.pp=2", "parallel.pp_schedule=Interleaved1F1B"]
        + ["parallel.pp_stages_per_rank=3"],
        "parallel.pp_stages_per_rank",
    ),
    (
        ["model=gpt-tiny", "model.n_layer=4", "parallel.pp=2", "parallel.pp_schedule=Interleaved1F1B"]
        + ["parallel.pp_microbatches=5", "batch.grad_accum=4"],
        "parallel.pp_microbatches",
    ),
]


@pytest.mark.parametrize(("overrides", "key"), SUGGESTING, ids=lambda v: str(v)[:70])
def test_a_refusals_suggested_values_pass_validation(hydra_compose, overrides: list[str], key: str) -> None:
    """Before, ``parallel.tp=4`` on 6 heads and 4 ranks suggested ``parallel.tp=3`` (refused: 3 does
    not divide the world), and the layout refusals named no value; now each suggestion runs."""
    import re

    base = ["device=cpu", "backend=fsdp", "nproc_per_node=4", "precision=fp32"]
    env = Environment(cpu_count=4)
    with pytest.raises(ConfigError) as err:
        plan(hydra_compose([*base, *overrides]), env)
    assert err.value.key == key, str(err.value)
    fix = str(err.value).split("Fix: ", 1)[1].split(", or ")[0]
    suggested = re.findall(r"(parallel\.\w+)=(-?\d+)", fix)
    assert suggested, str(err.value)
    fed_back = [*overrides, *(f"{k}={v}" for k, v in suggested)]
    plan(hydra_compose([*base, *fed_back]), env)  # no ConfigError

"""The backend specs (:mod:`flopsweep.backend_specs`) and the GPU rows (:mod:`flopsweep.peaks`): one
torch-free object per option, which the memory estimate and the step-time model ask instead of the
option's name."""

from __future__ import annotations

import dataclasses

import pytest

from flopsweep import forecast, memory
from flopsweep import predict as pr
from flopsweep.backend_specs import BACKEND_SPECS, DDPSpec, backend_spec
from flopsweep.config import BackendConfig, RunConfig
from flopsweep.layout import Layout
from flopsweep.models import family
from flopsweep.models.gpt2 import GPT2Config
from flopsweep.options import OPTION_SCHEMAS, DeepSpeedConfig, FSDPConfig
from flopsweep.peaks import GPU_MEMORY_GIB, PEAK_TABLE

SMALL = GPT2Config(name="gpt-small", n_layer=4, n_embd=256, n_head=4, seq_len=256, vocab_size=1024)


def _cfg(backend: BackendConfig) -> RunConfig:
    cfg = dataclasses.replace(RunConfig(), model=SMALL, backend=backend)
    cfg.batch.micro_batch_size = 2
    return cfg


def test_every_spec_names_torch_code_that_exists() -> None:
    """The import path of each spec's torch code is the builder the rank runs, and the torch side's
    registry is the specs themselves (one registry)."""
    from flopsweep import backends

    assert backends.BACKENDS is BACKEND_SPECS
    for name, spec in BACKEND_SPECS.items():
        assert spec.name == name
        module, _, function = spec.torch.partition(":")
        assert module == "flopsweep.backends" and spec.build() is getattr(backends, function), name


def test_the_specs_agree_with_the_schemas_and_the_layout() -> None:
    """Each spec's schema is the option's (:data:`flopsweep.options.OPTION_SCHEMAS`). The degrees each
    builds (the degree table's): FSDP2 every one, DDP and ZeRO data parallelism, ``single`` none."""
    for name, spec in BACKEND_SPECS.items():
        assert spec.schema is OPTION_SCHEMAS["backend"].get(name, BackendConfig)
    degrees = {name: spec.degrees for name, spec in BACKEND_SPECS.items()}
    assert degrees["single"] == () and degrees["ddp"] == degrees["deepspeed"] == ("dp_shard",)
    assert {"dp_replicate", "dp_shard", "tp", "pp", "cp"} <= set(degrees["fsdp"])


def test_offload_and_calibration_groups_come_from_the_spec() -> None:
    ds, fsdp = BACKEND_SPECS["deepspeed"], BACKEND_SPECS["fsdp"]
    nvme = ds.offload({"offload_optimizer": "nvme", "offload_param": "cpu"})
    assert (nvme.optimizer, nvme.param, nvme.host_bytes_per_param, nvme.steps_on_host) == (
        True,
        True,
        2,
        True,
    )
    assert ds.offload(DeepSpeedConfig(offload_optimizer="cpu")).host_bytes_per_param == 16
    assert fsdp.offload(FSDPConfig(cpu_offload=True)).states and not fsdp.offload(FSDPConfig()).states
    assert ds.calibration_group({"zero_stage": 2}) == "deepspeed-2" and fsdp.calibration_group({}) == "fsdp"
    assert ds.optimizer_family({"optimizer_impl": "torch"}) == "deepspeed-torch"
    assert ds.optimizer_family({"offload_optimizer": "cpu"}) is None and fsdp.optimizer_family({}) == "torch"
    assert backend_spec("fsdp1") is None  # a record's unknown name: the estimators' defaults


def test_hsdp_collectives_are_the_shard_groups_then_the_replicas() -> None:
    """FSDP2 on ``dp_replicate=2 x dp_shard=4``: its gathers and reduce-scatter over the shard group,
    the shard's all-reduce over the replicas, spanning nodes when the two together pass a node."""
    w = forecast.workload(_cfg(FSDPConfig()), Layout(dp_replicate=2, dp_shard=4))
    got = [(t.collective, t.group, t.across_nodes) for t in pr.transfers(w, gpus_per_node=4)]
    assert got == [("all_gather", 4, False), ("reduce_scatter", 4, False), ("all_reduce", 2, True)]
    one = forecast.workload(_cfg(BackendConfig(name="single")), Layout())
    assert pr.transfers(one, gpus_per_node=8) == []


def test_a_new_backend_is_its_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend the estimators have never heard of by name: DDP's spec with 8-byte buckets and an
    overlap of 0.25. The memory estimate and the step-time model take its terms from the spec."""
    toy = DDPSpec(name="toy", torch="flopsweep.backends:build_ddp", gradient_buckets=8, default_overlap=0.25)
    monkeypatch.setitem(BACKEND_SPECS, "toy", toy)
    p = family(SMALL).n_params(SMALL)
    ddp, new = (memory.estimate(_cfg(BackendConfig(name=n)), Layout()) for n in ("ddp", "toy"))
    assert new.model_states - ddp.model_states == new.step_states - ddp.step_states == 4 * p
    assert new.activations == ddp.activations  # autocast over fp32 weights: fp32 residual, as DDP
    w = forecast.workload(_cfg(BackendConfig(name="toy")), Layout(dp_shard=2))
    (t,) = pr.transfers(w, gpus_per_node=8)
    assert (t.collective, t.bytes, t.group) == ("all_reduce", 4 * p, 2)
    link = pr.Link(intra=dict.fromkeys(pr.COLLECTIVES, 100.0))
    made = pr.predict(w, pr.Compute(compute_s=1.0, optimizer_s=0.0, source="x"), link, gpus_per_node=8)
    assert (made.overlap, made.overlap_source) == (0.25, "assumed")
    assert made.exposed_comm_s == pytest.approx(made.comm_s * 0.75)


def test_a_gpu_is_one_row() -> None:
    """Memory and NVLink are fields of the GPU's row; the tables by name are views of the rows."""
    assert dict(GPU_MEMORY_GIB) == {row.name: row.memory_gib for row in PEAK_TABLE}
    assert pr.NVLINK_GBPS == {r.name: r.nvlink_gbps for r in PEAK_TABLE if r.nvlink_gbps is not None}
    h800 = next(r for r in PEAK_TABLE if r.name == "H800 SXM")
    link = pr.assumed_link("NVIDIA H800")
    assert link is not None and link.intra["all_reduce"] == pr.ASSUMED_NVLINK_SHARE * h800.nvlink_gbps
    pcie = pr.assumed_link("NVIDIA H100 PCIe")  # no NVLink between a node's cards: its PCIe Gen5 slot
    assert pcie is not None and pcie.intra["all_reduce"] == pytest.approx(pr.ASSUMED_NVLINK_SHARE * 64)
    assert memory.planned_gpu_bytes("H800", None) == (int(79.6 * 2**30), "H800 SXM (79.6 GiB)")

"""The nearest-set-up prediction (``flopsweep.nearest``, ``compute_source: nearest``): which record
stands for a set-up never measured, and what is carried over from it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from flopsweep import nearest, nearest_measured
from flopsweep.predict_record import predict_record

P = 1_000_000_000
H200, A100, H100 = "NVIDIA H200", "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"


def record(
    *,
    model: str = "m1",
    n_params: int = P,
    backend: str = "fsdp",
    policy: str = "none",
    precision: str = "bf16",
    mbs: int = 4,
    step: float = 1.0,
    gpu: str = H200,
    breakdown: dict | None = None,
    gemm: float | None = None,
    seq: int = 2048,
) -> dict:
    """An ok one-GPU record: 6 x parameters x tokens model (= hardware) FLOPs."""
    flops = 6.0 * n_params * mbs * seq
    metrics = {
        "iteration_time_s": {"mean": step},
        "model_flops_per_iteration": flops,
        "hardware_flops_per_iteration": flops,
        "measured_matmul_tflops": gemm,
    }
    if breakdown:
        metrics["breakdown"] = breakdown
    return {
        "status": "ok",
        "config": {
            "model": {"name": model, "n_layer": 4, "n_embd": 256, "seq_len": seq},
            "attention": {"name": "sdpa"},
            "backend": {"name": backend},
            "precision": {"name": precision},
            "activation_checkpointing": {"name": policy},
            "compile": False,
            "device": "cuda",
            "batch": {"micro_batch_size": mbs, "grad_accum": 1},
        },
        "model": {"n_params": n_params, "n_layer": 4, "n_embd": 256, "seq_len": seq},
        "system": {"world_size": 1, "device_name": gpu, "parallel": {"dp_shard": 1}},
        "metrics": metrics,
    }


def predicted(target: dict, records: dict[str, dict]):
    """The nearest compute of ``target`` (named ``target``) among ``records``."""
    me = nearest_measured.describe("target", target)
    pairs = list(records.items())
    return nearest.nearest_compute(me, nearest_measured.pool_of(pairs), pairs)


@pytest.mark.parametrize(
    ("target", "other", "said"),
    [
        ({"seq": 4096, "mbs": 2}, {}, "model.seq_len 4096 vs 2048; batch.micro_batch_size 2 vs 4"),
        ({"model": "m2", "seq": 8192, "mbs": 4}, {}, "model m2 vs m1; model.seq_len 8192 vs 2048"),
        (
            {"policy": "full", "n_params": 2 * P, "seq": 1024},
            {"backend": "ddp"},
            "backend.name fsdp vs ddp; activation_checkpointing full vs none; parameters 2B vs 1B; "
            "model.seq_len 1024 vs 2048",
        ),
    ],
)
def test_the_source_names_every_way_the_nearest_set_up_differs_that_the_order_uses(
    target: dict, other: dict, said: str
) -> None:
    """The source's ``differs in`` names each key :func:`nearest.order` sorts by where the borrowed
    set-up differs (kernel, backend and stage, policy, model or its parameters, sequence length,
    micro batch, world size), each once and in short: a sequence of another length was once left
    out when the model's name differed, or lost in the model's whole config cut at 300 characters."""
    found, why, first = predicted(record(**target), {"other": record(**other)})
    assert why == "" and first.name == "other"
    assert found.source.startswith(f"nearest: other (1 of its set-up; differs in {said});"), found.source
    assert found.source.endswith(f"rule: {nearest.RULE_SHORT}")
    assert "sequence length" in nearest.RULE_SHORT and "world size" in nearest.RULE_SHORT


def test_the_same_set_up_is_never_used() -> None:
    """A repeat of the target's own set-up (the same config, another name) is never the nearest, however
    close; the next set-up's rate carries over by FLOPs."""
    target = record(step=1.0)
    found, why, first = predicted(target, {"repeat": record(step=0.1), "mb8": record(mbs=8, step=2.0)})
    assert why == "" and first.name == "mb8"
    assert found.kind == "nearest"
    assert found.source.startswith("nearest: mb8 (1 of its set-up; differs in batch.micro_batch_size 4 vs 8)")
    assert "repeat" not in found.source
    assert found.compute_s == pytest.approx(2.0 * 4 / 8)  # its FLOP rate over half the FLOPs
    assert found.optimizer_s == 0.0 and "optimizer not separated" in found.source
    alone, why, first = predicted(target, {"repeat": record(step=0.1)})
    assert alone is None and first is None
    assert why == "no nearest set-up: none of the 1 records read is an ok record of another set-up"


def test_the_picking_order() -> None:
    """Backend, then the nearest model, then in that set-up the policy: a record of the same model on
    another policy (the target's base set-up) beats one of another model on the same policy, which
    beats one of another backend; another precision is never used. The policy is sorted after the
    base so that a plan's policy siblings take one base (issue 42: each took its own policy's nearest,
    and ZeRO-3 ``full`` came out faster than ``none``)."""
    target = record(model="m1")
    pool = {
        "other-policy": record(model="m1", policy="full", step=1.3),
        "other-backend": record(model="m1", backend="ddp", step=1.1),
        "bigger-model": record(model="m2", n_params=2 * P, step=2.2),
        "fp8": record(model="m1", precision="fp8", step=0.5),
    }
    assert predicted(target, pool)[2].name == "other-policy"
    del pool["other-policy"]
    assert predicted(target, pool)[2].name == "bigger-model"
    del pool["bigger-model"]
    assert predicted(target, pool)[2].name == "other-backend"
    del pool["other-backend"]
    found, why, _ = predicted(target, pool)
    assert found is None and "ran bf16 on cuda" in why
    # among models, the nearest by parameters and tokens per micro batch
    far = record(model="m3", n_params=4 * P)  # |ln 4| = 1.39
    pool = {"x4": far, "x1.5": record(model="m4", n_params=P * 3 // 2, mbs=8)}  # |ln 1.5| + |ln 2| = 1.10
    assert predicted(target, pool)[2].name == "x1.5"
    pool["x1.5"] = record(model="m4", n_params=P * 3 // 2, mbs=16)  # |ln 1.5| + |ln 4| = 1.79
    assert predicted(target, pool)[2].name == "x4"


def _experts(rec: dict, experts: str) -> dict:
    """``rec`` as a ``model=hf`` MoE config whose experts run through ``experts`` (``model.experts``)."""
    rec["config"]["model"]["experts"] = experts
    rec["model"]["n_active_params"] = rec["model"]["n_params"] // 5
    return rec


def test_the_experts_kernel_is_matched_ahead_of_the_model_and_the_micro_batch() -> None:
    """A ``model=hf`` MoE set-up takes a record of its own experts kernel over one of the same model and
    micro batch whose experts ran another kernel (OLMoE-1B-7B FSDP2 on one H200: ``eager`` 28 TFLOP/s,
    ``grouped_mm`` 175; taking one for the other was +445%), and the source says how they differ."""
    target = _experts(record(model="olmoe"), "grouped_mm")
    pool = {
        "eager-same-batch": _experts(record(model="olmoe", step=6.0), "eager"),
        "grouped-mb8": _experts(record(model="olmoe", mbs=8, step=2.0), "grouped_mm"),
    }
    found, why, first = predicted(target, pool)
    assert why == "" and first.name == "grouped-mb8"
    assert found.compute_s == pytest.approx(1.0)  # mb8's rate over half its FLOPs
    del pool["grouped-mb8"]
    found, why, first = predicted(target, pool)
    assert first.name == "eager-same-batch"
    assert "differs in model.experts grouped_mm vs eager" in found.source


def _policy_record(policy: str, step: float, **kw) -> dict:
    """:func:`record` with the hardware FLOPs of ``policy`` (full: the forward again, x4/3; selective:
    x1.1), so that the recompute share tells the policies apart."""
    out = record(policy=policy, step=step, **kw)
    metrics = out["metrics"]
    metrics["hardware_flops_per_iteration"] *= {"none": 1.0, "selective": 1.1, "full": 4 / 3}[policy]
    return out


def test_policy_siblings_take_one_base_set_up() -> None:
    """Targets that differ only by policy take the same base set-up (the same model, micro batch and
    backend measured at other policies beats another model measured at their own): each its own
    policy's record where the base ran it, else the nearest recompute share with ``selective`` last
    (its per-operator dispatch is a cost beyond its FLOPs); the compute is the target's hardware FLOPs
    at that record's rate, so ``none`` is never slower than a policy that recomputes."""
    pool = {
        "base-full": _policy_record("full", 1.2),
        "base-selective": _policy_record("selective", 1.25),
        "m2-none": _policy_record("none", 0.4, model="m2", n_params=P // 4, mbs=8),  # |ln 4| = 1.39
        "m2-full": _policy_record("full", 0.9, model="m2", n_params=P // 4, mbs=8),
    }
    targets = {p: _policy_record(p, 1.0, mbs=8) for p in ("none", "selective", "full")}  # |ln 2| = 0.69
    picked = {p: predicted(target, pool) for p, target in targets.items()}
    assert {p: found[2].name for p, found in picked.items()} == {
        "none": "base-full",  # full, not selective: its rate is its FLOPs'
        "selective": "base-selective",
        "full": "base-full",
    }
    step = {p: found[0].compute_s for p, found in picked.items()}
    assert step["none"] == pytest.approx(1.2 * 3 / 4 * 2)  # full's rate over none's FLOPs at 8 / 4 tokens
    assert step["none"] < step["full"] and step["none"] < step["selective"]
    assert "differs in activation_checkpointing none vs full" in picked["none"][0].source
    del pool["base-full"]  # only selective measured: it stands for the others
    assert predicted(targets["none"], pool)[2].name == "base-selective"


def test_another_gpu_is_scaled_by_the_datasheet_and_said_so() -> None:
    """A record of another GPU kind stands only where none of the target's own GPU does, its compute
    scaled by the ratio of the two datasheet peaks of the precision, said in the source."""
    target = record(gpu=A100)
    found, _, first = predicted(target, {"h200": record(mbs=8, step=2.0)})
    assert first.name == "h200"
    assert found.compute_s == pytest.approx(1.0 * 989.4 / 312.0)
    assert "measured on H200 SXM, scaled by the datasheet bf16 peak ratio 0.315" in found.source
    # the same GPU kind first, though its model is farther
    found, _, first = predicted(
        target, {"h200": record(mbs=8, step=2.0), "a100": record(model="m9", n_params=4 * P, gpu=A100)}
    )
    assert first.name == "a100" and "measured on" not in found.source
    # a GPU kind of the same peak (H100 and H200 SXM) is not another: the nearer model first, x1
    h100 = {"h100": record(model="m9", n_params=4 * P, gpu=H100), "h200": record(mbs=8, step=2.0)}
    found, _, first = predicted(record(gpu=H100), h100)
    assert first.name == "h200" and "scaled by the datasheet bf16 peak ratio 1;" in found.source
    h100["h200-m9"] = record(model="m9", n_params=4 * P)
    assert (
        predicted(record(model="m9", n_params=4 * P, mbs=2, gpu=H100), h100)[2].name == "h100"
    )  # then the kind


def test_the_optimizer_carries_over_per_parameter() -> None:
    """A profile that separates the optimizer gives seconds per parameter (the rate of the other set-ups'
    records): the compute carries over by FLOPs and the optimizer by the parameters a rank updates."""
    profile = {"step_s": 1.0, "optimizer_s": 0.2, "exposed_comm_s": 0.0, "idle_s": 0.0, "view": "cuda"}
    profile["optimizer_from"] = "launch"
    neighbour = record(model="m2", step=1.0, breakdown=profile)
    found, _, _ = predicted(record(model="m1", n_params=2 * P), {"m2": neighbour})
    assert found.compute_s == pytest.approx(0.8 * 2)
    assert found.optimizer_s == pytest.approx(0.2 * 2)
    assert "optimizer 200 ps per parameter a rank updates" in found.source


def test_predict_record_falls_back_to_the_flops_estimate_and_says_why() -> None:
    """``analysis --predict``: with nothing similar (only fp8 records for a bf16 run), the prediction is
    the FLOPs estimate and its source says why no set-up stood for it; with a similar one, ``nearest``."""
    target = record(gemm=700.0)
    made = predict_record("target", target, [("fp8", record(precision="fp8"))])
    assert made["compute_source"] == "flops"
    assert made["source"].startswith("uncalibrated: executed FLOPs at 0.6 x the measured GEMM rate")
    assert "no nearest set-up: none of the 1 ok records of other set-ups ran bf16 on cuda" in made["source"]
    made = predict_record("target", target, [("mb8", record(mbs=8, step=2.0))])
    assert made["compute_source"] == "nearest" and made["iteration_time_s"] == pytest.approx(1.0)


def test_a_plan_predicts_from_the_nearest_record_not_another_backends_calibration(
    hydra_compose, tmp_path: Path
) -> None:
    """``plan=true``: a record of the same model on another backend no longer calibrates the run (its
    step is another backend's); the nearest rule takes it, carrying its FLOP rate over, and says so."""
    from flopsweep import forecast
    from flopsweep.layout import Layout
    from flopsweep.plan import Environment, plan

    cfg = plan(hydra_compose(["model=gpt-tiny", "device=cpu", "backend=ddp"]), Environment(cpu_count=2)).cfg
    work = forecast.workload(cfg, Layout.data_parallel(1))
    config = json.loads(json.dumps(dataclasses.asdict(cfg), default=str))
    config["backend"] = {"name": "single"}
    other = {
        "status": "ok",
        "config": config,
        "model": {"n_params": work.n_params},
        "system": {"world_size": 1, "nproc_per_node": 1, "parallel": {"dp_shard": 1}},
        "metrics": {
            "iteration_time_s": {"mean": 0.5},
            "model_flops_per_iteration": work.model_flops,
            "hardware_flops_per_iteration": work.hardware_flops,
        },
    }
    made = forecast.prediction(
        cfg, Layout.data_parallel(1), [("single", other)], gpus_per_node=1, device_name=None
    )
    assert made["compute_source"] == "nearest", made["source"]
    assert made["source"].startswith(
        "nearest: single (1 of its set-up; differs in backend.name ddp vs single)"
    )
    assert made["iteration_time_s"] == pytest.approx(0.5)


def test_a_host_side_optimizer_carries_over_per_parameter() -> None:
    """Two runs whose optimizer steps on the host (FSDP2 ``cpu_offload``): the whole step carries over
    per parameter a rank updates, not per FLOP; a host-side run is not predicted from a run that steps on
    the GPU, nor the reverse (``nearest.candidates``: the optimizer side is required)."""
    offload = record(model="m2", n_params=4 * P, mbs=1, step=8.0)
    offload["config"]["backend"]["cpu_offload"] = True
    target = record(model="m1", n_params=P, mbs=4)
    target["config"]["backend"]["cpu_offload"] = True
    found, _, first = predicted(target, {"offload": offload, "on-gpu": record(model="m1", mbs=8, step=2.0)})
    assert first.name == "offload"
    assert found.compute_s == pytest.approx(8.0 / 4)  # 2 ns a parameter, not 8 s x 1 (the same FLOPs)
    assert "the whole step carried over per parameter a rank updates, 2 ns" in found.source
    found, why, first = predicted(record(model="m1", mbs=4), {"offload": offload})
    assert found is None and first is None  # a GPU-side run: never from a host-bound step (session 32)
    assert why.startswith(
        "no nearest set-up: none of the 1 ok records of other set-ups steps its optimizer on the GPU"
    )


def test_a_record_whose_parts_cannot_be_read_is_passed_over() -> None:
    """A two-rank record with neither a profile nor a probe (no bandwidth for its communication) and one
    without FLOPs stand for nothing: the next set-up does, and none left is the FLOPs estimate's why."""
    two = record(mbs=8, step=2.0)
    two["system"] = {"world_size": 2, "device_name": H200, "parallel": {"dp_shard": 2}}
    two["metrics"]["model_flops_per_iteration"] *= 2
    two["metrics"]["hardware_flops_per_iteration"] *= 2
    empty = record(model="m3", mbs=4, step=1.0)
    empty["metrics"]["model_flops_per_iteration"] = empty["metrics"]["hardware_flops_per_iteration"] = 0
    found, _, first = predicted(
        record(), {"two": two, "empty": empty, "next": record(model="m2", n_params=2 * P)}
    )
    assert first.name == "next" and found.compute_s == pytest.approx(0.5)
    found, why, _ = predicted(record(), {"two": two, "empty": empty})
    assert (
        found is None and why == "no nearest set-up: no record of the nearest set-ups has compute time left"
    )


def test_selective_s_dispatch_comes_from_the_nearest_set_up_that_ran_both() -> None:
    """Where ``selective`` is carried from another policy's record, its rate ratio is the nearest set-up's
    that ran both, named in the source: the nearest model first, of either compile setting for an eager
    run; a compiled run takes a compiled set-up first (a compiled step pays no per-operator dispatch)."""

    def rec(model: str, n: int, policy: str, step: float, compiled: bool = False) -> dict:
        out = _policy_record(policy, step, model=model, n_params=n)
        out["config"]["compile"] = compiled
        return out

    pool = {
        "m1-none": rec("m1", P, "none", 1.0),
        "m1c-none": rec("m1", P, "none", 1.0, compiled=True),
        "m2-none": rec("m2", 2 * P, "none", 1.0),  # eager, |ln 2| away: selective at half the rate
        "m2-selective": rec("m2", 2 * P, "selective", 2.2),
        "m3-none": rec("m3", 8 * P, "none", 1.0, compiled=True),  # compiled, |ln 8| away: at 0.8
        "m3-selective": rec("m3", 8 * P, "selective", 1.375, compiled=True),
    }
    eager, _, first = predicted(rec("m1", P, "selective", 1.0), pool)
    assert first.name == "m1-none"
    assert "selective at 0.5 x the rate of the other policies" in eager.source, eager.source
    assert "nearest set-up that ran both (m2 fsdp micro batch 4 on 1 H200 SXM)" in eager.source
    compiled, _, first = predicted(rec("m1", P, "selective", 1.0, compiled=True), pool)
    assert first.name == "m1c-none"
    assert "selective at 0.8 x the rate" in compiled.source and "(m3 fsdp micro batch 4" in compiled.source
    assert compiled.compute_s == pytest.approx(eager.compute_s * 1.25 / 2)
    # an eager run of m3's size takes m3's compiled ratio, the nearest model, said so
    big, _, _ = predicted(
        rec("m4", 8 * P, "selective", 1.0), {**pool, "m4-none": rec("m4", 8 * P, "none", 1.0)}
    )
    assert "(m3 fsdp micro batch 4 on 1 H200 SXM, compile true)" in big.source, big.source


def test_a_compiled_block_s_recompute_counts_what_backward_reads() -> None:
    """A compiled checkpointed block re-runs only what its backward reads (the partitioner drops the last
    projection, ``w2``): a new run counts ``early_stop``; an older record's counted ``full`` recompute
    (``metrics.recompute`` ``full``, or no such key and a compiled ``full`` run) is read at the family's
    ``early_stop`` share by every prediction (:func:`flopsweep.predict.workload_from_record`); an eager block
    (``early_stop`` already), a new record and a policy without recompute keep theirs."""
    from flopsweep import checkpointing, recompute_read
    from flopsweep.config import CheckpointingConfig, RunConfig
    from flopsweep.models import llama
    from flopsweep.models.llama import LlamaConfig
    from flopsweep.predict import workload_from_record

    shape = {
        "name": "llama3.1-8b",
        "arch": "llama",
        "n_layer": 32,
        "n_embd": 4096,
        "n_head": 32,
        "seq_len": 2048,
    }
    shape |= {"vocab_size": 128256, "n_kv_head": 8, "ffn_dim": 14336}
    cfg = LlamaConfig(**shape)
    base, full, read = (llama.hardware_flops(cfg, 2048, 1.0, r) for r in ("none", "full", "early_stop"))

    def rec(policy: str, compiled: bool, step: float, said: str | None = None) -> dict:
        out = record(policy=policy, step=step, n_params=8 * P)
        out["config"]["model"] = dict(shape)
        out["config"]["compile"] = compiled
        out["metrics"]["model_flops_per_iteration"] = 4 * base
        counted = {"full": full, "early_stop": read}.get(said or ("full" if compiled else "early_stop"))
        out["metrics"]["hardware_flops_per_iteration"] = 4 * (counted if policy == "full" else base)
        if said is not None:
            out["metrics"]["recompute"] = said
        return out

    share = recompute_read.ran_share(rec("full", True, 1.0))
    assert share == pytest.approx((read - base) / (full - base)) and 0.74 < share < 0.76
    assert recompute_read.ran_share(rec("full", True, 1.0, said="full")) == share
    for new in (rec("full", True, 1.0, said="early_stop"), rec("full", False, 1.0), rec("none", True, 1.0)):
        assert recompute_read.ran_share(new) == 1.0
    for old in (rec("full", True, 1.0), rec("full", True, 1.0, said="full")):
        assert workload_from_record(old).hardware_flops == pytest.approx(4 * read)
    assert workload_from_record(rec("full", True, 1.0, said="early_stop")).hardware_flops == 4 * read
    # a run about to start counts early_stop, compiled or not
    for compiled in (True, False):
        run = RunConfig(activation_checkpointing=CheckpointingConfig(name="full"), compile=compiled)
        assert checkpointing.recompute_mode(run) == "early_stop"
    # a compiled none run predicted from its full sibling: at full's rate on the FLOPs that ran
    found, _, first = predicted(rec("none", True, 1.0), {"full": rec("full", True, 1.2)})
    assert first.name == "full"
    assert found.compute_s == pytest.approx(1.2 * base / read)


def _dispatch_pool(**extra: dict) -> dict[str, dict]:
    """The target's base (m1, fsdp) measured at none only, and m2 (fsdp) measured at none and selective."""

    def rec(policy: str, step: float, **kw) -> dict:
        return _policy_record(policy, step, **kw)

    return {
        "m1-none": rec("none", 1.0),
        "m2-none": rec("none", 1.0, model="m2", n_params=8 * P),  # fsdp, |ln 8| away: selective at 0.8
        "m2-selective": rec("selective", 1.375, model="m2", n_params=8 * P),
        **extra,
    }


def test_selective_s_dispatch_is_its_backend_s_and_never_from_the_memory_edge_or_one_gpu_zero3() -> None:
    """Selective's rate ratio comes from a set-up of the target's backend ahead of a nearer model of
    another (the dispatch shows where the backend breaks the block's graph and runs hooks), never from a
    record at the memory edge (its allocator retries are no policy's cost) nor from a one-GPU ZeRO-3
    set-up (its step is floor-bound: no compute rate)."""
    near = {"model": "m3", "n_params": 2 * P}  # |ln 2| away
    ddp_none, ddp_sel = (
        _policy_record("none", 1.0, backend="ddp", **near),
        _policy_record("selective", 2.2, backend="ddp", **near),
    )
    target = _policy_record("selective", 1.0)
    found, _, first = predicted(target, _dispatch_pool(**{"ddp-none": ddp_none, "ddp-sel": ddp_sel}))
    assert first.name == "m1-none"
    assert "selective at 0.8 x the rate" in found.source and "(m2 fsdp micro batch 4" in found.source, (
        found.source
    )
    edge = _policy_record("none", 1.0, **near)
    edge["metrics"]["cuda_alloc_retries"] = 12
    pool = _dispatch_pool(**{"m3-none": edge, "m3-sel": _policy_record("selective", 2.2, **near)})
    assert "(m2 fsdp micro batch 4" in predicted(target, pool)[0].source
    zero3 = {
        k: _zero3(_policy_record(p, t, backend="deepspeed", **near))
        for k, p, t in (("z-none", "none", 1.0), ("z-sel", "selective", 2.2))
    }
    z_target = _zero3(_policy_record("selective", 1.0, backend="deepspeed"))
    z_source = predicted(
        z_target,
        {**_dispatch_pool(), **zero3, "z1-none": _zero3(_policy_record("none", 1.0, backend="deepspeed"))},
    )[0].source
    assert "(m2 fsdp micro batch 4" in z_source, z_source


def _zero3(r: dict) -> dict:
    r["config"]["backend"] |= {"zero_stage": 3, "offload_optimizer": "none", "offload_param": "none"}
    return r


def test_in_a_base_set_up_a_sibling_not_at_the_memory_edge_stands_first() -> None:
    """Of a base set-up's other policies, one without allocator retries stands for the target: a record at
    the memory edge ran slower than its work."""
    edge = _policy_record("none", 2.0)
    edge["metrics"]["cuda_alloc_retries"] = 16
    pool = {"none-edge": edge, "full": _policy_record("full", 1.2)}
    assert predicted(_policy_record("none", 1.0, mbs=8), pool)[2].name == "full"
    assert predicted(_policy_record("none", 1.0, mbs=8), {"none-edge": edge})[2].name == "none-edge"


def test_a_record_faster_than_its_gpu_s_peak_is_passed_over() -> None:
    """A record whose parts, as read, leave its FLOPs less time than its GPU's datasheet peak needs
    measured no compute rate: the next set-up stands instead."""
    pool = {"too-fast": record(step=0.01), "m2": record(model="m2", n_params=2 * P)}  # 4,900 TFLOP/s
    assert predicted(record(mbs=8), pool)[2].name == "m2"

"""Numbers that cannot mislead: strict records for a diverged loss, steady steps only,
plausibility against the measured GEMM rate, sweep values that are the values run."""

from __future__ import annotations

import dataclasses

import pytest

from flopsweep.config import RunConfig
from flopsweep.metrics import (
    PLAUSIBLE_FACTOR,
    compute_metrics,
    executed_tflops_floor,
    sanity_problem,
    unsteady_steps,
    warnings_for,
)


def test_unsteady_steps_finds_a_compile_step() -> None:
    assert unsteady_steps([0.1, 0.1, 0.1, 0.1]) == []
    assert unsteady_steps([2.0, 0.1, 0.11, 0.1]) == [0]
    assert unsteady_steps([0.1, 0.1]) == []  # too few steps to judge


def _ranks(step_s: float, device: str, gemm: float | None) -> list[dict]:
    return [
        {
            "rank": 0,
            "device": device,
            "step_times_s": [step_s] * 5,
            "losses": [6.0] * 7,
            "peak_cuda_allocated_bytes": None,
            "peak_cuda_reserved_bytes": None,
            "peak_host_rss_bytes": 1,
            "matmul_tflops": gemm,
        }
    ]


def test_faster_than_the_measured_gemm_rate_is_invalid_even_on_an_unknown_gpu() -> None:
    cfg = dataclasses.replace(RunConfig(), device="cuda")
    cfg.attention.density = 1.0
    flops = compute_metrics(cfg, _ranks(1.0, "NVIDIA Imaginary X1", 1.0))["hardware_flops_per_iteration"]
    rate = flops / 1e12  # TFLOP/s of a one-second step
    slow = compute_metrics(cfg, _ranks(1.0, "NVIDIA Imaginary X1", rate * 2))
    assert slow["peak_tflops"] is None and sanity_problem(cfg, slow, "cuda") is None
    fast = compute_metrics(cfg, _ranks(1.0, "NVIDIA Imaginary X1", rate / (PLAUSIBLE_FACTOR + 0.1)))
    assert "measured dense GEMM rate" in sanity_problem(cfg, fast, "cuda")
    assert fast["matmul_fraction"] == pytest.approx(
        fast["model_tflops_per_device"] / fast["measured_matmul_tflops"]
    )


def test_alloc_retries_are_the_max_over_ranks_and_a_warning() -> None:
    """A rank whose caching allocator retried cudaMalloc is flagged; CPU ranks record none."""
    cfg = dataclasses.replace(RunConfig(), device="cuda")
    cfg.attention.density = 1.0
    ranks = _ranks(1.0, "NVIDIA H200", 600.0) * 2
    ranks = [{**ranks[0], "cuda_alloc_retries": 0}, {**ranks[1], "rank": 1, "cuda_alloc_retries": 7}]
    m = compute_metrics(cfg, ranks)
    assert m["cuda_alloc_retries"] == 7 and [r["cuda_alloc_retries"] for r in m["per_rank"]] == [0, 7]
    [warning] = [w for w in warnings_for(m) if w.startswith("alloc_retries")]
    assert "7 times" in warning and "batch.micro_batch_size" in warning
    calm = compute_metrics(cfg, [{**r, "cuda_alloc_retries": 0} for r in ranks])
    assert calm["cuda_alloc_retries"] == 0 and not [w for w in warnings_for(calm) if w.startswith("alloc")]
    cpu = compute_metrics(RunConfig(), _ranks(1.0, "cpu", None))
    assert cpu["cuda_alloc_retries"] is None


def test_sort_range_is_refused_with_the_list_to_write() -> None:
    from run import sorted_range_problem

    message = sorted_range_problem(["batch.micro_batch_size=sort(range(1,6,2),reverse=true)"])
    assert "batch.micro_batch_size=5,3,1" in message and "hydra#3228" in message
    assert sorted_range_problem(["seed=range(3)", "model=gpt-tiny"]) is None


def test_the_policies_hardware_flops_on_an_h200_record() -> None:
    """Per policy on an H200 (a datasheet peak): every_n adds the share of full's recompute that its
    blocks run; memory_budget has no hardware figure, no HFU and says why, while MFU and the
    plausibility bound (on the model TFLOPs) stand."""
    from flopsweep.config import CheckpointingConfig
    from flopsweep.options import EveryNConfig, MemoryBudgetConfig

    base = dataclasses.replace(RunConfig(), device="cuda")
    base.attention.density = 1.0
    ranks = _ranks(1.0, "NVIDIA H200", 600.0)

    def run(policy, compiled: bool = False) -> dict:
        return compute_metrics(
            dataclasses.replace(base, activation_checkpointing=policy, compile=compiled), ranks
        )

    none, full = run(CheckpointingConfig(name="none")), run(CheckpointingConfig(name="full"))
    extra = full["hardware_flops_per_iteration"] - none["hardware_flops_per_iteration"]
    half = run(EveryNConfig(every=2))  # gpt-tiny: 2 blocks, 1 wrapped
    assert half["hardware_flops_per_iteration"] == pytest.approx(
        none["hardware_flops_per_iteration"] + extra / 2
    )
    budget = run(MemoryBudgetConfig(budget=0.3), compiled=True)
    assert budget["recompute"] == "unknown" and budget["mfu"] == pytest.approx(none["mfu"])
    assert (budget["hardware_flops_per_iteration"], budget["hardware_tflops_per_device"], budget["hfu"]) == (
        None,
        None,
        None,
    )
    assert any(w.startswith("recompute_unknown") for w in warnings_for(budget))
    assert sanity_problem(dataclasses.replace(base, compile=True), budget, "cuda") is None


def test_a_long_causal_sequence_is_judged_on_the_half_square_that_runs(hydra_compose) -> None:
    """Llama 3.1 8B at 65,536 tokens on an H200 (session 19): the convention's full square counted
    806 TFLOP/s against a measured 705 GEMM rate, yet FlashAttention ran only the causal half. The
    bound takes the half; a step twice as fast still cannot be real."""
    cfg = hydra_compose(
        "model=llama3.1-8b backend=fsdp precision=bf16 attention=sdpa activation_checkpointing=full "
        "device=cuda batch.micro_batch_size=1 model.seq_len=65536 loss.chunk_tokens=8192".split()
    )
    full = compute_metrics(cfg, _ranks(1.0, "NVIDIA H200", 705.0))["hardware_flops_per_iteration"]
    step = full / 806e12  # the step the record counted at 806 TFLOP/s
    honest = compute_metrics(cfg, _ranks(step, "NVIDIA H200", 705.0))
    assert honest["hardware_tflops_per_device"] == pytest.approx(806, rel=1e-3)
    assert sanity_problem(cfg, honest, "cuda") is None
    assert 0.55 * 806 < executed_tflops_floor(cfg, honest) < 0.75 * 806  # attention is most of it
    too_fast = compute_metrics(cfg, _ranks(step / 2, "NVIDIA H200", 705.0))
    assert "causal attention's half square" in sanity_problem(cfg, too_fast, "cuda")


def test_model_hf_takes_the_causal_half_of_its_counted_square_too(hydra_compose) -> None:
    """``model=hf`` counts eager attention's whole square and ignored ``density``: its timing bound kept
    the full square, so an honest long-sequence run read as too fast. The square is what grows with
    ``s^2`` (qwen3-tiny: 4 heads of 32, 2 layers; 12 s^2 h d per layer, forward and backward)."""
    from flopsweep.models import family
    from flopsweep.plan import validate

    s = 4096
    cfg = validate(hydra_compose(["model=hf", "model.config=qwen3-tiny", f"model.seq_len={s}", "device=cpu"]))
    fam, square = family(cfg.model), 12 * s * s * 4 * 32 * 2
    assert fam.model_flops(cfg.model, s, 1.0) - fam.model_flops(cfg.model, s, 0.5) == pytest.approx(
        square / 2
    )
    recomputed = fam.hardware_flops(cfg.model, s, 1.0, "early_stop") - fam.hardware_flops(
        cfg.model, s, 0.5, "early_stop"
    )
    assert recomputed == pytest.approx(square / 2 * 4 / 3)  # the recomputed forward's square too
    full = compute_metrics(cfg, _ranks(1.0, "NVIDIA H200", 705.0))["hardware_flops_per_iteration"]
    honest = compute_metrics(cfg, _ranks(full / 1.3 / 705e12, "NVIDIA H200", 705.0))  # the convention: 1.3x
    assert sanity_problem(cfg, honest, "cuda") is None
    too_fast = compute_metrics(cfg, _ranks(full / 3 / 705e12, "NVIDIA H200", 705.0))
    assert "causal attention's half square" in sanity_problem(cfg, too_fast, "cuda")


def test_a_block_sparse_layout_is_causal_already_and_not_halved_again(hydra_compose) -> None:
    """A block-sparse layout keeps no block above the diagonal (its density is of the causal half
    already); halving it again let a run twice too fast pass. Only the diagonal blocks' upper halves
    come off: causal, 16 blocks of 128 at 2,048 tokens, density 136/256, floor 136/256 - 8/256."""
    from flopsweep.models import family

    cfg = hydra_compose(
        "model=gpt-tiny attention=blocksparse attention.layout=causal attention.block_size=128 "
        "model.seq_len=2048 device=cuda precision=bf16".split()
    )
    resolved = dataclasses.replace(cfg.attention, density=136 / 256)  # as validation resolves it
    cfg = dataclasses.replace(cfg, attention=resolved)
    m = compute_metrics(cfg, _ranks(1.0, "NVIDIA H200", 705.0))
    fam = family(cfg.model)
    assert executed_tflops_floor(cfg, m) * 1e12 == pytest.approx(
        fam.hardware_flops(cfg.model, m["tokens_per_step"], 128 / 256, "none")
    )
    assert executed_tflops_floor(cfg, m) * 1e12 > fam.hardware_flops(
        cfg.model, m["tokens_per_step"], 0.5 * 136 / 256, "none"
    )


def test_an_fp8_run_without_a_measured_rate_is_bounded_by_the_fp8_peak(hydra_compose) -> None:
    """With no GEMM rate measured the bound was the datasheet peak that MFU takes, bf16's for an fp8
    run (989 on an H100): an fp8 run at 1.2x it, 60% of the fp8 peak (1,979), read as impossible."""
    cfg = hydra_compose("model=gpt-tiny device=cuda precision=fp8".split())
    flops = compute_metrics(cfg, _ranks(1.0, "NVIDIA H100 80GB HBM3", None))["hardware_flops_per_iteration"]
    fp8 = compute_metrics(cfg, _ranks(flops / 1.2 / 989e12, "NVIDIA H100 80GB HBM3", None))
    assert (fp8["peak_tflops"], fp8["peak_tflops_fp8"]) == (
        pytest.approx(989, rel=0.01),
        pytest.approx(1979, rel=0.01),
    )
    assert sanity_problem(cfg, fp8, "cuda") is None
    too_fast = compute_metrics(cfg, _ranks(flops / 2.5 / 989e12, "NVIDIA H100 80GB HBM3", None))
    assert "the fp8 datasheet peak" in sanity_problem(cfg, too_fast, "cuda")

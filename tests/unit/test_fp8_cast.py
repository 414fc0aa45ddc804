"""The eager float8 cast traffic (``flopsweep.fp8_cast``, issue 41): its bytes for a small workload counted by
hand, none for compiled fp8 or bf16, and where the prediction adds it (the flat estimate, a stand-in record of
another compile setting)."""

from __future__ import annotations

import pytest

from flopsweep import fp8_cast, nearest, nearest_measured
from flopsweep.predict import memory_tbps, workload_from_record
from flopsweep.predict_record import predict_record

H100 = "NVIDIA H100 80GB HBM3"

SMALL = {  # Llama-shaped: 4 heads of 16, 2 KV heads, SwiGLU width 128, 2 blocks
    "name": "tiny",
    "arch": "llama",
    "n_layer": 2,
    "n_embd": 64,
    "n_head": 4,
    "n_kv_head": 2,
    "ffn_dim": 128,
    "seq_len": 32,
    "vocab_size": 256,
}
# Its converted Linears (in, out): wq (64, 64), wk (64, 32), wv (64, 32), wo (64, 64), w1 (64, 128),
# w3 (64, 128), w2 (128, 64): inputs 6 x 64 + 128 = 512, outputs 64 + 32 + 32 + 64 + 128 + 128 + 64
# = 512, weights 4096 + 2048 + 2048 + 4096 + 8192 + 8192 + 8192 = 36864 a block.
INPUTS, OUTPUTS, WEIGHTS = 512, 512, 36864
TOKENS = 2 * 32  # micro batch 2 x seq_len 32
PER_OPERAND = 2 * 33 + 2  # two casts of 33 bytes an element, one layout copy of 2
TENSORWISE = 2 * (TOKENS * (INPUTS + OUTPUTS) * PER_OPERAND + WEIGHTS * PER_OPERAND)  # 2 blocks
ROWWISE = TENSORWISE + 2 * 12 * (
    TOKENS * INPUTS + WEIGHTS
)  # grad_input and grad_weight scaled after the GEMM


def record(precision: str = "fp8", compile: bool = False, *, step: float = 1.0, mbs: int = 2) -> dict:
    """An ok one-GPU ``single`` record of :data:`SMALL` on an H100; model FLOPs 6 x 1e6 x tokens."""
    flops = 6.0 * 1e6 * mbs * 32
    return {
        "status": "ok",
        "config": {
            "model": SMALL,
            "attention": {"name": "sdpa"},
            "backend": {"name": "single"},
            "precision": {"name": precision},
            "activation_checkpointing": {"name": "none"},
            "compile": compile,
            "device": "cuda",
            "batch": {"micro_batch_size": mbs, "grad_accum": 1},
        },
        "model": {"n_params": 1_000_000, "n_layer": 2, "n_embd": 64, "seq_len": 32},
        "system": {"world_size": 1, "device_name": H100, "parallel": {"dp_shard": 1}},
        "metrics": {
            "iteration_time_s": {"mean": step},
            "model_flops_per_iteration": flops,
            "hardware_flops_per_iteration": flops,
            "measured_matmul_tflops": 1000.0,
        },
    }


@pytest.mark.parametrize(("precision", "expected"), [("fp8", TENSORWISE), ("fp8-rowwise", ROWWISE)])
def test_the_eager_cast_bytes_of_a_small_llama_counted_by_hand(precision: str, expected: int) -> None:
    """Each operand of each Linear cast twice at 33 bytes an element plus a 2-byte layout copy; rowwise
    scales the two backward GEMMs' outputs after them (12 bytes an element of T x I and of W); over 2
    blocks (tensorwise 13,926,400 bytes, rowwise 15,597,568); the seconds: the bytes over the datasheet
    bandwidth."""
    r = record(precision)
    assert fp8_cast.linear_shapes(r) == (WEIGHTS, INPUTS, OUTPUTS)
    w = workload_from_record(r)
    assert fp8_cast.step_bytes(r, w) == expected == {"fp8": 13_926_400, "fp8-rowwise": 15_597_568}[precision]
    seconds, words = fp8_cast.cast_time(r, w, memory_tbps(H100))
    assert seconds == pytest.approx(expected / 3.35e12)
    assert words.endswith("at 3.35 TB/s (H100 SXM datasheet; flopsweep.fp8_cast)"), words
    assert fp8_cast.cast_time(r, w, (None, "no datasheet memory bandwidth for X"))[0] == 0.0


def test_llama_3_2_1b_rowwise_at_micro_batch_8_moves_927_gb_a_step() -> None:
    """The record of issue 41 (Llama 3.2 1B, fp8-rowwise, eager, micro batch 8, 16 blocks): I = 20480,
    O = 23552, W = 60,817,408 a block; 16384 tokens x (80 I + 68 O) + 80 W = 57,948,504,064 bytes a block."""
    model = {
        "name": "llama3.2-1b",
        "arch": "llama",
        "n_layer": 16,
        "n_embd": 2048,
        "n_head": 32,
        "n_kv_head": 8,
        "ffn_dim": 8192,
        "seq_len": 2048,
        "vocab_size": 128256,
    }
    r = record("fp8-rowwise", mbs=8)
    r["config"]["model"] = model
    r["model"].update(n_layer=16, n_embd=2048, seq_len=2048)
    assert fp8_cast.linear_shapes(r) == (60_817_408, 20_480, 23_552)
    assert fp8_cast.step_bytes(r, workload_from_record(r)) == 16 * 57_948_504_064


@pytest.mark.parametrize(("precision", "compile"), [("fp8", True), ("fp8-rowwise", True), ("bf16", False)])
def test_compiled_fp8_and_bf16_cast_nothing(precision: str, compile: bool) -> None:
    """Compiled, Inductor fuses the casts into the GEMMs' neighbours; bf16 casts nothing: no term, no
    words."""
    r = record(precision, compile)
    w = workload_from_record(r)
    assert fp8_cast.step_bytes(r, w) == 0.0
    assert fp8_cast.cast_time(r, w, memory_tbps(H100)) is None
    made = predict_record("target", r, [])
    assert "eager fp8 casts" not in made["source"]


def test_the_flat_estimate_adds_the_casts_and_says_so() -> None:
    """No record to stand for it: the FLOPs at 0.6 of the GEMM rate plus the casts at the datasheet
    bandwidth."""
    made = predict_record("target", record("fp8-rowwise"), [])
    flat = 6.0 * 1e6 * 2 * 32 / (0.6 * 1000.0e12)
    assert made["compute_source"] == "flops"
    assert made["compute_s"] == pytest.approx(flat + ROWWISE / 3.35e12)
    assert "(1000 TFLOP/s) + eager fp8 casts" in made["source"], made["source"]


def _nearest(target: dict, records: dict[str, dict]):
    me = nearest_measured.describe("target", target)
    pairs = list(records.items())
    return nearest.nearest_compute(me, nearest_measured.pool_of(pairs), pairs)


def test_a_compiled_record_stands_for_an_eager_fp8_run_with_its_casts_added() -> None:
    """No eager record of the recipe: the compiled one's rate carries over and the run's casts are added;
    the reverse takes the eager record's casts out of its step before its rate is taken."""
    found, why, first = _nearest(
        record("fp8-rowwise"), {"compiled": record("fp8-rowwise", True, step=0.5, mbs=4)}
    )
    assert why == "" and first.name == "compiled"
    assert found.compute_s == pytest.approx(0.5 / 2 + ROWWISE / 3.35e12)  # half the tokens, then the casts
    assert "differs in precision" not in found.source and "compile false vs true" in found.source
    assert "stand-in: no record ran fp8-rowwise with compile false" in found.source
    assert "this run's eager fp8 casts" in found.source and "taken out" not in found.source
    eager = record("fp8-rowwise", step=0.5, mbs=4)
    found, _, _ = _nearest(record("fp8-rowwise", True), {"eager": eager})
    out = fp8_cast.step_bytes(eager, workload_from_record(eager)) / 3.35e12
    assert found.compute_s == pytest.approx((0.5 - out) / 2)
    assert "its eager fp8 casts" in found.source and "taken out" in found.source


def test_bf16_eager_stands_in_last_and_a_record_of_the_run_s_own_kind_first() -> None:
    """An eager fp8 run: its own kind's record first (nothing moved), then its recipe compiled, then bf16
    eager (the float8 GEMMs' speed-up not modelled, said); a bf16 run never takes an fp8 record."""
    pool = {"bf16": record("bf16", step=0.4), "compiled": record("fp8", True, step=0.3, mbs=4)}
    own = {**pool, "eager": record("fp8", step=0.6, mbs=4)}
    found, _, first = _nearest(record("fp8"), own)
    assert first.name == "eager" and found.compute_s == pytest.approx(0.3) and "stand-in" not in found.source
    assert _nearest(record("fp8"), pool)[2].name == "compiled"
    found, _, first = _nearest(record("fp8"), {"bf16": pool["bf16"]})
    assert first.name == "bf16" and found.compute_s == pytest.approx(0.4 + TENSORWISE / 3.35e12)
    assert "the fp8 GEMMs' speed-up over bf16 not modelled" in found.source
    assert _nearest(record("bf16"), {"compiled": pool["compiled"]})[0] is None

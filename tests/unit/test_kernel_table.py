"""benchmarks/kernel_table.py: GPU time of one step by kernel family, from Chrome traces."""

from __future__ import annotations

import gzip
import importlib.util
import json
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "kernel_table.py"
_spec = importlib.util.spec_from_file_location("kernel_table", _PATH)
kt = importlib.util.module_from_spec(_spec)
sys.modules["kernel_table"] = kt
_spec.loader.exec_module(kt)


def _kernel(name: str, ts: float, dur: float, cat: str = "kernel") -> dict:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": 7}


def _trace(tmp_path: Path, name: str, events: list[dict]) -> Path:
    path = tmp_path / name
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump({"traceEvents": events}, f)
    return path


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTT", "GEMM"),
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "GEMM"),
        ("triton_tem_fused_mm_3", "GEMM"),
        (
            "pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128>>",
            "attention (flash / cuDNN / efficient)",
        ),
        (
            "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>",
            "optimizer and foreach (multi-tensor)",
        ),
        ("triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_0", "Inductor-fused (Triton)"),
        ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>", "loss (cross entropy)"),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
            "eager elementwise / reduce / copy",
        ),
        ("Memcpy DtoD (Device -> Device)", "memcpy / memset"),
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "communication (NCCL)"),
        ("some_new_kernel", "other"),
    ],
)
def test_family_of_kernel_names(name: str, family: str) -> None:
    assert kt.family(name) == family


def test_step_work_busy_idle_and_families(tmp_path: Path) -> None:
    # The host step annotation spans 100-200 us; device work launched inside it counts (also
    # when it runs after 200), work launched before it does not. Kineto's GPU-side step span
    # (cut short at 140) is not used.
    def launch(ts: float, c: int, cat: str = "cuda_runtime") -> dict:
        return {
            "ph": "X",
            "cat": cat,
            "name": "cudaLaunchKernel",
            "ts": ts,
            "dur": 1.0,
            "args": {"correlation": c},
        }

    def k(name: str, ts: float, dur: float, c: int, cat: str = "kernel") -> dict:
        return {**_kernel(name, ts, dur, cat), "args": {"correlation": c}}

    events = [
        {"ph": "X", "cat": "user_annotation", "name": "flopsweep.step", "ts": 100.0, "dur": 100.0},
        {"ph": "X", "cat": "gpu_user_annotation", "name": "flopsweep.step", "ts": 110.0, "dur": 30.0},
        launch(50, 1),
        k("nvjet_gemm_a", 60.0, 20.0, 1),  # launched before the step
        launch(100, 2),
        k("nvjet_gemm_a", 110.0, 30.0, 2),
        launch(101, 3),
        k("nvjet_gemm_a", 135.0, 10.0, 3),  # overlaps the previous: busy is a union
        launch(102, 4, "cuda_driver"),
        k("flash_fwd_kernel", 160.0, 20.0, 4),
        launch(190, 5),
        k("Memset (Device)", 200.0, 5.0, 5, cat="gpu_memset"),
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 100.0, "dur": 90.0},
    ]
    s = kt.summarize(kt.read_trace(_trace(tmp_path, "a.json.gz", events)))
    assert s["kernels"] == 4
    assert s["span_ms"] == pytest.approx(0.095)  # 110 .. 205 us
    assert s["busy_ms"] == pytest.approx(0.060)  # 35 + 20 + 5 us
    assert s["idle_ms"] == pytest.approx(0.035)
    assert s["families"]["GEMM"] == pytest.approx(0.040)  # summed, not unioned
    assert s["top"][0][:1] == ("nvjet_gemm_a",) and s["top"][0][2] == 2


def test_two_traces_give_a_delta_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _trace(
        tmp_path, "a.json.gz", [_kernel("nvjet_x", 0.0, 1000.0), _kernel("triton_poi_fused_1", 1500.0, 500.0)]
    )
    b = _trace(tmp_path, "b.json.gz", [_kernel("nvjet_x", 0.0, 1200.0)])
    out = tmp_path / "k.md"
    assert kt.main([f"tt={a}", f"fs={b}", "--out", str(out)]) == 0
    report = out.read_text()
    assert "| ms per step | tt | fs | tt - fs |" in report
    assert "| GEMM | 1.00 | 1.20 | -0.20 |" in report
    assert "| GPU idle (span - busy) | 0.50 | 0.00 | +0.50 |" in report
    assert report == capsys.readouterr().out


def test_bad_arguments_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        kt.main(["no-label-here"])
    assert e.value.code == 2 and "write LABEL=TRACE" in capsys.readouterr().err
    empty = _trace(
        tmp_path, "cpu.json.gz", [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 5}]
    )
    assert kt.main([f"cpu={empty}"]) == 1
    assert "no GPU kernels in the trace" in capsys.readouterr().err


def test_duplicate_labels_bad_top_out_and_non_traces_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _trace(tmp_path, "a.json.gz", [_kernel("nvjet_x", 0.0, 10.0)])
    for argv, words in [
        ([f"x={a}", f"x={a}"], "the label is given twice"),
        ([f"x={a}", "--top", "-1"], "--top -1"),
        ([f"x={a}", "--out", str(tmp_path)], "not a file in an existing folder"),
        ([f"x={a}", "--out", str(tmp_path / "no" / "such.md")], "not a file in an existing folder"),
    ]:
        with pytest.raises(SystemExit) as e:
            kt.main(argv)
        assert e.value.code == 2 and words in capsys.readouterr().err, argv
    record = tmp_path / "metrics.json"
    record.write_text(json.dumps({"status": "ok"}))
    assert kt.main([f"r={record}"]) == 1
    assert "not a Chrome trace (no 'traceEvents' key)" in capsys.readouterr().err

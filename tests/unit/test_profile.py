"""``profile=true``: the step breakdown from a Chrome trace, and a real 2-rank gloo run."""

from __future__ import annotations

import pytest

from flopsweep.annotations import OPTIMIZER_ANNOTATION, STEP_ANNOTATION
from flopsweep.metrics import mean_breakdown
from flopsweep.profile import (
    KINETO_LINE,
    PARTS,
    intersect,
    native_chatter_to,
    step_breakdown,
    subtract,
    trace_dir_problem,
    union,
)


def _ev(cat: str, name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur}


def test_interval_algebra() -> None:
    a = union([(0, 10), (5, 15), (20, 30), (30, 31), (40, 40)])
    assert a == [(0, 15), (20, 31)]
    assert intersect(a, [(10, 25)]) == [(10, 15), (20, 25)]
    assert subtract(a, [(2, 3), (12, 22)]) == [(0, 2), (3, 12), (22, 31)]
    assert subtract([(0, 5)], []) == [(0, 5)]


def test_cuda_breakdown_from_a_trace() -> None:
    """Step 0-100 us: compute 0-40 and 50-60 (optimizer span 50-70, its kernel 50-60), NCCL
    30-48 (10 us of it overlapped by compute): exposed 8 us, idle the rest."""
    events = [
        _ev("user_annotation", STEP_ANNOTATION, 0, 100),
        _ev("cpu_op", "aten::mm", 0, 95),  # host ops do not count on CUDA
        _ev("kernel", "sm90_xmma_gemm_bf16", 0, 25),
        _ev("kernel", "elementwise", 20, 20),  # 20-40 on another stream
        _ev("kernel", "ncclDevKernel_AllGather_RING_LL", 30, 18),
        _ev("gpu_user_annotation", OPTIMIZER_ANNOTATION, 50, 20),
        _ev("kernel", "multi_tensor_apply_kernel", 50, 10),
        _ev("kernel", "after_the_step", 120, 10),
    ]
    b = step_breakdown(events, cuda=True)
    us = 1e-6
    assert b.step_s == pytest.approx(100 * us)
    assert b.compute_s == pytest.approx(40 * us)
    assert b.optimizer_s == pytest.approx(10 * us)
    assert b.comm_s == pytest.approx(18 * us)
    assert b.exposed_comm_s == pytest.approx(8 * us)
    assert b.idle_s == pytest.approx(42 * us)
    assert sum(getattr(b, p) for p in PARTS) == pytest.approx(b.step_s)
    assert b.view == "cuda"


def test_cuda_optimizer_found_through_launch_correlation() -> None:
    """Without a gpu_user_annotation, the optimizer's kernels are those launched inside its host span."""
    launch = lambda ts, c: {**_ev("cuda_runtime", "cudaLaunchKernel", ts, 1), "args": {"correlation": c}}  # noqa: E731
    kernel = lambda ts, dur, c: {**_ev("kernel", "k", ts, dur), "args": {"correlation": c}}  # noqa: E731
    events = [
        _ev("user_annotation", STEP_ANNOTATION, 0, 100),
        _ev("user_annotation", OPTIMIZER_ANNOTATION, 30, 10),
        launch(5, 1),
        kernel(10, 30, 1),
        launch(32, 2),
        kernel(45, 15, 2),
    ]
    b = step_breakdown(events, cuda=True)
    assert (b.compute_s, b.optimizer_s, b.idle_s) == pytest.approx((30e-6, 15e-6, 55e-6))


def test_cuda_optimizer_by_launch_even_when_its_gpu_annotation_is_cut_short() -> None:
    """Kineto's GPU-side annotations do not nest: torch's own ``Optimizer.step`` span cuts
    flopsweep's short (Llama 8B on an H200: 27 of 93 ms). The launches decide, including Triton
    kernels launched through the driver API."""
    launch = lambda cat, ts, c: {**_ev(cat, "launch", ts, 1), "args": {"correlation": c}}  # noqa: E731
    kernel = lambda ts, dur, c: {**_ev("kernel", "k", ts, dur), "args": {"correlation": c}}  # noqa: E731
    events = [
        _ev("user_annotation", STEP_ANNOTATION, 0, 200),
        _ev("user_annotation", OPTIMIZER_ANNOTATION, 100, 50),
        _ev("gpu_user_annotation", OPTIMIZER_ANNOTATION, 110, 10),  # cut short at 120
        _ev("gpu_user_annotation", "Optimizer.step#AdamW.step", 120, 60),
        launch("cuda_runtime", 10, 1),
        kernel(20, 80, 1),  # forward and backward: 20-100
        launch("cuda_runtime", 105, 2),
        kernel(110, 40, 2),  # clipping and the fused update: 110-150
        launch("cuda_driver", 140, 3),
        kernel(150, 30, 3),  # a Triton kernel of the optimizer: 150-180
    ]
    b = step_breakdown(events, cuda=True)
    assert (b.compute_s, b.optimizer_s) == pytest.approx((80e-6, 70e-6))
    assert b.idle_s == pytest.approx(50e-6)


def test_cpu_breakdown_counts_operators_and_the_optimizer_annotation() -> None:
    events = [
        _ev("user_annotation", STEP_ANNOTATION, 1000, 50),
        _ev("cpu_op", "aten::addmm", 1000, 20),
        _ev("cpu_op", "c10d::allreduce_", 1025, 5),
        _ev("user_annotation", OPTIMIZER_ANNOTATION, 1030, 20),
        _ev("cpu_op", "aten::_foreach_add_", 1032, 10),
    ]
    b = step_breakdown(events, cuda=False)
    assert (b.compute_s, b.optimizer_s, b.exposed_comm_s) == pytest.approx((20e-6, 10e-6, 5e-6))
    assert b.idle_s == pytest.approx(15e-6)


def test_a_trace_without_the_step_annotation_is_refused() -> None:
    with pytest.raises(ValueError, match=STEP_ANNOTATION):
        step_breakdown([_ev("kernel", "k", 0, 1)], cuda=True)


def test_mean_over_ranks_keeps_the_sum() -> None:
    a = {"step_s": 1.0, "compute_s": 0.5, "optimizer_s": 0.1, "exposed_comm_s": 0.2, "idle_s": 0.2}
    b = {"step_s": 2.0, "compute_s": 1.0, "optimizer_s": 0.2, "exposed_comm_s": 0.6, "idle_s": 0.2}
    m = mean_breakdown([{**a, "view": "cpu"}, {**b, "view": "cpu"}])
    assert m["step_s"] == 1.5 and sum(m[p] for p in PARTS) == pytest.approx(1.5)
    assert m["ranks"] == 2 and m["view"] == "cpu"


def test_cpu_breakdown_counts_gloo_spans_on_gloo_threads_as_communication() -> None:
    """gloo's all-reduce runs on its own thread as a ``gloo:`` user annotation; the main thread
    waiting for it is exposed communication, not idle."""
    events = [
        _ev("user_annotation", STEP_ANNOTATION, 0, 100),
        _ev("cpu_op", "aten::mm", 0, 60),
        {**_ev("user_annotation", "gloo:all_reduce", 50, 30), "tid": 7},
    ]
    b = step_breakdown(events, cuda=False)
    assert (b.compute_s, b.comm_s, b.exposed_comm_s, b.idle_s) == pytest.approx((60e-6, 30e-6, 20e-6, 20e-6))


@pytest.mark.parametrize(
    "breakdown",
    [
        "x",
        [1, 2],
        {"step_s": "nan", "compute_s": 1, "optimizer_s": 0, "exposed_comm_s": 0, "idle_s": 0},
        {"step_s": 1.0, "compute_s": -0.5, "optimizer_s": 0, "exposed_comm_s": 0.5, "idle_s": 1.0},
        {"step_s": 0.037, "compute_s": 10, "optimizer_s": 0, "exposed_comm_s": 0, "idle_s": 0},
        {"step_s": 1.0, "compute_s": 1.0, "optimizer_s": 0, "exposed_comm_s": 0},
    ],
)
def test_a_damaged_breakdown_is_blank_and_flagged(tmp_path, breakdown) -> None:
    import json
    from pathlib import Path

    import analysis

    record = json.loads((Path(__file__).parents[1] / "fixtures/records/v2-ok/metrics.json").read_text())
    record["metrics"]["breakdown"] = breakdown
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "metrics.json").write_text(json.dumps(record))
    df = analysis.load(tmp_path)
    assert df.filter(like="breakdown_").isna().all(axis=None)
    assert "breakdown?: metrics.breakdown" in df.loc[0, "warnings"]
    assert df.loc[0, "status"] == "ok" and df.loc[0, "model_tflops_per_device"] > 0  # the rest stays


@pytest.mark.parametrize("optimizer_from", [None, "launch"])
def test_an_old_cuda_breakdown_keeps_its_step_but_not_its_optimizer_split(tmp_path, optimizer_from) -> None:
    """CUDA breakdowns recorded before the optimizer was found by launch undercount it: their
    compute/optimizer split is blank and flagged; step, exposed communication and idle stay."""
    import json
    from pathlib import Path

    import analysis

    record = json.loads((Path(__file__).parents[1] / "fixtures/records/v2-ok/metrics.json").read_text())
    b = {
        "step_s": 0.5,
        "compute_s": 0.45,
        "optimizer_s": 0.02,
        "exposed_comm_s": 0.01,
        "idle_s": 0.02,
        "view": "cuda",
    }
    record["metrics"]["breakdown"] = b if optimizer_from is None else {**b, "optimizer_from": optimizer_from}
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "metrics.json").write_text(json.dumps(record))
    row = analysis.load(tmp_path).loc[0]
    assert (row["breakdown_step_s"], row["breakdown_idle_s"], row["breakdown_exposed_comm_s"]) == (
        0.5,
        0.02,
        0.01,
    )
    if optimizer_from is None:
        assert pd_isna(row["breakdown_compute_s"]) and pd_isna(row["breakdown_optimizer_s"])
        assert "compute/optimizer split not shown" in row["warnings"]
    else:
        assert (row["breakdown_compute_s"], row["breakdown_optimizer_s"]) == (0.45, 0.02)


def pd_isna(value) -> bool:
    return value is None or value != value


def test_native_chatter_goes_to_the_sink_and_other_output_stays(capfd) -> None:
    """What C++ writes straight to file descriptors 1 and 2 inside the block: Kineto's lines go
    to the sink (the rank's debug log), any other line back to the descriptor it was written to."""
    import os

    kineto = "USDT:2026-11-30 23:55:08 3151:3151 SyncActivityProfilerHandler.cpp:52] profiler_start"
    debug: list[str] = []
    with native_chatter_to(debug.append):
        os.write(2, f"{kineto}\nan honest warning\n".encode())
        os.write(1, b"STAGE:2026-11-30 23:55:08 1:1 x.cpp:1] Completed Stage: Warm Up\nplain\n")
    out, err = capfd.readouterr()
    # stdout's captured lines first, then stderr's
    assert debug == ["STAGE:2026-11-30 23:55:08 1:1 x.cpp:1] Completed Stage: Warm Up", kineto]
    assert (out, err) == ("plain\n", "an honest warning\n")
    assert KINETO_LINE.match("INFO:2026-11-30 23:55:38 3612:3612 GenericActivityProfiler.cpp:562] x")
    assert not KINETO_LINE.match("[flopsweep rank 0] USDT: a run's own line")


def test_trace_dir_problem_names_a_file_in_the_way(tmp_path) -> None:
    (tmp_path / "profile").write_text("not a directory")
    assert trace_dir_problem(tmp_path / "profile") == (
        f"{tmp_path / 'profile'} is a file, not a directory, so no trace can be written there"
    )
    assert (
        trace_dir_problem(tmp_path / "fresh" / "profile") is None
        and (tmp_path / "fresh" / "profile").is_dir()
    )

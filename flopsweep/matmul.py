"""Measured dense-matmul throughput: the achievable ceiling beside the datasheet peak.

``flopsweep.peaks`` gives what the vendor prints; :func:`measure_matmul_tflops` gives
what one large square GEMM actually reaches on this device, at this dtype, with this
torch/cuBLAS (or hipBLASLt) build, clocks and power limit, in well under a second.
"""

from __future__ import annotations

import time
from typing import Any

DEFAULT_N_CUDA = 8192
"""Default matrix size on CUDA/ROCm: 2 * 8192^3 = 1.1e12 FLOPs a product, ~1.4 ms on an
H100/H200 in bf16, large enough for cuBLAS to reach its steady rate."""

DEFAULT_N_CPU = 512
"""Default matrix size elsewhere (CPU): 2.7e8 FLOPs a product, milliseconds."""


def _fp8_dtypes(torch: Any) -> tuple[Any, ...]:
    names = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
    return tuple(getattr(torch, name) for name in names if hasattr(torch, name))


def _sync(torch: Any, device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_matmul_tflops(device: Any, dtype: Any, *, n: int | None = None, budget_s: float = 0.3) -> float:
    """Achievable dense matmul TFLOP/s of one device at one dtype, by a short GEMM burst.

    Method: two random ``n x n`` operands on ``device``; one product as warm-up (cuBLAS
    handle, heuristics, clocks) and one timed alone to size the burst; then ``reps``
    back-to-back products, ``reps = max(1, budget_s / t_single)``, timed between two CUDA
    events (recorded on the current stream, then synchronised) on CUDA/ROCm, or with
    ``time.perf_counter`` elsewhere. FLOPs count ``2 n^3`` per product (one multiply-add
    = 2), so the result is ``reps * 2 n^3 / elapsed_s / 1e12``.

    * float dtypes (``torch.bfloat16``, ``torch.float16``, ``torch.float32``): ``torch.mm``
      into a preallocated output. float32 follows the process's
      ``torch.backends.cuda.matmul.allow_tf32`` (off by default, as in flopsweep, so it
      measures plain FP32).
    * fp8 dtypes (``torch.float8_e4m3fn``, ``float8_e5m2`` and the ROCm ``fnuz`` forms),
      CUDA/ROCm only: ``torch._scaled_mm(a, b_col_major, scale_a=1, scale_b=1,
      out_dtype=torch.bfloat16, use_fast_accum=True)`` with unit tensorwise scales, the
      forward GEMM of a tensorwise fp8 Linear.

    Random data, not zeros: a product of zeros draws less power and runs faster, which
    would overstate the ceiling. The burst is long enough (~0.3 s) to reach the board's
    power limit, so this is the sustained rate a training step sees, below both the
    datasheet peak and a 10-product burst. Measured on one NVIDIA H200 (700 W limit,
    torch 2.11 + CUDA 13): bf16 ~670 TFLOP/s sustained (SM clock 1665 MHz at 673 W)
    against ~775 for 10 products and 989.4 on the datasheet; fp16 ~660, fp32 ~51 (66.9),
    fp8 e4m3 ~1,290 (1,978.9); each call 0.25-0.6 s of wall time.

    Args:
        device: a ``torch.device`` or string, e.g. ``"cuda"``, ``"cuda:1"``, ``"cpu"``.
        dtype: the operand dtype.
        n: matrix size; default :data:`DEFAULT_N_CUDA` (8192) on CUDA/ROCm and
            :data:`DEFAULT_N_CPU` (512) elsewhere. fp8 needs a multiple of 16.
        budget_s: target length in seconds of the timed burst (the whole call adds the
            allocation, the warm-up and one sizing product: well under a second on a
            datacenter GPU at the default n).

    Returns:
        Achieved TFLOP/s (1e12 FLOP/s), a positive finite float.

    Raises:
        RuntimeError: fp8 requested off CUDA, or ``torch._scaled_mm`` missing or refusing
            the dtype on this GPU (fp8 GEMMs need compute capability 8.9+ or CDNA3).
        ValueError: ``n`` < 1, ``budget_s`` <= 0, or an fp8 ``n`` not a multiple of 16.
    """
    import torch

    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    if n is None:
        n = DEFAULT_N_CUDA if dev.type == "cuda" else DEFAULT_N_CPU
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not budget_s > 0:
        raise ValueError(f"budget_s must be > 0, got {budget_s}")

    gen = torch.Generator(device=dev).manual_seed(0)
    if dtype in _fp8_dtypes(torch):
        if dev.type != "cuda":
            raise RuntimeError(f"fp8 matmul probe needs a CUDA/ROCm device, got {dev}")
        if n % 16:
            raise ValueError(f"fp8 GEMM needs n to be a multiple of 16, got {n}")
        if not hasattr(torch, "_scaled_mm"):
            raise RuntimeError(f"this torch ({torch.__version__}) has no torch._scaled_mm for fp8 GEMMs")
        a = torch.randn(n, n, device=dev, generator=gen).to(dtype)
        b = torch.randn(n, n, device=dev, generator=gen).to(dtype).t()  # column-major, as required
        one = torch.ones((), device=dev, dtype=torch.float32)

        def product() -> Any:
            return torch._scaled_mm(
                a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True
            )

        try:
            product()
            _sync(torch, dev)
        except (RuntimeError, NotImplementedError, TypeError) as e:
            name = torch.cuda.get_device_name(dev)
            raise RuntimeError(f"fp8 ({dtype}) GEMM via torch._scaled_mm unsupported on {name}: {e}") from e
    else:
        a = torch.randn(n, n, device=dev, dtype=dtype, generator=gen)
        b = torch.randn(n, n, device=dev, dtype=dtype, generator=gen)
        out = torch.empty(n, n, device=dev, dtype=dtype)

        def product() -> Any:
            return torch.mm(a, b, out=out)

        product()  # warm-up
        _sync(torch, dev)

    t0 = time.perf_counter()
    product()
    _sync(torch, dev)
    t_single = max(time.perf_counter() - t0, 1e-9)
    reps = max(1, int(budget_s / t_single))

    if dev.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        stream = torch.cuda.current_stream(dev)
        start.record(stream)
        for _ in range(reps):
            product()
        end.record(stream)
        end.synchronize()
        elapsed_s = start.elapsed_time(end) / 1e3
    else:
        t0 = time.perf_counter()
        for _ in range(reps):
            product()
        elapsed_s = time.perf_counter() - t0
    return reps * 2.0 * n**3 / max(elapsed_s, 1e-12) / 1e12

"""The host AdamW step the compute probe times under FSDP2's ``cpu_offload`` against the run's own
(torch only, CPU; issue 41, session 39): ``python3 benchmarks/host_adamw.py [CASE ...]``.

Each case is torch's AdamW as :func:`flopsweep.trainers.build_adamw` builds it for host parameters
(``fused=False``, ``foreach=None``: the for-loop kernel) with the probe's clip
(``clip_grad_norm_(..., foreach=True)``), over fp32 parameters of Llama 3.2 1B's shapes: ``head`` the
probe's embedding-and-head piece (the tied 128256 x 2048 embedding and the final norm), ``block`` one
decoder block's, ``head16`` the head's parameters as 16 equal tensors, ``model`` the whole model's
(16 blocks and the head, the run's optimizer), each with constant values (0.01, gradients 1e-3);
``tied`` the head's parameters with the gradients the probe's head piece gives them (embedding, final
norm, tied head and loss, no block between: 6 backward passes of a ``[4, 2048]`` micro batch under bf16
autocast, on CUDA when there is one), copied to the host as the probe copies them. Per case: 2 untimed
steps, then 3 timed, the median, nanoseconds per parameter, the minor page faults per step
(``getrusage``) and the subnormal elements of AdamW's second moments. One JSON line a case.

Measured on the H100 host of session 39 (16 threads; docs/prediction-host-optimizer.md):
head 0.398 s (1.52 ns a parameter), block 0.094 s (1.55), head16 0.465 s (1.77), model 1.852 s (1.50),
tied 1.872 s with 245,379,851 of its 262,670,336 second moments subnormal, against 0.401 s for the
same shapes at constant values.
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time

import torch

H, FFN, KV, VOCAB, LAYERS = 2048, 8192, 512, 128256, 16
BLOCK = [(H, H), (KV, H), (KV, H), (H, H), (FFN, H), (FFN, H), (H, FFN), (H,), (H,)]
CASES = {
    "head": [(VOCAB, H), (H,)],
    "block": BLOCK,
    "head16": [(VOCAB // 16, H)] * 16,
    "model": BLOCK * LAYERS + [(VOCAB, H), (H,)],
}


def tied_grads() -> list[torch.nn.Parameter]:
    """The head piece's parameters with the gradients its probe gives them, on the host (module docstring)."""
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(VOCAB, H, device=dev) * 0.02)
    g = torch.nn.Parameter(torch.ones(H, device=dev))
    idx = torch.randint(0, VOCAB, (4, 2049), device=dev)
    for _ in range(6):
        with torch.autocast(dev, dtype=torch.bfloat16):
            x = torch.nn.functional.rms_norm(torch.nn.functional.embedding(idx[:, :-1], w), (H,), g)
            logits = (x @ w.t()).float().view(-1, VOCAB)
            loss = torch.nn.functional.cross_entropy(logits, idx[:, 1:].reshape(-1))
        loss.backward()
    out = []
    for p in (w, g):
        c = torch.nn.Parameter(p.detach().to("cpu", torch.float32))
        c.grad = p.grad.to("cpu", torch.float32)
        out.append(c)
    return out


def faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def case(name: str, timed: int = 3) -> dict:
    if name == "tied":
        params = tied_grads()
    else:
        params = [torch.nn.Parameter(torch.full(s, 0.01)) for s in CASES[name]]
        for p in params:
            p.grad = torch.full_like(p, 1e-3)
    opt = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, fused=False)

    def step() -> None:
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        opt.step()

    for _ in range(2):
        step()
    times, faulted = [], []
    for _ in range(timed):
        f0, t0 = faults(), time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
        faulted.append(faults() - f0)
    n = sum(p.numel() for p in params)
    med = statistics.median(times)
    return {
        "case": name,
        "params": n,
        "step_s": round(med, 4),
        "ns_per_param": round(med / n * 1e9, 3),
        "minor_faults_per_step": int(statistics.median(faulted)),
        "subnormal_moments": sum(
            int(((v := s["exp_avg_sq"]) != 0).logical_and(v < torch.finfo(torch.float32).tiny).sum())
            for s in opt.state.values()
        ),
        "threads": torch.get_num_threads(),
        "times": [round(t, 4) for t in times],
    }


if __name__ == "__main__":
    for name in sys.argv[1:] or [*CASES, "tied"]:
        print(json.dumps(case(name)), flush=True)

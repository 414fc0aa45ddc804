"""``loss.chunk_tokens``: the LM head fused with its cross-entropy, chunk by chunk.

The fused loss gives the unfused loss and gradients (fp32, 1e-5) for every head the built-in
families have (GPT-2's tied, Llama's tied and untied), at chunks that do and do not divide the
tokens; what cannot fuse is refused before launch; the memory estimate counts a chunk instead of
the whole logits; and real runs (``single``, FSDP2 and ZeRO-3 over two gloo ranks) train the same
losses with and without it.
"""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_runs_train_the_same_losses_fused_and_unfused(hydra_compose, tmp_path) -> None:
    """Same seed and data: ``single``, and FSDP2 and ZeRO-3 over two gloo ranks (Llama's untied head:
    ZeRO-3 gathers ``output.weight`` as an external parameter) give the same losses at each of two
    steps with ``loss.chunk_tokens=48`` as without, and a smaller memory estimate. The trainers are the
    runs' own (``flopsweep.backends.build_trainer``), the six cases in one pair of ranks and one rank
    (``tests/one_rank.py``; CI time: through ``run.py`` they were 6 jobs, 10 rank processes, in two
    Hydra starts); a real ``run.py`` run with the key writes an ``ok`` record that keeps it and the
    estimate."""
    from helpers import make_plan, read_record, run_py
    from one_rank import steps_of

    from flopsweep.memory import estimate
    from flopsweep.plan import Environment

    args = ["model=llama-tiny", "model.tie_embeddings=false", "optim.lr=1e-2", "device=cpu", "precision=fp32"]
    plans = {
        (backend, chunk): make_plan(
            hydra_compose(
                [*args, f"backend={backend}", f"nproc_per_node={nproc}", f"loss.chunk_tokens={chunk}"]
            ),
            Environment(cpu_count=4),
        )
        for backend, nproc in (("fsdp", 2), ("zero3", 2), ("single", 1))
        for chunk in (0, 48)
    }
    found = steps_of({f"{b} {c}": (plan.cfg, plan.layout) for (b, c), plan in plans.items()})
    peak = {key: round(estimate(plan.cfg, plan.layout).total_gib, 6) for key, plan in plans.items()}
    for backend in ("fsdp", "zero3", "single"):
        whole, fused = found[f"{backend} 0"], found[f"{backend} 48"]
        assert len(whole) == len(fused) == (1 if backend == "single" else 2), backend
        assert whole[0]["loss"][0] != whole[0]["loss"][1], backend  # the first step changed the weights
        for w, f in zip(whole, fused, strict=True):
            assert f["loss"][0] == pytest.approx(w["loss"][0], abs=1e-4), backend
            assert f["loss"][1] == pytest.approx(w["loss"][1], abs=1e-3), backend
        assert peak[(backend, 48)] != peak[(backend, 0)], backend
    done = run_py(
        *args,
        "backend=single",
        "loss.chunk_tokens=48",
        "steps.warmup=1",
        "steps.measure=2",
        f"hydra.run.dir={tmp_path}",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    record = read_record(tmp_path / "metrics.json")
    assert record["status"] == "ok" and record["config"]["loss"]["chunk_tokens"] == 48
    assert record["metrics"]["predicted_peak_gib"] == peak[("single", 48)], record["metrics"]

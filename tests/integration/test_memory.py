"""The memory estimate (``flopsweep.memory``): each part's arithmetic, the layouts, offload, the GPU
``plan=true`` plans for, the record's ``metrics.predicted_peak_gib`` and the analysis' error column.

The estimate is a pure function of ``(cfg, layout)``, so layouts that validation may still refuse
(tensor and pipeline parallelism) are tested here directly."""

from __future__ import annotations

import dataclasses
import json
import signal
from pathlib import Path

import pytest
from helpers import run_py

from flopsweep.backends import DeepSpeedConfig
from flopsweep.config import (
    RunConfig,
)
from flopsweep.layout import Layout
from flopsweep.memory import (
    GIB,
    estimate,
)
from flopsweep.models import family
from flopsweep.models.gpt2 import GPT2Config
from flopsweep.zero_memory import zero3_buffer_bytes, zero3_sub_groups


@pytest.mark.slow
def test_a_cpu_run_records_the_predicted_peak(tmp_path: Path, hydra_compose) -> None:
    """Every run records the plan's estimate, made before launch: on the CPU it is there, and the
    measured GPU peak is null."""
    proc = run_py(f"hydra.run.dir={tmp_path}", "steps.warmup=1", "steps.measure=1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((tmp_path / "metrics.json").read_text())
    cfg = dataclasses.replace(hydra_compose([]), device="cpu", nproc_per_node="1")
    expected = round(estimate(cfg, Layout()).total / GIB, 6)
    assert record["metrics"]["predicted_peak_gib"] == expected > 0
    assert record["metrics"]["peak_cuda_allocated_bytes"] is None


TINY_ZERO3 = GPT2Config(name="tiny-zero3", n_layer=4, n_embd=64, n_head=4, seq_len=16, vocab_size=512)
"""A GPT small enough for two gloo ranks, with an embedding (V h = 32768) larger than its blocks'
largest tensor (the MLP's 4 h^2 = 16384), as gpt-1.3b's is."""


def _zero3_tiny(**knobs) -> RunConfig:
    backend = DeepSpeedConfig(zero_stage=3, reduce_bucket_size=3000, **knobs)
    cfg = dataclasses.replace(RunConfig(), model=TINY_ZERO3, backend=backend, device="cpu")
    cfg.batch.micro_batch_size = 2
    return cfg


def _zero3_rank(rank: int, world: int, cfgs: dict, init: str, out: str) -> None:
    """One ZeRO-3 rank: per config, DeepSpeed's reduce bucket, its persistent elements, the elements
    gathered at the start of backward of each of four steps and its optimizer sub-groups' elements, to
    ``out/<name>-<rank>.json``."""
    import os

    import torch
    import torch.distributed as dist
    from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus

    from flopsweep.backends import build_deepspeed

    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world))  # zero.Init reads them
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        torch.set_num_threads(1)
        for name, cfg in cfgs.items():
            engine = build_deepspeed(cfg, torch.device("cpu"), Layout(dp_shard=world)).engine
            params = list(engine.module.parameters())
            gathered = []
            for _ in range(4):  # the first step records the module trace, the second uses it
                tokens = torch.randint(0, TINY_ZERO3.vocab_size, (2, TINY_ZERO3.seq_len + 1))
                loss = engine(tokens)
                gathered.append(sum(p.ds_numel for p in params if p.ds_status == ZeroParamStatus.AVAILABLE))
                engine.backward(loss)
                engine.step()
            result = {
                "bucket": [b.buffer.numel() for b in engine.optimizer.ipg_buckets.values()],
                "persistent": sum(p.ds_numel for p in params if p.ds_persist),
                "gathered": gathered,
                "sub_groups": list(engine.optimizer.fp16_partitioned_groups_flat_numel),
            }
            (Path(out) / f"{name}-{rank}.json").write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_zero3_buffers_are_what_deepspeed_holds_on_two_ranks() -> None:
    """Two gloo ranks, real DeepSpeed ZeRO-3 (flopsweep's ``build_deepspeed``): the reduce bucket it
    allocates, the elements it marks persistent and those gathered at the start of backward are
    :func:`zero3_buffer_bytes`' (over the 2 bytes of bf16), at the defaults (max_live 1e9: every
    parameter is kept), with the persistence threshold over the blocks' tensors, with a small
    ``stage3_max_live_parameters`` and the reuse distance over the model (all kept), and, where
    ``stage3_max_live_parameters`` binds, more than none and at most its figure and one tensor more
    (the prefetcher stops after passing it; here one MLP matrix of its 60,000, so an upper bound). Its
    optimizer sub-groups are :func:`zero3_sub_groups`' (one at DeepSpeed's 1e9; cut at 20,000 elements)."""
    import tempfile

    import torch.multiprocessing as mp

    live = 60_000  # a third of the parameters
    cfgs = {
        "defaults": _zero3_tiny(),
        "persist": _zero3_tiny(stage3_param_persistence_threshold=16384, sub_group_size=20_000),
        "live": _zero3_tiny(stage3_max_live_parameters=live, stage3_max_reuse_distance=0),
        "reuse": _zero3_tiny(stage3_max_live_parameters=live),  # max_reuse 1e9 keeps them all
    }
    with tempfile.TemporaryDirectory() as tmp:
        ranks = mp.spawn(_zero3_rank, args=(2, cfgs, f"file://{tmp}/store", tmp), nprocs=2, join=False)
        for process in ranks.processes:
            process.join(timeout=900)
        got = {f.stem: json.loads(f.read_text()) for f in Path(tmp).glob("*.json")}
    # A DeepSpeed rank on gloo now and then aborts in teardown ("terminate called without an active
    # exception", as flopsweep.outcome._died_in_teardown allows for): a rank must exit 0 or by SIGABRT
    # after writing every result; a rank that fails before is a failure.
    for rank, process in enumerate(ranks.processes):
        whole = all(f"{name}-{rank}" in got for name in cfgs)
        assert process.exitcode == 0 or (process.exitcode == -signal.SIGABRT and whole), (
            rank,
            process.exitcode,
        )
    p = family(TINY_ZERO3).n_params(TINY_ZERO3)
    largest = max(4 * 64 * 64, 512 * 64)
    for name, cfg in cfgs.items():
        want = zero3_buffer_bytes(cfg, Layout(dp_shard=2))
        for rank in (0, 1):
            seen = got[f"{name}-{rank}"]
            assert seen["bucket"] == [want.reduce_bucket // 2] == [3000], (name, seen)
            assert seen["persistent"] == want.persistent // 2, (name, seen)
            assert seen["sub_groups"] == zero3_sub_groups(cfg, Layout(dp_shard=2)), (name, seen)
            kept = seen["gathered"][2:]  # once the trace is complete
            formula = (want.persistent + want.retained) // 2
            if name == "live":
                assert formula == want.persistent // 2 + live
                assert all(0 < k - want.persistent // 2 <= live + largest for k in kept), (name, seen)
            else:
                assert formula == p and kept == [p, p], (name, seen)
    assert len(got["persist-0"]["sub_groups"]) > 1 == len(got["defaults-0"]["sub_groups"])

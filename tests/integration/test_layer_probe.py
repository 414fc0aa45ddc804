"""``predict.layer_probe=true`` on gloo ranks: the shallow copies are timed before warm-up, the step is
predicted from them, and the run itself is the run without the probe (the same losses)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import ok_sweep

GLOO = (
    "device=cpu",
    "precision=fp32",
    "nproc_per_node=2",
    "backend=fsdp",
    "steps.warmup=1",
    "steps.measure=2",
    "predict.cpu_probe=false",
)
"""FSDP2 on 2 gloo ranks, fp32, one warm-up and two measured steps (no CPU step probe: the run
without ``predict.layer_probe`` is the run without a probe)."""


@pytest.mark.slow
def test_the_layer_probe_predicts_the_step_and_leaves_the_run_as_it_was(tmp_path: Path) -> None:
    recs = ok_sweep(
        tmp_path,
        "model=llama-tiny",
        "model.n_layer=4",
        *GLOO,
        "predict.layer_probe=false,true",
        "predict.layer_probe_max_spread=1000",  # the loaded CI machine's steps vary; unit/ tests the limit
    )
    by = {r["config"]["predict"]["layer_probe"]: r for r in recs}
    assert set(by) == {False, True}
    probed = by[True]["metrics"]["predicted"]
    assert probed["layer_probe"]["fallback"] is None
    assert probed["layer_probe"]["layers"] == [1, 3] and all(t > 0 for t in probed["layer_probe"]["step_s"])
    assert probed["layer_probe"]["host_s"] == probed["layer_probe"]["step_s"]  # a CPU's step is its host's
    assert len(probed["layer_probe"]["spread"]) == 2 and all(r >= 1 for r in probed["layer_probe"]["spread"])
    t1, t3 = probed["layer_probe"]["step_s"]
    assert "released" not in probed["layer_probe"]  # FSDP2's copies are freed by gc: nothing to say
    if t3 > t1:
        assert probed["compute_source"] == "layers"
        assert probed["iteration_time_s"] == pytest.approx(t1 + 3 * (t3 - t1) / 2)
    else:  # a loaded machine: the 3-block copy stepped no faster than the 1-block one; said, not extrapolated
        assert probed["compute_source"] != "layers"
        assert "layer probe fell back: the layer probe's 3 blocks stepped no slower" in probed["source"]
    assert "layer_probe" not in by[False]["metrics"]["predicted"]
    assert by[True]["metrics"]["loss_first"] == pytest.approx(by[False]["metrics"]["loss_first"], abs=1e-6)
    assert by[True]["metrics"]["loss_last"] == pytest.approx(by[False]["metrics"]["loss_last"], abs=1e-6)
    _check_cost(by[True], settle=0.05)  # the default: the ranks agree after each step from the 4th
    assert by[False]["run"]["wall_s"] > 0
    assert by[False]["metrics"]["probe_s"] is None and by[False]["metrics"]["probe_share"] is None


def _check_cost(record: dict, *, settle: float) -> None:
    """The probe's cost keys agree with each other and the job's wall time, and each copy stopped as
    ``predict.layer_probe_settle`` says (rank 0's own window settled where it stopped early)."""
    import statistics

    from flopsweep.probe_schedule import (
        MAX_MEASURED_STEPS,
        MEASURED_STEPS,
        MIN_UNTIMED,
        SETTLE_STEPS,
        WARMUP_STEPS,
        settled,
    )

    probe, metrics, wall = (
        record["metrics"]["predicted"]["layer_probe"],
        record["metrics"],
        record["run"]["wall_s"],
    )
    pieces = record["metrics"]["predicted"].get("probe") or {}  # the compute probe, when it ran too
    assert 0 < probe["wall_s"] < wall
    assert metrics["probe_s"] == round(probe["wall_s"] + pieces.get("wall_s", 0.0), 3)
    assert metrics["probe_share"] == round(metrics["probe_s"] / wall, 4)
    parts = [probe[key] for key in ("build_s", "untimed_s", "timed_s")]
    assert all(len(part) == len(probe["layers"]) and min(part) >= 0 for part in parts)
    assert sum(map(sum, parts)) <= probe["wall_s"]
    for times, run, timed, step in zip(
        probe["times_s"], probe["steps_run"], probe["steps_timed"], probe["step_s"], strict=True
    ):
        assert len(times) == run
        if run < WARMUP_STEPS + MEASURED_STEPS:  # stopped early: only where this rank had settled
            assert settle > 0 and timed == SETTLE_STEPS and run >= MIN_UNTIMED + SETTLE_STEPS
            assert settled(times[MIN_UNTIMED:], settle)  # (it may have settled before, another rank not)
        else:  # 5 timed, more while the median is noisy (layer_probe.median_error)
            assert MEASURED_STEPS <= timed <= MAX_MEASURED_STEPS and run == WARMUP_STEPS + timed
        assert step >= statistics.median(times[-timed:]) - 1e-5  # the slowest rank's median


@pytest.mark.slow
def test_an_hf_moe_is_probed_on_its_first_layers(tmp_path: Path) -> None:
    """A 5-layer Moonlight (one dense layer, then MoE ones) under FSDP2 on 2 gloo ranks: its copies
    keep the file's first 2 and 4 layers (``hf_nn.build``), and the step is extrapolated from them."""
    from flopsweep.models.hf_files import SHIPPED

    raw = json.loads((SHIPPED / "moonlight-tiny.json").read_text())
    (tmp_path / "moonlight-5.json").write_text(json.dumps({**raw, "num_hidden_layers": 5}))
    (rec,) = ok_sweep(
        tmp_path / "sweep",
        "model=hf",
        f"model.config={tmp_path / 'moonlight-5.json'}",
        *GLOO,
        "predict.layer_probe=true",
        "predict.layer_probe_max_spread=1000",  # a loaded CPU's steps vary; unit/ tests the limit
        "predict.layer_probe_settle=0",  # no early stop: every copy runs 2 untimed and 5-15 timed steps
    )
    probed = rec["metrics"]["predicted"]
    assert all(5 <= k <= 15 for k in probed["layer_probe"]["steps_timed"]), probed["layer_probe"]
    _check_cost(rec, settle=0)
    assert probed["layer_probe"]["layers"] == [2, 4]
    t2, t4 = probed["layer_probe"]["step_s"]
    if t4 > t2:  # extrapolated from the two copies
        assert probed["compute_source"] == "layers" and probed["layer_probe"]["fallback"] is None
        assert probed["iteration_time_s"] == pytest.approx(t2 + 3 * (t4 - t2) / 2)
    else:  # a loaded CPU stepped the 4-layer copy no slower: the next estimate, and why
        assert probed["compute_source"] != "layers" and "stepped no slower" in probed["source"], probed


@pytest.mark.slow
def test_deepspeeds_copies_are_built_with_their_share_of_its_sizes(tmp_path: Path) -> None:
    """ZeRO-3 on 2 gloo ranks, llama-tiny at 3 blocks, its prefetch and reduce buckets and reuse
    distance set as a share of the model (CUDA's defaults are such a share of gpt-1.3b): each copy's
    engine read the sizes scaled by its parameters over the model's (``layer_probe.scaled_window``),
    the live parameters and optimizer sub-groups (DeepSpeed's 1e9) too, and the record says so; the JIT op
    the run loads was loaded before the probe's clock (``deepspeed_backend.prepare``, ``ops_loaded``)."""
    from flopsweep.layer_probe import MAX_MEASURED_STEPS, MEASURED_STEPS, RELEASED, scaled_window
    from flopsweep.models.llama import LlamaConfig, n_params

    (rec,) = ok_sweep(
        tmp_path,
        "model=llama-tiny",
        "model.n_layer=3",
        "model.seq_len=64",
        *[g for g in GLOO if not g.startswith(("backend=", "steps.measure="))],
        "backend=zero3",
        "steps.measure=1",
        "batch.micro_batch_size=1",
        "backend.stage3_prefetch_bucket_size=4e5",
        "backend.reduce_bucket_size=4e5",
        "backend.stage3_max_reuse_distance=7e5",
        "predict.layer_probe=true",
        "predict.layer_probe_max_spread=1000",  # a loaded CPU's steps vary; unit/ tests the limit
    )
    probe = rec["metrics"]["predicted"]["layer_probe"]
    assert probe["fallback"] is None and probe["layers"] == [1, 2] and probe["released"] == RELEASED
    assert all(MEASURED_STEPS <= k <= MAX_MEASURED_STEPS or k == 3 for k in probe["steps_timed"])
    counts = [n_params(LlamaConfig(n_layer=n)) for n in (1, 2, 3)]  # llama-tiny's sizes
    ds = probe["deepspeed"]
    assert ds["params"] == counts == [262_528, 459_392, 656_256] and ds["largest"] == 128 * 384
    # the shared-memory op the run's init_distributed loads, loaded before the probe's clock started
    assert ds.pop("ops_loaded") == ["deepspeed_shm_comm"]
    assert ds["model"] == {
        "reduce_bucket_size": 400_000,
        "stage3_prefetch_bucket_size": 400_000,
        "stage3_max_live_parameters": 10**9,
        "stage3_max_reuse_distance": 700_000,
        "sub_group_size": 10**9,
    }
    for copy, params in zip(ds["copies"], counts[:2], strict=True):
        assert copy == {k: scaled_window(v, params, counts[2], 128 * 384) for k, v in ds["model"].items()}
    assert ds["copies"][0]["stage3_max_reuse_distance"] == 700_000 * 262_528 // 656_256 == 280_027
    t1, t2 = probe["step_s"]
    if t2 > t1:  # else a loaded machine's copies did not rise with depth: the fallback says so (test above)
        assert rec["metrics"]["predicted"]["iteration_time_s"] == pytest.approx(t1 + 2 * (t2 - t1))
    else:
        assert "stepped no slower" in rec["metrics"]["predicted"]["source"]


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU")
def test_the_layer_probe_on_a_gpu_compiled(tmp_path: Path) -> None:
    """On a GPU, compiled and with the compute probe beside it: both are kept, the prediction is the
    layer probe's, and the compiled copies leave the run's losses as they were."""
    recs = ok_sweep(
        tmp_path,
        "model=llama-tiny",
        "model.n_layer=4",
        "device=cuda",
        "precision=bf16",
        "compile=true",
        "steps.warmup=3",
        "steps.measure=3",
        "predict.probe=true",
        "predict.layer_probe=false,true",
    )
    by = {r["config"]["predict"]["layer_probe"]: r for r in recs}
    probed = by[True]["metrics"]["predicted"]
    assert probed["compute_source"] == "layers" and probed["probe"]["fallback"] is None
    assert by[False]["metrics"]["predicted"]["compute_source"] == "probe"
    host, step = probed["layer_probe"]["host_s"], probed["layer_probe"]["step_s"]
    assert len(host) == 2 and all(0 < h <= t for h, t in zip(host, step, strict=True))
    assert by[True]["metrics"]["loss_first"] == pytest.approx(by[False]["metrics"]["loss_first"], rel=1e-3)
    _check_cost(by[True], settle=0.05)  # the default early stop


def _zero3_probe_rank(rank: int, world: int, init: str, out: str, policies: list[str]) -> None:
    """One gloo rank of a ZeRO-3 run under each of ``policies``, one after another: the real layer probe
    (two shallow copies, each built, stepped and let go), then what of them is still alive in the
    process, to ``out/<policy>-<rank>.json`` (CI time: one pair of ranks, where each policy started its
    own; what one probe left alive would count against the next as well)."""
    import dataclasses
    import gc
    import os

    import torch
    import torch.distributed as dist

    from flopsweep.config import CheckpointingConfig, RunConfig
    from flopsweep.layer_probe import probe_layers
    from flopsweep.layout import Layout
    from flopsweep.models.gpt2 import GPT2Config
    from flopsweep.rank_faults import is_oom
    from flopsweep.worker import make_batches

    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world))  # zero.Init reads them
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        torch.set_num_threads(1)
        model = GPT2Config(name="tiny-probe", n_layer=4, n_embd=64, n_head=4, seq_len=16, vocab_size=512)
        cpu, layout = torch.device("cpu"), Layout(dp_shard=world)
        for policy in policies:
            ckpt = CheckpointingConfig(name=policy)
            cfg = dataclasses.replace(RunConfig(), model=model, device="cpu", activation_checkpointing=ckpt)
            cfg = dataclasses.replace(
                cfg,
                backend=_zero3_backend(),
                predict=dataclasses.replace(cfg.predict, layer_probe=True, layer_probe_max_spread=1e9),
            )
            probe = probe_layers(
                cfg,
                cpu,
                layout,
                batches=lambda c: make_batches(c, layout, rank, cpu),
                is_oom=is_oom,
            )
            from deepspeed.runtime.engine import DeepSpeedEngine
            from deepspeed.runtime.zero import parameter_offload
            from deepspeed.runtime.zero.stage3 import DeepSpeedZeroOptimizer_Stage3

            gc.collect()
            alive = gc.get_objects()
            result = {
                "layers": probe.get("layers"),
                "engines": sum(isinstance(o, DeepSpeedEngine) for o in alive),
                "optimizers": sum(isinstance(o, DeepSpeedZeroOptimizer_Stage3) for o in alive),
                "zero3_params": sum(
                    isinstance(o, torch.nn.Parameter) and hasattr(o, "ds_tensor") for o in alive
                ),
                "module_stack": len(parameter_offload.FWD_MODULE_STACK),
                "released": probe.get("released"),
            }
            del alive
            (Path(out) / f"{policy}-{rank}.json").write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


def _zero3_backend():
    from flopsweep.backends import DeepSpeedConfig

    return DeepSpeedConfig(zero_stage=3)


POLICIES = ["none", "full"]


@pytest.fixture(scope="module")
def zero3_probe_leftovers() -> tuple[dict[str, dict], list[int | None]]:
    """What :func:`_zero3_probe_rank` found alive after the probe under each of :data:`POLICIES`, by
    ``<policy>-<rank>``, and the two ranks' exit codes: one pair of ranks for both policies."""
    import tempfile

    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        ranks = mp.spawn(
            _zero3_probe_rank, args=(2, f"file://{tmp}/store", tmp, POLICIES), nprocs=2, join=False
        )
        for process in ranks.processes:
            process.join(timeout=600)
        got = {f.stem: json.loads(f.read_text()) for f in Path(tmp).glob("*.json")}
    return got, [process.exitcode for process in ranks.processes]


@pytest.mark.slow
@pytest.mark.parametrize("policy", POLICIES)
def test_the_probes_zero3_copies_are_gone_before_the_run_is_built(policy: str, zero3_probe_leftovers) -> None:
    """Two gloo ranks, real DeepSpeed ZeRO-3: after the layer probe no copy's engine, optimizer or
    partitioned parameter is alive and DeepSpeed's module stack is empty (DeepSpeed 0.19.8 keeps the
    root module in ``FWD_MODULE_STACK`` and the coordinator in an ``lru_cache`` after ``destroy()``,
    and a block recomputed in backward under ``full`` checkpointing leaves its submodules on the
    stack; on one H200 the copies' states raised a ZeRO-3 run's peak by 16 B per parameter of both)."""
    from flopsweep.layer_probe import RELEASED

    got, exitcodes = zero3_probe_leftovers
    # a DeepSpeed rank on gloo now and then aborts in teardown, after writing (test_memory's note)
    for rank, exitcode in enumerate(exitcodes):
        assert exitcode == 0 or (exitcode == -6 and f"{POLICIES[-1]}-{rank}" in got), (rank, exitcode)
    for rank in ("0", "1"):
        assert got[f"{policy}-{rank}"] == {
            "layers": [1, 3],
            "engines": 0,
            "optimizers": 0,
            "zero3_params": 0,
            "module_stack": 0,
            "released": RELEASED,  # what the record says, so memory_estimate needs no date
        }

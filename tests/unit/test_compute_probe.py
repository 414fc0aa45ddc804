"""The compute probe (``flopsweep.compute_probe``, ``predict.probe=true``) and the step-time model's
composition of its pieces (``flopsweep.steptime.compute_from_probe``)."""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

import pytest

from flopsweep import predict as pr
from flopsweep.compute_probe import BACK_TO_BACK, MAX_REPS, block_inputs

P = 1_000_000_000


PROBE = pr.ProbeTimes(block_s=0.010, head_s=0.004, block_optimizer_s=0.002, head_optimizer_s=0.001)


LINK = pr.Link(intra=dict.fromkeys(pr.COLLECTIVES, 100.0), inter=dict.fromkeys(pr.COLLECTIVES, 10.0))


def workload(**kw) -> pr.Workload:
    base = dict(
        backend="fsdp",
        n_params=P,
        n_layer=24,
        n_embd=2048,
        seq_len=2048,
        micro_batch_size=4,
        grad_accum=2,
        degrees={"dp_replicate": 1, "dp_shard": 1, "tp": 1, "pp": 1, "cp": 1},
        model_flops=6.0 * P,
        hardware_flops=6.0 * P,
    )
    return pr.Workload(**{**base, **kw})


def test_one_rank_step_is_blocks_and_head_per_micro_batch_plus_the_optimizer() -> None:
    c = pr.compute_from_probe(workload(), PROBE)
    assert c.compute_s == pytest.approx(2 * (24 * 0.010 + 0.004))  # 0.488
    assert c.optimizer_s == pytest.approx(24 * 0.002 + 0.001)  # 0.049
    assert c.kind == "probe" and c.source.startswith("probe: 24 x block 10 ms")
    out = pr.predict(workload(), c, LINK, gpus_per_node=8)
    assert out.iteration_time_s == pytest.approx(0.488 + 0.049)  # one rank: no communication
    assert out.compute_source == "probe" and out.as_dict()["compute_source"] == "probe"


def test_tensor_parallel_splits_every_piece_and_the_optimizer() -> None:
    w = workload(degrees={"dp_shard": 1, "tp": 4})
    c = pr.compute_from_probe(w, PROBE)
    assert c.compute_s == pytest.approx(2 * (24 * 0.010 + 0.004) / 4)  # 0.122
    assert c.optimizer_s == pytest.approx((24 * 0.002 + 0.001) / 4)
    out = pr.predict(w, c, LINK, gpus_per_node=8)
    assert out.iteration_time_s == pytest.approx(0.122 + c.optimizer_s + out.exposed_comm_s)
    assert out.exposed_comm_s == pytest.approx(out.comm_s) and out.comm_s > 0  # TP: on the critical path


def test_a_pipeline_runs_its_stage_of_blocks_with_the_head_and_a_bubble() -> None:
    """pp 4, 8 micro batches: the last stage holds 24/4 blocks and the head; the bubble is (p-1)/m of
    that; FSDP over 2 shards halves the optimizer again."""
    w = workload(degrees={"dp_shard": 2, "pp": 4}, grad_accum=8, pp_microbatches=8)
    c = pr.compute_from_probe(w, PROBE)
    assert c.compute_s == pytest.approx(8 * (6 * 0.010 + 0.004))  # 0.512
    assert c.optimizer_s == pytest.approx((24 * 0.002 + 0.001) / 4 / 2)
    out = pr.predict(w, c, LINK, gpus_per_node=8, overlap=(1.0, "given"))
    assert out.bubble_s == pytest.approx(0.512 * 3 / 8)
    soft, hard = pr.comm_seconds(pr.transfers(w, gpus_per_node=8), LINK)
    assert 0 < soft < 0.512 and hard > 0  # FSDP's gathers hide behind compute; the sends do not
    assert out.iteration_time_s == pytest.approx(0.512 * (1 + 3 / 8) + c.optimizer_s + hard)


def test_probe_times_must_be_positive_and_finite() -> None:
    good = {"block_s": 1.0, "head_s": 1.0, "block_optimizer_s": 1.0, "head_optimizer_s": 1.0}
    assert pr.ProbeTimes.of(good).block_s == 1.0
    for bad in (0.0, -1.0, math.inf, math.nan, None):
        with pytest.raises(pr.PredictionError, match="head_s"):
            pr.ProbeTimes.of({**good, "head_s": bad})


@pytest.mark.parametrize("model", ["gpt-tiny", "llama-tiny"])
def test_the_probe_times_the_real_pieces_on_the_cpu(hydra_compose, model: str) -> None:
    from flopsweep.compute_probe import probe_compute
    from flopsweep.plan import validate

    cfg = validate(hydra_compose([f"model={model}", "device=cpu", "activation_checkpointing=full"]))
    got = probe_compute(cfg, "cpu", budget_s=0.5)
    assert got["fallback"] is None, got
    times = pr.ProbeTimes.of(got)  # positive and finite, or it raises
    assert times.block_s > 0 and times.head_s > 0
    assert got["reps"] % BACK_TO_BACK == 0 and BACK_TO_BACK <= got["reps"] <= MAX_REPS * BACK_TO_BACK
    assert got["wall_s"] > 0


def test_one_rank_probes_under_autocast_and_several_cast_the_weights(hydra_compose, tmp_path: Path) -> None:
    """FSDP2 and ZeRO in bf16 cast the probe's weights once when the ranks are several (their
    per-block cast is in the all-gather) and probe under autocast, as ``single`` and DDP do, on one
    rank; fp32 never casts. The decision is part of the probe's cache key."""
    import torch.distributed as dist

    from flopsweep.compute_probe import casts_weights, probe_compute, probe_key
    from flopsweep.plan import validate

    def cfg(*over: str):
        return validate(hydra_compose(["model=llama-tiny", "device=cpu", *over]))

    fsdp, zero3, single = cfg("backend=fsdp"), cfg("backend=zero3"), cfg("backend=ddp")
    fp32 = cfg("backend=fsdp", "precision=fp32")
    assert not dist.is_initialized()
    assert [casts_weights(c) for c in (fsdp, zero3, single, fp32)] == [True, True, False, False]
    cast_key = probe_key(fsdp, "cpu")["setup"]["cast"]
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        assert [casts_weights(c) for c in (fsdp, zero3, single, fp32)] == [False] * 4
        assert probe_key(fsdp, "cpu")["setup"]["cast"] is False and cast_key is True
        got = probe_compute(fsdp, "cpu", budget_s=0.5)
        assert got["fallback"] is None, got
        assert pr.ProbeTimes.of(got).block_optimizer_s > 0
    finally:
        dist.destroy_process_group()


def test_a_probe_is_kept_per_machine_and_setup(hydra_compose, tmp_path: Path, monkeypatch) -> None:
    """With ``FLOPSWEEP_PROBE_CACHE`` a folder, a probe is measured once and read back for the same
    set-up (``cached`` names the file); another micro batch is another set-up, measured anew; ``off``
    keeps nothing, and the CPU keeps nothing by default."""
    from flopsweep import compute_probe as cp
    from flopsweep.plan import validate

    monkeypatch.setenv(cp.CACHE_ENV, str(tmp_path))
    cfg = validate(hydra_compose(["model=gpt-tiny", "device=cpu", "batch.micro_batch_size=1"]))
    first = cp.cached_probe(cfg, "cpu", budget_s=0.1)
    assert first["cached"] is None and first["fallback"] is None
    (kept,) = tmp_path.glob("*.json")
    again = cp.cached_probe(cfg, "cpu", budget_s=0.1)
    assert again["cached"] == str(kept) and again["block_s"] == first["block_s"]
    other = validate(hydra_compose(["model=gpt-tiny", "device=cpu", "batch.micro_batch_size=2"]))
    assert cp.probe_key(other, "cpu") != cp.probe_key(cfg, "cpu")
    assert cp.cached_probe(other, "cpu", budget_s=0.1)["cached"] is None
    assert len(list(tmp_path.glob("*.json"))) == 2
    monkeypatch.setenv(cp.CACHE_ENV, "off")
    assert cp.cache_folder("cpu") is None
    monkeypatch.delenv(cp.CACHE_ENV)
    assert cp.cache_folder("cpu") is None and cp.cache_folder("cuda") is not None


@pytest.mark.parametrize(("config", "kinds"), [("moonlight-tiny", [1, 1]), ("qwen3-moe-tiny", [2])])
def test_an_hf_model_is_probed_one_block_of_each_kind(hydra_compose, config: str, kinds: list[int]) -> None:
    """``model=hf``: one decoder layer of each kind is timed (Moonlight's first layer is dense, the
    rest MoE), each with what the model's forward passes it; nothing falls back."""
    from flopsweep.compute_probe import probe_compute
    from flopsweep.plan import validate

    cfg = validate(hydra_compose(["model=hf", f"model.config={config}", "device=cpu"]))
    got = probe_compute(cfg, "cpu", budget_s=0.2)
    assert got["fallback"] is None, got["fallback"]
    assert got["layers_per_kind"] == kinds and sum(kinds) == cfg.model.n_layer
    assert got["block_s"] > 0 and got["head_s"] > 0 and got["block_optimizer_s"] > 0


def test_the_hf_probe_model_holds_one_layer_of_each_kind_initialised_and_tied(hydra_compose) -> None:
    import torch

    from flopsweep.models import hf_nn
    from flopsweep.plan import validate

    cfg = validate(hydra_compose(["model=hf", "model.config=moonlight-tiny", "device=cpu"]))
    shell, counts = hf_nn.probe_model(cfg.model, cfg.attention)
    layers = hf_nn.blocks(shell)
    assert len(layers) == len(counts) == 2 and [len(g) for g in hf_nn.layer_kinds(layers)] == [1, 1]
    model = hf_nn.materialize(shell, torch.device("cpu"), seed=0)
    assert all(p.device.type == "cpu" and torch.isfinite(p).all() for p in model.parameters())
    tied = model.hf.config.tie_word_embeddings
    assert (model.hf.get_output_embeddings().weight is model.hf.get_input_embeddings().weight) == tied
    tokens = torch.randint(0, cfg.model.vocab_size, (2, 9))
    loss = float(model(tokens).detach())  # freshly initialised: about ln(vocab_size)
    assert abs(loss - math.log(cfg.model.vocab_size)) < 1.0
    # what the probe calls each block with is what the forward passed it: the first block called
    # with its captured inputs gives the second block's captured hidden states
    seen = block_inputs(model, layers, tokens, contextlib.nullcontext)
    (x, *rest), named = seen[0]
    with torch.no_grad():
        out = layers[0](x, *rest, **named)
    torch.testing.assert_close(out[0] if isinstance(out, tuple) else out, seen[1][0][0])
    assert "position_embeddings" in named  # the rotary tables, made once by the model


def test_the_job_predicts_from_the_probe_and_names_a_fallback(hydra_compose) -> None:
    """``forecast.prediction`` with ``predict.probe``: the probe's pieces give the compute (and stay
    under ``probe``); a probe that fell back leaves the FLOPs estimate, its source saying why; without
    ``predict.probe`` nothing of a probe is read or kept."""
    from flopsweep.forecast import prediction
    from flopsweep.layout import Layout
    from flopsweep.plan import validate

    cfg = validate(hydra_compose(["device=cpu", "model=llama-tiny", "predict.probe=true"]))
    pieces = {"block_s": 0.01, "head_s": 0.004, "block_optimizer_s": 0.001, "head_optimizer_s": 0.001}
    pieces |= {"reps": 5, "wall_s": 2.0, "fallback": None}
    here = {"gpus_per_node": 1, "device_name": "cpu", "gemm_tflops": 0.1}
    made = prediction(cfg, Layout(), [], **here, compute_probe=pieces)
    assert made["compute_source"] == "probe" and made["probe"] == pieces
    assert made["iteration_time_s"] == pytest.approx(2 * 0.01 + 0.004 + 2 * 0.001 + 0.001)
    noted = prediction(cfg, Layout(), [], **here, compute_probe={**pieces, "optimizer_note": "stood in"})
    assert noted["source"].endswith("a micro batch; stood in")  # what the optimizer probe timed instead
    fell = prediction(cfg, Layout(), [], **here, compute_probe={"fallback": "too big", "wall_s": 0.1})
    assert fell["compute_source"] == "flops" and fell["source"].startswith("uncalibrated: ")
    assert fell["source"].endswith("; compute probe fell back: too big")
    none = prediction(cfg, Layout(), [], **here)  # no rank ran it
    assert none["source"].endswith("compute probe fell back: no rank ran the compute probe")
    plain = prediction(validate(hydra_compose(["device=cpu", "model=llama-tiny"])), Layout(), [], **here)
    assert "probe" not in plain and plain["compute_source"] == "flops"

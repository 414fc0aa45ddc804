"""``predict.layer_probe``: the depths it builds, the extrapolation, its rule and the prediction made
from it (``flopsweep.layer_probe``, ``flopsweep.forecast``); the run: integration/test_layer_probe.py."""

from __future__ import annotations

import pytest

from flopsweep.config import ConfigError
from flopsweep.layer_probe import depths, extrapolate, periodic_depths


@pytest.mark.parametrize(
    ("overrides", "want"),
    [
        (["model=llama-tiny", "model.n_layer=4"], [1, 3]),  # k = 3: 4 blocks is the model
        (["model=llama-tiny", "model.n_layer=32"], [1, 4]),  # k = SPAN
        (["model=llama-tiny", "model.n_layer=2"], [2]),  # 2 L1 is the model itself: timed whole
        (["model=llama-tiny", "model.n_layer=8", "parallel.pp=2"], [2, 6]),
        (
            ["model=llama-tiny", "model.n_layer=8", "parallel.pp=2", "parallel.pp_schedule=Interleaved1F1B"],
            [8],  # 2 stages a rank: 4 blocks the least, 8 the model itself
        ),
        (["model=llama-tiny", "model.n_layer=16", "activation_checkpointing=every_n"], [2, 8]),
    ],
)
def test_the_copies_have_the_smallest_depth_the_layout_builds_and_up_to_four_times_it(
    hydra_compose, overrides, want
) -> None:
    assert depths(hydra_compose(["device=cpu", *overrides])) == want


def test_the_step_grows_by_the_measured_cost_of_a_block() -> None:
    step, how = extrapolate({"layers": [1, 2], "step_s": [0.020, 0.033], "fallback": None}, 32)
    assert step == pytest.approx(0.020 + 31 * 0.013)
    assert how.startswith("layer probe: 1 blocks 20 ms, 2 blocks 33 ms, 32 blocks extrapolated")
    assert extrapolate({"layers": [2, 4], "step_s": [0.1, 0.3]}, 8)[0] == pytest.approx(0.7)
    assert extrapolate({"layers": [4], "step_s": [0.5]}, 4)[0] == 0.5


def test_a_host_that_outgrows_the_device_at_depth_sets_the_step() -> None:
    """gpt-1.3b FSDP2 `selective`, eager, one H200 (session 19): the synchronised steps of 1 and 2
    blocks (24.0, 31.6 ms) gave 0.199 s for 24 blocks, the run stepped 0.30 s. Host times that grow
    faster than the device's take over; ones under it, or missing (older records), change nothing."""
    device_only = {"layers": [1, 2], "step_s": [0.024, 0.0316]}
    step, _ = extrapolate(device_only, 24)
    assert step == pytest.approx(0.024 + 23 * 0.0076)
    host_bound, how = extrapolate({**device_only, "host_s": [0.016, 0.028]}, 24)
    assert host_bound == pytest.approx(0.016 + 23 * 0.012)
    assert "host-bound: the host's 16 and 28 ms extrapolate to 292 ms, over the device's 198.8" in how
    assert extrapolate({**device_only, "host_s": [0.010, 0.014]}, 24) == extrapolate(device_only, 24)
    assert extrapolate({**device_only, "host_s": [0.030, 0.020]}, 24) == extrapolate(device_only, 24)
    assert extrapolate({**device_only, "host_s": [float("nan"), 1.0]}, 24) == extrapolate(device_only, 24)


@pytest.mark.parametrize(
    ("probe", "words"),
    [
        ({"fallback": "a shallow copy ran out of memory"}, "^a shallow copy ran out of memory$"),
        ({"layers": [1, 2], "step_s": [0.1]}, "no usable times"),
        ({"layers": [1, 2], "step_s": [0.1, float("nan")]}, "no usable times"),
        ({"layers": [1, 2], "step_s": [0.1, -1.0]}, "no usable times"),
        ({"layers": [2, 1], "step_s": [0.1, 0.2]}, "do not rise"),
        ({"layers": [1, 2], "step_s": [0.885, 0.060]}, "2 blocks stepped no slower than its 1"),
        ({"layers": [1, 2], "step_s": [0.1, 0.1]}, "unsteady timings"),
        ({"layers": [4], "step_s": [0.1]}, "not the run's 8"),
        ({}, "no usable times"),
    ],
)
def test_an_unusable_probe_is_refused_with_its_reason(probe, words) -> None:
    with pytest.raises(ValueError, match=words):
        extrapolate(probe, 8)


def test_hf_under_a_pipeline_is_refused_in_one_line(hydra_compose) -> None:
    from flopsweep.rules import layer_probe

    with pytest.raises(ConfigError) as err:
        layer_probe(hydra_compose(["model=hf", "device=cpu", "predict.layer_probe=true", "parallel.pp=2"]))
    assert "predict.layer_probe" in str(err.value) and "parallel.pp=1" in str(err.value)
    layer_probe(hydra_compose(["model=hf", "device=cpu", "predict.layer_probe=true"]))
    layer_probe(hydra_compose(["model=llama-tiny", "device=cpu", "predict.layer_probe=true"]))


@pytest.mark.parametrize(
    ("kinds", "unit", "want"),
    [
        ([0] * 8, 1, [1, 4]),
        ([0, 1, 1, 1, 1], 1, [2, 4]),  # Moonlight: one dense layer, then MoE ones
        ([0] + [1] * 26, 1, [2, 5]),  # Moonlight-16B-A3B's 27 layers: 3 layers apart
        ([0, 1, 0, 1, 0, 1], 1, [2, 4]),  # alternating kinds: one period more
        ([0, 0, 1, 0, 1, 0, 1, 0], 1, [3, 7]),
        ([0] * 8, 2, [2, 6]),  # every_n=2: whole checkpointing periods
        ([0, 1, 1], 1, [3]),  # 2 + 1 is not below 3: the whole model
        ([0, 1, 2, 3], 1, [4]),  # no repeat at all
    ],
)
def test_the_copies_of_a_mixed_model_repeat_its_layer_pattern(kinds, unit, want) -> None:
    assert periodic_depths(kinds, unit) == want


def _predicted(hydra_compose, probe, overrides=()):
    from flopsweep.forecast import prediction
    from flopsweep.plan import validate

    cfg = validate(
        hydra_compose(
            ["model=llama-tiny", "model.n_layer=8", "device=cpu", "predict.layer_probe=true", *overrides]
        )
    )
    from flopsweep.layout import Layout

    return prediction(
        cfg, Layout(), [], gpus_per_node=1, device_name="cpu", gemm_tflops=0.1, layer_probe=probe
    )


def test_the_prediction_is_the_extrapolated_step_with_nothing_added(hydra_compose) -> None:
    made = _predicted(hydra_compose, {"layers": [1, 2], "step_s": [0.02, 0.03], "fallback": None})
    assert made["compute_source"] == "layers" and made["iteration_time_s"] == pytest.approx(0.02 + 7 * 0.01)
    assert (made["comm_s"], made["bubble_s"], made["optimizer_s"]) == (0.0, 0.0, 0.0)
    assert made["layer_probe"]["layers"] == [1, 2] and made["source"].startswith("layer probe: ")


def test_a_probe_that_fell_back_leaves_the_next_estimate_and_says_why(hydra_compose) -> None:
    made = _predicted(hydra_compose, {"fallback": "a shallow copy ran out of memory: OOM", "wall_s": 1.0})
    assert made["compute_source"] == "flops"
    assert made["source"].endswith("; layer probe fell back: a shallow copy ran out of memory: OOM")
    none = _predicted(hydra_compose, None)
    assert none["source"].endswith("; layer probe fell back: no rank ran the layer probe")


@pytest.mark.parametrize(
    ("spread", "words"),
    [
        ([1.2, 1.4], None),
        ([1.5, 1.5], None),  # at the limit: steady enough
        ([1.2, 2.25], "the 2-block copy's second slowest step took 2.25x its median (30 ms; over "),
        ([1.9, 2.25], "the 1-block copy's second slowest step took 1.9x its median (20 ms; over "),
    ],
)
def test_a_copy_whose_slowest_step_is_far_over_its_median_is_unsteady(spread, words) -> None:
    from flopsweep.layer_probe import unsteady

    why = unsteady([1, 2], [0.020, 0.030], spread, 1.5)
    if words is None:
        assert why is None
    else:
        assert why.startswith("unsteady timed steps: " + words)
        assert why.endswith("predict.layer_probe_max_spread=1.5), no extrapolation")


def test_an_unsteady_probe_falls_back_naming_its_copy(hydra_compose) -> None:
    probe = {"layers": [1, 2], "step_s": [0.02, 0.03], "spread": [1.1, 3.0]}
    from flopsweep.layer_probe import unsteady

    probe["fallback"] = unsteady(probe["layers"], probe["step_s"], probe["spread"], 1.5)
    made = _predicted(hydra_compose, probe)
    assert made["compute_source"] == "flops" and made["layer_probe"]["spread"] == [1.1, 3.0]
    assert made["source"].endswith("; layer probe fell back: " + probe["fallback"])
    assert "2-block copy's second slowest step took 3x its median" in made["source"]


@pytest.mark.parametrize(("value", "echo"), [("0.99", "0.99"), ("0.0", "0"), ("-1.0", "-1")])
def test_a_spread_limit_under_one_is_refused_in_one_line(hydra_compose, value, echo) -> None:
    """The value echoed in JSON's spelling (``config.typed_form``: 0.0 as 0)."""
    from flopsweep.plan import validate

    with pytest.raises(ConfigError) as err:
        validate(hydra_compose(["device=cpu", f"predict.layer_probe_max_spread={value}"]))
    text = str(err.value)
    assert "\n" not in text and f"predict.layer_probe_max_spread={echo}:" in text
    assert "set e.g. predict.layer_probe_max_spread=1.5" in text


TINY_PROBE = ["model=gpt-tiny", "model.n_layer=2", "model.seq_len=16", "device=cpu", "precision=fp32"]
"""Two blocks of 16 tokens on one CPU rank: ``2 L1`` is the model itself, timed whole (one copy)."""


def _probe_on_the_cpu(hydra_compose, *overrides: str, batches=None) -> dict:
    """The real probe in this process: the run's ``single`` trainer built and stepped on the CPU."""
    import torch

    from flopsweep.layer_probe import probe_layers
    from flopsweep.layout import Layout
    from flopsweep.plan import validate
    from flopsweep.rank_faults import is_oom
    from flopsweep.worker import make_batches

    cfg = validate(hydra_compose([*TINY_PROBE, "batch.micro_batch_size=1", *overrides]))
    cpu = torch.device("cpu")
    made = batches or (lambda c: make_batches(c, Layout(), 0, cpu))
    return probe_layers(cfg, cpu, Layout(), batches=made, is_oom=is_oom)


def test_the_probe_keeps_each_copys_spread_and_falls_back_over_the_limit(hydra_compose) -> None:
    """On the CPU with the limit at 1 (no five timed steps are all equal; no early stop, whose three
    agreeing steps have no spread) the real probe falls back naming its copy, its times kept; with a
    limit no spread reaches it extrapolates."""
    from flopsweep.layer_probe import extrapolate

    tight = _probe_on_the_cpu(
        hydra_compose, "predict.layer_probe_max_spread=1", "predict.layer_probe_settle=0"
    )
    assert tight["layers"] == [2] and len(tight["step_s"]) == len(tight["spread"]) == 1
    assert tight["step_s"][0] > 0 and tight["spread"][0] > 1
    assert tight["fallback"].startswith("unsteady timed steps: the 2-block copy's second slowest step took ")
    with pytest.raises(ValueError, match="^unsteady timed steps"):
        extrapolate(tight, 2)
    loose = _probe_on_the_cpu(hydra_compose, "predict.layer_probe_max_spread=1e9")
    assert loose["fallback"] is None and loose["spread"][0] >= 1
    assert extrapolate(loose, 2)[0] == loose["step_s"][0]


def test_a_copy_out_of_memory_falls_back_as_the_compute_probe_does(hydra_compose) -> None:
    """The layer probe's out-of-memory path is the compute probe's (``fall_back_on_oom``): the copy's
    error becomes its ``fallback``, nothing else is kept; any other error is raised."""
    import torch

    def no_memory(cfg):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    out = _probe_on_the_cpu(hydra_compose, batches=no_memory)
    assert set(out) == {"fallback", "wall_s"}
    assert out["fallback"] == (
        "a shallow copy ran out of memory: OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    )

    def broken(cfg):
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        _probe_on_the_cpu(hydra_compose, batches=broken)


def test_sliding_window_and_full_attention_layers_are_kinds_of_their_own(hydra_compose, tmp_path) -> None:
    """transformers 5 keeps a layer's attention kind on its attention module (``self_attn.layer_type``,
    ``sliding_window``), not on the layer: Qwen3's alternating ``layer_types`` read as one kind, and the
    probe's copies (1 and 2 layers) held one full-attention layer for a model half sliding-window."""
    import json

    from flopsweep.layer_probe import run_depths
    from flopsweep.models.hf_files import SHIPPED
    from flopsweep.models.hf_nn import kind_sequence
    from flopsweep.plan import validate

    raw = json.loads((SHIPPED / "qwen3-tiny.json").read_text())
    types = ["full_attention", "sliding_attention"] * 3
    extra = {"num_hidden_layers": 6, "use_sliding_window": True, "sliding_window": 8, "layer_types": types}
    (tmp_path / "config.json").write_text(json.dumps({**raw, **extra}))
    overrides = [
        "model=hf",
        f"model.config={tmp_path / 'config.json'}",
        "device=cpu",
        "predict.layer_probe=true",
    ]
    cfg = validate(hydra_compose(overrides))
    assert kind_sequence(cfg.model, cfg.attention) == [0, 1, 0, 1, 0, 1]
    assert run_depths(cfg) == [2, 4]


def test_deepspeeds_sizes_hold_the_same_share_of_each_copy_as_of_the_model() -> None:
    """``S' = min(S, max(S P / N, p))`` (``layer_probe.scaled_window``): gpt-1.3b's 1-block copy under
    ZeRO-3's 1e9 reuse distance (which the model's 1.3e9 parameters pass and the copy's 1.6e8 would
    not) gets the copy's share of it; a size within one parameter is kept; none goes below the
    largest parameter of a block, nor above the size itself."""
    from flopsweep.flops import n_params
    from flopsweep.layer_probe import deepspeed_windows, scaled_window

    model, copy = n_params(24, 2048, 2048, 50257), n_params(1, 2048, 2048, 50257)
    assert (model, copy) == (1_315_723_264, 157_483_008)
    assert scaled_window(10**9, copy, model, 2048 * 8192) == 10**9 * copy // model == 119_693_108
    assert scaled_window(16_384, 262_528, 2_428_032, 49_152) == 16_384  # h^2 of llama-tiny: kept
    assert scaled_window(60_000, 262_528, 2_428_032, 49_152) == 49_152  # 6,487 would split a parameter
    assert scaled_window(3 * 10**9, copy, model, 2048 * 8192) == 3 * 10**9 * copy // model
    assert scaled_window(5, model, model, 10) == 5  # the model timed whole: as it is
    with pytest.raises(ValueError, match="parameters must be positive"):
        scaled_window(10**9, 0, model, 1)
    sizes = {"reduce_bucket_size": 920_000, "stage3_max_reuse_distance": 1_850_000}
    windows = deepspeed_windows(sizes, [262_528, 459_392], 2_428_032, 49_152)
    assert windows["model"] == sizes and windows["params"] == [262_528, 459_392, 2_428_032]
    assert windows["copies"] == [
        {"reduce_bucket_size": 99_473, "stage3_max_reuse_distance": 200_028},
        {"reduce_bucket_size": 174_067, "stage3_max_reuse_distance": 350_026},
    ]


def test_a_copy_is_timed_until_its_median_is_steady() -> None:
    """``median_error``: the median's standard error over the median, from the median absolute
    deviation; the probe times more steps while it is over ``STEADY_ERROR`` (at most
    ``MAX_MEASURED_STEPS``)."""
    from flopsweep.layer_probe import MAX_MEASURED_STEPS, MEASURED_STEPS, STEADY_ERROR, median_error

    assert median_error([0.1] * 5) == 0.0
    assert median_error([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(1.2533 * 1.4826 * 1.0 / 5**0.5 / 3.0)
    assert median_error([1.0, 1.0]) == float("inf") and median_error([0.0, 0.0, 0.0]) == float("inf")
    steady = [0.050, 0.0501, 0.0499, 0.0502, 0.0500]  # 0.1 ms of jitter on 50 ms
    noisy = [0.050, 0.062, 0.045, 0.071, 0.052]  # a loaded host
    assert median_error(steady) < STEADY_ERROR < median_error(noisy)
    assert MEASURED_STEPS < MAX_MEASURED_STEPS


def test_a_probe_that_fell_back_is_one_record_warning_naming_it(hydra_compose) -> None:
    """A layer probe that fell back is a record warning (``job.warnings``, printed with the run's
    others): the probe, why, and what predicted instead; none when the probe was used."""
    from flopsweep.layer_probe import unsteady
    from flopsweep.probe_fallback import layer_fallback_line, probe_fallback_lines

    probe = {"layers": [1, 2], "step_s": [0.02, 0.03], "spread": [1.1, 14.9]}
    probe["fallback"] = unsteady(probe["layers"], probe["step_s"], probe["spread"], 1.5)
    made = _predicted(hydra_compose, probe)
    lines = probe_fallback_lines(made)
    used = made["source"].split("; layer probe fell back: ")[0]
    assert lines == [
        f"predict.layer_probe: the layer probe fell back ({probe['fallback']}); predicted from: {used}"
    ]
    assert "14.9x its median" in lines[0] and used.startswith("uncalibrated")
    ok = _predicted(hydra_compose, {"layers": [1, 2], "step_s": [0.02, 0.03], "fallback": None})
    assert probe_fallback_lines(ok) == [] and layer_fallback_line(None) is None
    # both probes fell back: one line each, the layer probe's without the compute probe's reason
    both = {"source": "uncalibrated x; layer probe fell back: OOM; compute probe fell back: too big"}
    assert probe_fallback_lines(both) == [
        "predict.layer_probe: the layer probe fell back (OOM); predicted from: uncalibrated x",
        "predict.probe: the compute probe fell back (too big); predicted from: uncalibrated x",
    ]

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
)
"""FSDP2 on 2 gloo ranks, fp32, one warm-up and two measured steps."""


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
    assert probed["compute_source"] == "layers" and probed["layer_probe"]["fallback"] is None
    assert probed["layer_probe"]["layers"] == [1, 2] and all(t > 0 for t in probed["layer_probe"]["step_s"])
    assert probed["layer_probe"]["host_s"] == probed["layer_probe"]["step_s"]  # a CPU's step is its host's
    assert len(probed["layer_probe"]["spread"]) == 2 and all(r >= 1 for r in probed["layer_probe"]["spread"])
    t1, t2 = probed["layer_probe"]["step_s"]
    assert probed["iteration_time_s"] == pytest.approx(t1 + 3 * (t2 - t1))
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

    from flopsweep.layer_probe import MEASURED_STEPS, MIN_UNTIMED, SETTLE_STEPS, WARMUP_STEPS, settled

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
        else:
            assert timed == MEASURED_STEPS
        assert step >= statistics.median(times[-timed:]) - 1e-5  # the slowest rank's median


@pytest.mark.slow
def test_an_hf_moe_is_probed_on_its_first_layers(tmp_path: Path) -> None:
    """A 5-layer Moonlight (one dense layer, then MoE ones) under FSDP2 on 2 gloo ranks: its copies
    keep the file's first 2 and 3 layers (``hf_nn.build``), and the step is extrapolated from them."""
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
        "predict.layer_probe_settle=0",  # no early stop: every copy runs 2 untimed and 5 timed steps
    )
    probed = rec["metrics"]["predicted"]
    assert probed["layer_probe"]["steps_run"] == [7, 7] and probed["layer_probe"]["steps_timed"] == [5, 5]
    _check_cost(rec, settle=0)
    assert probed["compute_source"] == "layers" and probed["layer_probe"]["fallback"] is None
    assert probed["layer_probe"]["layers"] == [2, 3]
    t2, t3 = probed["layer_probe"]["step_s"]
    assert probed["iteration_time_s"] == pytest.approx(t2 + 3 * (t3 - t2))


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

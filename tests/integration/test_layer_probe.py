"""``predict.layer_probe=true`` on gloo ranks: the shallow copies are timed before warm-up, the step is
predicted from them, and the run itself is the run without the probe (the same losses)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import ok_sweep


@pytest.mark.slow
def test_the_layer_probe_predicts_the_step_and_leaves_the_run_as_it_was(tmp_path: Path) -> None:
    recs = ok_sweep(
        tmp_path,
        "model=llama-tiny",
        "model.n_layer=4",
        "device=cpu",
        "precision=fp32",
        "nproc_per_node=2",
        "backend=fsdp",
        "steps.warmup=1",
        "steps.measure=2",
        "predict.layer_probe=false,true",
        "predict.layer_probe_max_spread=1000",  # the loaded CI machine's steps vary; unit/ tests the limit
    )
    by = {r["config"]["predict"]["layer_probe"]: r for r in recs}
    assert set(by) == {False, True}
    probed = by[True]["metrics"]["predicted"]
    assert probed["compute_source"] == "layers" and probed["layer_probe"]["fallback"] is None
    assert probed["layer_probe"]["layers"] == [1, 2] and all(t > 0 for t in probed["layer_probe"]["step_s"])
    assert len(probed["layer_probe"]["spread"]) == 2 and all(r >= 1 for r in probed["layer_probe"]["spread"])
    t1, t2 = probed["layer_probe"]["step_s"]
    assert probed["iteration_time_s"] == pytest.approx(t1 + 3 * (t2 - t1))
    assert "layer_probe" not in by[False]["metrics"]["predicted"]
    assert by[True]["metrics"]["loss_first"] == pytest.approx(by[False]["metrics"]["loss_first"], abs=1e-6)
    assert by[True]["metrics"]["loss_last"] == pytest.approx(by[False]["metrics"]["loss_last"], abs=1e-6)


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
    assert by[True]["metrics"]["loss_first"] == pytest.approx(by[False]["metrics"]["loss_first"], rel=1e-3)

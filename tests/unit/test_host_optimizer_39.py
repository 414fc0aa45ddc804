"""The compute probe's host optimizer (issue 41, session 39): under FSDP2's ``cpu_offload`` (and any
optimizer timed on a CPU) the embedding and head's AdamW step is taken at the block's rate per parameter
(``ProbeTimes.head_optimizer``), since the probe's head piece gives the tied embedding subnormal second
moments that the run's gradients do not (benchmarks/host_adamw.py); the probe records what the rule
needs (``optimizer_device``, ``block_params``, ``head_params``, method 3). Model change, no reliability
row: docs/prediction-host-optimizer.md; CHANGELOG, session 39."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flopsweep import predict as pr
from flopsweep.compute_time import HOST_HEAD_RULE
from flopsweep.text import figure

ROOT = Path(__file__).resolve().parents[2]
P2B = ROOT / "benchmarks/results/h100/session39/probe/p2b/0/metrics.json"
HEAD, BLOCK = (
    262_670_336,
    60_821_504,
)  # Llama 3.2 1B: the tied 128256 x 2048 embedding and final norm; a block


def p2b() -> tuple[dict, pr.Workload]:
    record = json.loads(P2B.read_text())
    return record, pr.workload_from_record(record)


def test_the_host_head_is_stepped_at_the_blocks_rate() -> None:
    """The committed FSDP2 ``cpu_offload`` run (H100, session 39, measured 2.642 s): its probe's pieces
    with the counts gave 16 x 0.1017 s + 2.216 s = 3.843 s of optimizer and +51.6%; at the block's
    1.67 ns a parameter the head is 0.439 s, the optimizer 2.066 s and the step 2.229 s (-15.6%)."""
    record, w = p2b()
    pieces = {**record["metrics"]["predicted"]["probe"], "optimizer_device": "cpu"}
    pieces |= {"head_params": HEAD, "block_params": BLOCK}
    times = pr.ProbeTimes.of(pieces)
    assert times.on_host and times.head_params == HEAD and times.block_params == BLOCK
    head, said = times.head_optimizer()
    assert head == pytest.approx(0.10166253199999176 / BLOCK * HEAD)  # 0.4390 s
    assert said == HOST_HEAD_RULE.format(
        rate=figure(0.10166253199999176 / BLOCK * 1e9), probed=figure(2.2162546 / HEAD * 1e9)
    )
    assert "8.44 ns a parameter replaced by the block's 1.67" in said
    c = pr.compute_from_probe(w, times)
    assert c.optimizer_s == pytest.approx(16 * 0.10166253199999176 + head) and c.optimizer_s == pytest.approx(
        2.0656, abs=1e-4
    )
    assert c.source.endswith(said)
    step = pr.predict(w, c, pr.Link(), gpus_per_node=1).iteration_time_s
    assert step == pytest.approx(2.2292, abs=1e-4)
    measured = record["metrics"]["iteration_time_s"]["mean"]
    assert (step - measured) / measured == pytest.approx(-0.1562, abs=1e-4)


def test_the_probed_head_stays_on_the_gpu_and_without_the_counts() -> None:
    """On the GPU (subnormals at full speed) and for a probe before method 3 (no counts: the committed
    records as stored, a kept probe of method 2), the probed head time, and ``source`` says nothing."""
    record, w = p2b()
    stored = record["metrics"]["predicted"]
    for extra in (
        {},
        {"optimizer_device": "cpu"},
        {"optimizer_device": "cuda", "head_params": HEAD, "block_params": BLOCK},
    ):
        times = pr.ProbeTimes.of({**stored["probe"], **extra})
        assert times.head_optimizer() == (pytest.approx(2.2162546), "")
        c = pr.compute_from_probe(w, times)
        assert c.optimizer_s == pytest.approx(stored["optimizer_s"]) and "host optimizer" not in c.source


@pytest.mark.parametrize("bad", [0, -1, float("nan"), True, "60e6", None])
def test_an_unusable_count_is_no_count(bad) -> None:
    record, _ = p2b()
    pieces = {**record["metrics"]["predicted"]["probe"], "optimizer_device": "cpu", "head_params": HEAD}
    times = pr.ProbeTimes.of({**pieces, "block_params": bad})
    assert times.block_params is None and times.head_optimizer()[1] == ""


def test_the_probe_records_the_counts_and_the_device(hydra_compose) -> None:
    """A CPU probe of llama-tiny (tied): its block's parameters times its layers plus the head's are the
    model's; the optimizer was timed on the CPU."""
    import torch

    from flopsweep.compute_probe import probe_compute
    from flopsweep.models import family
    from flopsweep.parallelize import make_model
    from flopsweep.plan import validate

    cfg = validate(hydra_compose(["model=llama-tiny", "device=cpu"]))
    got = probe_compute(cfg, "cpu", budget_s=0.2)
    assert got["fallback"] is None, got
    assert got["optimizer_device"] == "cpu"
    model = make_model(cfg, torch.device("cpu"))
    total = sum(p.numel() for p in model.parameters())
    (block,) = {sum(p.numel() for p in b.parameters()) for b in family(cfg.model).blocks(model)}
    assert got["block_params"] == block
    assert got["block_params"] * cfg.model.n_layer + got["head_params"] == total

"""model=hf: any transformers causal LM from its config.json (issue 28), on the CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import records, run_py
from unit.test_hf import MOE, TINY, _variant  # shared with the unit tier

pytest.importorskip("transformers")


@pytest.mark.slow
def test_every_tiny_config_gives_one_first_step_loss_on_every_backend(tmp_path: Path) -> None:
    """Same seed, same data, fp32: for every shipped tiny config, FSDP2 and ZeRO-3 (MoE layers as ZeRO-3
    leaves) on 2 gloo ranks give one first-step loss (the mean over both ranks' batches), and DDP gives
    it too for the MoE config qwen3-moe-tiny, where single equals DDP on one rank (the same batch), each
    within 1e-4. DDP wraps the whole model whatever its family (FSDP2 and ZeRO-3 wrap each family's
    blocks and MoE layers), so one config stands for all under DDP: 13 jobs in three Hydra starts."""
    common = ("model=hf", "device=cpu", "precision=fp32", "steps.warmup=1", "steps.measure=1")
    groups = {
        "two": (f"model.config={','.join(TINY)}", "backend=fsdp,zero3", "nproc_per_node=2"),
        "ddp": ("model.config=qwen3-moe-tiny", "backend=ddp", "nproc_per_node=2"),
        "one": ("model.config=qwen3-moe-tiny", "backend=single,ddp", "nproc_per_node=1"),
    }
    by_config: dict[tuple[str, str], list[dict]] = {}
    for sub, args in groups.items():
        # 10 two-rank jobs in one sweep: up to 20 min on a 2-core machine at load 10
        proc = run_py("-m", *common, *args, f"hydra.sweep.dir={tmp_path / sub}", timeout=3600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        for r in records(tmp_path / sub):
            group = "one" if sub == "one" else "two"  # DDP on two ranks joins its config's FSDP2 and ZeRO-3
            by_config.setdefault((group, r["model"]["name"]), []).append(r)
    assert {key: len(recs) for key, recs in by_config.items()} == {
        **{("two", config): 3 if config == "qwen3-moe-tiny" else 2 for config in TINY},
        ("one", "qwen3-moe-tiny"): 2,
    }
    every = [r for recs in by_config.values() for r in recs]
    assert all(r["status"] == "ok" for r in every), [r["error"] for r in every if r["status"] != "ok"]
    for key, recs in by_config.items():
        losses = {r["config"]["backend"]["name"]: r["metrics"]["loss_first"] for r in recs}
        assert max(losses.values()) - min(losses.values()) < 1e-4, (key, losses)
    for r in every:
        config = r["model"]["name"]
        assert r["model"]["arch"] == "hf" and len(r["model"]["config_sha256"]) == 64
        assert r["model"]["n_active_params"] <= r["model"]["n_params"]
        assert r["metrics"]["model_flops_per_iteration"] > 0
        assert (r["model"]["n_active_params"] < r["model"]["n_params"]) is (config in MOE), config


@pytest.mark.slow
def test_batch_auto_searches_an_hf_moe_model_and_prints_no_known_import_lines(tmp_path: Path) -> None:
    """``batch=auto`` with ``model=hf`` (a tiny MoE, FSDP2 on 2 gloo ranks): each probe is a real run in
    fresh workers, the record keeps the search and is measured at its result, and neither the job nor
    the ranks print torchao's known import lines (``flopsweep.quiet``)."""
    proc = run_py(
        "model=hf",
        "model.config=olmoe-tiny",
        "batch=auto",
        "batch.max_micro_batch_size=2",
        "backend=fsdp",
        "nproc_per_node=2",
        "device=cpu",
        "precision=fp32",
        "steps.warmup=1",
        "steps.measure=1",
        f"hydra.run.dir={tmp_path}",
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((tmp_path / "metrics.json").read_text())
    search = record["run"]["batch_search"]
    assert [(p["micro_batch_size"], p["status"]) for p in search["probes"]] == [(1, "ok"), (2, "ok")]
    assert search["result"] == 2 and record["config"]["batch"]["micro_batch_size"] == 2
    assert record["status"] == "ok" and record["model"]["name"] == "olmoe-tiny"
    assert record["metrics"]["global_batch_size"] == 2 * 2
    output = proc.stdout + proc.stderr
    for line in ("Failed to load", "is an Enum subclass", "Detected no triton"):
        assert line not in output, output[-3000:]


def test_a_bad_field_type_is_refused_before_hydra_alone_and_invalid_in_a_sweep(tmp_path: Path) -> None:
    """A config.json whose num_hidden_layers is "2": one run is refused in one line, exit 2, before Hydra
    makes its folder (flopsweep.command_line_checks.model_config_problem); a sweep over two such files
    leaves the read to its jobs, each of which writes an invalid record naming the field."""
    config = _variant(tmp_path, "str", num_hidden_layers="2")
    other = _variant(tmp_path, "str2", num_hidden_layers="3")
    proc = run_py(
        "model=hf", f"model.config={config}", "device=cpu", f"hydra.run.dir={tmp_path / 'out'}", timeout=300
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "num_hidden_layers" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr[-3000:]
    assert not (tmp_path / "out").exists()
    proc = run_py(
        "-m",
        "model=hf",
        f"model.config={config},{other}",
        "device=cpu",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        timeout=600,
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    found = records(tmp_path / "sweep")
    assert [r["status"] for r in found] == ["invalid", "invalid"], proc.stderr[-3000:]
    assert all("num_hidden_layers" in r["error"]["message"] for r in found), [r["error"] for r in found]

"""model=hf: any transformers causal LM from its config.json (issue 28), on the CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import records, run_py
from unit.test_hf import MOE, TINY, _variant  # shared with the unit tier

pytest.importorskip("transformers")


@pytest.mark.slow
def test_every_tiny_config_gives_one_first_step_loss_on_every_backend(hydra_compose) -> None:
    """Same seed, same global batch (2 sequences), fp32: for every shipped tiny config, FSDP2 and ZeRO-3
    (MoE layers as ZeRO-3 leaves) on 2 gloo ranks give one loss at each of two steps (the mean over both
    ranks' batches), and DDP on 2 ranks and single and DDP on one rank give it too for the MoE config
    qwen3-moe-tiny, each within 1e-4. DDP wraps the whole model whatever its family (FSDP2 and ZeRO-3 wrap
    each family's blocks and MoE layers), so one config stands for all under DDP. The trainers are the
    runs' own (``flopsweep.backends.build_trainer``), all 13 cases in one pair of ranks and one rank
    (``tests/one_rank.py``; CI time: through ``run.py`` they were 13 jobs, 24 rank processes, in three
    Hydra starts); ``run.py``'s records of every config are
    test_every_tiny_config_writes_an_ok_record_under_zero3's."""
    from helpers import make_plan
    from one_rank import steps_of

    from flopsweep.plan import Environment

    def case(config: str, backend: str, nproc: int) -> tuple:
        args = ["model=hf", f"model.config={config}", "device=cpu", "precision=fp32", f"backend={backend}"]
        plan = make_plan(hydra_compose([*args, f"nproc_per_node={nproc}"]), Environment(cpu_count=4))
        return plan.cfg, plan.layout

    cases = {
        (config, backend, 2): case(config, backend, 2) for config in TINY for backend in ("fsdp", "zero3")
    }
    cases |= {("qwen3-moe-tiny", "ddp", 2): case("qwen3-moe-tiny", "ddp", 2)}
    cases |= {
        ("qwen3-moe-tiny", backend, 1): case("qwen3-moe-tiny", backend, 1) for backend in ("single", "ddp")
    }
    found = steps_of({" ".join(map(str, key)): value for key, value in cases.items()})
    assert len(found) == 13
    for config in TINY:
        ranks = [r for name, rs in found.items() if name.startswith(f"{config} ") for r in rs]
        assert len(ranks) == (2 * 3 + 2 if config == "qwen3-moe-tiny" else 2 * 2), config
        first = ranks[0]["loss"]
        assert first[0] != first[1], config  # the first step changed the weights
        for r in ranks:
            assert r["loss"] == pytest.approx(first, abs=1e-4), (config, r, first)
        norms = [r["grad_norm"] for r in ranks if r["grad_norm"] is not None]  # DeepSpeed's engine keeps none
        assert norms and max(norms) - min(norms) < 1e-4 and min(norms) > 0, (config, norms)


@pytest.mark.slow
def test_every_tiny_config_writes_an_ok_record_under_zero3(tmp_path: Path) -> None:
    """Through ``run.py``: every shipped tiny config under ZeRO-3 (the job process's worker, DeepSpeed's
    engine with MoE layers as leaves, one rank) writes an ``ok`` record naming an ``hf`` model, its
    config's hash, its parameters (fewer active than in all exactly for the MoE configs) and its FLOPs
    per iteration: 5 jobs in one Hydra start."""
    proc = run_py(
        "-m",
        "model=hf",
        f"model.config={','.join(TINY)}",
        "device=cpu",
        "precision=fp32",
        "backend=zero3",
        "nproc_per_node=1",
        "steps.warmup=1",
        "steps.measure=1",
        f"hydra.sweep.dir={tmp_path}",
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    every = records(tmp_path)
    assert sorted(r["model"]["name"] for r in every) == sorted(TINY)
    assert all(r["status"] == "ok" for r in every), [r["error"] for r in every if r["status"] != "ok"]
    for r in every:
        config = r["model"]["name"]
        backend = r["config"]["backend"]
        assert (backend["name"], backend["zero_stage"]) == ("deepspeed", 3), config
        assert r["metrics"]["loss_first"] > 0, config
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

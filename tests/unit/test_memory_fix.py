"""The fix of a set-up over its GPU's memory (``flopsweep.memory_fix``): only the levers its config has
not pulled, each line's estimate checked again here by applying its overrides by hand; the lines that
carry it (``oom_note``), plan=true's ``memory_fix`` column and the strict JSON of the plan."""

from __future__ import annotations

import csv
import dataclasses
import json
import re
from pathlib import Path

import pytest
import yaml

from flopsweep.config import BackendConfig, CheckpointingConfig, RunConfig
from flopsweep.layout import Layout
from flopsweep.memory import estimate
from flopsweep.memory_fix import MAX_RANKS_PER_NODE, gpu_memory_fix, levers
from flopsweep.models.llama import LlamaConfig
from flopsweep.oom_note import GPU_MEMORY_FIX, oom_estimate_line, over_memory_line
from flopsweep.options import FSDPConfig

H100 = int(79.18 * 2**30)
"""An H100 80GB's memory as torch reports it (79.18 GiB)."""

CONF = Path(__file__).resolve().parents[2] / "conf" / "model"


def _llama(name: str) -> LlamaConfig:
    doc = yaml.safe_load((CONF / f"{name}.yaml").read_text())
    doc.pop("defaults")
    return LlamaConfig(**doc)


def _cfg(model: str, backend: BackendConfig, mb: int, ac: str = "none", nproc: int = 1) -> RunConfig:
    cfg = dataclasses.replace(
        RunConfig(),
        model=_llama(model),
        backend=backend,
        nproc_per_node=str(nproc),
        device="cuda",
        activation_checkpointing=CheckpointingConfig(name=ac),
    )
    return dataclasses.replace(cfg, batch=dataclasses.replace(cfg.batch, micro_batch_size=mb))


def _applied(cfg: RunConfig, overrides: str) -> RunConfig:
    """``cfg`` with the overrides of a fix applied, key by key, independently of the module's own changes."""
    for word in overrides.split():
        key, value = word.split("=")
        if key == "backend":
            assert value == "fsdp", word
            cfg = dataclasses.replace(cfg, backend=FSDPConfig())
        elif key == "nproc_per_node":
            cfg = dataclasses.replace(cfg, nproc_per_node=value)
        elif key == "nnodes":
            cfg = dataclasses.replace(cfg, nnodes=int(value))
        elif key == "batch.micro_batch_size":
            cfg = dataclasses.replace(cfg, batch=dataclasses.replace(cfg.batch, micro_batch_size=int(value)))
        elif key == "activation_checkpointing":
            cfg = dataclasses.replace(cfg, activation_checkpointing=CheckpointingConfig(name=value))
        elif key == "loss.chunk_tokens":
            cfg = dataclasses.replace(cfg, loss=dataclasses.replace(cfg.loss, chunk_tokens=int(value)))
        elif key == "parallel.cp":
            cfg = dataclasses.replace(cfg, parallel=dataclasses.replace(cfg.parallel, cp=int(value)))
        elif key == "backend.cpu_offload":
            cfg = dataclasses.replace(
                cfg, backend=dataclasses.replace(cfg.backend, cpu_offload=value == "true")
            )
        else:
            raise AssertionError(f"unexpected override {word}")
    return cfg


def _gib(cfg: RunConfig) -> float:
    world = int(cfg.nproc_per_node) * cfg.nnodes
    return estimate(cfg, Layout.resolve(cfg.parallel, world).for_backend(cfg.backend.name)).total_gib


CLAIM = re.compile(r"((?:[\w.]+=\S+ ?)+) \(estimated (\d+\.\d) GiB per rank\)")


def _claims(fix: str) -> list[tuple[str, float]]:
    return [(m[1].strip(), float(m[2])) for m in CLAIM.finditer(fix)]


def _assert_unpulled(cfg: RunConfig, fix: str) -> None:
    """No word of ``fix`` pulls a lever ``cfg`` has pulled, and each names a step past the config's."""
    if cfg.backend.name == "fsdp":
        assert "backend=fsdp" not in fix and "zero" not in fix
    if cfg.activation_checkpointing.name == "full":
        assert "activation_checkpointing=" not in fix
    for mb in re.findall(r"batch\.micro_batch_size=(\d+)", fix):
        assert int(mb) < cfg.batch.micro_batch_size
    for n in re.findall(r"nproc_per_node=(\d+)", fix):
        assert int(cfg.nproc_per_node) < int(n) <= MAX_RANKS_PER_NODE
    if getattr(cfg.backend, "cpu_offload", False):
        assert "cpu_offload" not in fix


CASES = {
    "single 8B mb4": _cfg("llama3.1-8b", BackendConfig(name="single"), 4),
    "fsdp 8B mb4 on 1": _cfg("llama3.1-8b", FSDPConfig(), 4),
    "full 8B mb16 fsdp on 2": _cfg("llama3.1-8b", FSDPConfig(), 16, "full", 2),
    "mb1 8B ddp on 2": _cfg("llama3.1-8b", BackendConfig(name="ddp"), 1, "selective", 2),
    "every lever 70B": _cfg("llama3.1-70b", FSDPConfig(), 1, "full", 8),
    "single 70B mb2": _cfg("llama3.1-70b", BackendConfig(name="single"), 2),
}


@pytest.mark.parametrize("case", CASES)
def test_the_fix_names_no_pulled_lever_and_each_claimed_set_up_fits_by_the_estimate(case: str) -> None:
    cfg = CASES[case]
    assert _gib(cfg) > H100 / 2**30  # each case is over the H100
    fix = gpu_memory_fix(cfg, H100)
    _assert_unpulled(cfg, fix)
    claims = _claims(fix)
    assert claims, fix  # every case gets at least one estimated, runnable line
    for overrides, said in claims:
        gib = _gib(_applied(cfg, overrides))
        assert gib == pytest.approx(said, abs=0.051)
        assert gib <= H100 / 2**30, (overrides, gib)
    assert "\n" not in fix and GPU_MEMORY_FIX not in fix


def test_single_8b_shards_over_a_node_and_nothing_less_does() -> None:
    """Llama 3.1 8B on one H100 with ``single`` at micro batch 4: ``16 P`` alone is 120 GiB, so neither a
    smaller micro batch nor full checkpointing fits; FSDP2 over 8 GPUs does (and over 4 does not)."""
    cfg = CASES["single 8B mb4"]
    fix = gpu_memory_fix(cfg, H100)
    assert fix.startswith("set backend=fsdp nproc_per_node=8 (estimated ")
    assert fix.endswith("GiB per rank), within the 79.2 GiB by the memory estimate")
    for over in (
        "batch.micro_batch_size=1",
        "activation_checkpointing=full",
        "backend=fsdp nproc_per_node=4",
    ):
        assert _gib(_applied(cfg, over)) > H100 / 2**30


def test_the_levers_left_by_the_config() -> None:
    assert set(levers(CASES["single 8B mb4"])) == {"loss", "micro_batch", "checkpointing", "sharding"}
    assert set(levers(CASES["full 8B mb16 fsdp on 2"])) == {"loss", "micro_batch", "sharding"}
    assert set(levers(CASES["mb1 8B ddp on 2"])) == {"checkpointing", "sharding"}  # 0.98 GiB of logits
    assert levers(CASES["every lever 70B"]) == {}
    steps = levers(CASES["full 8B mb16 fsdp on 2"])
    assert [t for t, _ in steps["micro_batch"]] == [f"batch.micro_batch_size={k}" for k in (8, 4, 2, 1)]
    assert [t for t, _ in steps["sharding"]] == ["nproc_per_node=4", "nproc_per_node=8"]


def test_long_sequences_are_fixed_by_the_chunked_loss_first_where_the_rules_allow_it() -> None:
    """Llama 3.1 8B at 65,536 tokens, FSDP2 over 8 H100s, full checkpointing, micro batch 1: the whole
    fp32 logits (31 GiB, with their gradient and copies most of the peak) are what the chunked loss drops;
    the fix names it first and its estimate fits. Under tensor parallel the rule refuses the chunked loss
    and the fix never names it; below 1 GiB of logits it is no lever."""
    cfg = _cfg("llama3.1-8b", FSDPConfig(), 1, "full", 8)
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, seq_len=65536))
    assert _gib(cfg) > H100 / 2**30
    fix = gpu_memory_fix(cfg, H100)
    assert fix.startswith("set loss.chunk_tokens=4096 (estimated "), fix
    overrides, said = _claims(fix)[0]
    assert _gib(_applied(cfg, overrides)) == pytest.approx(said, abs=0.051) and said <= H100 / 2**30
    tp = dataclasses.replace(cfg, parallel=dataclasses.replace(cfg.parallel, tp=2))
    assert "loss" not in levers(tp) and "loss.chunk_tokens" not in gpu_memory_fix(tp, H100)
    short = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, seq_len=1024))
    assert "loss" not in levers(short)  # 1 x 1,024 x 128,256 x 4 bytes: 0.49 GiB


def test_where_no_lever_is_left_the_fix_says_what_is_and_estimates_it() -> None:
    """Llama 3.1 70B on FSDP2 over 8 H100s, full, micro batch 1: 143 GiB; more nodes or CPU offload."""
    fix = gpu_memory_fix(CASES["every lever 70B"], H100)
    assert fix.startswith("every lever of this node is pulled already")
    assert "nnodes=2 (estimated " in fix and "backend.cpu_offload=true (estimated " in fix
    assert fix.endswith("else a smaller model")


def test_the_fix_is_what_the_oom_and_launch_lines_say() -> None:
    cfg = CASES["single 8B mb4"]
    fix = gpu_memory_fix(cfg, H100)
    predicted = _gib(cfg)
    line = over_memory_line(predicted, H100, "NVIDIA H100 80GB HBM3", lambda cap: gpu_memory_fix(cfg, cap))
    assert line is not None and line.endswith(f"Fix: {fix}")
    assert over_memory_line(10.0, H100, None, lambda cap: 1 / 0) is None  # the fix made only when over
    error = {"message": "CUDA out of memory. GPU 0 has a total capacity of 79.18 GiB of which 1 GiB is free."}
    line = oom_estimate_line(predicted, error, lambda cap: gpu_memory_fix(cfg, cap))
    assert line is not None and "backend=fsdp nproc_per_node=8 (estimated" in line
    assert oom_estimate_line(predicted, error).endswith(f"Fix: {GPU_MEMORY_FIX}")  # no config: every lever


def _plan(path: Path, rows: list[dict]) -> None:
    from flopsweep.job.plantable import PLAN_COLUMNS

    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=PLAN_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def test_the_unfit_line_gives_the_rows_own_fix(tmp_path: Path) -> None:
    from flopsweep.job.planprint import plan_unfit_line

    fix = gpu_memory_fix(CASES["single 8B mb4"], H100)
    row = {"job": 0, "status": "ok", "model": "llama3.1-8b", "est_peak_gib_per_rank": 130.1, "fits": False}
    _plan(tmp_path / "plan.csv", [row | {"fits_on": "H100 SXM (79.2 GiB)", "memory_fix": fix}])
    line = plan_unfit_line(str(tmp_path / "plan.csv"), "H100")
    assert f"Fix: {fix}; plan_clusters=[H100:1x8,H100:8x8] ranks the set-ups that fit." in line
    _plan(tmp_path / "plan.csv", [row | {"fits_on": "H100 SXM (79.2 GiB)"}])  # an older row: every lever
    assert f"Fix: {GPU_MEMORY_FIX};" in plan_unfit_line(str(tmp_path / "plan.csv"), "H100")


def test_plan_json_is_strict_json_with_its_non_finite_figures_null_and_said(tmp_path: Path) -> None:
    """A plan row whose figure is infinite (pandas reads a CSV cell ``inf``/``-inf`` of a numeric column as a
    float) is written null in ``plan_format=json``, and its row's ``nulls`` names why; the text parses with
    every non-finite constant refused (``allow_nan=False``'s JSON). A finite row beside it is unchanged."""
    from flopsweep.job.planprint import plan_output

    rows = [
        {"job": 0, "status": "ok", "model": "m", "predicted_mfu": 0.5, "predicted_budget_days": "inf"},
        {"job": 1, "status": "ok", "model": "m", "predicted_mfu": "-inf", "predicted_budget_days": 3.0},
    ]
    _plan(tmp_path / "plan.csv", rows)
    text = plan_output(str(tmp_path / "plan.csv"), "json")
    assert "NaN" not in text and "Infinity" not in text

    def refuse(name: str) -> None:
        raise ValueError(name)

    first, second = json.loads(text, parse_constant=refuse)
    assert first["predicted_budget_days"] is None and first["predicted_mfu"] == 0.5
    assert first["nulls"] == {"predicted_budget_days": "inf: not a finite number (JSON has none)"}
    assert second["predicted_mfu"] is None and second["predicted_budget_days"] == 3.0
    assert second["nulls"] == {"predicted_mfu": "-inf: not a finite number (JSON has none)"}
    assert first["fits"] is None and first["model"] == "m"  # a blank cell: null, no reason


def test_plan_json_gives_a_nan_cell_null_and_numbers_beside_a_blank_as_numbers(tmp_path: Path) -> None:
    """Session 26: pandas read a column with a blank or a ``nan`` cell as text: ``"nan"`` and ``"0.5"`` in
    ``plan_format=json``. A ``nan`` is null (said under ``nulls``), a blank null, the numbers numbers; a
    ``True``/``False`` column with a blank booleans; text stays text (``"nan"`` in a column of text)."""
    from flopsweep.job.planprint import plan_output

    rows = [
        {"job": 0, "status": "ok", "model": "m", "n_params": 12, "predicted_mfu": "nan", "fits": True},
        {"job": 1, "status": "invalid", "model": "nan", "reason": "why", "predicted_mfu": 0.5},
    ]
    _plan(tmp_path / "plan.csv", rows)
    first, second = json.loads(plan_output(str(tmp_path / "plan.csv"), "json"))
    assert first["predicted_mfu"] is None and first["nulls"] == {
        "predicted_mfu": "nan: not a finite number (JSON has none)"
    }
    assert second["predicted_mfu"] == 0.5 and first["n_params"] == 12 and second["n_params"] is None
    assert (first["fits"], second["fits"]) == (True, None) and (first["reason"], second["reason"]) == (
        None,
        "why",
    )
    assert (first["model"], second["model"]) == ("m", "nan") and "nulls" not in second


def test_where_the_estimate_fits_the_fix_names_the_unpulled_levers_unestimated() -> None:
    """An ``oom`` the estimate did not foresee (its estimate within the GPU's memory): the estimate cannot
    choose, so the fix names each lever the config has left at its mildest step, and nothing pulled."""
    from flopsweep.memory_fix import levers_line

    cfg = CASES["full 8B mb16 fsdp on 2"]
    fix = gpu_memory_fix(cfg, 2 * H100)  # 108 GiB within 158 GiB
    assert (
        fix
        == levers_line(cfg)
        == (
            "set one of loss.chunk_tokens=4096, batch.micro_batch_size=8, nproc_per_node=4 (each lowers the "
            "memory per rank); "
            "else more nodes (nnodes), backend.cpu_offload=true or a smaller model"
        )
    )
    assert levers_line(CASES["every lever 70B"]) == (
        "every lever of this node is pulled already; try more nodes (nnodes), backend.cpu_offload=true "
        "or a smaller model"
    )


def test_a_plan_row_over_its_gpu_carries_its_own_fix_and_a_row_that_fits_none(tmp_path: Path) -> None:
    """``plan=true plan_gpu=H100-80GB`` of Llama 3.1 8B on ``single`` at micro batch 4: its row's
    ``memory_fix`` is :func:`gpu_memory_fix` of the planned config on the H100's 79.6 GiB with the memory
    edge's 13% left free, which the unfit line prints; the fitting FSDP2 row over 8 GPUs has none. Session
    29: FSDP2 over 8 GPUs alone (70.8 GiB, 11% free: the plan's own row flags it at the memory edge) was the
    fix; now each set-up named leaves 13% free."""
    from flopsweep.job import JobInfo, plan_job
    from flopsweep.job.planprint import plan_unfit_line

    base = dataclasses.replace(CASES["single 8B mb4"], device="auto", plan=True, plan_gpu="H100-80GB")
    (tmp_path / "one").mkdir()
    one = plan_job(base, JobInfo(job_dir=tmp_path / "one", overrides=["plan_gpu=H100-80GB"]))["plan"]
    assert (one["status"], one["fits"], one["fits_on"]) == ("ok", False, "H100 SXM (79.6 GiB)")
    fix = one["memory_fix"]
    assert fix.endswith("within the 79.6 GiB by the memory estimate, 13% of it left free (the memory edge)")
    assert "set backend=fsdp nproc_per_node=8 (estimated" not in fix, fix
    claims = _claims(fix)
    assert claims, fix
    for overrides, said in claims:
        gib = _gib(_applied(base, overrides))
        assert gib == pytest.approx(said, abs=0.051) and gib <= 0.87 * 79.6, (overrides, gib)
    assert _gib(_applied(base, "backend=fsdp nproc_per_node=8")) > 0.87 * 79.6  # at the edge: not named
    line = plan_unfit_line(str(tmp_path / "one" / "plan.csv"), "H100")
    assert f"Fix: {one['memory_fix']}; plan_clusters=[H100:1x8,H100:8x8]" in line
    (tmp_path / "eight").mkdir()
    eight = dataclasses.replace(base, backend=FSDPConfig(), nproc_per_node="8")
    row = plan_job(eight, JobInfo(job_dir=tmp_path / "eight", overrides=[]))["plan"]
    assert (row["status"], row["fits"], row["memory_fix"]) == ("ok", True, "")


@pytest.mark.parametrize("case", CASES)
def test_on_a_cluster_the_fix_names_no_more_gpus_than_it_has(case: str) -> None:
    """Session 26: a ``plan_clusters`` row over memory on ``A100-40GB:1x4`` was told ``nproc_per_node=8``,
    more GPUs than its cluster has. With the cluster's nodes and GPUs per node, no set-up named exceeds them
    (each estimate still checked), and where none fits within them the fix says so and names a larger one."""
    cfg = dataclasses.replace(CASES[case], nproc_per_node="4")
    a100 = int(0.9 * 40 * 2**30)
    fix = gpu_memory_fix(cfg, a100, (1, 4))
    assert not re.search(r"nproc_per_node=(?:[5-9]|\d\d)", fix) and "nnodes=" not in fix, fix
    for overrides, said in _claims(fix):
        gib = _gib(_applied(cfg, overrides))
        assert gib == pytest.approx(said, abs=0.051) and gib <= a100 / 2**30, (overrides, gib)
    if not fix.startswith("set "):
        assert "no lever fits within the cluster's 4 GPUs (1x4)" in fix, fix
        assert "a cluster of more than 4 GPUs (1x4)" in fix and "more nodes (nnodes)" not in fix, fix
    assert "nproc_per_node=8" in gpu_memory_fix(CASES["single 8B mb4"], H100)  # off a cluster: a node of 8


def test_on_a_cluster_the_levers_stop_at_its_gpus_per_node() -> None:
    cfg = CASES["full 8B mb16 fsdp on 2"]
    assert [t for t, _ in levers(cfg, (1, 4))["sharding"]] == ["nproc_per_node=4"]
    assert "sharding" not in levers(cfg, (4, 2))  # two GPUs per node: its ranks are all of them
    fix = gpu_memory_fix(CASES["every lever 70B"], int(0.9 * 40 * 2**30), (1, 8))
    assert "no lever fits within the cluster's 8 GPUs (1x8)" in fix and "nnodes=" not in fix, fix
    assert fix.endswith("else a cluster of more than 8 GPUs (1x8) or a smaller model"), fix


H200 = int(140.4 * 2**30)
"""An H200's memory as the peak table gives it (140.4 GiB)."""


def test_casts_is_the_mildest_checkpointing_step_where_autocast_copies_weights() -> None:
    """From ``none`` with autocast over fp32 weights (``single``, ``ddp``; bf16), ``casts`` (none's
    activations, the bf16 weight copies dropped, no matmul recomputed) comes before ``full``; Llama 3.1 8B
    ``single`` compiled at micro batch 4 on an H200 (145 GiB estimated) fits with it, and the fix names it
    with the estimate of the config the override makes. FSDP2, ``selective`` and fp32 keep ``full`` alone."""
    from flopsweep.config import PrecisionConfig

    cfg = dataclasses.replace(_cfg("llama3.1-8b", BackendConfig(name="single"), 4), compile=True)
    steps = levers(cfg)["checkpointing"]
    assert [t for t, _ in steps] == ["activation_checkpointing=casts", "activation_checkpointing=full"]
    fix = gpu_memory_fix(cfg, H200)
    claims = dict(_claims(fix))
    assert "activation_checkpointing=casts" in claims and "activation_checkpointing=full" not in claims
    assert claims["activation_checkpointing=casts"] == round(
        _gib(_applied(cfg, "activation_checkpointing=casts")), 1
    )
    assert _gib(cfg) > H200 / 2**30 >= claims["activation_checkpointing=casts"]
    fp32 = dataclasses.replace(cfg, precision=PrecisionConfig(name="fp32"))
    for other in (CASES["fsdp 8B mb4 on 1"], CASES["mb1 8B ddp on 2"], fp32):
        assert [t for t, _ in levers(other)["checkpointing"]] == ["activation_checkpointing=full"]


def _long(seq_len: int, mb: int = 1, chunk: int = 0) -> RunConfig:
    """Llama 3.1 8B at ``seq_len`` tokens on FSDP2 over 8 GPUs, full checkpointing."""
    cfg = _cfg("llama3.1-8b", FSDPConfig(), mb, "full", 8)
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, seq_len=seq_len))
    return dataclasses.replace(cfg, loss=dataclasses.replace(cfg.loss, chunk_tokens=chunk))


def _assert_claims_fit(cfg: RunConfig, fix: str, capacity_gib: float) -> None:
    claims = _claims(fix)
    assert claims, fix
    for overrides, said in claims:
        gib = _gib(_applied(cfg, overrides))
        assert gib == pytest.approx(said, abs=0.051) and gib <= capacity_gib, (overrides, gib)


def test_context_parallel_is_a_lever_of_fsdp2_within_the_node_where_the_rules_take_it() -> None:
    """Session 29: at 262,144 tokens on 8 H100s the fix said ``even loss.chunk_tokens=4096 is estimated at
    137.4 GiB ...; try more nodes`` though ``parallel.cp=8 loss.chunk_tokens=4096`` fits the same 8 GPUs.
    ``parallel.cp=N`` doubles up to the node's ranks on FSDP2 only, each step the rules accept (the kernel,
    the ``2 cp`` equal chunks), and never below 8,192 tokens a rank."""
    from flopsweep.options import BlockSparseConfig

    cfg = _long(262144)
    assert [t for t, _ in levers(cfg)["context_parallel"]] == [f"parallel.cp={n}" for n in (2, 4, 8)]
    assert list(levers(cfg)) == ["loss", "context_parallel"]  # micro batch 1, full, 8 ranks of 8
    fix = gpu_memory_fix(cfg, H100)
    assert "parallel.cp=" in fix and "even " not in fix and "nnodes" not in fix, fix
    _assert_claims_fit(cfg, fix, H100 / 2**30)
    odd = _long(65544)  # 65,544 = 8 x 8,193: 4 or 8 equal chunks, not 16
    assert [t for t, _ in levers(odd)["context_parallel"]] == ["parallel.cp=2", "parallel.cp=4"]
    four = dataclasses.replace(cfg, nproc_per_node="4")
    assert [t for t, _ in levers(four)["context_parallel"]] == ["parallel.cp=2", "parallel.cp=4"]
    assert [t for t, _ in levers(cfg, (1, 2))["context_parallel"]] == ["parallel.cp=2"]  # a 2-GPU node
    assert "context_parallel" not in levers(dataclasses.replace(cfg, attention=BlockSparseConfig()))
    assert "context_parallel" not in levers(dataclasses.replace(cfg, backend=BackendConfig(name="ddp")))
    assert "context_parallel" not in levers(_long(8192))  # 4,096 tokens a rank at cp2: too short
    done = dataclasses.replace(cfg, parallel=dataclasses.replace(cfg.parallel, cp=4))
    assert [t for t, _ in levers(done)["context_parallel"]] == ["parallel.cp=8"]


def test_a_chunk_above_4096_tokens_gets_the_smaller_chunk() -> None:
    """Session 29: ``loss.chunk_tokens=65536`` at 64K tokens counted as pulled and the fix never offered a
    smaller chunk; a chunk of 4096 or less is no lever."""
    cfg = _long(65536, chunk=65536)
    assert [t for t, _ in levers(cfg)["loss"]] == ["loss.chunk_tokens=4096"]
    fix = gpu_memory_fix(cfg, H100)
    assert fix.startswith("set loss.chunk_tokens=4096 (estimated "), fix
    _assert_claims_fit(cfg, fix, H100 / 2**30)
    assert "loss" not in levers(_long(65536, chunk=4096)) and "loss" not in levers(_long(65536, chunk=1024))
    assert "loss" in levers(_long(65536, chunk=6144))  # 6,144 tokens x 128,256 x 4 bytes: 2.9 GiB


def test_the_one_config_fix_leaves_the_memory_edge_free_and_says_where_only_the_edge_fits() -> None:
    """Session 29: at 64K tokens and micro batch 4 the one-row plan's fix named ``loss.chunk_tokens=4096
    batch.micro_batch_size=2`` at 75.9 of 79.6 GiB, a set-up the same plan flags at the memory edge, while
    micro batch 1 fits at 45.2. With ``margin`` (13%: the memory edge) each set-up named leaves it free,
    and combinations drop a lever they do not need; where only the edge fits, the fix says so."""
    cfg = _long(65536, mb=4)
    gpu = 79.6
    fix = gpu_memory_fix(cfg, gpu * 2**30, margin=0.13)
    assert fix.endswith("within the 79.6 GiB by the memory estimate, 13% of it left free (the memory edge)")
    assert "loss.chunk_tokens=4096 batch.micro_batch_size=1 (estimated 45.2 GiB per rank)" in fix, fix
    _assert_claims_fit(cfg, fix, 0.87 * gpu)
    assert all(o.count("=") <= 2 for o, _ in _claims(fix))  # no lever a claim does not need
    strongest = " ".join(steps[-1][0] for steps in levers(cfg).values())
    least = _gib(_applied(cfg, strongest))
    edge = gpu_memory_fix(cfg, least / 0.95 * 2**30, margin=0.13)  # only 5% free at the least
    assert "by the memory estimate but at the memory edge (under 13% of it free" in edge, edge
    _assert_claims_fit(cfg, edge, least / 0.95)

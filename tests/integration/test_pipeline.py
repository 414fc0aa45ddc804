"""Pipeline parallelism (``parallel.pp > 1``, :mod:`flopsweep.pipeline`): the split into stages, the
refusals before launch, and, on four gloo ranks (PP 2 x FSDP 2 and TP 2 x PP 2, fp32), the first step of
each schedule against the same model on one rank: loss, gradient norm and the tied weight.

What is comparable with the one-rank model: the pipeline keeps GPT-2's (and llama-tiny's) LM head tied
to the token embedding by summing the two copies' gradients (first and last stage) after the backward,
so its model *is* the one-rank model. The one-rank reference runs that model on the union of the
data-parallel ranks' batches (``make_batches`` of data-parallel ranks 0 and 1, whose mean loss is the
global one): the first-step loss is the mean the step returns, the gradient norm is the tied model's
(the tied weight's gradient is the sum of its two uses, counted once), and after the step both copies
hold the same values.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import sys
from pathlib import Path

import pytest
import torch
from helpers import ok_sweep

from analysis.checks import record_problems
from flopsweep.config import CheckpointingConfig, ParallelConfig, RunConfig
from flopsweep.layout import Layout
from flopsweep.models.gpt2 import GPT2Config
from flopsweep.models.llama import LlamaConfig
from flopsweep.options import FSDPConfig
from flopsweep.profile import COMM_PATTERN

TESTS = Path(__file__).resolve().parents[1]  # tests/: the spawned ranks import integration.<this module>


SCHEDULES = ("1F1B", "GPipe", "Interleaved1F1B")


# (overrides, key, words in the message): each refused in one line before any worker starts.
REFUSALS = [
    (["parallel.pp=2", "backend=zero3"], "parallel.pp", "stays data-parallel"),
    (["parallel.pp=2", "backend=ddp"], "parallel.pp", "is replicate-only data parallelism"),
    (["parallel.pp=2", "backend=single"], "parallel.pp", "backend=single runs one rank"),
    (["parallel.pp=3", "backend=fsdp", "model.n_layer=4"], "parallel.pp", "does not divide model.n_layer=4"),
    (
        [
            "parallel.pp=2",
            "backend=fsdp",
            "parallel.pp_schedule=Interleaved1F1B",
            "parallel.pp_stages_per_rank=3",
        ],
        "parallel.pp_stages_per_rank",
        "6 stages do not divide model.n_layer=2",
    ),
    (
        ["parallel.pp=2", "backend=fsdp", "parallel.pp_schedule=Interleaved1F1B"],
        "parallel.pp_stages_per_rank",
        "4 stages do not divide model.n_layer=2",
    ),
    (
        ["parallel.pp=2", "backend=fsdp", "parallel.pp_stages_per_rank=2"],
        "parallel.pp_stages_per_rank",
        "parallel.pp_schedule=1F1B runs one stage per rank",
    ),
    (["parallel.pp=2", "backend=fsdp", "parallel.pp_microbatches=1"], "parallel.pp_microbatches", "fewer"),
    (
        ["parallel.pp=2", "backend=fsdp", "model.n_layer=4", "parallel.pp_schedule=Interleaved1F1B"]
        + ["parallel.pp_microbatches=5"],
        "parallel.pp_microbatches",
        "2 rounds, which must divide it",
    ),
    (["parallel.pp_schedule=GPipe"], "parallel.pp_schedule", "parallel.pp=1 runs none"),
    (["parallel.pp_microbatches=4"], "parallel.pp_microbatches", "parallel.pp=1 runs none"),
    (["parallel.pp=2", "backend=fsdp", "precision=fp16"], "precision", "loss scaling"),
    (["parallel.pp=2", "backend=fsdp", "batch=auto"], "batch", "micro-batch search"),
    (
        ["parallel.pp=2", "backend=fsdp", "model=hf", "model.config=qwen3-tiny"],
        "parallel.pp",
        "no pipeline split",
    ),
    (
        ["parallel.pp=2", "backend=fsdp", "batch.micro_batch_size=3"],
        "parallel.pp_microbatches",
        "3 x 1 = 3 sequences",
    ),
    (
        ["parallel.pp=2", "backend=fsdp", "batch.micro_batch_size=1", "batch.global_batch_size=6"],
        "parallel.pp_microbatches",
        "1 x 3 = 3 sequences",  # grad_accum 6 / (micro 1 x dp 2) = 3
    ),
]


@pytest.mark.parametrize(("overrides", "key", "words"), REFUSALS, ids=lambda v: str(v)[:60])
def test_a_pipeline_that_cannot_run_is_an_invalid_record(
    hydra_compose, tmp_path: Path, overrides: list[str], key: str, words: str
) -> None:
    from flopsweep.job import JobInfo, run_job

    args = ["device=cpu", "nproc_per_node=4", "precision=fp32", *overrides]
    cfg = hydra_compose(args)
    record = run_job(cfg, JobInfo(job_dir=tmp_path, overrides=args))
    assert record["status"] == "invalid", record["error"]
    error = record["error"]
    assert (error["type"], error["phase"]) == ("ConfigError", "config")
    assert f"{key}=" in error["message"] and words in error["message"], error["message"]
    assert "Fix:" in error["message"] and "\n" not in error["message"]
    assert record["system"]["world_size"] is None  # no worker started


CASES = [(arch, schedule) for arch in ("gpt2", "llama") for schedule in SCHEDULES]


def _config(arch: str, schedule: str, pp: int = 2) -> RunConfig:
    """gpt-tiny or llama-tiny at 4 layers (``llama-untied``: its LM head separate, as Llama 3.1)."""
    model = (
        GPT2Config(name="gpt-tiny", n_layer=4)
        if arch == "gpt2"
        else LlamaConfig(name="llama-tiny", n_layer=4, tie_embeddings=arch != "llama-untied")
    )
    from flopsweep.config import BatchConfig, PrecisionConfig

    return RunConfig(
        device="cpu",
        model=model,
        backend=FSDPConfig(),
        precision=PrecisionConfig(name="fp32"),
        batch=BatchConfig(micro_batch_size=2, grad_accum=2),  # 4 sequences per rank: 2 or 4 micro-batches
        parallel=ParallelConfig(pp=pp, pp_schedule=schedule),
    )


LAYOUT = Layout(pp=2, dp_shard=2)


PP4 = Layout(pp=4)
"""Four stages, one data-parallel rank: middle stages, and the tied weight's own group of the
first and the last pipeline rank (``new_group``)."""


MORE = [("gpt2", "1F1B", PP4), ("llama-untied", "1F1B", LAYOUT)]
"""Cases beside :data:`CASES`: (arch, schedule, layout)."""


def _rank(rank: int, store: str, out: str) -> None:
    """One of four ranks: every case's trainer, one step, its loss, gradient norm and the tied
    weight's full values after the step (first and last stage)."""
    import torch.distributed as dist
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=LAYOUT.world_size)
    from flopsweep.backends import build_trainer
    from flopsweep.worker import make_batches

    results = {}
    for arch, schedule, layout in [(a, s, LAYOUT) for a, s in CASES] + MORE:
        cfg = _config(arch, schedule, layout.pp)
        if (arch, schedule) == ("llama", "GPipe"):  # recompute changes no value: checkpointed blocks
            cfg = dataclasses.replace(cfg, activation_checkpointing=CheckpointingConfig(name="full"))
        trainer = build_trainer(cfg, torch.device("cpu"), layout)
        loss = trainer.step(make_batches(cfg, layout, rank, torch.device("cpu")))
        tied = [p.full_tensor().sum().item() for p in trainer.tied]
        blocks = [b for stage in trainer.stages for b in stage.layers.values()]
        results[f"{arch}-{schedule}-{layout.pp}"] = {
            "loss": loss.item(),
            "grad_norm": trainer.grad_norm.item(),
            "tied": tied,
            "checkpointed": [isinstance(b, CheckpointWrapper) for b in blocks],
        }
    Path(out, f"rank{rank}.json").write_text(json.dumps(results))
    dist.destroy_process_group()


def _reference(arch: str, schedule: str, dp_ranks: int = 2) -> dict[str, float]:
    """The same model on one rank (``build_model``, as every backend builds it), on the batches of
    data-parallel ranks ``0 .. dp_ranks - 1`` together: the first-step loss and gradient norm."""
    from flopsweep.backends import build_model
    from flopsweep.worker import make_batches

    cfg = _config(arch, schedule)
    batches = [b for r in range(dp_ranks) for b in make_batches(cfg, LAYOUT, r, torch.device("cpu"))]
    model = build_model(cfg, torch.device("cpu"))
    loss = sum(model(b) for b in batches) / len(batches)
    loss.backward()
    norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()]).item()
    return {"loss": loss.item(), "grad_norm": norm}


def _both_ranks(rank: int, pp_store: str, pp_out: str, tp_store: str, tp_out: str) -> None:
    """One of four ranks: :func:`_rank`'s cases (PP 2 x FSDP 2), then :func:`_tp_rank`'s (TP 2 x PP 2),
    each in a process group of its own (CI time: one set of four ranks, where each test started its own)."""
    _rank(rank, pp_store, pp_out)
    _tp_rank(rank, tp_store, tp_out)


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict]]:
    """Every rank's results of :func:`_rank` (``pp``) and :func:`_tp_rank` (``tp``), in rank order, from
    one set of four spawned ranks."""
    import torch.multiprocessing as mp

    pp, tp = tmp_path_factory.mktemp("pp2_fsdp2"), tmp_path_factory.mktemp("tp2_pp2")
    sys.path.insert(0, str(TESTS))  # the spawned ranks import this module
    mp.start_processes(
        _both_ranks,
        args=(str(pp / "store"), str(pp), str(tp / "store"), str(tp)),
        nprocs=LAYOUT.world_size,
        start_method="spawn",
    )
    assert LAYOUT.world_size == TP2_PP2.world_size == 4
    return {
        key: [json.loads((folder / f"rank{r}.json").read_text()) for r in range(4)]
        for key, folder in (("pp", pp), ("tp", tp))
    }


@pytest.mark.slow
def test_pp2_x_fsdp2_first_step_matches_one_rank(four_ranks: dict[str, list[dict]]) -> None:
    """PP 2 x FSDP 2 (four gloo ranks, fp32), gpt-tiny and llama-tiny at 4 layers, 1F1B, GPipe and
    Interleaved1F1B (2 stages per rank): the first-step loss and gradient norm of the one-rank model
    within 1e-4 on every rank, and the tied weight's two copies equal after the step; the same for
    PP 4 (middle stages) and for an untied head. llama with GPipe runs its stages' blocks under
    ``activation_checkpointing=full`` (wrapped before the split; the reference is not)."""
    ranks = four_ranks["pp"]
    for arch, schedule in CASES:
        ref = _reference(arch, schedule)
        got = [r[f"{arch}-{schedule}-2"] for r in ranks]
        # Ranks 0, 1 (stage 0 and the first, data-parallel ranks 0 and 1), ranks 2, 3 the last stage.
        mean = (got[0]["loss"] + got[1]["loss"]) / 2
        assert got[0]["loss"] == got[2]["loss"] and got[1]["loss"] == got[3]["loss"]  # the pipeline's peers
        assert math.isclose(mean, ref["loss"], abs_tol=1e-4), (arch, schedule, mean, ref)
        for g in got:
            assert math.isclose(g["grad_norm"], ref["grad_norm"], abs_tol=1e-4), (arch, schedule, g, ref)
            assert len(g["tied"]) == 1  # tied head: one copy on the first and one on the last stage
            assert g["tied"] == got[0]["tied"]  # after the step: the two copies are still one weight
            want = [(arch, schedule) == ("llama", "GPipe")] * 2  # 4 blocks over 2 pipeline ranks
            assert g["checkpointed"] == want
    # PP 4 (one data-parallel rank): every rank the loss and norm of the one-rank model on dp rank 0's
    # batch; the tied weight on ranks 0 and 3 only, equal after the step.
    ref = _reference("gpt2", "1F1B", dp_ranks=1)
    got = [r["gpt2-1F1B-4"] for r in ranks]
    for g in got:
        assert math.isclose(g["loss"], ref["loss"], abs_tol=1e-4) and math.isclose(
            g["grad_norm"], ref["grad_norm"], abs_tol=1e-4
        ), (g, ref)
    assert [len(g["tied"]) for g in got] == [1, 0, 0, 1] and got[0]["tied"] == got[3]["tied"]
    # An untied LM head (Llama 3.1's): nothing to sum, the same loss and norm.
    ref = _reference("llama-untied", "1F1B")
    got = [r["llama-untied-1F1B-2"] for r in ranks]
    assert math.isclose((got[0]["loss"] + got[1]["loss"]) / 2, ref["loss"], abs_tol=1e-4), (got, ref)
    assert all(math.isclose(g["grad_norm"], ref["grad_norm"], abs_tol=1e-4) and g["tied"] == [] for g in got)


PIPELINE_SWEEP = (
    "model=gpt-tiny,llama-tiny",
    "model.n_layer=4",
    "device=cpu",
    "precision=fp32",
    "backend=fsdp",
    "nproc_per_node=4",
    "parallel.pp=2",
    "batch.micro_batch_size=2",
    "batch.grad_accum=2",
    "steps.warmup=1",
)
"""The pipeline runs through ``run.py``: both tiny models at 4 layers, PP 2 on four gloo ranks."""


@pytest.mark.slow
def test_pipeline_runs_write_ok_records_with_their_layout(tmp_path: Path) -> None:
    """The real job path: ``run.py -m`` over llama-tiny (4 layers) and the three schedules on four ranks;
    each record ``ok`` with ``system.parallel.pp=2``, tokens per step counted over the two data-parallel
    ranks, the first-step loss of the one-rank model, and (``profile=true``) the stages' sends and
    receives counted as communication in the breakdown. gpt-tiny's pipeline runs through ``run.py`` in
    test_compiled_blocks_run_in_a_pipeline (PP 2 x FSDP 2, 1F1B) and
    test_tp2_x_pp2_runs_write_ok_records_with_their_layout, its three schedules' first step in
    test_pp2_x_fsdp2_first_step_matches_one_rank (CI time: 3 four-rank jobs, not 6)."""
    schedules = "parallel.pp_schedule=1F1B,GPipe,Interleaved1F1B"
    llama = [a if not a.startswith("model=") else "model=llama-tiny" for a in PIPELINE_SWEEP]
    recs = ok_sweep(tmp_path, *llama, schedules, "steps.measure=2", "profile=true")
    assert len(recs) == 3
    # profile=true: the pipeline's sends and receives are in the trace, and counted as communication.
    trace = next(tmp_path.rglob("rank0.trace.json.gz"))
    names = {e.get("name") for e in json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]}
    assert {"c10d::send", "c10d::recv_"} <= names and all(
        COMM_PATTERN.search(n) for n in ("c10d::send", "c10d::recv_")
    )
    assert all(r["metrics"]["breakdown"]["comm_s"] > 0 for r in recs)
    for r in recs:
        assert r["status"] == "ok", r["error"]
        assert r["system"]["parallel"] == {
            "dp_replicate": 1,
            "dp_shard": 2,
            "tp": 1,
            "pp": 2,
            "cp": 1,
            "ep": 1,
        }
        m, seq = r["metrics"], r["config"]["model"]["seq_len"]
        assert m["global_batch_size"] == 2 * 2 * 2 and m["tokens_per_step"] == 8 * seq  # micro x accum x dp
        parallel = r["config"]["parallel"]  # the derived pipeline keys, as they ran
        per_rank = 2 if parallel["pp_schedule"] == "Interleaved1F1B" else 1
        assert (parallel["pp_stages_per_rank"], parallel["pp_microbatches"]) == (per_rank, 2 * per_rank)
        arch = r["model"]["arch"]
        ref = _reference(arch, r["config"]["parallel"]["pp_schedule"])
        assert math.isclose(m["loss_first"], ref["loss"], abs_tol=1e-4), (arch, m["loss_first"], ref)
        assert record_problems(r) == []  # the analysis' checks count tokens over dp, not the world


TP2_PP2 = Layout(pp=2, tp=2, dp_shard=1)


TP_CASES = [(arch, schedule) for arch in ("gpt2", "llama") for schedule in SCHEDULES] + [
    ("llama-untied", "1F1B")
]
"""TP 2 x PP 2 cases: both tiny models under every schedule, and llama's separate (column-wise) head."""


def _tp_rank(rank: int, store: str, out: str) -> None:
    """One of four ranks of TP 2 x PP 2: every case of :data:`TP_CASES`, one step, its loss,
    gradient norm, the tied weight's full values after the step, and the stages' tensor-parallel
    state (each block weight a ``DTensor`` sharded over ``tp``, its local shard half the rows)."""
    import torch.distributed as dist
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper
    from torch.distributed.tensor import DTensor, Shard

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=TP2_PP2.world_size)
    from flopsweep.backends import build_trainer
    from flopsweep.worker import make_batches

    results = {}
    for arch, schedule in TP_CASES:
        cfg = _config(arch, schedule)
        if (arch, schedule) == ("llama", "GPipe"):  # checkpointed tensor-parallel blocks
            cfg = dataclasses.replace(cfg, activation_checkpointing=CheckpointingConfig(name="full"))
        trainer = build_trainer(cfg, torch.device("cpu"), TP2_PP2)
        loss = trainer.step(make_batches(cfg, TP2_PP2, rank, torch.device("cpu")))
        block = next(iter(trainer.stages[0].layers.values()))
        name = "attn.c_attn.weight" if arch == "gpt2" else "attention.wq.weight"
        weight = next(p for n, p in block.named_parameters() if n.endswith(name))  # wrapped or not
        tp_dim = weight.device_mesh.mesh_dim_names.index("tp") if isinstance(weight, DTensor) else None
        results[f"{arch}-{schedule}"] = {
            "loss": loss.item(),
            "grad_norm": trainer.grad_norm.item(),
            "tied": [p.full_tensor().sum().item() for p in trainer.tied],
            "checkpointed": isinstance(block, CheckpointWrapper),
            "tp_sharded": tp_dim is not None and weight.placements[tp_dim] == Shard(0),
            "local_rows": [weight.to_local().shape[0], weight.shape[0]] if tp_dim is not None else None,
        }
    Path(out, f"rank{rank}.json").write_text(json.dumps(results))
    dist.destroy_process_group()


@pytest.mark.slow
def test_tp2_x_pp2_first_step_matches_one_rank(four_ranks: dict[str, list[dict]]) -> None:
    """TP 2 x PP 2 (acceptance of issue 23; four gloo ranks, fp32): gpt-tiny and llama-tiny at 4
    layers under 1F1B, GPipe and Interleaved1F1B, and llama with its separate head, give on every rank
    the first-step loss and gradient norm of the one-rank model (one data-parallel rank: data-parallel
    rank 0's batches) within 1e-4; the stages' blocks are tensor-parallel (half the rows per rank;
    llama with GPipe checkpointed too), and the tied weight's two copies (first and last stage,
    vocabulary-sharded alike) equal after the step."""
    ranks = four_ranks["tp"]
    for arch, schedule in TP_CASES:
        ref = _reference(arch, schedule, dp_ranks=1)
        got = [r[f"{arch}-{schedule}"] for r in ranks]
        for g in got:
            assert math.isclose(g["loss"], ref["loss"], abs_tol=1e-4), (arch, schedule, g, ref)
            assert math.isclose(g["grad_norm"], ref["grad_norm"], abs_tol=1e-4), (arch, schedule, g, ref)
            assert g["tp_sharded"] and g["local_rows"][0] * 2 == g["local_rows"][1], g
            assert g["tied"] == got[0]["tied"] and len(g["tied"]) == (arch != "llama-untied")
            assert g["checkpointed"] == ((arch, schedule) == ("llama", "GPipe"))


@pytest.mark.slow
def test_tp2_x_pp2_runs_write_ok_records_with_their_layout(tmp_path: Path) -> None:
    """The real job path of TP 2 x PP 2: ``run.py -m`` over both tiny models (4 layers, 1F1B) on
    four ranks; each record ``ok`` with its layout and the one-rank model's first-step loss."""
    recs = ok_sweep(tmp_path, *PIPELINE_SWEEP, "parallel.tp=2", "steps.measure=1")
    assert sorted(r["model"]["arch"] for r in recs) == ["gpt2", "llama"]
    for r in recs:
        assert r["status"] == "ok", r["error"]
        assert r["system"]["parallel"] == {
            "dp_replicate": 1,
            "dp_shard": 1,
            "tp": 2,
            "pp": 2,
            "cp": 1,
            "ep": 1,
        }
        m, seq = r["metrics"], r["config"]["model"]["seq_len"]
        assert m["tokens_per_step"] == 2 * 2 * 1 * seq  # micro x accum x dp (one data-parallel rank)
        # One data-parallel rank: the one-rank model on data-parallel rank 0's batches.
        ref = _reference(r["model"]["arch"], "1F1B", dp_ranks=1)
        assert math.isclose(m["loss_first"], ref["loss"], abs_tol=1e-4), (r["model"]["arch"], ref)
        assert record_problems(r) == []


@pytest.mark.slow
def test_compiled_blocks_run_in_a_pipeline(tmp_path: Path) -> None:
    """``compile=true`` compiles each block inside its stage (``backends.wrap_blocks`` before the
    split): a PP 2 x FSDP 2 run is ``ok`` with the one-rank model's first-step loss."""
    from helpers import run_py

    proc = run_py(
        "device=cpu",
        "nproc_per_node=4",
        "backend=fsdp",
        "precision=fp32",
        "parallel.pp=2",
        "compile=true",
        "steps.warmup=2",
        "steps.measure=1",
        f"hydra.run.dir={tmp_path}",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((tmp_path / "metrics.json").read_text())
    assert record["status"] == "ok", record["error"]
    assert record["system"]["parallel"]["pp"] == 2 and record["config"]["compile"] is True
    from flopsweep.backends import build_model
    from flopsweep.worker import make_batches

    cfg = dataclasses.replace(_config("gpt2", "1F1B"), model=GPT2Config(name="gpt-tiny"))
    cfg = dataclasses.replace(cfg, batch=dataclasses.replace(cfg.batch, micro_batch_size=4, grad_accum=1))
    batches = [b for r in range(2) for b in make_batches(cfg, LAYOUT, r, torch.device("cpu"))]
    model = build_model(cfg, torch.device("cpu"))
    ref = (sum(model(b) for b in batches) / len(batches)).item()
    assert math.isclose(record["metrics"]["loss_first"], ref, abs_tol=1e-4), (
        record["metrics"]["loss_first"],
        ref,
    )

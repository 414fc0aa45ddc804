"""The estimators, the metrics' record building, validation's registries and the option specs import
no torch (and no transformers): each module imported alone in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

TORCH_FREE = [
    "flopsweep.memory",
    "flopsweep.memory_terms",
    "flopsweep.activation_memory",
    "flopsweep.offload_memory",
    "flopsweep.predict",
    "flopsweep.metrics",
    "flopsweep.config",
    "flopsweep.layout",
    "flopsweep.degrees",
    "flopsweep.tensor_parallel",
    "flopsweep.context_parallel",
    "flopsweep.columns",
    "flopsweep.forecast",
    "flopsweep.models",
    "flopsweep.models.gpt2",
    "flopsweep.models.llama",
    "flopsweep.models.hf",
    "flopsweep.models.hf_files",
    "flopsweep.models.hf_numbers",
    "flopsweep.models.hf_shape",
    "flopsweep.attention",
    "flopsweep.blocksparse",
    "flopsweep.checkpointing",
    "flopsweep.precision",
    "flopsweep.fp8",
    "flopsweep.flops",
    "flopsweep.steptime",
    "flopsweep.workload",
    "flopsweep.comm_time",
    "flopsweep.node_links",
    "flopsweep.peak_row",
    "flopsweep.dropped",
    "flopsweep.compute_time",
    "flopsweep.layer_probe",
    "flopsweep.launcher_choice",
    "flopsweep.backend_specs",
    "flopsweep.deepspeed_config",
    "flopsweep.pipeline_plan",
    "flopsweep.identity",
    "flopsweep.lazy",
    "flopsweep.rules",
    "flopsweep.checks",
    "flopsweep.plan",
    "flopsweep.reference",
    "flopsweep.reference_plan",
    "flopsweep.reference_records",
    "flopsweep.reference_text",
    "flopsweep.jit_ops",
    "flopsweep.start_checks",
    "flopsweep.rank_faults",  # split from worker: a rank's phase, error and injected-fault files
    "flopsweep.outcome",  # split from launch: the ranks' scratch files read into an Outcome
    "flopsweep.job_log",  # run.py's checks of where the job's log goes, before Hydra
    "flopsweep.job_log_keys",  # run.py's check of hydra.job_logging's keys, before Hydra
    "flopsweep.job_name",  # hydra.job.name as a plain file name
]
"""Modules that must import without torch: the estimators, record building, identity and the whole of
validation (``checks``, ``rules``, ``plan``), and the modules holding a degree's step-time term
(``tensor_parallel``, ``pipeline_plan``, ``context_parallel``); each option's torch code is loaded
by path on the rank."""


def _imports(module: str, code: str = "") -> list[str]:
    """The heavy packages loaded after ``import module`` (and ``code``) in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    heavy = "('torch', 'transformers', 'deepspeed')"
    script = f"import sys, {module}\n{code}\nprint([m for m in {heavy} if m in sys.modules])"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1].replace("'", '"'))


@pytest.mark.parametrize("module", TORCH_FREE)
def test_module_imports_no_torch(module):
    assert _imports(module) == []


def test_family_arithmetic_and_record_building_need_no_torch():
    """Counting, FLOPs, memory shapes and the record's model section of the built-in families, the
    policies' recompute and the blocksparse density all run without torch; the torch module loads
    only when a backend asks the family for its module."""
    code = """
from flopsweep.attention import attention_density, executed_density
from flopsweep.checkpointing import POLICIES
from flopsweep.config import CheckpointingConfig
from flopsweep.models import MODELS
from flopsweep.options import BlockSparseConfig
from flopsweep.models.gpt2 import GPT2Config
from flopsweep.models.llama import LlamaConfig
for arch, cfg in (("gpt2", GPT2Config()), ("llama", LlamaConfig())):
    fam = MODELS[arch]
    fam.check(cfg), fam.info(cfg), fam.memory(cfg), fam.tensor_parallel_dims(cfg)
    fam.model_flops(cfg, 4096, 1.0), fam.hardware_flops(cfg, 4096, 1.0, "selective")
    assert fam.parallelize == "tensor_parallel_plan"
assert MODELS["hf"].parallelize is None
sparse = BlockSparseConfig(name="blocksparse", layout="bigbird", impl="gather", block_size=64)
attention_density(sparse, 1024), executed_density(sparse, 1024)
[p.recompute(True) for p in POLICIES.values()]
from flopsweep.config import RunConfig
from flopsweep.metrics import build_record, compute_metrics
run = RunConfig()
rank = dict(step_times_s=[0.5, 0.5], losses=[5.0, 4.0, 3.0], peak_cuda_allocated_bytes=None,
            peak_cuda_reserved_bytes=None, peak_host_rss_bytes=1, device="cpu", rank=0)
metrics = compute_metrics(run, [rank])
record = build_record(cfg=run, status="ok", error=None, run={}, system={}, metrics=metrics)
assert record["metrics"]["model_flops_per_iteration"] > 0 and record["model"]["n_params"] > 0
"""
    assert _imports("flopsweep.metrics", code) == []
    assert _imports("flopsweep.models", "from flopsweep.models import MODELS; MODELS['gpt2'].build") == [
        "torch"
    ]


def test_validation_and_the_plan_of_every_backend_run_without_torch():
    """``checks.validate`` and ``plan.resolve`` (the launch's own checks: ranks, devices, the backend's
    option rules) for each backend and a layout, in an interpreter that never imports torch."""
    code = """
import dataclasses
from flopsweep.checks import validate
from flopsweep.config import RunConfig, ParallelConfig
from flopsweep.options import DeepSpeedConfig, FSDPConfig
from flopsweep.config import BackendConfig
from flopsweep.plan import Environment, resolve
env = Environment(cpu_count=8)
for backend, n in ((BackendConfig(name="single"), 1), (BackendConfig(name="ddp"), 2), (FSDPConfig(), 2),
                   (DeepSpeedConfig(zero_stage=3, reduce_bucket_size=5e7), 2)):
    cfg = validate(RunConfig(device="cpu", nproc_per_node=n, backend=backend))
    p = resolve(cfg, env)
    assert p.nproc_per_node == n and p.layout.world_size == n, p
    if backend.name == "deepspeed":
        size = p.cfg.backend.reduce_bucket_size
        assert size == 50_000_000 and isinstance(size, int), size
cfg = validate(RunConfig(device="cpu", nproc_per_node=4, backend=FSDPConfig(), parallel=ParallelConfig(tp=2)))
"""
    assert _imports("flopsweep.plan", code) == []


def test_every_degrees_step_time_term_loads_without_torch():
    """The step-time model sums each degree's term (``DegreeSpec.transfers``, loaded by path from the
    degree's module): a prediction over data, tensor and pipeline parallel imports no torch."""
    code = """
from flopsweep.degrees import DEGREE_SPECS
from flopsweep.steptime import Workload, transfers
w = Workload(backend="fsdp", n_params=10**9, n_layer=8, n_embd=1024, seq_len=1024, micro_batch_size=2,
             grad_accum=2, degrees={"dp_replicate": 2, "dp_shard": 2, "tp": 2, "pp": 2}, model_flops=1.0,
             hardware_flops=1.0)
kinds = {t.what.split()[0] for t in transfers(w, gpus_per_node=8)}
assert kinds == {"fsdp", "hsdp", "tensor-parallel", "pipeline"}, kinds
assert all(s.resolve("transfers") is not None for s in DEGREE_SPECS if s.transfers)
"""
    assert _imports("flopsweep.steptime", code) == []


@pytest.mark.parametrize("family", ["gpt2", "llama", "hf"])
def test_from_import_of_a_shape_module_imports_no_torch(family):
    """``from flopsweep.models.<family> import NAME`` asks the module for ``__path__``; its lazy
    ``__getattr__`` must not hand that (or any dunder) to the torch module, so importing a family's
    schema by name stays torch-free (``rules`` imports ``HF_ATTENTION`` so)."""
    schema = {"gpt2": "GPT2Config", "llama": "LlamaConfig", "hf": "HFConfig"}[family]
    assert _imports("flopsweep.config", f"from flopsweep.models.{family} import CONFIG, {schema}") == []

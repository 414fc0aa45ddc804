"""The module graph: no import cycle among flopsweep modules (lazy, function-level imports
included), and the analysis imports neither torch nor flopsweep's formulas."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, package: str) -> set[str]:
    """Every flopsweep module that ``path`` imports, at any depth of the file (lazy imports too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name.split(".")[0] == package}


def _graph(package: str) -> dict[str, set[str]]:
    files = {_module_name(p): p for p in (ROOT / package).rglob("*.py")}
    return {
        mod: {m for m in _imports(path, package) if m in files and m != mod} for mod, path in files.items()
    }


TORCH_FREE = (
    "flopsweep.version",  # flopsweep-analysis --version
    "flopsweep.record",
    "flopsweep.steptime",  # through flopsweep.predict
    "flopsweep.workload",  # through steptime: the step-time model's terms
    "flopsweep.comm_time",  # through steptime: the communication
    "flopsweep.compute_time",  # through steptime: the compute
    "flopsweep.backend_specs",
    "flopsweep.deepspeed_config",  # through backend_specs: DeepSpeed's option check, torch-free
    "flopsweep.lazy",  # through backend_specs: the builder's path, loaded only on the rank
    "flopsweep.fsdp_units",  # through backend_specs: FSDP2's end units (rules, memory terms), torch-free
    "flopsweep.peaks",
    "flopsweep.peak_row",  # through peaks: one row of the GPU table (PeakRow)
    "flopsweep.node_links",  # through peaks: each GPU kind's link in a node, from its datasheet
    "flopsweep.memory_bandwidth",  # through peaks: each GPU kind's datasheet memory bandwidth
    "flopsweep.clusters",  # through compute_time: the plan_gpu example a message names
    "flopsweep.cluster_prices",  # through clusters: a cluster name's @PRICE
    "flopsweep.local_gpus",  # through clusters: this machine's GPUs (nvidia-smi, torch only when asked)
    "flopsweep.files",
    "flopsweep.safe_read",  # the one reader of records (read_json), left files (session 42)
    "flopsweep.safe_folders",  # a run's folders and another user's link (foreign_link_refusal), left files
    "flopsweep.text",
    "flopsweep.wire",
    "flopsweep.signals",
    "flopsweep.streams",  # analysis/__main__.py's entry: a closed stdout or stderr (standard_streams)
    "flopsweep.columns",
    "flopsweep.column_spec",  # through columns: how a column is shown
    "flopsweep.options",
    "flopsweep.config",
    "flopsweep.limits",  # through plausible and figure_types: the largest value of each key (MAX_BY_KEY)
    "flopsweep.cost",
    "flopsweep.noise",
    "flopsweep.predict",
    "flopsweep.predict_record",  # analysis --predict: a record's own prediction
    "flopsweep.nearest",  # through predict_record: the nearest measured set-up
    "flopsweep.nearest_measured",  # through nearest: what it compares of a record
    "flopsweep.fp8_cast",  # through predict_record and nearest: the eager float8 casts' traffic
    "flopsweep.zero3_floor",  # through predict: ZeRO-3's floor on one GPU
    "flopsweep.memory_edge",  # through nearest: a record at the memory edge (peak against the GPU's memory)
    "flopsweep.nearest_wrap",  # through nearest: a one-rank wrapper's cost per parameter
    "flopsweep.nearest_host",  # through nearest: a host-bound record a floor (session 40)
    "flopsweep.nearest_words",  # through nearest: the source's words for a scaled record (session 40)
    "flopsweep.lookalike",  # through gpu_memory: a look-alike character's ASCII letter (plan_gpu=Н100)
    "flopsweep.layout",
    "flopsweep.degrees",  # through layout: the degree table, torch-free
    "flopsweep.identity",
    "flopsweep.identity.versions",
    "flopsweep.override_parsing",  # through identity: Hydra's override grammar (parsed_all_or_none)
    "flopsweep.recompute_read",  # through predict: an older record's compiled recompute as what ran
    "flopsweep.gpu_memory",  # through peaks/clusters: a GPU's memory and its name as the peak table spells it
    "flopsweep.budget",  # the read budget of the analysis and predict.calibration
    "flopsweep.tree",  # the one walk for records
    "flopsweep.lock_names",  # analysis.discover.still_written: a sweep still writing the folder read
    "flopsweep.plausible",  # the checks of a record, shared with predict.calibration
    "flopsweep.links",  # through files: another user's link on an output path (the analysis's outputs)
    "flopsweep.free_folder",  # through record: a free folder a refusal names (session 40)
    "flopsweep.sweep_jobs",  # analysis.missing_jobs: a sweep's jobs from its multirun.yaml (session 40)
    "flopsweep.figure_types",  # through plausible: each figure's type and range in a record
    "flopsweep.objective",  # through analysis.spread: the figures objective= names (the tuner's figure)
    "flopsweep.strict_json",  # analysis.display.to_json: JSON without Infinity or NaN (standard library)
    "flopsweep.calibration_order",  # through predict: how pick_calibration orders records (session 41)
    "flopsweep.choices",  # through config's users: a choice and its did-you-mean (session 41)
    "flopsweep.cluster_gpu",  # through clusters: an unknown GPU's refusal (session 41)
)
"""The flopsweep modules the analysis may import: none of them imports torch."""


LOADED_THROUGH_COLUMNS = (
    "flopsweep.setup_spec",
    "flopsweep.models",
    "flopsweep.models.gpt2",
    "flopsweep.models.llama",
    "flopsweep.models.hf",
    "flopsweep.models.hf_files",
    "flopsweep.models.hf_numbers",  # through hf_files: the config.json number fields
    "flopsweep.models.hf_shape",  # through hf_files: a config.json's shape fields and its quantization
    "flopsweep.models.heads",  # through the families: the one rule for heads that do not divide (session 40)
    "flopsweep.flops",
    "flopsweep.peaks",
    "flopsweep.blocksparse",  # through options: the block-sparse layout knobs' defaults (session 42)
)
"""Loaded, never imported by an analysis file: the model families' shape modules declare their schema
and their knobs' columns, which ``columns`` and ``options`` read from ``flopsweep.models.MODELS``. The
analysis calls none of their formulas (no analysis file imports them: the static check below)."""


def test_analysis_imports_neither_torch_nor_the_formulas() -> None:
    allowed = {f"{m}.{n}" for m in TORCH_FREE for n in dir(__import__(m, fromlist=["x"]))}
    for path in (ROOT / "analysis").rglob("*.py"):
        assert _imports(path, "flopsweep") <= set(TORCH_FREE) | allowed, path
        assert not _imports(path, "torch"), path
    code = (
        "import sys, analysis, flopsweep.store, flopsweep.objective; "
        "assert not {'torch', 'transformers', 'deepspeed'} & set(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def _closure(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others (lazy imports too)."""
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


RUN_PATH = {
    "flopsweep.job",
    "flopsweep.job.lifecycle",
    "flopsweep.job.dryrun",
    "flopsweep.sizesearch",
    "flopsweep.autobatch",
    "flopsweep.modelsearch",
}
"""The job's orchestrator: its steps and searches (the package's face loads them on demand)."""


def test_the_callbacks_and_the_plugins_import_none_of_the_orchestrator() -> None:
    """The sweep process's parts (the callback, the Hydra plug-ins) import the parts of the job they
    need (the record assembly, the plan table, the overrides), never its run path: by the module
    graph (lazy imports too) and as Python loads them."""
    graph = _graph("flopsweep")
    starts = {"flopsweep.callbacks"}
    for path in (ROOT / "hydra_plugins").rglob("*.py"):
        starts |= {m for m in _imports(path, "flopsweep") if m in graph}
    for start in sorted(starts):
        reached = _closure(graph, start) | {start}
        assert not reached & RUN_PATH, (start, reached & RUN_PATH)
    code = (
        "import sys, flopsweep.callbacks, flopsweep.job.records, flopsweep.job.plantable, "
        "flopsweep.job.result; "
        f"loaded = {sorted(RUN_PATH - {'flopsweep.job'})!r}; "
        "assert not [m for m in loaded if m in sys.modules], [m for m in loaded if m in sys.modules]"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


_RUN_MAIN = """
import runpy, sys
sys.argv = ["run.py", *sys.argv[1:]]
try:
    runpy.run_path("run.py", run_name="__main__")
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print("torch imported:", "torch" in sys.modules)
sys.exit(code)
"""


@pytest.mark.slow
def test_run_py_refuses_without_importing_torch(tmp_path: Path) -> None:
    """The one line for an unknown option (its list names only the YAML options, no schema node)
    and for a key of another option come before any torch import."""
    unknown = subprocess.run(
        [sys.executable, "-c", _RUN_MAIN, "model=nope", f"hydra.run.dir={tmp_path / 'a'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert unknown.returncode == 2, unknown.stderr[-2000:]
    assert "torch imported: False" in unknown.stdout, unknown.stdout + unknown.stderr[-2000:]
    assert unknown.stderr.startswith("flopsweep: Invalid config: model=nope: nope is no option of model")
    listed = unknown.stderr.split("Fix: pick one of ")[1].split(", e.g. ")[0].split(", ")
    assert listed == sorted(p.stem for p in (ROOT / "conf" / "model").glob("*.yaml")), listed
    foreign = subprocess.run(
        [sys.executable, "-c", _RUN_MAIN, "attention.block_size=64", "attention=sdpa"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert foreign.returncode == 2, foreign.stderr[-2000:]
    assert "torch imported: False" in foreign.stdout, foreign.stdout + foreign.stderr[-2000:]
    assert foreign.stderr.strip() == (
        "flopsweep: Invalid config: attention.block_size: belongs to attention=blocksparse, not to "
        "attention=sdpa. Fix: drop the override, or pick attention=blocksparse."
    )
    # a ranking plan's clusters, checked before Hydra by the job's own functions (flopsweep.job.plandecide)
    twice = subprocess.run(
        [sys.executable, "-c", _RUN_MAIN, "plan=true", "plan_clusters=[H100-80GB:8,H100-SXM:8]"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert twice.returncode == 2, twice.stderr[-2000:]
    assert "torch imported: False" in twice.stdout, twice.stdout + twice.stderr[-2000:]
    assert "names one cluster twice" in twice.stderr and len(twice.stderr.strip().splitlines()) == 1

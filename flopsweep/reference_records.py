"""``docs/reference/records.md``: the record reference, made from the record's specs
(:data:`flopsweep.record.METRIC_SPECS`, :data:`flopsweep.columns.SETUP_SPECS`,
:data:`flopsweep.column_spec.COLUMN_SPECS`, :class:`flopsweep.wire.ErrorInfo` and ``RankFigures``,
:class:`flopsweep.steptime.Prediction`, :data:`flopsweep.degrees.DEGREE_SPECS`) and, for the sections no
spec declares (``run``, ``system``, nested keys), the tables :data:`RECORD_KEYS`, :data:`RUN_KEYS`,
:data:`SYSTEM_KEYS` and :data:`NESTED_KEYS` here. A key that the code writes but no table describes stops
the generator (:class:`flopsweep.reference_text.ReferenceError`), naming it. Written by
:mod:`flopsweep.reference`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from flopsweep import column_spec, columns, profile, record, steptime, wire
from flopsweep.degrees import DEGREE_SPECS
from flopsweep.models import MODELS
from flopsweep.reference_text import (
    HEADER,
    REPO,
    ReferenceError,
    attribute_docs,
    code,
    documented,
    field_docs,
    field_types,
    read_text,
    table,
    type_name,
)

# --- records.md -------------------------------------------------------------------------------------

RECORD_KEYS: dict[str, tuple[str, str]] = {
    "schema_version": ("int", f"the record's layout: {record.SCHEMA_VERSION}; the analysis maps older ones"),
    "status": ("text", f"how the run ended: {', '.join(record.STATUSES)}"),
    "error": ("object or null", "why the run is not ok (see error); null when ok"),
    "warnings": (
        "list of text",
        "findings that do not make a run invalid (a non-finite loss, unsteady steps)",
    ),
    "run": ("object", "this job: its id, times, overrides, repeat round and keys (see run)"),
    "config": (
        "object",
        "the resolved config as JSON; each group holds only its option's keys (overrides.md)",
    ),
    "model": ("object", "the model family's info: its shape keys and parameter counts (see model)"),
    "system": ("object", "host, devices, software versions, layout and probes (see system)"),
    "metrics": ("object", "the figures (see metrics); every value null when the status is not ok"),
}
"""The record's top-level keys (:func:`flopsweep.metrics.build_record`): ``(type, description)``."""

RUN_KEYS: dict[str, tuple[str, str]] = {
    "id": ("text", "a unique hex id of this run"),
    "started_at": ("text", "when the job started, ISO 8601 UTC"),
    "finished_at": ("text or null", "when the record was written, ISO 8601 UTC; null for a lost Slurm job"),
    "overrides": ("list of text", "the job's command-line overrides"),
    "job_num": ("int or null", "the job's number in its sweep; null for a single run"),
    "repeat": ("int", "this job's round of repeats= (0-based)"),
    "repeats": ("int", "how many rounds the sweep runs (repeats=)"),
    "repeat_group": (
        "text or null",
        "a hash of the sweep folder that every round shares; null unless repeats > 1",
    ),
    "batch_search": (
        "object",
        "batch=auto only: every probe of the micro batch search, its status and peak memory",
    ),
    "model_search": (
        "object",
        "search.model=largest only: the search's range, probes, result and n_params; grow says what grew "
        "(n_layer: blocks; seq_len: tokens per sequence, each probe's seq_len)",
    ),
    "before_run": (
        "object or null",
        "not ok only: {predicted_peak_gib, predicted}, known before the run (its metrics stay null); "
        "null if the launch's checks never passed",
    ),
    "setup_key": ("text", "hash of what the run measured (flopsweep.identity): equal set-ups share it"),
    "job_key": ("text", "hash of the set-up and the repeat round: what resume=true compares"),
    "identity_version": ("int", "version of the hashing of setup_key and job_key"),
    "wall_s": (
        "s or null",
        "seconds from the job's start to its record (searches, launch, probes, steps); null for a lost "
        "Slurm job",
    ),
}
"""The record's ``run`` keys (``job.lifecycle.new_run``, ``identity.record_keys``)."""

SYSTEM_KEYS: dict[str, tuple[str, str]] = {
    "hostname": ("text", "the host that ran the job"),
    "device_name": ("text", "rank 0's device (`NVIDIA H200`) or `cpu`"),
    "device_count": ("int", "GPUs visible to the job process; 0 on the CPU"),
    "world_size": ("int or null", "ranks of the run; null when it never launched"),
    "nproc_per_node": ("int or null", "ranks per node as run; null when it never launched"),
    "parallel": (
        "object or null",
        "the resolved layout's integer degrees (product: world_size); null when never launched",
    ),
    "power_limit_w": ("W", "the GPUs' enforced power limit, lowest over ranks; null on the CPU"),
    "torch": ("text", "torch's version"),
    "cuda": ("text or null", "the CUDA version torch was built with"),
    "deepspeed": ("text or null", "DeepSpeed's version; null when not installed"),
    "xformers": ("text or null", "xformers' version; null when not installed"),
    "torchao": ("text or null", "torchao's version; null when not installed"),
    "python": ("text", "Python's version"),
    "git_sha": ("text or null", "the checkout's commit"),
    "git_dirty": (
        "bool or null",
        "whether the checkout's tracked files differ from git_sha (the code that ran is not that commit's)",
    ),
    "loadavg": ("object", "the host's [1, 5, 15 min] load average at the job's start and end"),
    "cpu_count": ("int", "os.cpu_count(): the scale of loadavg"),
    "cuda_alloc_conf": ("text or null", "PYTORCH_ALLOC_CONF (or PYTORCH_CUDA_ALLOC_CONF) of the job"),
    "visible_devices": (
        "list or null",
        'the job\'s CUDA_VISIBLE_DEVICES entries (`["0", "1"]`): the devices hydra/launcher=pool '
        "pinned it to; null when unset",
    ),
    "nccl": ("text or null", "the NCCL version torch reports (CUDA only)"),
    "gpu_topology": ("text or null", "the text of `nvidia-smi topo -m` (CUDA only)"),
    "nccl_env": ("object", "every NCCL_* variable of the job"),
    "interconnect": ("list or null", "the collective probe over every rank before warm-up; [] on one rank"),
    "cpu_threads": ("int or null", "rank 0's intra-op threads (torch.get_num_threads())"),
    "optimizer": ("object or null", "rank 0's optimizer as built, read after the measured steps"),
}
"""The record's ``system`` keys (:func:`flopsweep.metrics.system_info`, ``job.records.recorded``)."""

NESTED_KEYS: dict[str, tuple[str, str]] = {
    "system.loadavg.start": ("list", "[1, 5, 15 min] load average when the job started"),
    "system.loadavg.end": ("list", "[1, 5, 15 min] load average when the record was written"),
    "system.interconnect[].collective": ("text", "the collective probed (all_reduce, all_gather, ...)"),
    "system.interconnect[].bytes": ("bytes", "the message size"),
    "system.interconnect[].busbw_gbps": ("GB/s", "bus bandwidth, nccl-tests' busbw"),
    "system.interconnect[].time_s": ("s", "one call's time: the slowest rank's mean over the probe's calls"),
    "system.interconnect[].ranks": ("int", "ranks in the group (every rank)"),
    "system.interconnect[].ran": ("text", "the collective that ran (gloo: all_reduce for a reduce-scatter)"),
    "system.optimizer.class": ("text", "the optimizer's qualified class name (torch.optim.adamw.AdamW)"),
    "system.optimizer.fused": ("bool or null", "the fused implementation runs; null for DeepSpeed's own"),
    "system.optimizer.foreach": ("bool or null", "the foreach implementation runs; null for DeepSpeed's own"),
    "system.optimizer.in_backward": (
        "bool",
        "per-parameter optimizers stepped in backward (optim.in_backward)",
    ),
    "system.optimizer.overlap_forward": (
        "bool",
        "per-unit optimizers stepped on a side CUDA stream beside the next forward (optim.overlap_forward)",
    ),
    "metrics.iteration_time_s.min": ("s", "fastest measured step"),
    "metrics.iteration_time_s.max": ("s", "slowest measured step"),
    "metrics.iteration_time_s.std": ("s", "standard deviation of the measured steps; null for one step"),
    "metrics.iteration_time_s.values": ("s", "every measured step (slowest rank per step)"),
    "metrics.breakdown.ranks": ("int", "ranks whose profiled step the means are over"),
    "metrics.breakdown.trace_dir": ("text", "the folder of the per-rank traces, relative to the job's"),
}
"""Nested record keys that no spec declares: ``(unit or type, description)``."""

PREDICTED_KEYS: dict[str, str] = {
    "iteration_time_s": "predicted seconds per optimizer step",
    "tokens_per_s": "predicted global tokens per second",
    "source": "the calibration record, uncalibrated, or probe: what the prediction is made from",
    "tokens_per_s_per_device": "predicted tokens per second per device",
    "mfu": "predicted MFU; null when the peak is unknown",
    "compute_s": "predicted compute seconds per step",
    "optimizer_s": "predicted optimizer step seconds",
    "bubble_s": "predicted pipeline bubble seconds",
    "comm_s": "predicted communication seconds per step",
    "exposed_comm_s": "the part of comm_s not hidden behind compute",
    "overlap": "share (0..1) of data-parallel communication hidden behind compute",
    "overlap_source": "where overlap comes from (predict.overlap, profiled records, the default)",
    "bandwidth_source": "where the bandwidths come from (predict.*_gbps, the probe)",
    "world_size": "ranks of the predicted cluster",
    "budget_gpu_hours": "predicted GPU-hours for budget.tokens; null without a budget",
    "budget_days": "predicted days for budget.tokens; null without a budget",
    "compute_source": (
        "where the compute time comes from: layers (the layer probe or the CPU step probe), probe, "
        "calibration, nearest or flops"
    ),
    "probe": "predict.probe=true only: the compute probe's pieces, seconds",
    "layer_probe": (
        "predict.layer_probe=true, or a CPU run's predict.cpu_probe (then cpu_probe: true, and 1 to 6 steps "
        "timed): the shallow copies' depths (layers), steps (step_s, s), host issue "
        "times (host_s, s), second slowest step over the median (spread), why it fell back (fallback), the "
        "probe's wall time (wall_s), each copy's build, untimed and timed seconds (build_s, untimed_s, "
        "timed_s) and its steps run and timed (steps_run, steps_timed: 3 when it settled early, else 5 to "
        "15); on a CPU under expert parallel, each copy's untimed replay before its timed build "
        "(replay_s, s: layer_probe.replays); DeepSpeed: the model's and each copy's bucket, live, reuse and "
        "sub-group sizes "
        "(deepspeed: model, copies, params, largest, ops_loaded: the JIT ops loaded before its clock) "
        "and how each copy's engine was let go (released: "
        "every_module, its ZeRO-3 states freed before the run; absent before 2026-12-05)"
    ),
}
"""``metrics.predicted`` (:class:`flopsweep.steptime.Prediction`, ``probe`` and ``layer_probe``):
description by key."""


def _ast_keys(path: Path, function: str) -> set[str]:
    """The string keys of the dict literals that ``function`` of the module at ``path`` returns, and
    of ``system["key"] = ...`` assignments in it (torch-free: read with :mod:`ast`)."""
    tree = ast.parse(read_text(path), str(path))
    keys: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Return) and isinstance(sub.value, ast.Dict):
                    keys |= {k.value for k in sub.value.keys if isinstance(k, ast.Constant)}
                if isinstance(sub, ast.Subscript) and isinstance(sub.ctx, ast.Store):
                    if isinstance(sub.value, ast.Name) and sub.value.id == "system":
                        keys |= {sub.slice.value} if isinstance(sub.slice, ast.Constant) else set()
    return keys


def system_keys_written() -> set[str]:
    """The ``system`` keys the code writes: ``metrics.system_info``, ``metrics.interconnect`` and the
    keys ``job.records.recorded`` adds."""
    pkg = REPO / "flopsweep"
    return (
        _ast_keys(pkg / "metrics.py", "system_info")
        | _ast_keys(pkg / "metrics.py", "interconnect")
        | _ast_keys(pkg / "job" / "records.py", "recorded")
    )


def _need(keys: Iterable[str], described: dict[str, Any], where: str) -> None:
    missing = [k for k in keys if k not in described]
    if missing:
        raise ReferenceError(
            f"{where}: {', '.join(missing)} not described: add it to flopsweep/reference.py and rerun "
            "python -m flopsweep.reference"
        )


def _model_rows() -> list[list[str]]:
    """``model`` section: every family schema's keys (the family's ``info``), then the counts."""
    rows, seen = [], set()
    for arch, family in MODELS.items():
        docs = field_docs(family.config)
        for key, hint in field_types(family.config).items():
            if key in seen:
                continue
            seen.add(key)
            holders = [a for a, f in MODELS.items() if key in field_types(f.config)]
            which = "all" if len(holders) == len(MODELS) else ", ".join(holders)
            rows.append(
                [
                    code(f"model.{key}"),
                    type_name(hint, json=True),
                    which,
                    documented(family.config, key, docs),
                ]
            )
        del arch
    rows += [
        [code("model.n_params"), "int", "all", "parameters of the module, each counted once"],
        [code("model.n_active_params"), "int", "hf", "parameters each token uses (MoE: its top-k experts)"],
        [code("model.hf_architecture"), "text", "hf", "the config's first `architectures` entry"],
    ]
    return rows


def _error_rows() -> list[list[str]]:
    docs = attribute_docs(wire.ErrorInfo)
    _need(field_types(wire.ErrorInfo), docs, "flopsweep.wire.ErrorInfo's Attributes")
    return [
        [code(f"error.{k}"), type_name(t, json=True), docs[k]] for k, t in field_types(wire.ErrorInfo).items()
    ]


def _metric_rows() -> list[list[str]]:
    rows = []
    for spec in record.METRIC_SPECS:
        key = ".".join(spec.path) if spec.path else spec.key
        rows.append(
            [
                code(f"metrics.{key}"),
                code(spec.unit) if spec.unit else "-",
                spec.better or "-",
                code(spec.name),
                spec.description,
            ]
        )
    return rows


def _per_rank_rows() -> list[list[str]]:
    docs, hints = attribute_docs(wire.RankFigures), field_types(wire.RankFigures)
    _need(wire.PER_RANK_KEYS, docs, "flopsweep.wire.RankFigures' Attributes")
    return [
        [code(f"metrics.per_rank[].{k}"), type_name(hints[k], json=True), docs[k]] for k in wire.PER_RANK_KEYS
    ]


def _predicted_rows() -> list[list[str]]:
    """``metrics.predicted``'s keys that no ``MetricSpec`` lists."""
    keys = [*field_types(steptime.Prediction), "probe", "layer_probe"]
    _need(keys, PREDICTED_KEYS, "PREDICTED_KEYS (flopsweep.steptime.Prediction)")
    specs = {spec.path[1] for spec in record.METRIC_SPECS if spec.path and spec.key == "predicted"}
    keys = [k for k in keys if k not in specs]
    hints = {**field_types(steptime.Prediction), "probe": "dict | None", "layer_probe": "dict | None"}
    return [[code(f"metrics.predicted.{k}"), type_name(hints[k], json=True), PREDICTED_KEYS[k]] for k in keys]


def _breakdown_rows() -> list[list[str]]:
    """``metrics.breakdown``'s keys that no ``MetricSpec`` lists (``profile.StepBreakdown``)."""
    docs, hints = attribute_docs(profile.StepBreakdown), field_types(profile.StepBreakdown)
    _need(hints, docs, "flopsweep.profile.StepBreakdown's Attributes")
    specs = {spec.path[1] for spec in record.METRIC_SPECS if spec.path and spec.key == "breakdown"}
    return [
        [code(f"metrics.breakdown.{k}"), type_name(t, json=True), docs[k]]
        for k, t in hints.items()
        if k not in specs
    ]


def _setup_rows() -> list[list[str]]:
    """One row per set-up column: its description, else its config field's docstring, else the
    record key's description here (``system.*``)."""
    described = {f"system.{k}": d for k, (_, d) in SYSTEM_KEYS.items()}
    described |= {f"system.parallel.{d.name}": d.what for d in DEGREE_SPECS}
    rows = []
    for spec in columns.SETUP_SPECS:
        doc = spec.description
        found = columns.schema_field(spec)
        if not doc and found:
            cls, key = found
            doc = field_docs(cls).get(key, "")
        rows.append(
            [code(spec.name), code(spec.path), columns.kind(spec), doc or described.get(spec.path, "")]
        )
    return rows


def _column_rows() -> list[list[str]]:
    metric_columns = {spec.name for spec in record.METRIC_SPECS}
    return [
        [code(spec.name), spec.header or "-", spec.better or "-", spec.description]
        for spec in column_spec.COLUMN_SPECS
        if spec.name not in metric_columns and spec.description
    ]


def records_md() -> str:
    """The text of ``docs/reference/records.md``."""
    _need(system_keys_written(), SYSTEM_KEYS, "SYSTEM_KEYS (the system keys flopsweep/metrics.py writes)")
    out = [
        HEADER.format(
            sources="flopsweep/record.py, columns.py, column_spec.py, wire.py, steptime.py, degrees.py, "
            "reference_records.py"
        ),
        "",
        "# Record reference",
        "",
        "Every run writes one `metrics.json` (strict JSON, schema version "
        f"{record.SCHEMA_VERSION}), whatever its outcome; the analysis reads nothing else.",
        "When the status is not ok, every metric is null, never 0.",
        "",
        "## Top level",
        "",
    ]
    out += table(["key", "type", "description"], ([code(k), t, d] for k, (t, d) in RECORD_KEYS.items()))
    out += ["", "## error", "", f"Phases: {', '.join(map(code, record.PHASES))}.", ""]
    out += table(["key", "type", "description"], _error_rows())
    out += ["", "## run", ""]
    out += table(["key", "type", "description"], ([code(f"run.{k}"), t, d] for k, (t, d) in RUN_KEYS.items()))
    out += [
        "",
        "## config",
        "",
        "`config` is the resolved config: every key of [the override reference](overrides.md) that the",
        "run's options have (`config.backend.zero_stage` only for DeepSpeed), `activation_checkpointing`",
        "as `{name: <policy>}` and `parallel` as asked (`dp_shard` -1: the rest of the world).",
        "",
        "## model",
        "",
        "The family's info (`family`: the `model.arch` values that have the key).",
        "",
    ]
    out += table(["key", "type", "family", "description"], _model_rows())
    out += ["", "## system", ""]
    out += table(
        ["key", "type", "description"], ([code(f"system.{k}"), t, d] for k, (t, d) in SYSTEM_KEYS.items())
    )
    out += ["", "Nested keys (`[]`: each entry of a list); `system.parallel` has one key per degree:", ""]
    rows = [
        [code(f"system.parallel.{d.name}"), "int", f"{d.what}: `parallel.{d.name}` as run (resolved)"]
        for d in DEGREE_SPECS
    ]
    rows += [[code(k), t, d] for k, (t, d) in NESTED_KEYS.items() if k.startswith("system.")]
    out += table(["key", "type", "description"], rows)
    out += [
        "",
        "## metrics",
        "",
        "One line per `MetricSpec` of `flopsweep/record.py` (`column`: the analysis column; `better`: the",
        "direction a ranking sorts by).",
        "",
    ]
    out += table(["key", "unit", "better", "column", "description"], _metric_rows())
    out += ["", "Nested keys:", ""]
    rows = [[code(k), t, d] for k, (t, d) in NESTED_KEYS.items() if k.startswith("metrics.")]
    rows += _breakdown_rows() + _predicted_rows() + _per_rank_rows()
    out += table(["key", "unit or type", "description"], rows)
    out += [
        "",
        "## Set-up columns",
        "",
        "The analysis's set-up columns (`flopsweep.columns.SETUP_SPECS`): where each is in the record.",
        "",
    ]
    out += table(["column", "record path", "type", "description"], _setup_rows())
    out += [
        "",
        "## Columns the analysis makes",
        "",
        "(`flopsweep.column_spec.COLUMN_SPECS` with a description.)",
        "",
    ]
    out += table(["column", "header", "better", "description"], _column_rows())
    return "\n".join(out).rstrip("\n") + "\n"

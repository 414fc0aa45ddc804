"""docs/reference/*.md are what ``python -m flopsweep.reference`` makes of the schemas and specs, and
they name every config key and every record key (the contract's, the committed records').

In process; ``tests/integration/test_reference_doc.py`` runs the command as a user does."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest

from flopsweep import config, options, reference, reference_records, reference_text
from flopsweep.record import SCHEMA_VERSION
from flopsweep.safe_read import read_json

REPO = Path(__file__).resolve().parents[2]
OVERRIDES = REPO / "docs" / "reference" / "overrides.md"
RECORDS = REPO / "docs" / "reference" / "records.md"

DESIGN_RECORD_KEYS = (
    # the record's sections and the schema_version 1 block ("metrics.json")
    "schema_version", "status", "error", "warnings", "run", "config", "model", "system", "metrics",
    "error.type", "error.message", "error.phase", "error.rank",
    "run.id", "run.started_at", "run.finished_at", "run.overrides", "run.job_num", "run.batch_search",
    "model.name", "model.n_layer", "model.n_embd", "model.n_head", "model.seq_len", "model.vocab_size",
    "model.n_params", "model.arch", "model.hf_architecture", "model.config_sha256", "model.n_active_params",
    "system.hostname", "system.device_name", "system.device_count", "system.world_size", "system.torch",
    "system.cuda", "system.deepspeed", "system.xformers", "system.python", "system.git_sha",
    "system.loadavg", "system.nccl", "system.gpu_topology", "system.power_limit_w",
    "system.parallel", "system.parallel.dp_replicate", "system.parallel.dp_shard", "system.parallel.tp",
    "system.parallel.pp", "system.parallel.cp", "system.parallel.ep",
    "system.interconnect", "system.interconnect[].collective", "system.interconnect[].bytes",
    "system.interconnect[].busbw_gbps",
    "metrics.iteration_time_s", "metrics.iteration_time_s.mean", "metrics.iteration_time_s.median",
    "metrics.iteration_time_s.min", "metrics.iteration_time_s.max", "metrics.iteration_time_s.std",
    "metrics.iteration_time_s.values", "metrics.iteration_time_s.cv",
    "metrics.tokens_per_s", "metrics.tokens_per_s_per_device", "metrics.tflops_per_device",
    "metrics.model_tflops_per_device", "metrics.mfu", "metrics.hfu", "metrics.peak_tflops",
    "metrics.peak_tflops_source", "metrics.peak_cuda_allocated_bytes", "metrics.peak_cuda_reserved_bytes",
    "metrics.per_rank", "metrics.per_rank[].rank", "metrics.per_rank[].device",
    "metrics.per_rank[].peak_cuda_allocated_bytes", "metrics.per_rank[].peak_cuda_reserved_bytes",
    "metrics.per_rank[].peak_host_rss_bytes", "metrics.peak_host_rss_bytes", "metrics.swap_used_bytes",
    "metrics.loss_first", "metrics.loss_last",
    # rounds two to four
    "metrics.model_flops_per_iteration", "metrics.hardware_flops_per_iteration",
    "metrics.hardware_tflops_per_device", "metrics.measured_matmul_tflops", "metrics.matmul_fraction",
    "metrics.loss_finite", "metrics.breakdown", "metrics.predicted", "metrics.predicted.iteration_time_s",
    "metrics.predicted.tokens_per_s", "metrics.predicted.source", "metrics.predicted_peak_gib",
    "metrics.energy_j", "metrics.joules_per_token", "metrics.power_w_mean", "metrics.sm_clock_mhz_mean",
    "metrics.throttle_reasons", "metrics.usd_per_million_tokens", "metrics.budget",
)  # fmt: skip
"""Every record key that ``/work/shared/DESIGN.md`` (the contract, outside the repository) names: its
``metrics.json`` block and its rounds' ``metrics.*``, ``system.*``, ``model.*``, ``run.*`` keys."""


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _names(text: str, key: str) -> bool:
    """``key`` is a row of the reference (`key`), or the prefix of rows (`key.x`, `key[].x`)."""
    return any(f"`{key}{end}" in text for end in ("`", ".", "[]."))


def test_committed_references_are_what_the_generator_makes() -> None:
    problems = reference.stale(reference.generate())
    assert not problems, "\n".join(problems)


def test_check_names_the_stale_file_and_writing_makes_it_current(tmp_path, capsys) -> None:
    out = ["--output-dir", str(tmp_path)]
    assert reference.main(out) == 0
    assert reference.main([*out, "--check"]) == 0
    stale = tmp_path / "records.md"
    stale.write_text(_text(stale).replace("`metrics.mfu`", "`metrics.mfu_renamed`"), encoding="utf-8")
    capsys.readouterr()
    assert reference.main([*out, "--check"]) == 1
    err = capsys.readouterr().err
    assert f"{stale} is stale" in err and "overrides.md is stale" not in err
    assert "-| `metrics.mfu_renamed`" in err and "+| `metrics.mfu`" in err
    stale.unlink()  # a missing file is stale too
    assert reference.main([*out, "--check"]) == 1
    assert reference.main(out) == 0 and reference.main([*out, "--check"]) == 0


def test_a_field_without_a_docstring_stops_the_generator() -> None:
    @dataclasses.dataclass(kw_only=True)
    class Undocumented(config.StepsConfig):
        extra: int = 0

    with pytest.raises(reference.ReferenceError, match=r"Undocumented\.extra has no docstring"):
        reference.plain_rows("steps.", Undocumented)


def _config_keys(cls: type, prefix: str = "") -> list[str]:
    """Every leaf key of ``cls`` (dotted), each group with its option schemas' keys too."""
    hints = typing.get_type_hints(cls)
    keys = []
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            schemas = [hints[f.name], *options.OPTION_SCHEMAS.get(f.name, {}).values()]
            keys += list(dict.fromkeys(k for s in schemas for k in _config_keys(s, f"{prefix}{f.name}.")))
        else:
            keys.append(prefix + f.name)
    return keys


def test_every_config_key_is_in_the_override_reference() -> None:
    text = _text(OVERRIDES)
    keys = _config_keys(config.RunConfig)
    assert {"model.n_kv_head", "backend.zero_stage", "parallel.ep", "objective"} <= set(keys)
    missing = [k for k in keys if f"| `{k}` |" not in text]
    assert not missing, f"not in docs/reference/overrides.md: {missing}"


def test_every_option_file_is_in_the_override_reference() -> None:
    text = _text(OVERRIDES)
    for group in reference.GROUPS:
        for option, _ in reference.option_files(group):
            assert f"| `{group}={option}` |" in text
    assert "| `model=llama3.1-8b` | base_llama | 32 | 4096 |" in text  # the shape as its columns


def test_every_design_record_key_is_in_the_record_reference() -> None:
    text = _text(RECORDS)
    missing = [k for k in DESIGN_RECORD_KEYS if not _names(text, k)]
    assert not missing, f"not in docs/reference/records.md: {missing}"
    assert "| `config.activation_checkpointing.name` |" in text  # a set-up column's path
    assert "| `activation_checkpointing.name` |" in _text(OVERRIDES)


def _record_keys(record: dict) -> set[str]:
    """The keys of a record down to the levels the reference lists."""
    keys = set(record)
    for section in ("error", "run", "model", "system", "metrics"):
        keys |= {f"{section}.{k}" for k in record.get(section) or {}}
    metrics, system = record.get("metrics") or {}, record.get("system") or {}
    for name in ("iteration_time_s", "predicted", "budget", "breakdown"):
        keys |= {f"metrics.{name}.{k}" for k in metrics.get(name) or {}}
    keys |= {f"metrics.per_rank[].{k}" for rank in metrics.get("per_rank") or [] for k in rank}
    keys |= {f"system.parallel.{k}" for k in system.get("parallel") or {}}
    keys |= {f"system.interconnect[].{k}" for entry in system.get("interconnect") or [] for k in entry}
    for name in ("loadavg", "optimizer"):
        if isinstance(system.get(name), dict):  # loadavg: a list in older records
            keys |= {f"system.{name}.{k}" for k in system[name]}
    return keys


def test_every_key_of_the_committed_records_is_in_the_record_reference() -> None:
    found: set[str] = set()
    paths = sorted((REPO / "benchmarks" / "results").rglob("metrics.json"))
    for path in paths:
        record = read_json(path)
        if record.get("schema_version") == SCHEMA_VERSION:
            found |= _record_keys(record)
    assert len(paths) > 100 and "system.optimizer.in_backward" in found
    text = _text(RECORDS)
    missing = sorted(k for k in found if not _names(text, k))
    assert not missing, f"keys of benchmarks/results records not in docs/reference/records.md: {missing}"


def test_every_system_key_the_code_writes_is_described() -> None:
    written = reference_records.system_keys_written()
    assert {"hostname", "nccl_env", "interconnect", "optimizer", "cpu_threads"} <= written
    assert written <= set(reference_records.SYSTEM_KEYS)


def test_reference_lines_fit() -> None:
    for path in (OVERRIDES, RECORDS):
        lines = _text(path).splitlines()
        assert len(lines) <= 400, path
        assert max(map(len, lines)) <= reference_text.MAX_LINE, path


def test_the_plan_csv_reference_names_every_column_of_both_kinds() -> None:
    """docs/reference/plan.md has one row per ``plan.csv`` column (``plan_clusters``', a sweep's two more and
    the one row per job's), each described; a column without a description stops the generator, naming it."""
    from flopsweep import reference_plan
    from flopsweep.job.plantable import PLAN_COLUMN_DOCS, PLAN_COLUMNS
    from flopsweep.plan_assess import COLUMNS, SETUP_COLUMNS

    text = _text(REPO / "docs" / "reference" / "plan.md")
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    from flopsweep.job.plansweep import SWEEP_COLUMN_DOCS, SWEEP_COLUMNS

    assert [r.split("`")[1] for r in rows] == [*COLUMNS, *SWEEP_COLUMN_DOCS, *PLAN_COLUMNS]
    assert SWEEP_COLUMNS == (*SWEEP_COLUMN_DOCS, *COLUMNS)  # a sweep's file: its two columns, then the plan's
    assert all(len(r.split(" | ")[1].strip(" |")) > 10 for r in rows)
    assert set(PLAN_COLUMN_DOCS) == set(PLAN_COLUMNS) and set(SETUP_COLUMNS) < set(COLUMNS)
    with pytest.raises(
        reference_text.ReferenceError, match=r"plan\.csv column 'cluster_rank' has no description"
    ):
        reference_plan.described(["rank", "cluster_rank"], {"rank": "the place"}, "here")

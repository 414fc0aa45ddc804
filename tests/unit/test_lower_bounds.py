"""Session 25: lower bounds that the value alone decides (``timeout_s=0``, ``steps.measure=0``, ``nnodes=0``)
had been refused only in the job, after Hydra made its folder. They are one table
(:data:`flopsweep.lower_bounds.MIN_BY_KEY`) that :func:`flopsweep.checks.check_number` reads, before Hydra
(``run.refusal``) and first in the job (:func:`flopsweep.checks.check_bounds`), so both say the same. A limit
that needs the whole config (a ``timeout_s`` too short for this run's start-up and warm-up) is known only
when it runs out: its record's line names the key, the value, how far the ranks got and the fix."""

from __future__ import annotations

import dataclasses

import pytest

from flopsweep.checks import check_number, number_problem, validate
from flopsweep.config import ConfigError, RunConfig
from flopsweep.lower_bounds import MIN_BY_KEY, outside
from flopsweep.options import AutoBatchConfig, BlockSparseConfig, EveryNConfig
from flopsweep.outcome import collect, timeout_message
from run import refusal


def _numbers(node: object, prefix: str = "") -> dict[str, object]:
    found: dict[str, object] = {}
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if dataclasses.is_dataclass(value):
            found.update(_numbers(value, f"{prefix}{f.name}."))
        else:
            found[f"{prefix}{f.name}"] = value
    return found


SCHEMA = {
    **_numbers(RunConfig()),
    **_numbers(BlockSparseConfig(), "attention."),
    **_numbers(EveryNConfig(), "activation_checkpointing."),
    **_numbers(AutoBatchConfig(), "batch."),
}
OPTION = {
    "attention": ["attention=blocksparse"],
    "activation_checkpointing": ["activation_checkpointing=every_n"],
    "batch": ["batch=auto"],  # batch.max_micro_batch_size; the micro batch and grad_accum keys have it too
    # the search's bounds act under search.model=largest (else the idle key's line, its fix the least: #367)
    "search.min_n_layer": ["search.model=largest"],
    "search.max_n_layer": ["search.model=largest"],
    "search.min_seq_len": ["search.model=largest", "search.grow=seq_len"],
    "search.max_seq_len": ["search.model=largest", "search.grow=seq_len"],
}


def _below(key: str) -> int | float:
    """The nearest value the bound refuses: the bound itself when strict, else one below it."""
    low = MIN_BY_KEY[key]
    return low.least if low.strict else low.least - 1


def test_every_bound_names_a_key_of_the_schema_and_holds_its_default() -> None:
    for key in MIN_BY_KEY:
        assert key in SCHEMA, key
        default = SCHEMA[key]
        if isinstance(default, int | float) and not isinstance(default, bool):
            check_number(key, default)  # a default the table refused would refuse every run


@pytest.mark.parametrize("key", sorted(MIN_BY_KEY))
def test_a_value_below_the_bound_is_refused_before_hydra_as_the_job_refuses_it(hydra_compose, key) -> None:
    low, below = MIN_BY_KEY[key], _below(key)
    typed = f"{below:g}" if isinstance(below, float) else str(int(below))
    overrides = [*OPTION.get(key, OPTION.get(key.partition(".")[0], [])), f"{key}={typed}"]
    line = refusal(overrides)
    assert line is not None and line.startswith(f"Invalid config: {key}={typed}: {low.problem}. Fix: "), line
    assert "\n" not in line
    with pytest.raises(ConfigError) as job:  # a config file's value: the same line, in the job
        validate(hydra_compose(["device=cpu", *overrides]))
    assert job.value.key == key and job.value.problem == low.problem
    assert line.partition(". Fix: ")[2].startswith(job.value.fix.rstrip("."))
    at = low.least + (1 if low.strict else 0)
    assert number_problem(key, at) is None  # the bound's own side passes
    assert outside(key, below) and not outside(key, at)  # the idle-key check's reading agrees


def test_a_bound_that_depends_on_the_option_or_other_keys_stays_in_the_job() -> None:
    """``model.n_layer=0`` is "read it from the file" under ``model=hf``: not in the table, not refused by its
    value alone. ``parallel.dp_shard=-1`` is "the ranks the other degrees leave": the table's one value below
    its bound that passes (``LowerBound.also``); 0 and -2 are refused (session 26: only in the job)."""
    for key, value in (("model.n_layer", 0), ("parallel.dp_shard", -1), ("steps.warmup", 0)):
        check_number(key, value)
    assert refusal(["model=hf", "model.n_layer=0"]) is None
    assert refusal(["parallel.dp_shard=-1"]) is None and not outside("parallel.dp_shard", -1)
    assert refusal(["parallel.dp_shard=-2"]) == (
        "Invalid config: parallel.dp_shard=-2: must be a positive integer, or -1 for the ranks the other "
        "degrees leave. Fix: set parallel.dp_shard=-1."
    )


def test_a_timeout_too_short_for_the_whole_config_names_the_key_the_value_and_the_fix(tmp_path) -> None:
    """``timeout_s=0.5`` passes every check (no value alone decides what start-up and warm-up take); when it
    runs out, the record's line had said "no result within timeout_s=0.5 s; all 1 workers were stopped"."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()  # no rank wrote its phase: they were still starting
    outcome = collect(scratch, {}, 1, timeout_s=0.5)
    assert outcome.status == "error" and outcome.error["phase"] == "launch"
    assert (
        outcome.error["message"]
        == timeout_message(0.5, 1, "launch")
        == (
            "timeout: no result within timeout_s=0.5 s (the rank was still starting); its one worker was "
            "stopped. Fix: if the run needs longer, raise timeout_s (default 1800); if it hung, its run.log "
            "shows where"
        )
    )
    assert "(the ranks were in warmup); all 2 workers were stopped." in timeout_message(60, 2, "warmup")

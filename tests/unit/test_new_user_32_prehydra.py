"""The session-32 new-user trial's refusals that came only after Hydra made ``outputs/<date>/<time>/``, or
not at all (docs/reliability-4.md, session 32): a ``config.json``'s bad values and a model's shape relations
(the job's own checks), interpolations that fail only when resolved, and digits of another script in a
number key. Each is now one line from :func:`run.refusal`, before Hydra."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flopsweep.lookalike import ascii_digits
from run import refusal

TINY = json.loads((Path(__file__).parents[2] / "flopsweep/models/hf_configs/qwen3-tiny.json").read_text())


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("num_hidden_layers", -3, "has num_hidden_layers=-3, and it is a size"),
        ("num_hidden_layers", 2.5, "has num_hidden_layers=2.5, not a whole number"),
        ("num_hidden_layers", "2", "has num_hidden_layers='2', not a whole number"),
        ("num_hidden_layers", True, "has num_hidden_layers=True, not a whole number"),
        ("num_hidden_layers", 1e9, "has num_hidden_layers=1000000000.0, not a whole number"),
        ("num_attention_heads", 0, "has num_attention_heads=0, and it is a size"),
        ("hidden_size", 1e30, "has hidden_size=1e+30, not a whole number"),
        ("model_type", "nosuch", "is not a causal language model transformers builds natively"),
    ],
)
def test_a_config_json_the_job_refuses_is_refused_before_hydra(
    tmp_path: Path, field: str, value: object, problem: str
) -> None:
    """Was: exit 2 with the job's line after Hydra made the run's folder (``hf.check`` in validation)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**TINY, field: value}))
    line = refusal(["model=hf", "device=cpu", f"model.config={path}"])
    assert line is not None and line.startswith(f"Invalid config: model.config='{path}': {problem}"), line
    assert "\n" not in line and "Fix: " in line


def test_a_good_config_json_and_a_shipped_name_pass_before_hydra(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY))
    assert refusal(["model=hf", "device=cpu", f"model.config={path}"]) is None
    assert refusal(["model=hf", "device=cpu", "model.config=qwen3-tiny"]) is None


@pytest.mark.parametrize("plan", [[], ["plan=true", "plan_gpu=H100"]])
def test_a_kv_head_count_that_does_not_divide_the_heads_is_the_jobs_line_before_hydra(
    plan: list[str],
) -> None:
    """``llama.check``, the check validation calls, on the option merged with the command line's values."""
    assert refusal(["model=llama3.1-8b", *plan, "model.n_kv_head=3"]) == (
        "Invalid config: model.n_kv_head=3: does not divide model.n_head=32 (each key/value head serves a "
        "whole group). Fix: choose n_kv_head that divides n_head, e.g. model.n_kv_head=1 or "
        "model.n_kv_head=32."
    )
    assert refusal(["model=llama3.1-8b", *plan, "model.n_kv_head=4"]) is None


def test_an_odd_rope_head_dim_is_the_jobs_line_before_hydra() -> None:
    line = refusal(
        ["model=llama-tiny", "device=cpu", "model.n_embd=96", "model.n_head=32", "model.n_kv_head=1"]
    )
    assert line is not None and line.startswith("Invalid config: model.n_head=32: gives an odd head dim"), (
        line
    )


def test_a_model_sweep_is_left_to_its_jobs() -> None:
    assert refusal(["-m", "model=llama3.1-8b", "plan=true", "plan_gpu=H100", "model.n_kv_head=3,4"]) is None


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        (
            ["model.n_layer=${model.n_head}", "model.n_head=${model.n_layer}"],
            "Invalid config: model.n_layer=${model.n_head}: model.n_layer and model.n_head refer to each "
            "other, so none of them resolves. Fix: set one of them to a number itself, not an interpolation.",
        ),
        (
            ["model.n_layer=${nosuchresolver:1}"],
            "Invalid config: model.n_layer=${nosuchresolver:1}: nosuchresolver is no resolver (those there "
            "are: oc.env, oc.decode, oc.select, oc.create, oc.dict.keys, oc.dict.values, now, ...). Fix: "
            "name a resolver, e.g. ${oc.env:NAME,default}, or write the value itself.",
        ),
        (
            ["model.n_layer=${oc.evn:N,2}"],
            "Invalid config: model.n_layer=${oc.evn:N,2}: oc.evn is no resolver (those there are: oc.env, "
            "oc.decode, oc.select, oc.create, oc.dict.keys, oc.dict.values, now, ...). Fix: write "
            "${oc.env:N,2} if oc.env is meant, or write the value itself.",
        ),
        (
            ["steps.measure=${oc.env:HOME}"],
            "Invalid config: steps.measure=${oc.env:HOME}: resolves to '{home}', which is not a whole "
            "number. Fix: set steps.measure to a whole number, e.g. steps.measure=5 (its default).",
        ),
        (
            ['model.n_layer=${oc.decode:"[1,2]"}'],
            'Invalid config: model.n_layer=${oc.decode:"[1,2]"}: resolves to [1, 2], which takes a whole '
            "number, not a list. Fix: set model.n_layer to a whole number, e.g. model.n_layer=2 "
            "(model=llama-tiny's); several, one job each: -m model.n_layer=a,b.",
        ),
    ],
)
def test_an_interpolation_that_fails_only_when_resolved_is_one_line_before_hydra(
    monkeypatch: pytest.MonkeyPatch, overrides: list[str], line: str
) -> None:
    """Was: exit 2 after Hydra made outputs/.../run.log, "Fix: set the value it refers to, or drop it"."""
    monkeypatch.setenv("HOME", "/home/someone")
    assert refusal(["model=llama-tiny", "device=cpu", *overrides]) == line.replace("{home}", "/home/someone")


def test_a_ring_of_three_keys_names_each_and_a_resolvable_interpolation_passes() -> None:
    ring = ["model.n_layer=${model.n_head}", "model.n_head=${model.n_embd}", "model.n_embd=${model.n_layer}"]
    line = refusal(["model=llama-tiny", "device=cpu", *ring])
    assert line is not None and "(model.n_layer -> model.n_head -> model.n_embd -> model.n_layer)" in line
    assert refusal(["model=llama-tiny", "device=cpu", "steps.measure=${oc.decode:'3'}"]) is None
    assert refusal(["model=llama-tiny", "device=cpu", "model.n_layer=${model.n_kv_head}"]) is None


def test_a_sweep_with_an_interpolated_value_is_left_to_its_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Session 32's stop failed CI: ``-m cost.usd_per_gpu_hour=2,${oc.env:PRICE}`` was resolved as one string
    ('2,1e12', "not a number") and the sweep refused; each job records its own refusal instead (the plan's
    ``invalid`` row: tests/integration/test_plan_decide.py). Alone, it is still refused before Hydra."""
    monkeypatch.setenv("PRICE", "1e12")
    base = ["-m", "plan=true", "model=llama-tiny"]
    assert refusal([*base, "cost.usd_per_gpu_hour=2,${oc.env:PRICE}"]) is None
    assert refusal([*base, "steps.measure=choice(3,${oc.env:HOME})"]) is None
    alone = refusal(["plan=true", "model=llama-tiny", "cost.usd_per_gpu_hour=${oc.env:PRICE}"])
    assert alone is not None and "resolves to '1e12', which is beyond the bound of 1000000" in alone


def test_ascii_digits_writes_every_scripts_digits_0_to_9() -> None:
    assert ascii_digits("٣") == "3" and ascii_digits('"１２８"') == '"128"' and ascii_digits("3e-4") is None
    assert ascii_digits("²") is None  # a superscript is no decimal digit (int() refuses it too)


@pytest.mark.parametrize(
    ("override", "key", "ascii"),
    [
        ("steps.measure=٣", "steps.measure", "3"),
        ('steps.measure="٣"', "steps.measure", "3"),
        ('model.seq_len="１２８"', "model.seq_len", "128"),
        ('batch.micro_batch_size="２"', "batch.micro_batch_size", "2"),
        ("optim.lr=٣e-4", "optim.lr", "3e-4"),
    ],
)
def test_a_number_key_in_another_scripts_digits_names_the_ascii_value(
    override: str, key: str, ascii: str
) -> None:
    """Was: unquoted, "quote the value as one string"; quoted, it ran with int("٣") == 3."""
    line = refusal(["device=cpu", override])
    assert line is not None and line.startswith(
        f"Invalid config: {override}: is written in another script's digits"
    )
    assert line.endswith(f"and {key} takes a number in digits 0-9. Fix: write {key}={ascii}."), line
    assert "quote" not in line


def test_foreign_digits_needing_more_name_the_whole_line_and_a_string_key_keeps_them() -> None:
    assert refusal(["repeats=٢"]).endswith(
        "Fix: did you mean flopsweep -m repeats=2? (repeats=2 alone is refused: it needs -m)"
    )
    assert refusal(["device=cpu", "plan=true", 'tag="٣"']) is None


def test_the_jobs_line_for_an_interpolation_names_a_fix_of_its_class() -> None:
    """A ``+sweep`` file's interpolation still fails in the job: its fix follows omegaconf's error."""
    from omegaconf import OmegaConf

    from flopsweep.interpolations import resolution_fix

    def error(data: dict) -> BaseException:
        try:
            OmegaConf.to_container(OmegaConf.create(data), resolve=True)
        except Exception as exc:  # noqa: BLE001 - the error is the value under test
            return exc
        raise AssertionError(data)

    assert resolution_fix(error({"a": "${b}", "b": "${a}"})).startswith("give one of the keys it refers to")
    assert resolution_fix(error({"a": "${nosuch:1}"})).startswith("name a resolver (oc.env,")
    assert resolution_fix(error({"a": "${b}"})) == "set the value it refers to, or drop it"

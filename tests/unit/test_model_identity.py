"""Session 24's trial: a hand-set ``model.name`` ran another model under that name
(``model.name=llama3.1-8b`` trained gpt-tiny, and ``plan=true`` said the 8B fits in 0.0136 GiB),
``model=llama3.1-8b model.arch=gpt2`` built GPT-2 blocks at the 8B's sizes under the Llama name,
``model.name=a,a`` made two identical jobs and ``model.name=''`` rows of no model. The identity keys
(:data:`flopsweep.model_identity.IDENTITY_KEYS`) are refused before Hydra (``run.py``'s ``refusal``:
exit 2, no run folder) and in validation with Hydra's choices (a ``+sweep`` file, a plan), in one
line; the size knobs stay free, and the analysis never shows two sizes under one name.

The command lines themselves run in ``tests/integration/test_refusals.py`` (rows ``model_name_*``).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from analysis.load import load, name_sizes
from flopsweep.checks import validate
from flopsweep.config import ConfigError
from flopsweep.identity import setup_key
from flopsweep.model_identity import (
    IDENTITY_KEYS,
    arch_problem,
    command_line_problem,
    head_problem,
    name_problem,
    options,
)
from flopsweep.models import MODELS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "records"


def refusal(argv: list[str]) -> str | None:
    from run import refusal as run_refusal

    return run_refusal(argv)


# --- which keys are the option's identity -------------------------------------------------------------


def test_the_identity_keys_are_name_and_arch_and_every_other_model_key_is_a_knob() -> None:
    """Every key of every family's schema is either an identity key or a knob a sweep varies; the
    options' files set exactly the identity (name, family) and sizes, and each option's name is its own
    file name (so ``model=<name>`` is the fix of a name)."""
    assert IDENTITY_KEYS == ("name", "arch")
    for arch, family in MODELS.items():
        fields = {f.name for f in dataclasses.fields(family.config)}
        assert set(IDENTITY_KEYS) <= fields, arch
    known = options()
    assert known["gpt-tiny"] == ("gpt-tiny", "gpt2") and known["llama3.1-8b"] == ("llama3.1-8b", "llama")
    assert known["hf"] == ("", "hf")
    assert all(name == option for option, (name, _) in known.items() if option != "hf")


# --- the lines ---------------------------------------------------------------------------------------


def test_another_options_name_is_refused_naming_that_option_as_the_fix() -> None:
    line = str(name_problem("llama3.1-8b", "gpt-tiny"))
    assert line == (
        "Invalid config: model.name='llama3.1-8b': is the name of model=llama3.1-8b (llama), but model.name "
        "only labels the run: model=gpt-tiny (gpt2, its sizes) would train under it. "
        "Fix: pick the option itself: model=llama3.1-8b, and drop model.name."
    )
    assert name_problem("gpt-tiny", "gpt-tiny") is None and name_problem("gpt-tiny", "gpt-tiny.yaml") is None


def test_a_name_of_no_option_is_refused_with_the_closest_other_option() -> None:
    line = str(name_problem("llama-tny", "gpt-tiny"))
    assert line.startswith("Invalid config: model.name='llama-tny': is no model option's name, ")
    assert line.endswith(
        "Fix: drop the model.name override (model=gpt-tiny names the model); to run another model, pick "
        "its option, e.g. model=llama-tiny."
    )
    # the picked option itself is no suggestion; nothing close: no suggestion at all
    assert "e.g. model=gpt-tiny" not in str(name_problem("gpt-tny", "gpt-tiny"))
    assert str(name_problem("a", "gpt-tiny")).endswith(
        "Fix: drop the model.name override (model=gpt-tiny names the model)."
    )


@pytest.mark.parametrize("value", ["", "   ", "\t"])
def test_a_blank_name_is_refused_on_every_option_and_hf_takes_only_its_empty_default(value: str) -> None:
    line = str(name_problem(value, "llama-tiny"))
    assert line == (
        f"Invalid config: model.name={value!r}: is blank, and every record and table names the run's model "
        "by it. Fix: drop the model.name override (model=llama-tiny names the model)."
    )
    hf = name_problem(value, "hf")
    assert (hf is None) == (value == "")  # '' is hf's default: named from its config.json


def test_non_text_values_are_left_to_the_type_check_and_numbers_are_names() -> None:
    assert name_problem(None, "gpt-tiny") is None and name_problem(["a"], "gpt-tiny") is None
    assert str(name_problem(5, "gpt-tiny")).startswith(
        "Invalid config: model.name='5': is no model option's name"
    )


def test_another_family_is_refused_naming_an_option_of_it() -> None:
    line = str(arch_problem("gpt2", "llama3.1-8b"))
    assert line == (
        "Invalid config: model.arch='gpt2': is the family of the model option, and model=llama3.1-8b is "
        "llama: set by hand it would build llama3.1-8b's sizes as another family under llama3.1-8b's name. "
        "Fix: drop the model.arch override (model=llama3.1-8b sets it), or pick a gpt2 option, e.g. "
        "model=gpt-1.3b."
    )
    assert "pick an option of the family you want (gpt2, hf, llama)" in str(arch_problem("foo", "gpt-tiny"))
    assert arch_problem("llama", "llama-tiny") is None and arch_problem("hf", "hf") is None


def test_heads_that_do_not_divide_lead_with_the_key_the_user_set() -> None:
    assert str(head_problem(128, 3, "model.n_head")) == (
        "Invalid config: model.n_head=3: does not divide model.n_embd=128 (each head takes n_embd / n_head "
        "channels). Fix: choose heads that divide n_embd, e.g. model.n_head=2."
    )
    assert str(head_problem(100, 8, "model.n_embd")) == (
        "Invalid config: model.n_embd=100: is not divisible by model.n_head=8 (each head takes n_embd / "
        "n_head channels). Fix: choose a multiple of n_head, e.g. model.n_embd=96."
    )
    assert head_problem(128, 4, "model.n_head") is None


# --- before Hydra: run.py's refusal ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["device=cpu", "model.name=llama3.1-8b"], str(name_problem("llama3.1-8b", "gpt-tiny"))),
        (
            ["plan=true", "model.name=llama3.1-8b", "plan_gpu=H100"],
            str(name_problem("llama3.1-8b", "gpt-tiny")),
        ),
        (["model=llama3.1-8b", "model.arch=gpt2"], str(arch_problem("gpt2", "llama3.1-8b"))),
        (["-m", "plan=true", "model.name=a,a"], str(name_problem("a", "gpt-tiny"))),
        (["model.name=''"], str(name_problem("", "gpt-tiny"))),
        (["model.name='   '"], str(name_problem("   ", "gpt-tiny"))),
        (["model=hf", "model.name='   '"], str(name_problem("   ", "hf"))),
        (
            ["-m", "model=gpt-tiny,llama-tiny", "model.name=gpt-tiny"],
            str(name_problem("gpt-tiny", "llama-tiny")),
        ),
        (["model.n_head=3"], str(head_problem(128, 3, "model.n_head"))),
        (["model=llama-tiny", "model.n_embd=102"], str(head_problem(102, 4, "model.n_embd"))),
        (["-m", "model.n_head=4,3"], str(head_problem(128, 3, "model.n_head"))),
    ],
)
def test_the_command_line_is_refused_before_hydra_in_the_validation_line(argv: list[str], line: str) -> None:
    assert line.startswith("Invalid config: model.")
    assert refusal(argv) == line


@pytest.mark.parametrize(
    "argv",
    [
        ["model.name=gpt-tiny"],  # the option's own name: the same run
        ["model=llama3.1-8b", "model.name=llama3.1-8b", "model.arch=llama"],
        ["model=hf"],  # named from its file
        ["-m", "model=gpt-tiny", "model.n_layer=2,4,48"],  # sizes are knobs
        ["model=gpt-tiny", "model.n_embd=256", "model.n_head=8"],
        ["+sweep=predict-cpu", "model.name=llama-tiny"],  # the sweep picks the option: validation checks it
        ["model.name=${oc.env:HOME}"],  # an interpolation: the job's
    ],
)
def test_what_names_the_picked_option_or_varies_a_size_passes(argv: list[str]) -> None:
    assert command_line_problem(argv) is None


# --- in validation: sweep files and plans ------------------------------------------------------------


def _composed(hydra_compose, overrides: list[str]):
    """The typed config and Hydra's group choices, as the job gets them."""
    node = hydra_compose.config(overrides, hydra=True)
    choices = {k: str(v) for k, v in node.hydra.runtime.choices.items() if v is not None}
    return hydra_compose(overrides), choices


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        (["model.name=llama3.1-8b"], str(name_problem("llama3.1-8b", "gpt-tiny"))),
        (["model=llama3.1-8b", "model.arch=gpt2"], str(arch_problem("gpt2", "llama3.1-8b"))),
        (["model.name='  '"], str(name_problem("  ", "gpt-tiny"))),
        (["+sweep=predict-cpu", "model.name=llama3.1-8b"], str(name_problem("llama3.1-8b", "llama-tiny"))),
    ],
)
def test_validation_refuses_them_with_hydras_choices_in_the_same_line(hydra_compose, overrides, line) -> None:
    cfg, choices = _composed(hydra_compose, overrides)
    with pytest.raises(ConfigError) as caught:
        validate(cfg, choices)
    assert str(caught.value) == line


def test_validation_without_choices_refuses_a_blank_name_and_a_family_whose_keys_go_unread(
    hydra_compose,
) -> None:
    cfg, _ = _composed(hydra_compose, ["model=llama-tiny", "model.arch=gpt2"])
    with pytest.raises(ConfigError) as caught:
        validate(cfg)  # a config built in code: the schema says the node is Llama's
    assert str(caught.value).startswith(
        "Invalid config: model.arch='gpt2': was set by hand on an option of another family"
    )
    assert "(ffn_dim, n_kv_head, norm_eps, rope_theta, tie_embeddings)" in str(caught.value)
    cfg, _ = _composed(hydra_compose, ["model.name=' '"])
    with pytest.raises(ConfigError, match=r"model.name=' ': is blank"):
        validate(cfg)
    cfg, choices = _composed(hydra_compose, ["model=gpt-tiny", "model.n_layer=3"])
    assert validate(cfg, choices) is cfg  # a size is a knob
    searched = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, name="gpt-tiny-L3"))
    assert validate(searched) is searched  # a search's probe size, validated without choices


def test_hf_refuses_a_name_that_is_not_its_files(hydra_compose) -> None:
    pytest.importorskip("transformers")
    cfg, choices = _composed(hydra_compose, ["model=hf", "model.name=llama3.1-8b", "device=cpu"])
    with pytest.raises(ConfigError) as caught:
        validate(cfg, choices)
    assert str(caught.value).startswith(
        "Invalid config: model.name='llama3.1-8b': model=hf names the model from model.config"
    )
    cfg, choices = _composed(hydra_compose, ["model=hf", "device=cpu"])
    named = validate(cfg, choices).model.name
    again, choices = _composed(hydra_compose, ["model=hf", "device=cpu", f"model.name='{named}'"])
    assert validate(again, choices).model.name == named  # the file's own name, given: the same run


# --- the record and the analysis: a size changed by hand ----------------------------------------------


def _record(**model) -> dict:
    record = json.loads((FIXTURES / "llama" / "metrics.json").read_text())
    record["config"]["model"].update(model)
    record["model"]["name"] = record["config"]["model"]["name"]
    record["run"].pop("setup_key", None)
    record["run"].pop("job_key", None)
    record["run"].pop("identity_version", None)
    return record


def test_the_setup_key_tells_every_size_apart_under_one_name() -> None:
    """Repeats pool, and scaling compares, by the set-up key: every size key is in it, so two sizes
    under one name are never one set-up."""
    base = _record()
    keys = {setup_key(base)}
    for key, value in (("n_layer", 3), ("n_embd", 256), ("n_head", 8), ("ffn_dim", 1024), ("n_kv_head", 4)):
        keys.add(setup_key(_record(**{key: value})))
    assert len(keys) == 6


def test_the_analysis_names_runs_of_one_name_apart_by_their_sizes(tmp_path: Path) -> None:
    """The trial's ``model=gpt-tiny model.n_layer=48`` keeps the option's name in the record; beside a
    run of another size the analysis names each by what differs (``-L<blocks>``, ``[key=value]``), so
    ``--best-by model``, a baseline and a pivot never take two sizes for one model. A name that stands
    for one size is kept."""
    records = [
        _record(),
        _record(n_embd=256, n_head=8),
        _record(n_layer=3),
        _record(name="llama-1b", n_layer=5),
    ]
    for i, record in enumerate(records):
        folder = tmp_path / str(i)
        folder.mkdir()
        record["run"]["id"] = f"run-{i}"
        (folder / "metrics.json").write_text(json.dumps(record))
    df = load(tmp_path).sort_values("run_dir")
    base, blocks = records[0]["config"]["model"]["name"], records[0]["config"]["model"]["n_layer"]
    assert df["model"].tolist() == [  # each run of the name by every size that differs within it
        f"{base}-L{blocks}[n_embd=2048,n_head=32]",
        f"{base}-L{blocks}[n_embd=256,n_head=8]",
        f"{base}-L3[n_embd=2048,n_head=32]",
        "llama-1b",
    ]
    assert df["setup_id"].nunique() == 4


def test_name_sizes_keeps_a_name_of_one_size_and_leaves_out_keys_older_records_lack() -> None:
    import pandas as pd

    df = pd.DataFrame({"model": ["m", "m", "x"], "n_layer": [2, 2, 4]})
    shapes = [(("n_layer", "2"), ("n_embd", "128")), (("n_layer", "2"),), (("n_layer", "4"),)]
    assert name_sizes(df.copy(), shapes)["model"].tolist() == ["m", "m", "x"]
    shapes[1] = (("n_layer", "2"), ("n_embd", "64"))
    assert name_sizes(df.copy(), shapes)["model"].tolist() == ["m[n_embd=128]", "m[n_embd=64]", "x"]

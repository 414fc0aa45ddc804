"""Session 26: a value outside its key's set (``fault.kind=oomm``, ``model.n_layer=0``) had been refused only
in the job, after Hydra made its folder (``backend.optimizer_impl`` and ``attention.layout`` only once the
ranks started). Every text key of a fixed set of names, and each model family's sizes, are now refused
before Hydra (:mod:`flopsweep.value_sets`): one line naming the key, the value and the fix (a "did you
mean" for a near name). Through ``python run.py`` (exit 2, no job folder): tests/integration/test_refusals.py
(``n_layer_zero``, ``fault_kind_typo``, ...)."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from flopsweep.checks import option_schemas, validate
from flopsweep.config import ConfigError, RunConfig
from flopsweep.models import MODELS
from flopsweep.value_sets import choices, value_set_problem
from run import refusal


def _text_keys(cls: type, prefix: str = "") -> set[str]:
    """Every key of ``cls`` (a schema dataclass) whose type is ``str``, sub-configs included."""
    hints = typing.get_type_hints(cls)
    out: set[str] = set()
    for f in dataclasses.fields(cls):
        kind = hints[f.name]
        if dataclasses.is_dataclass(kind):
            out |= _text_keys(kind, f"{prefix}{f.name}.")
        elif kind is str:
            out.add(f"{prefix}{f.name}")
    return out


FREE_TEXT = {
    "tag",  # a label
    "nproc_per_node",  # auto or a count: overrides._nproc_problem, plan.resolve_nproc
    "objective",  # a figure of merit: run.objective_problem
    "model.name",  # a label, and the option's: flopsweep.model_identity
    "model.arch",  # the option's family: flopsweep.model_identity
    "model.config",  # a path or a shipped config's name (model=hf)
    "model.config_sha256",  # a hash
}
"""The text keys that take no fixed set of names, each with where it is checked."""

OPTION = {
    "attention.layout": "attention=blocksparse",
    "attention.impl": "attention=blocksparse",
    "backend.offload_optimizer": "backend=zero3",
    "backend.offload_param": "backend=zero3",
    "backend.optimizer_impl": "backend=zero3",
    "model.experts": "model=hf",
}
"""The option a key of one option's schema needs on the command line."""


def test_every_text_key_of_the_schemas_is_a_set_checked_before_hydra_or_free_text() -> None:
    """A new text key of a fixed set of names must join :func:`flopsweep.value_sets.choices`."""
    keys = _text_keys(RunConfig)
    for group, options in option_schemas().items():
        for schema in options.values():
            keys |= _text_keys(schema, f"{group}.")
    assert keys - FREE_TEXT == set(choices()), sorted((keys - FREE_TEXT) ^ set(choices()))


@pytest.mark.parametrize("key", sorted(choices()))
def test_a_name_outside_the_set_is_refused_before_hydra_and_each_name_in_it_passes(key: str) -> None:
    names, example = choices()[key]
    option = [OPTION[key]] if key in OPTION else []
    line = refusal([*option, f"{key}=zzqx"])
    assert line == (
        f"Invalid config: {key}='zzqx': must be one of {', '.join(names)}. "
        f"Fix: pick one of those, e.g. {example}={names[0]}."
    )
    for name in names:
        assert value_set_problem([*option, f"{key}={name}"]) is None, name


@pytest.mark.parametrize(
    ("override", "meant"),
    [
        ("fault.kind=oomm", "fault.kind=oom"),
        ("parallel.pp_schedule=Gpipe", "parallel.pp_schedule=GPipe"),
        ("optim.implementation=foreash", "optim.implementation=foreach"),
        ("precision.name=bf61", "precision=bf16"),
    ],
)
def test_a_near_name_gets_the_did_you_mean_that_passes(hydra_compose, override: str, meant: str) -> None:
    key, _, value = override.partition("=")
    line = refusal([override])
    assert line is not None and line.startswith(f"Invalid config: {key}='{value}': must be one of "), line
    assert line.endswith(f"Fix: did you mean {meant}?") and "\n" not in line
    assert refusal([meant]) is None
    with pytest.raises(ConfigError) as job:  # a sweep file's value: the job's own check, the same key
        validate(hydra_compose(["device=cpu", override]))
    assert job.value.key == key


def test_a_did_you_mean_that_another_key_refuses_names_that_refusal() -> None:
    """``fault.phase=measure`` does nothing without ``fault.kind``: the first line says so (``then:``)."""
    line = refusal(["fault.phase=mesure"])
    assert line is not None and line.startswith(
        "Invalid config: fault.phase='mesure': must be one of init, warmup, measure, teardown. Fix: did you "
        "mean fault.phase=measure (then: fault.phase=measure: does nothing without fault.kind"
    ), line
    assert refusal(["fault.kind=raise", "fault.phase=mesure"]).endswith("did you mean fault.phase=measure?")


def test_a_sweep_over_names_is_refused_at_its_bad_one() -> None:
    line = refusal(["-m", "fault.kind=oom,oomm"])
    assert line == (
        "Invalid config: fault.kind='oomm': must be one of none, oom, raise, kill, abort, hang, nan_loss. "
        "Fix: did you mean fault.kind=oom?"
    )


SIZES = [
    (option, key) for option in ("gpt-tiny", "llama-tiny") for key in ("n_layer", "n_embd", "n_head")
] + [
    ("llama-tiny", "n_kv_head"),
    ("llama-tiny", "ffn_dim"),
    ("gpt-tiny", "vocab_size"),
]


@pytest.mark.parametrize(("option", "key"), SIZES)
def test_a_model_size_below_one_is_refused_before_hydra_as_the_job_refuses_it(
    hydra_compose, option: str, key: str
) -> None:
    for value in (0, -3):
        line = refusal([f"model={option}", f"model.{key}={value}"])
        assert line is not None and line.startswith(
            f"Invalid config: model.{key}={value}: must be a positive integer. Fix: set model.{key}="
        ), line
        example = line.partition("Fix: set ")[2].split(" ")[0]
        assert refusal([f"model={option}", example]) is None  # the option's own value
        with pytest.raises(ConfigError) as job:
            validate(hydra_compose(["device=cpu", f"model={option}", f"model.{key}={value}"]))
        assert job.value.key == f"model.{key}" and job.value.problem == "must be a positive integer"


def test_each_family_names_its_sizes_and_hf_reads_zero_from_its_file() -> None:
    """``model=hf`` takes ``model.n_layer=0`` as "the file's": not refused; in a sweep over a family that
    builds it and hf, the family's job would be refused, so the sweep is."""
    assert set(MODELS["gpt2"].positive) >= {"n_layer", "n_embd", "n_head", "vocab_size"}
    assert set(MODELS["llama"].positive) >= {"n_kv_head", "ffn_dim"} and MODELS["hf"].positive == ()
    assert refusal(["model=hf", "model.n_layer=0"]) is None
    assert refusal(["-m", "model=gpt-tiny,hf", "model.n_layer=0"]) == (
        "Invalid config: model.n_layer=0: must be a positive integer. Fix: set model.n_layer=2 "
        "(model=gpt-tiny's; any positive integer)."
    )

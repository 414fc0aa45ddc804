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
    "nproc_per_node",  # auto or a count: override_values._nproc_problem, plan.resolve_nproc
    "objective",  # a figure of merit: command_line_checks.objective_problem
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
    case = " (options are case-sensitive)." if meant.partition("=")[2].lower() == value.lower() else ""
    assert line.endswith(f"Fix: did you mean {meant}?{case}") and "\n" not in line
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


@pytest.mark.parametrize(
    ("overrides", "meant"),
    [
        (["parallel.pp_schedule=1f1b"], "parallel.pp_schedule=1F1B"),
        (["parallel.pp_schedule=interleaved1f1b"], "parallel.pp_schedule=Interleaved1F1B"),
        (["device=CPU"], "device=cpu"),
        (["fault.kind=OOM"], "fault.kind=oom"),
        (["precision.name=BF16"], "precision=bf16"),
    ],
)
def test_a_name_that_differs_in_case_alone_gets_its_option_and_says_options_are_case_sensitive(
    overrides: list[str], meant: str
) -> None:
    """Session 26: the did-you-mean matched case and all: ``parallel.pp_schedule=1f1b`` got no suggestion
    (``1F1B`` is 0.5 near it). Names are matched without case, and a case-only difference is said."""
    line = refusal(overrides)
    assert line is not None and line.endswith(f"Fix: did you mean {meant}? (options are case-sensitive)."), (
        line
    )
    assert refusal([meant]) is None


@pytest.mark.parametrize(
    ("override", "meant"),
    [
        ("precision=BF16", "precision=bf16"),
        ("model=Llama-Tiny", "model=llama-tiny"),
        ("backend=FSDP", "backend=fsdp"),
    ],
)
def test_a_group_option_that_differs_in_case_alone_gets_its_did_you_mean(override: str, meant: str) -> None:
    line = refusal([override])
    value = override.partition("=")[2]
    assert line == (
        f"Invalid config: {override}: {value} is no option of {override.partition('=')[0]}: options are "
        f"case-sensitive. Fix: did you mean {meant}?"
    )
    assert refusal([meant]) is None
    assert refusal(["-m", f"{override},fsdp" if "backend" in override else override]).endswith(
        "options are case-sensitive. Fix: did you mean "
        + (f"{meant},fsdp?" if "backend" in override else f"{meant}?")
    )


def test_near_names_and_the_key_did_you_mean_ignore_case() -> None:
    from flopsweep.choices import near_name
    from flopsweep.near_keys import ranked
    from flopsweep.override_schema import near_names

    assert near_name("1f1b", ["1F1B", "Interleaved1F1B", "GPipe"]) == "1F1B"
    assert near_name("zzqx", ["1F1B"]) is None
    assert near_names("Llama-Tiny", ["gpt-tiny", "llama-tiny"], "model=", n=1) == ["model=llama-tiny"]
    assert ranked("Measure", ["measure", "warmup"]) == ["measure"]


@pytest.mark.parametrize(
    ("option", "stage"), [("deepspeed", 4), ("deepspeed", 0), ("zero2", -1), ("zero1", 5)]
)
def test_a_zero_stage_outside_one_to_three_is_refused_before_hydra_as_the_job_refuses_it(
    hydra_compose, option: str, stage: int
) -> None:
    """Session 26: ``backend.zero_stage=4`` was refused only in the job, after Hydra made its folder."""
    example = {"zero1": 1, "zero2": 2}.get(option, 3)
    line = refusal([f"backend={option}", f"backend.zero_stage={stage}"])
    assert line == (
        f"Invalid config: backend.zero_stage={stage}: DeepSpeed ZeRO has stages 1, 2 and 3. "
        f"Fix: set backend.zero_stage={example} (or another of 1, 2, 3)."
    )
    assert refusal([f"backend={option}", f"backend.zero_stage={example}"]) is None
    assert refusal(["-m", "backend=deepspeed", f"backend.zero_stage=2,{stage}"]).startswith(
        f"Invalid config: backend.zero_stage={stage}: DeepSpeed ZeRO has stages 1, 2 and 3."
    )
    if option == "deepspeed":  # backend=zeroN: the job names the contradiction with the option first
        from flopsweep.plan import Environment, plan

        with pytest.raises(ConfigError) as job:  # the backend's check (backend_checks.check_support)
            plan(
                hydra_compose(["device=cpu", f"backend={option}", f"backend.zero_stage={stage}"]),
                Environment.detect(),
            )
        assert str(job.value) == line

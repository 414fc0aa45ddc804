"""Session 41 (docs/reliability-12.md #881, #882): a choice key's did-you-mean names the option another word
means (``config.SYNONYMS``, looked up in ``config.near_name``, the one suggestion of a choice):
``device=gpu`` had been told ``did you mean device=cpu?``; ``activation_checkpointing=off`` ``e.g.
activation_checkpointing=offload``; ``space.checkpointing=[off]`` the default list. Each fix, typed back,
passes the command line's checks (``run.refusal``)."""

from __future__ import annotations

import pytest

BASE = ["plan=true", "model=llama3.1-8b", "plan_clusters=[H100:8]"]


def refusal(argv: list[str]) -> str | None:
    from run import refusal as run_refusal

    return run_refusal(argv)


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("device=gpu", "device=cuda"),
        ("device=nvidia", "device=cuda"),
        ("device=GPU", "device=cuda"),
    ],
)
def test_a_choice_keys_synonym_is_the_did_you_mean_and_passes(typed: str, meant: str) -> None:
    key, _, value = typed.partition("=")
    line = refusal([typed])
    assert (
        line == f"Invalid config: {key}='{value}': must be one of auto, cuda, cpu. Fix: did you mean {meant}?"
    )
    assert refusal([meant]) is None


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("precision=bfloat16", "precision=bf16"),
        ("precision=torch.bfloat16", "precision=bf16"),
        ("precision=float16", "precision=fp16"),
        ("precision=half", "precision=fp16"),
        ("precision=float32", "precision=fp32"),
        ("precision=float", "precision=fp32"),
        ("precision=float8", "precision=fp8"),
        ("backend=zero", "backend=deepspeed"),
        ("activation_checkpointing=off", "activation_checkpointing=none"),
        ("activation_checkpointing=no", "activation_checkpointing=none"),
        ("activation_checkpointing=on", "activation_checkpointing=full"),
    ],
)
def test_a_groups_synonym_is_the_did_you_mean_and_passes(typed: str, meant: str) -> None:
    group, _, value = typed.partition("=")
    option = meant.partition("=")[2]
    line = refusal([typed])
    assert line == (
        f"Invalid config: {typed}: {value} is no option of {group}: its name here is {option}. "
        f"Fix: did you mean {meant}?"
    )
    assert refusal([meant]) is None


@pytest.mark.parametrize(
    ("typed", "fixed"),
    [
        ("space.checkpointing=[off]", "space.checkpointing=[none]"),
        ("space.checkpointing=[true,selective]", "space.checkpointing=[full,selective]"),
        ("space.precisions=[bfloat16,half]", "space.precisions=[bf16,fp16]"),
        ("space.backends=[zero,fsdp]", "space.backends=[deepspeed,fsdp]"),
        ("space.backends=[zero,zero3]", "space.backends=[zero3]"),  # deepspeed is zero3: refused beside it
    ],
)
def test_a_space_lists_synonym_is_named_in_its_fix_and_passes(typed: str, fixed: str) -> None:
    line = refusal([*BASE, typed])
    assert line is not None and line.endswith(f"Fix: list some of those, e.g. {fixed}."), line
    assert refusal([*BASE, fixed]) is None


def test_a_synonym_names_only_an_option_of_the_key():
    from flopsweep.config import synonym

    assert synonym("gpu", ["auto", "cuda", "cpu"]) == "cuda"
    assert synonym("torch.BFloat16", ["bf16", "fp16"]) == "bf16"
    assert synonym("off", ["default", "reduce-overhead"]) is None  # no "none" among them: no synonym
    assert refusal(["device=cpy"]).endswith("Fix: did you mean device=cpu?")  # a typo: the nearest spelling

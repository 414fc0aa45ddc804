"""An unknown value of a ``space.*`` list gets a list to type (docs/reliability-9.md #531): ``plan=true
'plan_clusters=[H100:8]' 'space.backends=[FSDP]'`` said "Fix: list some of those." after the seven names."""

from __future__ import annotations

import pytest


def refusal(argv: list[str]) -> str | None:
    from run import refusal as run_refusal

    return run_refusal(argv)


BASE = ["plan=true", "model=llama3.1-8b", "plan_clusters=[H100:8]"]


@pytest.mark.parametrize(
    ("typed", "fixed"),
    [
        ("space.backends=[FSDP]", "space.backends=[fsdp]"),
        ("space.backends=[fsdp,fsdp2]", "space.backends=[fsdp]"),
        ("space.backends=[]", "space.backends=[single,ddp,fsdp,zero1,zero2,zero3]"),
        ("space.checkpointing=[Selective,none]", "space.checkpointing=[selective,none]"),
        ("space.checkpointing=[foo]", "space.checkpointing=[none,selective,full]"),
        ("space.precisions=[BF16,fp8]", "space.precisions=[bf16,fp8]"),
    ],
)
def test_an_unknown_space_value_names_a_list_that_passes(typed: str, fixed: str) -> None:
    line = refusal([*BASE, typed])
    assert line.endswith(f"Fix: list some of those, e.g. {fixed}."), line
    assert refusal([*BASE, fixed]) is None

"""A ``space.*`` list of numbers written in another script's digits is refused with the value in digits 0-9
(docs/reliability-9.md #532): ``'space.micro_batches=[٢]'`` got the grammar's fix, quote it, and
``'space.micro_batches=["٢"]'`` then planned micro batch 2 (``int("٢") == 2``), the command line showing
none; a price (``@٢.5``) and a size (``H100:٨``) were refused so since session 35."""

from __future__ import annotations

import pytest


def refusal(argv: list[str]) -> str | None:
    from run import refusal as run_refusal

    return run_refusal(argv)


BASE = ["plan=true", "model=llama3.1-8b", "plan_clusters=[H100:8]"]


@pytest.mark.parametrize(
    ("typed", "fixed", "takes"),
    [
        ("space.micro_batches=[٢]", "space.micro_batches=[2]", "micro batches"),
        ('space.micro_batches=["٢"]', "space.micro_batches=[2]", "micro batches"),
        ("space.micro_batches=[1,２]", "space.micro_batches=[1,2]", "micro batches"),
        ("space.layouts=[tp٢]", "space.layouts=[tp2]", "degrees (tp2, pp4)"),
        ('space.layouts=["tp٢",dp]', "space.layouts=[tp2,dp]", "degrees (tp2, pp4)"),
    ],
)
def test_a_space_list_in_another_scripts_digits_names_it_in_digits_0_9(
    typed: str, fixed: str, takes: str
) -> None:
    key = typed.partition("=")[0]
    line = refusal([*BASE, typed])
    assert line.startswith(f"Invalid config: {typed}: is written in another script's digits ("), line
    assert line.endswith(f"and {key} takes {takes} in digits 0-9. Fix: write {fixed}."), line
    assert refusal([*BASE, fixed]) is None

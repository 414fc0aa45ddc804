"""A cluster name with a space, or a size of three factors, is refused with a name to type
(docs/reliability-9.md #527): ``plan_clusters=[H100: 8]`` said "is not a cluster name" with the grammar;
``[H100:8x8x8]`` "gives no size"; ``[H100: 8@2.5]``'s line was split inside its value (``'H100: 8@2.5':
8': ...``)."""

from __future__ import annotations

import pytest


def refusal(argv: list[str]) -> str | None:
    from run import refusal as run_refusal

    return run_refusal(argv)


BASE = ["plan=true", "model=llama3.1-8b"]


@pytest.mark.parametrize(
    ("typed", "fixed"),
    [
        ("H100: 8", "H100:8"),
        ("H 100:8x8", "H100:8x8"),
        ("H100:8:ib 400", "H100:8:ib400"),
        ("H100: 8@2.5", "H100:8@2.5"),
    ],
)
def test_a_space_in_a_name_is_refused_with_the_name_without_it(typed: str, fixed: str) -> None:
    line = refusal([*BASE, f"plan_clusters=[{typed}]"])
    assert line == (
        f"Invalid config: plan_clusters='{typed}': holds a space. Fix: write it without: "
        f"plan_clusters=[{fixed}]."
    )
    assert refusal([*BASE, f"plan_clusters=[{fixed}]"]) is None


def test_a_space_whose_name_is_still_wrong_gets_the_grammar() -> None:
    line = refusal([*BASE, "plan_clusters=[Foo Bar:8]"])
    assert line.startswith(
        "Invalid config: plan_clusters='Foo Bar:8': is not a cluster name. Fix: name it GPU:"
    )


def test_a_size_of_three_factors_is_named_as_a_size() -> None:
    line = refusal([*BASE, "plan_clusters=[H100:8x8x8]"])
    assert line.startswith(
        "Invalid config: plan_clusters='H100:8x8x8': its size '8x8x8' is not a GPU count or "
    )
    assert "e.g. plan_clusters=[H100:8] (one node of 8)" in line
    assert refusal([*BASE, "plan_clusters=[H100:8]"]) is None

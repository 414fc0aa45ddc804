"""Session 39 (docs/reliability-10.md #674): several overrides quoted as one word (``flopsweep
"backend=fsdp nproc_per_node=2 parallel.tp=3" device=cpu``) were read as one key's value and refused as
``fsdp nproc_per_node=2 parallel.tp=3 is no option of backend ... e.g. backend=single``. Now such a word
is refused first (``joined_overrides.joined_problem``, in ``run.py``'s refusal) with the split command
as the fix, which the refusal accepts when typed back."""

from __future__ import annotations

import shlex

import pytest

from flopsweep.joined_overrides import split_word


def refusal(argv: list[str]) -> str | None:
    from run import refusal as run_refusal

    return run_refusal(argv)


def _fix(line: str) -> list[str]:
    command = line.split("Fix: give each override its own word: ", 1)[1].removesuffix(".")
    words = shlex.split(command)
    assert words[0] == "flopsweep"
    return words[1:]


@pytest.mark.parametrize(
    ("argv", "split"),
    [
        (["backend=fsdp nproc_per_node=2 parallel.tp=3", "device=cpu"], ["backend=fsdp", "nproc_per_node=2"]),
        (["-m", "backend=ddp,fsdp seed=3", "device=cpu"], ["backend=ddp,fsdp", "seed=3"]),
        (["device=cpu", "model=gpt-tiny  steps.measure=2"], ["model=gpt-tiny", "steps.measure=2"]),
    ],
)
def test_several_overrides_in_one_word_are_refused_with_the_split_command(argv, split):
    line = refusal(argv)
    word = next(a for a in argv if " " in a)
    assert line.startswith(f"Invalid config: {word}: holds {len(word.split())} overrides in one word ("), line
    assert "is no option" not in line and "(then:" not in line
    fixed = _fix(line)
    assert fixed == [part for a in argv for part in a.split()] and all(s in fixed for s in split)
    assert refusal(fixed) is None  # typed back: accepted


def test_what_still_refuses_the_split_command_is_said_beside_it():
    line = refusal(["device=cpu", "model=gpt-tiny +steps.measure=2"])
    assert line.endswith(
        "(then: +steps.measure=2: steps.measure already exists; + adds only new keys. Fix: steps.measure=2)"
    )
    assert _fix(line.split(" (then: ")[0]) == ["device=cpu", "model=gpt-tiny", "+steps.measure=2"]


def test_a_value_with_spaces_and_no_second_key_is_left_to_its_own_checks():
    assert split_word("space.layouts=[dp, tp2]") is None
    assert split_word("tag='a b=c'") is None  # Hydra's quotes: the value's own text
    assert split_word("model=gpt-tiny seed") is None
    assert split_word("backend=fsdp ~fault") is None
    assert split_word("backend=fsdp ~fault=x") == ["backend=fsdp", "~fault=x"]

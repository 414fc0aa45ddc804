"""A tuner's memory cap keeps two set-ups, and a tuning left with one is refused in every path
(docs/reliability-14.md #1061)."""

from __future__ import annotations

import re

from flopsweep.tune import Candidate, capped_problem, one_setup_problem
from hydra_plugins.flopsweep_tune import command_line_problem as tuner_problem

PEAKS = (0.00874, 0.0105, 0.0105, 0.0122)
"""llama-tiny's estimates per rank, GiB, of single/ddp x micro batch 1/2 on one CPU rank (session 43)."""


def _judged(cap: float, headroom: float = 0.0) -> list[Candidate]:
    """The four set-ups pruned as ``plan_assess.assess`` prunes them: over ``(1 - headroom) x cap``."""
    return [
        Candidate(
            i,
            (f"batch.micro_batch_size={i}",),
            f"mb{i}",
            setup=f"s{i}",
            pruned="over memory: ..." if peak > (1 - headroom) * cap else None,
            peak_gib=peak,
        )
        for i, peak in enumerate(PEAKS)
    ]


def _typed_fix(line: str) -> str:
    return re.search(r"Fix: set (\S+) \(keeps \d+ set-ups\)", line).group(1)


def test_a_cap_that_fits_one_set_up_is_refused_and_its_fix_keeps_two() -> None:
    """``memory_gib=1e-9``'s fix was 0.0088, which pruned 3 of 4 and the tuner ran the one left 3 times
    (``runner-up: none``). Now both caps are refused, and the fix, typed back, keeps two and passes."""
    none_fit = capped_problem(_judged(1e-9), 1e-9, 0.0)
    assert none_fit is not None and none_fit.startswith(
        "Invalid config: hydra.sweeper.memory_gib=1e-9: fits no set-up (the least two, mb0 and mb1, are "
        "estimated at 0.00874 and 0.0105 GiB per rank; space.min_headroom=0). Fix: set "
        "hydra.sweeper.memory_gib=0.011 (keeps 3 set-ups)"  # 0.0105 twice: both fit it
    )
    one_fits = capped_problem(_judged(0.0088), 0.0088, 0.0)
    assert one_fits == (
        "Invalid config: hydra.sweeper.memory_gib=0.0088: fits one set-up (mb0), nothing to tune (the next, "
        "mb1, is estimated at 0.0105 GiB per rank; space.min_headroom=0). Fix: set "
        "hydra.sweeper.memory_gib=0.011 (keeps 3 set-ups), or leave it unset (the device's memory)."
    )
    for line in (none_fit, one_fits):
        typed = _typed_fix(line)
        cap = float(typed.partition("=")[2])
        kept = _judged(cap)
        said = int(re.search(r"keeps (\d+) set-ups", line).group(1))
        assert sum(c.pruned is None for c in kept) == said >= 2
        assert capped_problem(kept, cap, 0.0) is None and one_setup_problem(kept) is None
        assert tuner_problem(["-m", "hydra/sweeper=tune", typed]) is None


def test_the_fix_keeps_two_under_a_headroom() -> None:
    line = capped_problem(_judged(0.001, 0.1), 0.001, 0.1)
    cap = float(_typed_fix(line).partition("=")[2])
    assert sum(c.pruned is None for c in _judged(cap, 0.1)) >= 2


def test_one_set_up_left_after_any_pruning_is_refused() -> None:
    """Three of four refused by the rules (no cap to blame): the one left is nothing to tune either."""
    found = [
        Candidate(0, ("a=0",), "mb0", setup="s0"),
        *(
            Candidate(i, (f"a={i}",), f"mb{i}", setup=f"s{i}", pruned="refused: parallel.tp=2: ...")
            for i in (1, 2, 3)
        ),
    ]
    assert capped_problem(found, 0.5, 0.0) is None  # no cap keeps two: not the cap's
    assert one_setup_problem(found) == (
        "Invalid config: hydra/sweeper=tune: one set-up (mb0) left of 4, nothing to tune (the other 3 "
        "pruned: refused, ...). Fix: list more values, e.g. space.micro_batches=[1,2,4], or run it plainly "
        "(repeats=3 for an interval)."
    )
    assert one_setup_problem(found[:1] + [Candidate(9, ("a=9",), "mb9", setup="s9")]) is None
    assert tuner_problem(["-m", "hydra/sweeper=tune", "space.micro_batches=[1,2,4]"]) is None

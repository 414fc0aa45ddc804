"""Session 39 (docs/reliability-9.md #480, #481): a tuning sweep whose ``space.layouts`` no set-up of this
machine places (``[tp3]`` on 2 ranks) said "all 90 dropped", exit 1, where ``plan_clusters``' same case is
one ``Invalid config`` line, exit 2. Now one line, exit 2, before any job or folder, its fix the layouts
this model takes on these ranks (:func:`flopsweep.layout_fit.taken_layouts`, the tuner judging each by
composing it); typed back, the fix's set-ups pass the rules (shown without running a job: a memory cap
that fits none is then the only reason left, ``memory_gib``'s own exit-2 line). A subprocess is the point:
the sweeper runs inside Hydra."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import run_sweep

BASE = ("hydra/sweeper=tune", "device=cpu", "space.backends=[fsdp]")
ONE = ("space.checkpointing=[none]", "space.micro_batches=[2]", "space.precisions=[fp32]")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("ranks", "model", "fix"),
    [
        (2, (), "[dp,tp2]"),
        (2, ("model=llama-tiny", "model.n_kv_head=1"), "[dp]"),  # 1 KV head: no tp2
        (4, ("model=gpt-tiny,llama-tiny",), "[dp,tp2]"),  # every job's: llama-tiny's 2 KV heads take no tp4
    ],
    ids=["gpt-tiny", "one_kv_head", "two_models"],
)
def test_a_space_placed_nowhere_is_one_line_whose_fix_is_judged_ok(tmp_path: Path, ranks, model, fix) -> None:
    own = (*BASE, f"nproc_per_node={ranks}", *ONE, *model)
    done = run_sweep(tmp_path / "t", *own, "space.layouts=[tp3]")
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    lines = [x for x in done.stderr.splitlines() if x.startswith("flopsweep")]
    assert lines == [
        "flopsweep: Invalid config: space.layouts=[tp3]: no layout of it is a set-up on this machine's "
        f"{ranks} rank(s) (nnodes=1 x {ranks} per node; tp3 needs its degree 3 to divide the {ranks} ranks). "
        f"Fix: set space.layouts={fix}."
    ]
    assert not (tmp_path / "t").exists()
    typed = re.search(r"Fix: set (\S+)\.$", lines[0]).group(1)
    again = run_sweep(tmp_path / "u", *own, typed, "hydra.sweeper.memory_gib=1e-9")
    said = [x for x in again.stderr.splitlines() if x.startswith("flopsweep")]
    assert again.returncode == 2 and len(said) == 1, again.stderr[-2000:]
    assert said[0].startswith(  # [dp] of ONE is one set-up: nothing to tune, whatever the cap (#1061)
        "flopsweep: Invalid config: hydra.sweeper.memory_gib=1e-9: fits no set-up"
        if fix != "[dp]"
        else "flopsweep: Invalid config: hydra/sweeper=tune: one set-up ("
    ), said

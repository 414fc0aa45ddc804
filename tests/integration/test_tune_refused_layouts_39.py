"""Session 39 (docs/reliability-10.md #620): a tuning sweep whose ``space.layouts`` is placed but whose every
set-up the rules refuse for the model (``[ep2]``, gpt-tiny is dense) said "all N dropped", exit 1. Now one
``Invalid config`` line, exit 2, before any job or folder (``Tuning.taken_nowhere``), its fix the layouts
the model takes; typed back, the fix passes the rules (a memory cap that fits nothing is then the only
reason left: ``memory_gib``'s own exit-2 line). A subprocess is the point: the sweeper runs inside Hydra."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import run_sweep

OWN = (
    "hydra/sweeper=tune",
    "device=cpu",
    "nproc_per_node=2",
    "space.backends=[fsdp]",
    "space.checkpointing=[none]",
    "space.micro_batches=[2]",
    "space.precisions=[fp32]",
)


@pytest.mark.slow
def test_a_layout_the_model_refuses_everywhere_is_one_line_whose_fix_passes(tmp_path: Path) -> None:
    done = run_sweep(tmp_path / "t", *OWN, "space.layouts=[ep2]")
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    lines = [x for x in done.stderr.splitlines() if x.startswith("flopsweep")]
    assert len(lines) == 1 and lines[0].startswith(
        "flopsweep: Invalid config: space.layouts=[ep2]: the rules refuse every set-up of its layouts for "
        "this model (ep2 on 1x2 rank(s): parallel.ep=2: needs a mixture-of-experts model"
    ), lines
    assert not (tmp_path / "t").exists()
    typed = re.search(r"Fix: set (space\.layouts=\[[\w,]*\])", lines[0]).group(1)
    assert typed == "space.layouts=[dp]"
    again = run_sweep(tmp_path / "u", *OWN, typed, "hydra.sweeper.memory_gib=1e-9")
    said = [x for x in again.stderr.splitlines() if x.startswith("flopsweep")]
    # the layouts pass; the space's one set-up is refused next (#1061: before the memory cap's check)
    assert again.returncode == 2 and len(said) == 1 and "nothing to tune" in said[0], again.stderr[-2000:]
    assert "space.layouts" not in said[0]

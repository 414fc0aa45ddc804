"""Session 39 (docs/reliability-10.md #620): a plan whose every layout the rules refuse for the model
(``space.layouts=[ep2]`` on a dense model) planned, then ended "all 90 dropped", exit 1. It is now one
``Invalid config`` line before Hydra (and in the job's own check), its fix the layouts the model takes
(:func:`flopsweep.layout_fit.taken_nowhere_problem`); typed back, the fix is accepted. A space with one
layout the model takes, or whose every layout is refused for a reason no layout fixes, is left to the plan."""

from __future__ import annotations

import re

import pytest

from flopsweep.config import ConfigError, RunConfig
from flopsweep.job.plandecide import named_clusters, placed_nowhere_problem
from flopsweep.plan_command_line import command_line_problem
from flopsweep.space import Space

NARROW = ["space.checkpointing=[none]", "space.micro_batches=[2]"]


@pytest.mark.parametrize(
    ("model", "layouts", "why", "fix"),
    [
        ([], "[ep2]", "needs a mixture-of-experts model, and model.arch=gpt2 (gpt-tiny) is dense", "[dp]"),
        (["model=llama3.2-1b"], "[ep2]", "model.arch=llama (llama3.2-1b) is dense", "[dp]"),
        ([], "[ep2,ep4]", "needs a mixture-of-experts model", "[dp]"),
        ([], "[tp8]", "does not divide model.n_head=4", "[dp,tp2,tp4]"),
    ],
)
def test_a_space_whose_every_layout_the_model_refuses_is_one_line_and_its_fix_passes(
    model: list[str], layouts: str, why: str, fix: str
) -> None:
    base = ["plan=true", "plan_clusters=[H100:8]", *model, *NARROW]
    line = command_line_problem([*base, f"space.layouts={layouts}"])
    assert line is not None and "\n" not in line, line
    assert line.startswith(f"Invalid config: space.layouts={layouts}: the rules refuse every set-up"), line
    assert why in line, line
    typed = re.search(r"Fix: set (space\.layouts=\[[\w,]*\])", line).group(1)
    assert typed == f"space.layouts={fix}"
    assert command_line_problem([*base, typed]) is None


def test_the_jobs_check_refuses_the_same_space_and_a_space_with_a_taken_layout_passes() -> None:
    clusters = named_clusters(["H100:8"])
    space = Space(layouts=("ep2",), checkpointing=("none",), micro_batches=(2,))
    with pytest.raises(ConfigError) as err:
        placed_nowhere_problem(space, clusters, cfg=RunConfig())
    assert "space.layouts=[ep2]: the rules refuse every set-up" in str(err.value)
    assert str(err.value).endswith(
        "Fix: set space.layouts=[dp], or pick an MoE config (model=hf "
        "model.config=olmoe-tiny, qwen3-moe-tiny, qwen3-30b-a3b)."
    )
    mixed = Space(layouts=("dp", "ep2"), checkpointing=("none",), micro_batches=(2,))
    assert placed_nowhere_problem(mixed, clusters, cfg=RunConfig()) is None  # dp ranks; ep2's rows say why


def test_a_space_refused_for_no_layouts_fault_is_left_to_the_plans_line() -> None:
    """``space.backends=[single]`` on 8 ranks: every layout refused, ``dp`` too; the plan's last line
    says it in ``space.*`` terms."""
    line = command_line_problem(["plan=true", "plan_clusters=[H100:8]", "space.backends=[single]", *NARROW])
    assert line is None or "space.layouts" not in line

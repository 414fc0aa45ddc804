"""The tuner's space that this machine places none of is the plan's refusal, exit 2 (docs/reliability-9.md
#528): ``-m hydra/sweeper=tune device=cpu nproc_per_node=2 'space.layouts=[tp3]'`` said "tune: no set-up to
measure ... Fix: list a layout these ranks take (dp, tp2), or run on a multiple of 3 ranks", exit 1, where
``plan=true 'plan_clusters=[H100:8]' 'space.layouts=[tp3]'`` is one ``Invalid config`` line, exit 2."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest


def _refused(layouts: list[str], nnodes: int, per_node: int) -> str:
    from flopsweep.config import ConfigError
    from flopsweep.job.plandecide import placed_nowhere_problem
    from flopsweep.plan_space import Space

    here = SimpleNamespace(
        nnodes=nnodes, gpus_per_node=per_node, label=f"nnodes={nnodes} x nproc_per_node={per_node}"
    )
    with pytest.raises(ConfigError) as err:
        placed_nowhere_problem(
            Space(layouts=tuple(layouts)), [here], nowhere="this machine's ranks place none of its layouts"
        )
    return str(err.value)


@pytest.mark.parametrize(
    ("layouts", "nnodes", "per_node", "fixed"),
    [(["tp3"], 1, 2, "[dp,tp2]"), (["hsdp"], 1, 4, "[dp,tp2,tp4]"), (["tp2"], 1, 3, "[dp,tp3]")],
)
def test_a_space_this_machine_places_none_of_is_one_line_with_layouts_it_places(
    layouts: list[str], nnodes: int, per_node: int, fixed: str
) -> None:
    from flopsweep.plan_space import Space, placed

    line = _refused(layouts, nnodes, per_node)
    assert line.startswith(
        f"Invalid config: space.layouts=[{','.join(layouts)}]: this machine's ranks place none of its "
        f"layouts (on nnodes={nnodes} x nproc_per_node={per_node}, "
    )
    assert line.endswith(f"Fix: set space.layouts={fixed}."), line
    typed = re.findall(r"\w+", fixed)
    assert placed(Space(layouts=tuple(typed)), nnodes, per_node)  # the fix: set-ups this machine places


def test_the_plans_words_are_unchanged() -> None:
    from flopsweep.clusters import parse_cluster
    from flopsweep.config import ConfigError
    from flopsweep.job.plandecide import placed_nowhere_problem
    from flopsweep.plan_space import Space

    with pytest.raises(ConfigError) as err:
        placed_nowhere_problem(Space(layouts=("tp3",)), [parse_cluster("H100:8")])
    assert str(err.value) == (
        "Invalid config: space.layouts=[tp3]: no cluster of plan_clusters places any of its layouts (on "
        "H100:1x8:ib400, tp3 needs its degree 3 to divide the 8 ranks). Fix: set "
        "space.layouts=[dp,tp2,tp4,tp8]."
    )

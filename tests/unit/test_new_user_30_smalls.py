"""A new user's trial, session 30 (CPU): four small defects (docs/reliability-4.md #255-#258)."""

from __future__ import annotations

import pytest

from flopsweep.clusters import parse_cluster
from flopsweep.config import ConfigError
from flopsweep.override_grammar import syntax_problem
from flopsweep.override_parsing import override_parser
from flopsweep.tune import budget_stop


def test_a_tag_without_a_sweep_is_told_the_values_and_the_tag_apart() -> None:
    """``batch.micro_batch_size=tag(a,1,2)``: Hydra's ``tag()`` labels a sweep, its last argument; the fix
    was to quote it whole, a micro batch of the string "tag(a,1,2)". Now the fix names the values and the
    label apart (``batch.micro_batch_size=1,2 tag=a``) and the tagged sweep, each of which Hydra reads."""
    line = syntax_problem(["-m", "batch.micro_batch_size=tag(a,1,2)", "device=cpu"])
    assert line is not None and line.startswith("Invalid config: batch.micro_batch_size=tag(a,1,2): ")
    assert "batch.micro_batch_size=1,2 tag=a" in line
    assert "batch.micro_batch_size=tag(a,choice(1,2))" in line
    assert '"tag(a,1,2)"' not in line  # no longer quoted into a string
    parsed = override_parser().parse_overrides(["batch.micro_batch_size=1,2", "tag=a"])
    assert list(parsed[0].sweep_iterator()) == [1, 2] and parsed[1].value() == "a"
    (tagged,) = override_parser().parse_overrides(["batch.micro_batch_size=tag(a,choice(1,2))"])
    assert list(tagged.sweep_iterator()) == [1, 2] and tagged.value().tags == {"a"}
    # two labels, and a sweep function as the last argument, keep their shape
    two = syntax_problem(["-m", "seed=tag(a,b,1)"])
    assert two is not None and "seed=1 tag=a_b" in two and "seed=tag(a,b,choice(1))" in two


@pytest.mark.parametrize("size", ["1e9", "1E3", "8x1e2", "1e9x8"])
def test_a_gpu_count_in_exponent_form_is_refused_as_no_whole_number(size: str) -> None:
    """``plan_clusters=[H100:1e9]`` was refused with "gives no size": the line now says the count must be
    a whole number, its bounds, and a fix that parses."""
    with pytest.raises(ConfigError) as caught:
        parse_cluster(f"H100:{size}")
    line = str(caught.value)
    assert line.startswith(
        f"Invalid config: plan_clusters='H100:{size}': its size '{size}' is not a GPU count "
    )
    assert "positive whole numbers in digits 0-9 (at most 1024 nodes of 128 GPUs)" in line
    assert "gives no size" not in line
    assert "Fix: write the count as a whole number, e.g. plan_clusters=[H100:8] (one node of 8)" in line
    assert parse_cluster("H100:8").world_size == 8 and parse_cluster("H100:128x8").world_size == 1024


def test_a_cluster_name_without_a_size_says_where_the_size_goes() -> None:
    with pytest.raises(
        ConfigError, match=r"gives no size \(a GPU count or NODESxGPUS_PER_NODE after the GPU\)"
    ):
        parse_cluster("H100")


def test_a_plan_whose_least_memory_set_up_the_rules_refuse_names_the_rule_not_memory(hydra_compose) -> None:
    """``compile_mode=max-autotune`` with ``space.compile=[true]`` on Llama 3.1 8B over 8 H100s: the rules
    refuse FSDP2 and ZeRO-3 (CUDA graphs), DDP is over memory. The over-memory fix said "fsdp or zero3 in
    space.backends", which the space lists; now it names the rule that refused them, with its own fix."""
    from flopsweep.job.planmemory import memory_fix
    from flopsweep.plan import validate
    from flopsweep.space import Space

    cfg = validate(hydra_compose(["model=llama3.1-8b", "compile=true", "compile_mode=max-autotune"]))
    space = Space(compile=(True,))
    fix = memory_fix(cfg, space, [parse_cluster("H100:8")], [])
    assert fix.startswith(
        "the set-up of least memory, fsdp dp, full checkpointing, micro batch 1, is refused by the rules, "
        "not by memory: compile_mode='max-autotune': runs CUDA graphs"
    )
    assert "compile_mode=max-autotune-no-cudagraphs" in fix and "in space.backends" not in fix
    # without the rule, the fix is memory's again: the least set-up fits on 8 H100s and is named
    plain = memory_fix(validate(hydra_compose(["model=llama3.1-8b"])), Space(), [parse_cluster("H100:8")], [])
    assert plain.startswith(
        "list the set-up of least memory, fsdp dp, full checkpointing, micro batch 1, which fits"
    )


def test_the_budget_stop_line_counts_the_round_as_the_schedule_does() -> None:
    """The schedule said "4 x 2" for round 1 and the stop line "round 1 (20 jobs)": 8 challengers had
    joined. The stop line now counts as the schedule does and names the challengers."""
    line = budget_stop(1, pool=12, target=2, challengers=8, jobs=20, cost=536.2, left=-16.0)
    assert line == (
        "budget: round 1 (12 x 2 run(s), 8 of them challengers: 20 jobs) would cost about 536 GPU-s, "
        "none left (the rounds so far ran 16 over it)"
    )
    assert budget_stop(1, pool=1, target=2, challengers=0, jobs=1, cost=40, left=3) == (
        "budget: round 1 (1 x 2 run(s): 1 job) would cost about 40 GPU-s, 3 left"
    )

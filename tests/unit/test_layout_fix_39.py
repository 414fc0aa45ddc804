"""Session 39 (docs/reliability-9.md #480): a plan's refusal of ``space.layouts`` that no cluster places
(``[tp3]`` on ``H100:8``) listed every degree dividing the ranks, ``space.layouts=[dp,tp2,tp4,tp8]``, and
gpt-tiny's 4 heads refused each ``tp8`` set-up (typed back, 240 of its 360 set-ups dropped, every ``tp8``
one). The layouts a fix lists are now :func:`flopsweep.layout_fit.taken_layouts`': placed on the cluster
and accepted by the rules for the model in a set-up of the space. Each fix, typed back, passes the command
line's check and plans, for each layout it lists, at least one ``ok`` set-up (the plan's own
:func:`~flopsweep.plan_space.candidates`).
"""

from __future__ import annotations

import dataclasses
import re

import pytest

from flopsweep.config import ConfigError, RunConfig
from flopsweep.job.plandecide import named_clusters, placed_nowhere_problem
from flopsweep.layout_fit import command_line_model, plan_refusal, taken_layouts
from flopsweep.plan_command_line import command_line_problem
from flopsweep.plan_space import candidates
from flopsweep.space import Space

NARROW = ["space.backends=[fsdp]", "space.checkpointing=[none]", "space.micro_batches=[8]"]
"""One set-up per layout: each layout of a fix is planned on its own (a micro batch of 8: a pipeline's
stages divide it; under ``space.micro_batches=[1]`` no ``ppN`` is taken, and the fix says ``[dp]``)."""


def _fix(line: str) -> str:
    return re.search(r"Fix: set (space\.layouts=\[[\w,]*\])\.$", line).group(1)


@pytest.mark.parametrize(
    ("clusters", "layouts", "model", "fix"),
    [
        ("[H100:8]", "[tp3]", [], "[dp,tp2,tp4]"),
        ("[H100:8]", "[tp3]", ["model=llama-tiny", "model.n_kv_head=1"], "[dp]"),  # 1 KV head: no tpN
        ("[H100:8]", "[tp3]", ["model.n_head=8"], "[dp,tp2,tp4,tp8]"),
        ("[H100:8]", "[pp3]", ["model.n_layer=4"], "[dp,pp2,pp4]"),  # 4 layers: no pp8
        ("[H100:16]", "[ep3]", ["model=llama-tiny"], "[dp]"),  # a dense model: no epN
        ("[H100:2x4]", "[cp3]", [], "[dp,cp2,cp4]"),  # seq_len 128, 4 heads: no cp8
    ],
)
def test_a_fix_lists_the_layouts_the_model_takes_and_each_plans(
    clusters: str, layouts: str, model: list[str], fix: str
) -> None:
    base = ["plan=true", f"plan_clusters={clusters}", *model, *NARROW]
    line = command_line_problem([*base, f"space.layouts={layouts}"])
    assert line is not None and "\n" not in line
    assert line.startswith(f"Invalid config: space.layouts={layouts}: no cluster of plan_clusters places")
    typed = _fix(line)
    assert typed == f"space.layouts={fix}"
    assert command_line_problem([*base, typed]) is None
    values = {"model": [m.partition("=")[2] for m in model if m.startswith("model=")]}
    values.update({m.partition("=")[0]: [int(m.partition("=")[2])] for m in model if m.startswith("model.")})
    cfg = command_line_model({k: v for k, v in values.items() if v})
    cluster = named_clusters([clusters.strip("[]")])
    for layout in fix.strip("[]").split(","):
        space = Space(layouts=(layout,), backends=("fsdp",), checkpointing=("none",), micro_batches=(8,))
        rows = candidates(cfg, space, cluster).rows
        assert [r.status for r in rows] == ["ok"], (layout, [r.reason for r in rows])


def test_the_jobs_check_gives_the_command_lines_line_for_the_composed_model() -> None:
    clusters = named_clusters(["H100:8"])
    cfg = command_line_model({"model": ["llama-tiny"], "model.n_kv_head": [1]})
    with pytest.raises(ConfigError) as caught:
        placed_nowhere_problem(Space(layouts=("tp3",)), clusters, cfg=cfg)
    said = command_line_problem(
        [
            "plan=true",
            "plan_clusters=[H100:8]",
            "space.layouts=[tp3]",
            "model=llama-tiny",
            "model.n_kv_head=1",
        ]
    )
    assert str(caught.value) == said and said.endswith("Fix: set space.layouts=[dp].")


def test_a_layout_accepted_by_some_set_up_of_the_space_is_listed() -> None:
    """tp2 is refused under fp8 (no float8 tensor-parallel plan) and accepted under bf16: listed where
    the space lists both precisions, not where it lists fp8 alone."""
    (cluster,) = named_clusters(["H100:8"])
    judge = plan_refusal(RunConfig(), cluster)
    both = Space(layouts=("tp3",), precisions=("fp8", "bf16"), backends=("fsdp",))
    assert taken_layouts(both, 1, 8, judge) == ["dp", "tp2", "tp4"]
    fp8 = dataclasses.replace(both, precisions=("fp8",))
    assert taken_layouts(fp8, 1, 8, judge) == ["dp"]


def test_a_model_only_hydra_composes_is_left_to_the_jobs_check() -> None:
    """``model=hf``'s shape is its config.json's: the command line's check reads no model and passes."""
    assert command_line_model({"model": ["hf"]}) is None
    assert command_line_model({"model": ["${oc.env:M}"]}) is None
    line = [
        "plan=true",
        "plan_clusters=[H100:8]",
        "space.layouts=[tp3]",
        "model=hf",
        "model.config=qwen3-tiny",
    ]
    assert command_line_problem(line) is None


@pytest.mark.parametrize(
    ("models", "fix"),
    [(["model=gpt-tiny,llama-tiny"], "[dp,tp2]"), (["model.n_head=4,8"], "[dp,tp2,tp4]")],
)
def test_a_sweeps_fix_lists_the_layouts_every_model_takes(models: list[str], fix: str) -> None:
    """``-m model=gpt-tiny,llama-tiny``: llama-tiny's 2 KV heads take no tp4; the fix is each job's."""
    base = ["-m", "plan=true", "plan_clusters=[H100:8]", *models, *NARROW]
    line = command_line_problem([*base, "space.layouts=[tp3]"])
    assert line is not None and _fix(line) == f"space.layouts={fix}"
    assert command_line_problem([*base, f"space.layouts={fix}"]) is None
    key, _, listed = models[0].partition("=")
    cluster = named_clusters(["H100:8"])
    for value in listed.split(","):
        cfg = command_line_model({key: [value if key == "model" else int(value)]})
        for layout in fix.strip("[]").split(","):
            space = Space(layouts=(layout,), backends=("fsdp",), checkpointing=("none",), micro_batches=(8,))
            assert [r.status for r in candidates(cfg, space, cluster).rows] == ["ok"], (value, layout)


@pytest.mark.parametrize(
    ("model", "said"),
    [
        ("model.n_head=0", "Invalid config: model.n_head=0: must be a positive integer."),
        ("model.n_head=abc", "Invalid config: model.n_head='abc': is not a whole number."),
        # the key the command line set, and its fix that key's (docs/reliability-11.md #780)
        ("model.n_head=3", "Invalid config: model.n_head=3: does not divide model.n_embd=128 (each head"),
    ],
)
def test_a_model_no_layout_takes_is_refused_by_its_own_line_first(model: str, said: str) -> None:
    """A model that refuses even ``dp`` is the thing to fix: its own line, not ``space.layouts=[dp]``
    (``model.n_head=abc``, of the wrong type, is read by no rule: the type's own line, no traceback)."""
    from run import refusal  # every check before Hydra, as run.py runs them

    line = refusal(["plan=true", "plan_clusters=[H100:8]", "space.layouts=[tp3]", model])
    assert line is not None and line.removeprefix("flopsweep: ").startswith(said), line
    assert "space.layouts" not in line and "\n" not in line.strip()

"""``space.compile``: a plan (and the tuner) enumerates compiled and eager set-ups, each predicted from
the records of its own compile setting (:mod:`flopsweep.plan_space`); without it the job's own
``compile`` is kept, the set-ups and their override lines as before."""

from __future__ import annotations

import csv
import io
import json

import pytest

from flopsweep import forecast
from flopsweep import plan_space as ps
from flopsweep import space as sp
from flopsweep.clusters import parse_cluster
from flopsweep.config import ConfigError
from flopsweep.plan_command_line import command_line_problem

LLAMA8B = ["model=llama3.1-8b", "model.seq_len=8192"]
TITAN = sp.Space(
    backends=("fsdp",),
    layouts=("dp",),
    checkpointing=("selective",),
    precisions=("bf16", "fp8"),
    micro_batches=(2,),
    compile=(False, True),
    min_headroom=0.05,
)
"""torchtitan's Llama 3.1 8B set-up (benchmarks/plan_llama8b.py), eager and compiled."""


def test_space_compile_doubles_the_set_ups_and_its_default_adds_none(hydra_compose) -> None:
    """``space.compile=[false,true]`` gives each set-up twice, compiled and eager, in the lists' order
    (compile inside precision); the default (``[]``) gives each once, its ``compile`` None (the job's)."""
    cfg = hydra_compose(["space.compile=[false,true]", "space.layouts=[dp]", "space.backends=[fsdp]"])
    space = sp.Space.from_config(cfg.space)
    assert space.compile == (False, True)
    assert space.combinations() == 1 * 1 * 3 * 1 * 5 * 2 == len(sp.setups(space))
    assert [(s.checkpointing, s.compile) for s in sp.setups(space)[:10]] == [("none", False)] * 5 + [
        ("none", True)
    ] * 5
    default = sp.Space.from_config(hydra_compose([]).space)
    assert default.compile == () and default.combinations() == 6 * 6 * 3 * 1 * 5
    assert {s.compile for s in sp.setups(default)} == {None}
    assert sp.Space.from_config(hydra_compose(["space.compile=[true,true]"]).space).compile == (True,)


@pytest.mark.parametrize(
    ("value", "said"), [("yes", "yes"), (1, "1"), (0, "0"), ("true", "'true'"), ("1", "'1'"), (None, "null")]
)
def test_a_compile_value_that_is_not_true_or_false_is_one_line_naming_it(value, said) -> None:
    """``Space.check`` refuses a value other than True or False, naming the key, the list and the fix
    (a string ``'true'`` too: Hydra's ``[true]`` is a bool, a quoted one is not), the value as typed
    (``null``, not ``None``; ``yes``, not ``'yes'``; quoted where Hydra would read another type)."""
    with pytest.raises(ConfigError) as err:
        sp.Space(compile=(False, value)).check()
    assert str(err.value) == (
        f"Invalid config: space.compile=[false,{said}]: {said} is not true or false. "
        "Fix: list true and/or false, e.g. space.compile=[false,true]."
    )


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("space.compile=[maybe]", "space.compile=[maybe]: maybe is not true or false. Fix: list true"),
        ("space.compile=[1]", "space.compile=[1]: 1 is not true or false. Fix: list true and/or false"),
        ("space.compile=true", "space.compile=true: is one value, not a list. Fix: write a list: "),
    ],
)
def test_a_bad_space_compile_is_refused_before_hydra(given: str, said: str) -> None:
    """A plan's command line with a bad ``space.compile`` is one line before Hydra makes the run's
    folder (``run.py``'s refusal): the ``Space.check`` line, or the typed list's for one bare value, whose
    fix writes ``[true]`` (it wrote Python's ``[True]``)."""
    from run import refusal

    line = refusal(["plan=true", "plan_clusters=[H100:8]", given])
    assert line is not None and said in line and "\n" not in line, line
    assert command_line_problem(["plan_clusters=[H100:8]", "space.compile=[false,true]"]) is None
    if given.endswith("=true"):
        assert line.endswith("space.compile=[true]."), line


def test_the_override_line_names_compile_only_where_space_compile_gives_it() -> None:
    """The set-up's overrides say ``compile=true|false`` after the precision where ``space.compile``
    gave it, as the other axes print theirs; a set-up of the default space keeps the job's, unsaid."""
    kw = {"backend": "fsdp", "layout": "dp", "checkpointing": "none", "precision": "bf16", "micro_batch": 2}
    compiled = sp.Setup(**kw, compile=True).setup_overrides(1, 8)
    assert compiled == [
        "backend=fsdp",
        "activation_checkpointing=none",
        "precision=bf16",
        "compile=true",
        "batch.micro_batch_size=2",
    ]
    assert "compile=false" in sp.Setup(**kw, compile=False).overrides(parse_cluster("H100:8"))
    assert not any(o.startswith("compile=") for o in sp.Setup(**kw).overrides(parse_cluster("H100:8")))


def test_compiled_rows_are_predicted_from_compiled_records(hydra_compose) -> None:
    """Each row of ``space.compile=[false,true]`` is predicted from shipped records of its own compile
    setting (:func:`flopsweep.nearest.candidates` requires it): the nearest set-up's records its source
    names ran with ``compile`` as the row's, and a compiled row is not the eager row's prediction (the
    plan kept the job's ``compile`` and gave both one figure, benchmarks/plan/llama3.1-8b.md before
    session 29)."""
    cfg = hydra_compose(LLAMA8B)
    records = forecast.prediction_records(cfg)
    compile_of = {name: bool(r["config"]["compile"]) for name, r in records}
    result = ps.candidates(cfg, TITAN, [parse_cluster("H100-NVL:1x8:ib400")], records)
    assert len(result.rows) == 4 and {r.status for r in result.rows} == {"ok"}
    by = {(r.setup.precision, r.setup.compile): r for r in result.rows}
    for (_, compiled), row in by.items():
        nearest = row.prediction_source.split("nearest (shipped records): ", 1)[1].split(" (", 1)[0]
        named = nearest.split(", ")  # the nearest set-up's records (the optimizer's: any compile)
        assert named and {compile_of[n] for n in named} == {compiled}, row.prediction_source
    for precision in ("bf16", "fp8"):
        eager, compiled = by[(precision, False)], by[(precision, True)]
        assert compiled.predicted_tokens_per_s_per_gpu != eager.predicted_tokens_per_s_per_gpu
    fp8 = by[("fp8", True)].prediction_source.split("nearest (shipped records): ", 1)[1].split(" (", 1)[0]
    precision_of = {name: r["config"]["precision"]["name"] for name, r in records}
    assert {precision_of[n] for n in fp8.split(", ")} == {"fp8"}, fp8  # a compiled fp8 record, not bf16's


def test_the_rows_csv_and_json_carry_the_compile_column(hydra_compose) -> None:
    """``plan.csv`` and ``plan_format=json`` give each row its ``compile`` (blank / null where the job's
    own was kept), and a sweep's ``plan.csv`` reads it back into the set-up."""
    from flopsweep.job.plansweep import row_of

    cfg = hydra_compose(LLAMA8B)
    one = sp.Space(backends=("fsdp",), layouts=("dp",), checkpointing=("full",), micro_batches=(1,))
    cluster = [parse_cluster("H100:8")]
    rows = ps.candidates(cfg, sp.Space(**{**one.__dict__, "compile": (True, False)}), cluster).rows
    plain = ps.candidates(cfg, one, cluster).rows
    assert [r.as_dict()["compile"] for r in rows] == [True, False] and plain[0].as_dict()["compile"] is None
    assert ps.COLUMNS.index("compile") == ps.COLUMNS.index("precision") + 1
    assert json.loads(json.dumps([r.as_dict() for r in rows]))[0]["compile"] is True
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=ps.COLUMNS)
    writer.writeheader()
    writer.writerows([r.as_dict() for r in [*rows, *plain]])
    read = [row_of(cells).setup.compile for cells in csv.DictReader(io.StringIO(text.getvalue()))]
    assert read == [True, False, None]


def test_the_tuner_refuses_compile_beside_space_compile_and_sets_it(hydra_compose) -> None:
    """``hydra/sweeper=tune`` with ``space.compile`` takes ``compile`` from the space (its set-ups'
    overrides say it): a ``compile=`` override beside it is one line naming ``space.compile``; without
    ``space.compile`` the job's ``compile=true`` is kept, as before."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from hydra_plugins.flopsweep_tune import TuneSweeper

    def space(over: list[str]):
        sweeper = TuneSweeper()
        sweeper.config = hydra_compose.config(over, hydra=True)
        return sweeper.space(OverridesParser.create().parse_overrides(over))

    given = ["device=cpu", "space.compile=[false,true]", "space.backends=[single]", "space.layouts=[dp]"]
    with pytest.raises(ConfigError) as err:
        space([*given, "compile=true"])
    assert str(err.value).startswith(
        "Invalid config: compile=true: a tuning sweep over space.* takes it from the space "
        "(space.compile sets each set-up's compile). Fix: "
    )  # not "(space.layouts: one machine size)", whose fix led back to compile=true (session 29)
    assert str(err.value).endswith("Fix: give it as space.compile=[...], or drop the space.* overrides.")
    _, (setups, _) = space(given)
    assert {s.compile for s in setups} == {False, True}
    _, (setups, _) = space(["device=cpu", "compile=true", *given[2:]])
    assert {s.compile for s in setups} == {None}

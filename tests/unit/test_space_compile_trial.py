"""Session 29's trial of ``space.compile`` and ``cpN`` (docs/reliability-3.md, rows 231 on): ``compile_mode``
beside ``space.compile`` refused with a fix that led back to the refusal, ``compile=true`` beside it
ignored by the plan, layout degrees neither read as numbers nor bounded, fixes that were refused when
typed. ``run.refusal`` is the line ``run.py`` prints before Hydra (exit 2), nothing written."""

from __future__ import annotations

import re

import pytest

from flopsweep import compile_levers
from flopsweep import plan_space as ps
from flopsweep import space as sp
from flopsweep.clusters import parse_cluster
from flopsweep.config import ConfigError, SpaceConfig
from run import refusal

PLAN = ["plan=true", "plan_clusters=[H100:8]"]
TUNE = ["-m", "hydra/sweeper=tune", "device=cpu"]


@pytest.mark.parametrize("reader", [PLAN, TUNE])
@pytest.mark.parametrize("lever", ["compile_mode=max-autotune-no-cudagraphs", "compile_scope=model"])
def test_a_compile_lever_acts_where_space_compile_lists_true(reader, lever):
    """Was: ``does nothing without compile ... Fix: write compile=true``, and with ``compile=true`` the
    tuner's "takes it from the space (space.layouts: one machine size)", whose fix led back. Now the lever
    applies to the compiled set-ups; beside ``space.compile=[false]`` alone its fix lists true, and passes."""
    assert refusal([*reader, lever, "space.compile=[true]"]) is None
    assert refusal([*reader, lever, "space.compile=[false,true]"]) is None
    key = lever.partition("=")[0]
    line = refusal([*reader, lever, "space.compile=[false]"])
    assert line == (
        f"Invalid config: {lever}: does nothing without compile: space.compile=[false] sets no set-up's "
        f"compile to true. Fix: write space.compile=[false,true] {lever} in place of space.compile=[false], "
        f"or drop {key}."
    )
    assert refusal([*reader, "space.compile=[false,true]", lever]) is None


def test_without_space_compile_a_lever_still_needs_compile_true():
    line = refusal([*PLAN, "compile_mode=reduce-overhead", "space.compile=[]"])
    assert line is not None and "Fix: write compile=true compile_mode=reduce-overhead" in line, line


@pytest.mark.parametrize(("reader", "who"), [(PLAN, "a plan"), (TUNE, "a tuning sweep")])
@pytest.mark.parametrize(("given", "listed"), [("compile=true", "[true]"), ("compile=false", "[false]")])
def test_compile_beside_space_compile_is_refused_before_hydra(reader, who, given, listed):
    """Was: the plan ran, ignoring ``compile=true`` (its set-ups' compile the space's); the tuner refused it
    after Hydra had made ``multirun/<date>/``. Now one line before Hydra for both; the fix passes."""
    line = refusal([*reader, given, "space.compile=[false,true]"])
    assert line == (
        f"Invalid config: {given}: {who} over space.* takes it from the space (space.compile sets each "
        f"set-up's compile). Fix: give it as space.compile={listed} in place of both, or drop space.compile "
        "to keep the job's own."
    )
    assert refusal([*reader, f"space.compile={listed}"]) is None
    assert refusal([*reader, given, "space.compile=[]"]) is None  # [] keeps the job's own compile


def test_the_tuners_own_refusal_of_compile_names_space_compile_not_the_machine_size(hydra_compose):
    """The sweep's check (a ``+sweep`` file may set ``compile``): its reason is ``space.compile``'s."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from hydra_plugins.flopsweep_tune import TuneSweeper

    over = ["device=cpu", "space.compile=[true]", "compile=true", "space.layouts=[dp]"]
    sweeper = TuneSweeper()
    sweeper.config = hydra_compose.config(over, hydra=True)
    with pytest.raises(ConfigError) as err:
        sweeper.space(OverridesParser.create().parse_overrides(over))
    assert str(err.value) == (
        "Invalid config: compile=true: a tuning sweep over space.* takes it from the space (space.compile "
        "sets each set-up's compile). Fix: give it as space.compile=[...], or drop the space.* overrides."
    )


def test_an_eager_set_up_drops_the_compile_levers(hydra_compose):
    """``space.compile=[false,true] compile_mode=...``: the eager set-ups run without the lever (the job's
    ``compile=false`` refuses one), the compiled ones with it; a plan's rows of both are judged."""
    from hydra_plugins.flopsweep_tune.tuning import candidates

    one = {"backends": ("single",), "layouts": ("dp",), "checkpointing": ("none",), "micro_batches": (1,)}
    setups = sp.setups(sp.Space(**one, compile=(False, True)))
    combos = [["device=cpu", f"compile_mode={m}"] for m in ("default", "max-autotune-no-cudagraphs")]
    made = [c.overrides for c in candidates(combos, {"compile_mode"}, setups, (1, 1))]
    assert made == [
        ("device=cpu", "backend=single", "activation_checkpointing=none", "precision=bf16", "compile=false",
         "batch.micro_batch_size=1"),
        ("device=cpu", "compile_mode=default", "backend=single", "activation_checkpointing=none",
         "precision=bf16", "compile=true", "batch.micro_batch_size=1"),
        ("device=cpu", "compile_mode=max-autotune-no-cudagraphs", "backend=single",
         "activation_checkpointing=none", "precision=bf16", "compile=true", "batch.micro_batch_size=1"),
    ]  # fmt: skip
    for over in made:  # each passes the compile levers' rules, which refuse a lever beside compile=false
        composed = hydra_compose(list(over))
        assert composed.compile == ("compile=true" in over) and compile_levers.check(composed) is None
    cfg = hydra_compose(["compile_mode=max-autotune-no-cudagraphs", "compile=true"])
    eager, compiled = (ps.setup_config(cfg, s, parse_cluster("H100:8")) for s in setups)
    assert (eager.compile, eager.compile_mode, compiled.compile_mode) == (
        False,
        "default",
        "max-autotune-no-cudagraphs",
    )


@pytest.mark.parametrize(
    ("layouts", "read"),
    [
        (["cp2", "cp02"], ("cp2",)),
        (["tp2", "tp02"], ("tp2",)),
        (["dp", "cp1"], ("dp",)),
        (["tp1", "pp01", "ep1"], ("dp",)),
        (["hsdp", "pp002", "ep4"], ("hsdp", "pp2", "ep4")),
    ],
)
def test_a_layouts_degree_is_read_as_a_number(layouts, read):
    """Was: ``[cp2,cp02]`` two equal set-ups (two rows, two tuner jobs), ``[dp,cp1]`` two dp set-ups. A
    degree is read as a number, as ``space.micro_batches=[02]`` is 2; a degree of 1 is ``dp``."""
    assert sp.Space.from_config(SpaceConfig(layouts=layouts)).layouts == read


@pytest.mark.parametrize("layout", ["cp99999999999999999999", "tp1024000001", "ep" + "9" * 5000])
def test_a_layout_degree_beyond_any_world_size_is_refused_before_hydra(layout):
    """Was: ``[cp99999999999999999999]`` taken, every row dropped, ``plan.csv`` written, exit 1."""
    assert sp.max_world_size() == 1024 * 10**6
    line = refusal([*PLAN, f"space.layouts=[{layout}]"])
    assert line is not None and line.startswith(f"Invalid config: space.layouts=[{layout[:14]}"), line
    assert f"a degree beyond the most ranks a run has ({10**6 * 1024}: nnodes x nproc_per_node)." in line
    fix = line.rpartition("e.g. ")[2].rstrip(".")
    assert fix == f"space.layouts=[dp,{layout[:2]}2]" and refusal([*PLAN, fix]) is None
    assert sp.Space.from_config(SpaceConfig(layouts=["tp1024000000"])).layouts == ("tp1024000000",)


def test_a_degree_of_zero_is_refused_however_written():
    """``cp00`` passed the check (only ``cp0`` was refused) and divided by zero."""
    for layout in ("cp0", "cp00", "tp000"):
        with pytest.raises(ConfigError, match=r"takes dp, hsdp, tpN, ppN, cpN and epN \(N a degree of 1"):
            sp.Space.from_config(SpaceConfig(layouts=["dp", layout]))


@pytest.mark.parametrize(
    ("given", "fix"),
    [
        ("space.compile=yes", "space.compile=[true]"),
        ("space.compile=1", "space.compile=[true]"),
        ("space.compile=off", "space.compile=[false]"),
        ("space.compile={a:1}", "space.compile=[false,true]"),
        ("space.compile=null", "space.compile=[false,true]"),
        ("space.compile=[null]", "space.compile=[false,true]"),
        ("space.compile=[maybe]", "space.compile=[false,true]"),
        ("space.layouts=''", "space.layouts=[dp,hsdp,tp2,tp4,tp8,pp2]"),
        ("space.layouts=null", "space.layouts=[dp,hsdp,tp2,tp4,tp8,pp2]"),
        ("space.micro_batches=[1e30]", "space.micro_batches=[1,2,4,8,16]"),
    ],
)
@pytest.mark.parametrize("reader", [PLAN, TUNE, []])
def test_a_fix_of_a_space_value_is_a_value_the_key_takes(given, fix, reader):
    """Was: ``Fix: space.compile=[yes]`` (``[1]``, ``[{'a': 1}]``), ``space.layouts=[]``, ``e.g.
    space.compile=[a,b]``, each refused in turn. The fix is a list the key takes; without a reader of
    ``space.*`` the line that follows is the one naming the reader."""
    line = refusal([*reader, given])
    assert line is not None and line.startswith(f"Invalid config: {given}: "), line  # as typed
    told = re.findall(r"(space\.\w+=\[[^\]]*\])\.?(?:;|$)", line)  # the list the fix writes
    if given == "space.micro_batches=[1e30]" and reader:
        fix = "space.micro_batches=[1,2,4]"  # Space.check's line, the plan's and the tuner's
    assert told == [fix], line
    fixed = refusal([*reader, told[0]])
    assert fixed is None if reader else "this command has neither" in fixed, fixed


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("space.compile=[null]", "space.compile=[null]: null is not true or false."),
        ("space.compile=[maybe]", "space.compile=[maybe]: maybe is not true or false."),
        ("space.compile=[false,'true']", "space.compile=[false,'true']: 'true' is not true or false."),
        ("space.backends=[ddp,nope]", "space.backends=[ddp,nope]: nope is not one of"),
        ("space.micro_batches=[1e30]", "space.micro_batches=[1e30]: lists a micro batch beyond"),
        ("space.min_headroom=1e400", "space.min_headroom=1e400: is a share in [0, 1)."),
    ],
)
def test_a_space_value_is_shown_as_typed(given, said):
    """Was: ``[None]``, ``['maybe']``, ``1000000000000000019884624838656`` for ``1e30``, ``inf`` for
    ``1e400``: Python's reprs of what Hydra parsed. A quoted ``'true'`` stays quoted (it is no bool)."""
    line = refusal([*PLAN, given])
    assert line is not None and line.startswith(f"Invalid config: {said}"), line

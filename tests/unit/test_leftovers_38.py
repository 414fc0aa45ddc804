"""Session 38's leftovers: defects earlier helpers found and left, each refused in one line whose fix is
itself accepted. Reliability rows 457 on (docs/reliability-8.md):

- 491: a plan whose ``space.layouts`` no cluster places (``[tp3]`` on ``H100:8``) printed an empty table,
  "dropped: none; 90 left out" then "all 90 dropped", exit 1;
- 492: a tuning whose every set-up is over ``hydra.sweeper.memory_gib=1e-9`` said ``9.31e-10 GiB`` in 36
  ``pruned`` lines, then exit 1;
- 493: ``hydra.launcher.timeout_min=true`` said "each job's deadline must be positive" (pool) or "is not a
  whole number" (submitit): now "is a boolean";
- 494: a tab in an override was refused as a control character "which a terminal would obey";
- 495: a look-alike in a sweep file's defaults entry naming a sweep file or ``_self_`` (``- smоke``) got
  a did-you-mean without the character named, as a pick's line names it;
- 496: a sweep file's ``- /GROUP: null`` (no ``override``) of a group the primary config does not pick
  was not checked (exit 0), where ``- override /backend: null`` is refused;
- 497: a sweep file's ``tag: ${seed}`` with ``hydra.sweep.subdir: ${tag}`` and ``seed`` swept was refused as
  one folder for every job (a key only a file sets was taken as the same in every job).
"""

from __future__ import annotations

import re

import pytest

from flopsweep.config import ConfigError
from flopsweep.job.plandecide import named_clusters, placed_nowhere_problem
from flopsweep.plan_command_line import command_line_problem
from flopsweep.space import Space


def _fix(line: str) -> str:
    """The ``KEY=VALUE`` a line's fix says to set."""
    return re.search(r"Fix: set (\S+)\.$", line).group(1)


@pytest.mark.parametrize(
    ("clusters", "layouts", "fix"),
    [
        ("[H100:8]", "[tp3]", "space.layouts=[dp,tp2,tp4]"),  # gpt-tiny's 4 heads: no tp8 (#480)
        ("[H100:8]", "[hsdp]", "space.layouts=[dp,tp2,tp4]"),
        ("[H100:8,H100:2x4]", "[pp3,tp3]", "space.layouts=[dp,pp2,tp2,tp4]"),  # its 2 layers: pp2 alone
    ],
)
def test_a_space_no_cluster_places_is_one_line_whose_fix_plans(clusters: str, layouts: str, fix: str):
    base = ["plan=true", f"plan_clusters={clusters}"]
    line = command_line_problem([*base, f"space.layouts={layouts}"])
    assert line is not None and line.startswith(f"Invalid config: space.layouts={layouts}: no cluster of")
    assert "on H100:1x8:ib400," in line and "\n" not in line
    assert _fix(line) == fix
    assert command_line_problem([*base, fix]) is None


def test_a_space_one_cluster_places_is_planned():
    """gpt-tiny's 4 heads take no ``tp3`` on ``H100:3`` (refused since session 39, #620): ``pp3`` of 3
    layers at a micro batch of 3 is taken there."""
    over = ["model.n_layer=3", "space.micro_batches=[3]", "space.layouts=[pp3]"]
    assert command_line_problem(["plan=true", "plan_clusters=[H100:8,H100:3]", *over]) is None


def test_the_jobs_check_refuses_it_as_the_command_line_does():
    clusters = named_clusters(["H100:8"])
    with pytest.raises(ConfigError) as caught:
        placed_nowhere_problem(Space(layouts=("tp3",)), clusters)
    said = command_line_problem(["plan=true", "plan_clusters=[H100:8]", "space.layouts=[tp3]"])
    assert str(caught.value) == said


@pytest.mark.parametrize(
    ("peaks", "headroom", "fix"), [((0.00896, 0.02), 0.0, 0.02), ((0.0221, 0.0224), 0.1, 0.025)]
)
def test_a_memory_cap_that_fits_nothing_is_one_line_whose_fix_fits(peaks, headroom, fix):
    """Its fix keeps two set-ups since session 43 (#1061): the least one alone is nothing to tune."""
    from flopsweep.tune import Candidate, capped_problem
    from hydra_plugins.flopsweep_tune import command_line_problem as tuner_problem

    found = [
        Candidate(i, (f"batch.micro_batch_size={i}",), f"mb{i}", pruned="over memory: ...", peak_gib=p)
        for i, p in enumerate(peaks)
    ]
    line = capped_problem(found, 1e-09, headroom)
    assert line is not None and line.startswith(
        "Invalid config: hydra.sweeper.memory_gib=1e-9: fits no set-up"
    )
    assert f"the least two, mb0 and mb1, are estimated at {peaks[0]:.3g} and {peaks[1]:.3g} GiB" in line
    typed = _fix(line.replace(" (keeps 2 set-ups), or leave it unset (the device's memory).", "."))
    assert typed == f"hydra.sweeper.memory_gib={fix:g}"
    assert tuner_problem(["-m", "hydra/sweeper=tune", typed]) is None
    assert peaks[1] <= (1 - headroom) * fix  # plan_assess.assess's test: both set-ups fit the fixed cap


def test_a_memory_cap_is_not_blamed_where_another_reason_prunes_or_none_is_set():
    from flopsweep.tune import Candidate, capped_problem

    over = Candidate(0, ("a=1",), "a=1", pruned="over memory: ...", peak_gib=1.0)
    refused = Candidate(1, ("a=2",), "a=2", pruned="refused: parallel.tp=2: ...")
    assert capped_problem([over, refused], 1e-9, 0.1) is None
    assert capped_problem([over], None, 0.1) is None


@pytest.mark.parametrize(
    ("launcher", "key", "value"),
    [
        ("pool", "timeout_min", "true"),
        ("pool", "grace_s", "false"),
        ("submitit_local", "timeout_min", "true"),
        ("slurm_local", "timeout_min", "false"),
    ],
)
def test_a_boolean_launcher_time_is_said_to_be_a_boolean(launcher: str, key: str, value: str):
    from run import refusal

    extra = {"pool": ["hydra.launcher.slots=[0,1]"], "slurm_local": ["nproc_per_node=1"]}.get(launcher, [])
    base = ["-m", "device=cpu", f"hydra/launcher={launcher}", "seed=0,1", *extra]
    line = refusal([*base, f"hydra.launcher.{key}={value}"])
    assert line is not None and f"hydra.launcher.{key}={value}: is a boolean, not a " in line, line
    assert ("minutes" if key == "timeout_min" else "seconds") in line.split(". Fix:")[0]
    fix = re.search(r"Fix: set (\S+?)[.,]? ", line + " ").group(1).rstrip(".")
    assert refusal([*base, fix]) is None, fix


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("tag=a\tb", "its value holds a tab, \\t (character 6), which is part of no key or value"),
        ("tag=a\u200bb", "its value holds an invisible character, \\u200b, ZERO WIDTH SPACE (character 6)"),
    ],
)
def test_a_tab_or_an_invisible_character_is_not_said_to_be_obeyed(typed: str, said: str):
    from run import refusal

    line = refusal([typed])
    assert line is not None and said in line and "terminal" not in line, line
    assert line.endswith("Fix: remove it from the value.")
    assert refusal([typed.replace(typed[5], "")]) is None


def _sweep_conf(tmp_path, *entries: str) -> str:
    """test_sweep_files_38's ``conf/`` (``model`` and ``backend`` picked), an ``attention`` group its
    primary config does not pick, and ``sweep/mine.yaml`` with ``entries`` as its defaults."""
    from tests.unit.test_sweep_files_38 import _conf, _defaults

    conf = _conf(tmp_path, _defaults(*entries))
    (tmp_path / "conf" / "attention").mkdir()
    for option in ("sdpa", "flex"):
        (tmp_path / "conf" / "attention" / f"{option}.yaml").write_text(f"name: {option}\n")
    return conf


def _sweep_line(conf: str) -> str | None:
    from flopsweep.option_file_keys import sweep_picks_problem
    from flopsweep.sweep_file_defaults import defaults_problem
    from tests.unit.test_sweep_files_38 import ARGV

    return defaults_problem(ARGV, conf) or sweep_picks_problem(ARGV, conf)


@pytest.mark.parametrize(
    ("entry", "note", "meant"),
    [
        ("smоke", "'о' (U+043E CYRILLIC SMALL LETTER O) looks like ASCII 'o'", "smoke"),
        ("_sеlf_", "'е' (U+0435 CYRILLIC SMALL LETTER IE) looks like ASCII 'e'", "_self_"),
    ],
)
def test_a_look_alike_sweep_file_name_names_its_character(tmp_path, entry: str, note: str, meant: str):
    line = _sweep_line(_sweep_conf(tmp_path, entry))
    assert line is not None and f"(defaults: {entry}): names no sweep file" in line
    assert line.endswith(f"; {note}). Fix: did you mean - {meant}?"), line
    assert _sweep_line(_sweep_conf(tmp_path / "fix", meant)) is None


@pytest.mark.parametrize("option", ["null", "nope"])
def test_a_pick_of_a_group_the_primary_does_not_pick_takes_the_override_rule(tmp_path, option: str):
    line = _sweep_line(_sweep_conf(tmp_path, f"/attention: {option}"))
    assert line is not None and f"(defaults: /attention: {option}): attention={option}: " in line, line
    assert "override" not in line.partition(". Fix: ")[2], line  # no default picks attention to override
    fixed = re.search(r"- (/attention: \S+?)[ ,)?]", line.partition(". Fix: ")[2] + " ").group(1)
    assert _sweep_line(_sweep_conf(tmp_path / "fix", fixed)) is None, fixed
    assert _sweep_line(_sweep_conf(tmp_path / "o", "override /backend: null")) is not None  # #426 kept


def test_a_sweep_files_own_key_is_read_through_in_its_subdir(tmp_path, monkeypatch: pytest.MonkeyPatch):
    import shutil

    from flopsweep import override_schema
    from flopsweep.sweep_subdir import fixed_subdir_problem

    conf = tmp_path / "conf"
    shutil.copytree(override_schema.CONF, conf, symlinks=False)
    monkeypatch.setattr(override_schema, "CONF", str(conf))
    mine = conf / "sweep" / "mine.yaml"
    mine.write_text("# @package _global_\ntag: ${seed}\nhydra:\n  sweep:\n    subdir: ${tag}\n")
    argv = ["-m", "+sweep=mine", "device=cpu", "seed=0,1"]
    assert fixed_subdir_problem(argv, str(conf)) is None  # Hydra resolves it to 0 and 1
    line = fixed_subdir_problem([*argv, "tag=x"], str(conf))  # the command line's one value wins
    assert line is not None and "is the same for every job" in line
    line = fixed_subdir_problem([*argv, "steps.measure=2,3"], str(conf))
    assert line is not None and "seed=0 steps.measure=2 and seed=0 steps.measure=3" in line
    fix = re.search(r"Fix: write subdir: (\S+) under", line).group(1)
    mine.write_text(f"# @package _global_\ntag: ${{seed}}\nhydra:\n  sweep:\n    subdir: {fix}\n")
    assert fixed_subdir_problem([*argv, "steps.measure=2,3"], str(conf)) is None

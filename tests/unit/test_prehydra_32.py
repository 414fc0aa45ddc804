"""Session 32's new-user trial (docs/reliability-4.md, rows 269 on): a run or sweep folder inside a folder
Hydra reads configs from, a ``++`` key no schema has, a calibration folder whose record lies too deep, and
the folders a lock made for a sweep that ran nothing. Each refusal is :func:`run.refusal`'s one line, before
Hydra; ``tests/integration/test_refusals_32.py`` runs them as a user types them."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from flopsweep import tree
from flopsweep.calibration_files import calibration_records
from flopsweep.config import ConfigError, RunConfig
from flopsweep.hydrafiles import config_folders
from flopsweep.locks import lock_sweep_dir
from run import refusal

ROOT = Path(__file__).resolve().parents[2]
BASE = ["model=gpt-tiny", "device=cpu"]
CONF, PLUGINS = "conf/, the config folder", "the Hydra plug-ins' folder"
LINKED = "conf/sweep, a config group linked in"
RUN_KEYS = [f.name for f in dataclasses.fields(RunConfig)]


def _inside(key: str, value: str, folder: Path, what: str) -> str:
    example = "multirun/my-sweep" if "sweep" in key else "outputs/my-run"
    return (
        f"Invalid config: {key}={value}: is inside {folder} ({what}), which Hydra and flopsweep read configs "
        f"and code from; the run's files there (.hydra/, multirun.yaml) would become config options of every "
        f"later command. Fix: choose a folder outside it, e.g. {key}={example}."
    )


def test_the_config_folders_are_conf_the_plugins_the_package_and_hydras_own() -> None:
    """The checkout's ``conf/``, ``hydra_plugins/`` and ``flopsweep/`` (real paths), and Hydra's configs."""
    import hydra

    found = config_folders()
    assert found[str(ROOT / "conf")] == "conf/, the config folder"
    assert found[str(ROOT / "hydra_plugins")] == "the Hydra plug-ins' folder"
    assert found[str(ROOT / "flopsweep")] == "the flopsweep package"
    assert found[os.path.realpath(Path(hydra.__file__).parent / "conf")] == "Hydra's configs"


@pytest.mark.parametrize(
    ("args", "key", "value", "folder", "what"),
    [
        ([], "hydra.run.dir", "{root}/conf", "conf", CONF),
        (["-m", "plan=true", "seed=1,2"], "hydra.sweep.dir", "{root}/conf/backend", "conf", CONF),
        ([], "hydra.run.dir", "{root}/outputs/../conf/x", "conf", CONF),
        ([], "hydra.run.dir", "{root}/flopsweep/runs", "flopsweep", "the flopsweep package"),
        ([], "hydra.run.dir", "{root}/hydra_plugins/flopsweep_slurm/conf/r", "hydra_plugins", PLUGINS),
        (["-m", "plan=true"], "hydra.sweep.dir", "{root}/sweep/mine", "sweep", LINKED),
        (["-m", "plan=true"], "hydra.sweep.dir", "{root}/conf/sweep/x", "sweep", LINKED),
    ],
)
def test_a_folder_inside_a_config_folder_is_refused_before_hydra(
    args: list[str], key: str, value: str, folder: str, what: str
) -> None:
    """It exited 0 and wrote ``conf/.hydra/`` (``+.hydra`` then a group of ``--help``), or a sweep's
    ``conf/backend/multirun.yaml`` (``backend=multirun`` then an option, refused with ConfigKeyError);
    ``..`` resolved."""
    value = value.format(root=ROOT)
    assert refusal([*args, *BASE, f"{key}={value}"]) == _inside(key, value, ROOT / folder, what)


def test_a_group_linked_into_conf_is_a_config_folder() -> None:
    """``conf/sweep`` links to ``sweep/``, the ``+sweep=`` group: a sweep's ``multirun.yaml`` or ``.hydra/``
    written under ``sweep/`` became options of ``+sweep=`` (``+sweep=mine/multirun``; docs/reliability-4.md
    #277)."""
    assert (ROOT / "conf" / "sweep").is_symlink()
    assert config_folders()[str(ROOT / "sweep")] == LINKED


def test_a_sweep_folder_hydra_cannot_resolve_yet_is_refused() -> None:
    """``hydra.sweep.dir=${hydra:runtime.cwd}/sd``: Hydra's launcher makes the folder before it sets what
    ``${hydra:...}`` reads (a 103-line traceback, exit 1; #278); a run's folder may use it (#276)."""
    value = "${hydra:runtime.cwd}/sd"
    line = refusal(["-m", *BASE, f"hydra.sweep.dir={value}"])
    assert line == (
        f"Invalid config: hydra.sweep.dir={value}: Hydra makes the sweep's folder before it sets what "
        "${hydra:...} reads, and stops on it with a traceback. Fix: write the folder itself; a relative one "
        "is taken from the folder you run in (e.g. hydra.sweep.dir=multirun/my-sweep)."
    )
    assert refusal([*BASE, f"hydra.run.dir={value}"]) is None


def test_a_link_to_the_config_folder_is_resolved(tmp_path: Path) -> None:
    """``hydra.run.dir=L/run`` where ``L`` links to ``conf/``: the real path is inside it."""
    (tmp_path / "c").symlink_to(ROOT / "conf")
    value = f"{tmp_path}/c/run"
    line = _inside("hydra.run.dir", value, ROOT / "conf", "conf/, the config folder")
    assert refusal([*BASE, f"hydra.run.dir={value}"]) == line


def test_a_folder_beside_the_config_folder_is_taken(tmp_path: Path) -> None:
    """``conf2/`` beside ``conf/`` (a name that starts the same) and a folder of the user's are not inside."""
    assert refusal([*BASE, f"hydra.run.dir={tmp_path}/conf2"]) is None
    assert refusal([*BASE, f"hydra.run.dir={tmp_path}/run"]) is None


def test_the_default_folder_made_in_the_config_folder_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from ``conf/`` with no folder named: the default ``outputs/...`` (``multirun/...``) would be
    made there; the fix says to run from another folder."""
    monkeypatch.chdir(ROOT / "conf")
    run = refusal(BASE)
    assert run is not None and run.startswith(
        f"Invalid config: hydra.run.dir=outputs/... (the default): is inside {ROOT / 'conf'} ({CONF})"
    )
    assert run.endswith("Fix: choose a folder outside it, e.g. hydra.run.dir=/path/outside/outputs/my-run, "
                        "or run from a folder outside it.")  # fmt: skip
    sweep = refusal(["-m", *BASE, "seed=1,2"])
    assert sweep is not None and sweep.startswith(
        "Invalid config: hydra.sweep.dir=multirun/... (the default)"
    )


@pytest.mark.parametrize(
    ("override", "line"),
    [
        (
            "++steps.bogus=1",
            "Invalid config: steps.bogus=1: is not a key of steps (a '++' override adds keys without "
            "checking them). Fix: drop ++steps.bogus=1 (the keys of steps are warmup, measure, "
            "max_extra_warmup, gc_freq).",
        ),
        (
            "+steps.bogus=1",
            "Invalid config: steps.bogus=1: is not a key of steps (a '+' override adds keys without "
            "checking them). Fix: drop +steps.bogus=1 (the keys of steps are warmup, measure, "
            "max_extra_warmup, gc_freq).",
        ),
        (
            "+model.n_layers=3",
            "Invalid config: model.n_layers=3: is not a key of model (a '+' override adds keys without "
            "checking them). Fix: write model.n_layer=3, without the '+' (model.n_layer is a key already).",
        ),
        (  # a key below a key the section lacks (a re-trial: refused by the job, its folder left)
            "++steps.bogus.y=1",
            "Invalid config: steps.bogus.y=1: is not a key of steps (a '++' override adds keys without "
            "checking them). Fix: drop ++steps.bogus.y=1 (the keys of steps are warmup, measure, "
            "max_extra_warmup, gc_freq).",
        ),
        (  # a key below a top-level key no schema has
            "+bogus.x=1",
            "Invalid config: bogus.x=1: is not a top-level key of the config (a '+' override adds keys "
            "without checking them). Fix: drop +bogus.x=1 (the top-level keys are "
            + ", ".join(RUN_KEYS)
            + ").",
        ),
    ],
)
def test_a_nested_key_no_schema_has_added_with_plus_is_refused_before_hydra(override: str, line: str) -> None:
    """It was refused by the job after Hydra made the run's folder, as "a '+' override" whatever was typed."""
    assert refusal([*BASE, override]) == line


def test_a_top_level_key_added_with_two_pluses_names_them() -> None:
    line = refusal([*BASE, "++bogus=1"])
    assert line is not None and line.startswith(
        "Invalid config: bogus=1: is not a top-level key of the config (a '++' override adds keys without"
    )


@pytest.mark.parametrize(
    "override",
    [
        "++steps.measure=3",
        "++model.n_layer=3",
        "+attention.window_blocks=2",
        "+sweep=seed-fsdp",  # plain values only: +sweep=smoke's axes run only under -m (#350)
        "++hydra.job.name=x",
    ],
)
def test_a_key_the_schema_has_or_another_option_has_is_left_alone(override: str) -> None:
    """``++`` of a key the config has sets it; a key of another option of the group is the job's to name."""
    assert refusal([*BASE, override]) is None


def test_a_record_nested_too_deep_is_named_with_the_limit(tmp_path: Path) -> None:
    """A ``metrics.json`` 40 levels down: it said "holds no metrics.json" though one is there."""
    deep = tmp_path.joinpath(*[f"d{i}" for i in range(1, 41)])
    deep.mkdir(parents=True)
    (deep / "metrics.json").write_text("{}")
    with pytest.raises(ConfigError) as caught:
        calibration_records(str(tmp_path))
    below = tmp_path.joinpath(*[f"d{i}" for i in range(1, tree.MAX_DEPTH + 1)])
    assert str(caught.value) == (
        f"Invalid config: predict.calibration='{tmp_path}': holds no metrics.json within {tree.MAX_DEPTH} "
        f"levels: folders nested deeper are not searched (flopsweep's limit of a walk; not entered below "
        f"{below}). Fix: name a folder at most {tree.MAX_DEPTH} levels above the records, or give a run's "
        "metrics.json or a sweep folder that holds some, or null."
    )


def test_an_empty_folder_still_holds_no_record(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"holds no metrics.json\. Fix: give a run's metrics.json"):
        calibration_records(str(tmp_path))


def test_the_folders_a_lock_made_go_when_it_is_released_and_nothing_was_put_there(tmp_path: Path) -> None:
    """A sweep whose tuner pruned every set-up left ``multirun/<date>/``, made for its lock; an existing
    folder, and one the sweep filled, stay."""
    sweep = tmp_path / "multirun" / "2026-12-06" / "08-40"
    lock_sweep_dir(sweep).close()
    assert list(tmp_path.iterdir()) == []
    held = lock_sweep_dir(sweep)
    sweep.mkdir()
    held.close()
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "multirun",
        "multirun/2026-12-06",
        "multirun/2026-12-06/08-40",
    ]

"""Session 38: a sweep job's config composed once, not twice (docs/reliability-8.md #464).

Hydra's sweeper composed every job's config for its check (``validate_batch_is_legal``), then its
launcher composed it again from the same overrides: a 432-job plan sweep composed 864 configs.
:mod:`flopsweep.composed_once` keeps the check's config for the launcher. Real Hydra compositions of
``conf/``, no stand-in loader."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import ConfigCompositionException
from hydra.types import HydraContext, RunMode
from omegaconf import open_dict

from flopsweep.composed_once import ComposedOnce, check_batch
from flopsweep.store import register_configs

CONF = Path(__file__).resolve().parents[2] / "conf"


@pytest.fixture(scope="module")
def loader_and_master():
    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        master = loader.load_configuration("config", ["plan=true"], run_mode=RunMode.MULTIRUN)
        yield loader, master


def test_kept_config_handed_once_then_composed_again(loader_and_master) -> None:
    loader, master = loader_and_master
    once = ComposedOnce(loader)
    once.keep(master, [["seed=1"], ["seed=2"]])
    first = once.load_sweep_config(master, ["seed=1"])
    assert first.seed == 1 and first is not once.load_sweep_config(master, ["seed=1"])
    assert once.load_sweep_config(master, ["seed=2"]).seed == 2
    assert once.kept == {}  # each handed out once: the caller owns it (the launcher sets hydra.job.num)


def test_other_master_overrides_compose_afresh(loader_and_master) -> None:
    """A Hydra override the sweep adds after the check (plan's scratch folder) is part of the key."""
    loader, master = loader_and_master
    once = ComposedOnce(loader)
    once.keep(master, [["seed=3"]])
    changed = master.copy()
    with open_dict(changed):
        changed.hydra.overrides.hydra.append("hydra.sweep.dir=/tmp/elsewhere")
    assert once.load_sweep_config(changed, ["seed=3"]).hydra.sweep.dir == "/tmp/elsewhere"
    assert len(once.kept) == 1  # the check's config still kept for its own master config


def test_next_batch_drops_the_last_and_bad_job_raises_hydras_error(loader_and_master) -> None:
    loader, master = loader_and_master
    once = ComposedOnce(loader)
    once.keep(master, [["seed=4"]])
    with pytest.raises(ConfigCompositionException):
        once.keep(master, [["seed=5"], ["backend=nosuch"]])
    assert [k[2] for k in once.kept] == [("seed=5",)]


class PlainLoader:
    """A picklable loader: Hydra's own pickles only while every ConfigStore node does (another test's
    node in the same worker may not), which is not what this test is about."""

    def load_sweep_config(self, master_config, sweep_overrides):
        return {"overrides": list(sweep_overrides)}


def test_pickled_as_the_plain_loader(loader_and_master) -> None:
    """``hydra/launcher=pool`` pickles the HydraContext for each job: never the kept configs."""
    loader, master = loader_and_master
    once = ComposedOnce(loader)
    once.keep(master, [["seed=6"]])
    rebuild, args = once.__reduce__()
    assert args == (loader,) and rebuild(*args) is loader  # the kept config is not in what is sent
    plain = ComposedOnce(PlainLoader())
    plain.kept[("config", (), ("seed=6",))] = [{"kept": True}]
    assert type(pickle.loads(pickle.dumps(plain))) is PlainLoader


class _Sweeper:
    def __init__(self, loader, master, launcher) -> None:
        self.hydra_context = HydraContext(config_loader=loader, callbacks=None)
        self.config, self.launcher = master, launcher


class BasicLauncher:  # named as Hydra's: check_batch reads the launcher's class name
    pass


def test_check_batch_keeps_only_for_a_launcher_in_this_process(loader_and_master) -> None:
    loader, master = loader_and_master
    here = _Sweeper(loader, master, BasicLauncher())
    check_batch(here, [["seed=7"]])
    assert isinstance(here.hydra_context.config_loader, ComposedOnce)
    assert here.hydra_context.config_loader.load_sweep_config(master, ["seed=7"]).seed == 7
    elsewhere = _Sweeper(loader, master, object())  # slurm: each job composes in its own process
    check_batch(elsewhere, [["seed=8"]])
    assert elsewhere.hydra_context.config_loader is loader
    with pytest.raises(ConfigCompositionException):
        check_batch(elsewhere, [["backend=nosuch"]])


def test_past_max_kept_the_launcher_composes_again(loader_and_master, monkeypatch) -> None:
    """A batch past ``MAX_KEPT`` (about 0.2 MB a config) keeps its first jobs only; the rest still compose."""
    import flopsweep.composed_once as composed_once

    loader, master = loader_and_master
    monkeypatch.setattr(composed_once, "MAX_KEPT", 1)
    once = ComposedOnce(loader)
    once.keep(master, [["seed=9"], ["seed=10"]])
    assert [k[2] for k in once.kept] == [("seed=9",)]
    assert once.load_sweep_config(master, ["seed=10"]).seed == 10

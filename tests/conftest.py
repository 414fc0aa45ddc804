"""Shared fixtures: Hydra composition of conf/ into the typed RunConfig, once per session."""

from __future__ import annotations

import copy
import gc
import re
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra._internal.sources_registry import SourcesRegistry
from hydra.core.plugins import Plugins
from omegaconf import DictConfig, OmegaConf

from flopsweep.checkpointing import normalize_overrides
from flopsweep.config import RunConfig
from flopsweep.store import register_configs

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"

# Hydra's plug-in scan, once, before the test modules are collected. The first ``Plugins.instance()`` of a
# process (the first compose) walks ``hydra._internal.core_plugins`` and ``hydra_plugins``
# and runs each module's code again in place when it is imported already (hydra-core 1.3,
# ``Plugins._scan_all_plugins``: ``spec.loader.exec_module`` on the module of ``sys.modules``): a
# ``TuneSweeper`` a test module imported at collection then subclasses the ``BasicSweeper`` of before the
# scan, whose ``__init__`` calls ``super(BasicSweeper, self)`` with the class of after it: "super(type, obj):
# obj must be an instance or subtype of type". ``run.py`` is safe (Hydra builds the sweeper from the scan's
# classes); the tests now import the plug-ins after the scan, as Hydra does.
Plugins.instance()


_COMPOSED: dict[tuple[str, ...], DictConfig] = {}
"""The composed configs by their overrides, for the session: the unit tier composed about 1,000 times,
100 of them repeats, at about 0.1 s each (Hydra re-reads and merges ``conf/`` on every compose);
``conf/`` and the config store do not change while the tests run. Only the ``RunConfig`` path uses it
(``OmegaConf.to_object`` builds a fresh object and resolves its interpolations on every call)."""


_PARSED: dict[tuple[str, str, str, str], object] = {}
"""Each YAML file Hydra read for the compose fixture, as its config source returned it (a
``ConfigResult``), by source and path, for the session: Hydra parses every file of the defaults list
again on every compose (about 10 files, 1 ms each, and Hydra's own ``hydra/`` options from its
package); a deep copy costs a fifth of that. Hydra changes what a source returns (it pops the
``defaults`` list, and merges the nodes into the composed config without copying them), so each
load gets a fresh copy and the kept one is never handed out. A file that fails to load raises each
time and is not kept."""


def _parsed_once(load):
    """``load`` (a config source's ``load_config``) reading each file once per session (:data:`_PARSED`)."""

    def load_config(self, config_path: str):
        key = (type(self).__name__, self.provider, self.path, config_path)
        if key not in _PARSED:
            _PARSED[key] = load(self, config_path)
        return copy.deepcopy(_PARSED[key])

    return load_config


def _sharing_the_store(self, memo: dict):
    """A copy of a ``structured://`` config source that reads the one ``ConfigStore``, as a new source
    does. Hydra deep-copies its sources at every compose, and this one's ``store`` attribute is the whole
    store (7 ms a copy, 8% of a compose); nothing stores a config while a compose runs."""
    return copy.copy(self)


class Composer:
    """Hydra's compose API on ``conf/``, as ``run.py`` composes: the overrides pass through
    ``normalize_overrides`` first (``activation_checkpointing=true``/``false`` -> ``full``/``none``).

    Call it for the typed ``RunConfig`` the job gets; :meth:`config` gives the composed
    ``DictConfig`` (with the ``hydra`` node when asked: the sweeper's params, the launcher).
    """

    def __call__(self, overrides: list[str]) -> RunConfig:
        key = tuple(overrides)
        if key not in _COMPOSED:  # a failed compose raises each time and is not kept
            _COMPOSED[key] = self.config(overrides)
        return OmegaConf.to_object(_COMPOSED[key])  # a new RunConfig each call, resolved now

    def config(self, overrides: list[str], *, hydra: bool = False) -> DictConfig:
        return compose(
            config_name="config",
            overrides=normalize_overrides(list(overrides)),
            return_hydra_config=hydra,
        )


@pytest.fixture(scope="module")
def hydra_compose():
    """The one compose fixture of the tests (a :class:`Composer`): ``hydra_compose(overrides) ->
    RunConfig``, what run.py's Hydra would hand the job; ``hydra_compose.config(overrides,
    hydra=True)`` for the composed ``DictConfig``. Hydra is initialised once per test module; while
    the fixture is up, each YAML file is parsed once per session (:func:`_parsed_once`) and the config
    store is not copied at each compose (:func:`_sharing_the_store`): 734 composes of every sweep point
    and preset case gave the same configs and errors with and without, each 28% cheaper (2026-12-04)."""
    register_configs()
    OmegaConf.register_new_resolver("flopsweep_uid", lambda: "test", replace=True)
    OmegaConf.register_new_resolver("flopsweep_batch", lambda fail_fast: None, replace=True)
    with (
        initialize_config_dir(config_dir=str(CONF), version_base=None),
        pytest.MonkeyPatch.context() as patch,
    ):
        # conf/ (file://) and Hydra's own hydra/ options (pkg://), by the classes Hydra's plugins load
        for scheme in ("file", "pkg"):
            source = SourcesRegistry.instance().resolve(scheme)
            patch.setattr(source, "load_config", _parsed_once(source.load_config))
        structured = SourcesRegistry.instance().resolve("structured")
        patch.setattr(structured, "__deepcopy__", _sharing_the_store, raising=False)
        yield Composer()


ON_REQUEST = ("gpu", "slurm")
"""Markers whose tests run only when ``-m`` names them (``-m gpu``, ``-m slurm``): the default run and
the fast tier (``-m "not slow"``) leave them out, as ``-m`` on the command line would otherwise
replace a ``-m`` in ``addopts``."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the :data:`ON_REQUEST` tests unless the ``-m`` expression names their marker."""
    asked = set(re.findall(r"\w+", config.getoption("markexpr") or ""))
    off = [m for m in ON_REQUEST if m not in asked]
    dropped = [item for item in items if any(item.get_closest_marker(m) for m in off)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not any(item.get_closest_marker(m) for m in off)]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Move what collection built (torch, transformers, Hydra, pandas and matplotlib imported, every
    test module and its parameters: about 350,000 objects) out of the cyclic garbage collector's view
    (``gc.freeze``): each full collection then walks only what the tests make. It halved the unit
    tier's time in the collector (23.8 s to 12.9 s over its first 1,002 tests, 2026-12-04)."""
    gc.collect()
    gc.freeze()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A selected ``slurm`` test never passes by skipping: its skip is reported as a failure, so
    that ``python -m pytest -m slurm`` exits non-zero when no Slurm test really ran (``-m slurm``
    selecting no test at all exits 5)."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and item.get_closest_marker("slurm") and not hasattr(report, "wasxfail"):
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"a slurm test must run when selected (-m slurm), but it was skipped: {reason}"

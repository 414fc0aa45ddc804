"""Session 42: :class:`hydra_plugins.flopsweep_repeats.compose_many.Composer` (the cheap composition of a
long sweep's jobs for the check before any job) composes what Hydra's own ``load_sweep_config`` composes,
Hydra's part included, over sweeps of each kind: the command line's (``-m seed=0,1
batch.micro_batch_size=1,2``), ``+sweep=`` files whose ``hydra.sweeper.params`` sweep config groups and plain
keys, and a ``+sweep=`` group beside the command line's own axis. Reliability row #990
(docs/reliability-13.md): the two keys of Hydra's part that name the job's overrides were the cached
composition's. Real Hydra compositions of ``conf/`` through Hydra's own config loader; no subprocess."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from helpers import config_loader
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.types import HydraContext, RunMode
from omegaconf import OmegaConf

from hydra_plugins.flopsweep_repeats import repeat_axis
from hydra_plugins.flopsweep_repeats.compose_many import Composer

loader = pytest.fixture(scope="module", name="loader")(config_loader)

JOBS_EACH = 2
"""The jobs of each sweep compared (each a full Hydra composition, about 0.13 s)."""


def _sweep(loader, argv: list[str]) -> tuple[SimpleNamespace, list[list[str]]]:
    """The sweeper's state for ``-m ARGV`` and its jobs, split as :class:`RepeatingSweeper` splits them
    (``repeat`` outermost, then ``hydra.sweeper.params``, then the command line's axes)."""
    master = loader.load_configuration("config", argv, run_mode=RunMode.MULTIRUN)
    params = master.hydra.sweeper.get("params") or {}
    axes = repeat_axis(master.get("repeats", 1)) + [f"{k}={v}" for k, v in params.items()] + argv
    parser = OverridesParser.create(config_loader=loader)
    jobs = [list(j) for b in BasicSweeper.split_arguments(parser.parse_overrides(axes), None) for j in b]
    hydra = HydraContext(config_loader=loader, callbacks=None)
    return SimpleNamespace(config=master, overrides=[jobs], hydra_context=hydra), jobs


@pytest.mark.parametrize(
    "argv",
    [
        ["seed=0,1", "batch.micro_batch_size=1,2"],  # the command line's axes: plain keys
        ["+sweep=smoke"],  # a sweep file's groups (backend, precision)
        ["+sweep=scaling"],  # a group and a plain key (nproc_per_node) of a sweep file
        ["+sweep=frontier-fsdp"],  # a sweep file's group and an option's own key (backend.cpu_offload)
        ["+sweep=backends", "seed=0,1"],  # a +sweep= group beside the command line's axis
        ["hydra.sweep.subdir=${hydra.job.override_dirname}", "seed=0,1", "tag=a"],  # a folder per overrides
    ],
)
def test_each_job_is_hydras_own_composition_hydras_part_included(loader, argv: list[str]) -> None:
    sweeper, jobs = _sweep(loader, argv)
    composer = Composer(sweeper)
    for job in jobs[:JOBS_EACH]:
        ours = OmegaConf.to_container(composer.compose(job), resolve=False)
        assert ours == OmegaConf.to_container(loader.load_sweep_config(sweeper.config, job), resolve=False)


def test_the_overrides_hydras_part_names_are_the_jobs(loader) -> None:
    """Was: ``hydra.overrides.task`` and ``hydra.job.override_dirname`` named the cached composition's
    overrides (``model=gpt-tiny``), not the job's (``model=gpt-tiny seed=3``)."""
    sweeper, _ = _sweep(loader, ["seed=0,1"])
    composer = Composer(sweeper)
    composer.compose(["model=gpt-tiny"])
    cfg = composer.compose(["model=gpt-tiny", "seed=3"])
    assert composer.compositions == 1
    assert list(cfg.hydra.overrides.task) == ["model=gpt-tiny", "seed=3"]
    assert cfg.hydra.job.override_dirname == "model=gpt-tiny,seed=3"


def test_a_key_set_twice_is_composed_in_full_as_hydra_applies_them_in_order(loader) -> None:
    sweeper, _ = _sweep(loader, ["seed=0,1"])
    composer = Composer(sweeper)
    job = ["seed=1", "++seed=2"]
    assert composer.split(job) == (job, [])
    assert composer.compose(job).seed == loader.load_sweep_config(sweeper.config, job).seed == 2


def test_a_resumed_sweep_with_a_folder_per_overrides_is_checked_past_64_jobs(loader, tmp_path) -> None:
    """``-m resume=true hydra.sweep.subdir=${hydra.job.override_dirname} model=gpt-1.3b device=cpu
    seed=range(0,70)`` where none fits the free memory. Was: each job composed in full (its folder named by
    its overrides, which the cheap composition named wrong), past 64 compositions the check gave up and the
    70 jobs were refused one by one. Now one line for the 70, before any job."""
    from flopsweep.plan import Environment
    from hydra_plugins.flopsweep_repeats.once import refusal_line

    gib = 2**30
    argv = [
        "device=cpu",
        "resume=true",
        f"hydra.sweep.dir={tmp_path}",
        "hydra.sweep.subdir=${hydra.job.override_dirname}",
    ]
    sweeper, _ = _sweep(loader, argv)
    sweeper.overrides = [[["model=gpt-1.3b", "device=cpu", f"seed={s}"] for s in range(70)]]
    line = refusal_line(sweeper, Environment(cpu_count=2, host_memory_bytes=1024 * gib), free=22 * gib)
    assert line is not None and line.startswith("Invalid config: model='gpt-1.3b': on the CPU 1 rank needs")
    assert "(each of the sweep's 70 jobs is refused for it; job 0 needs the most)" in line

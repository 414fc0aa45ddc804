"""Session 41 (docs/reliability-12.md #922): a CPU sweep of more than 64 jobs every one of which the launch's
free host memory refuses is refused once before any job: each job is composed cheaply
(:class:`hydra_plugins.flopsweep_repeats.compose_many.Composer`: one full composition per distinct defaults
list, plain ``key=value`` overrides merged as Hydra merges them) and checked. Real Hydra compositions of
``conf/`` through Hydra's own config loader; the machine given as an :class:`flopsweep.plan.Environment` and
its free memory in bytes; no rank, no subprocess."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from helpers import config_loader
from hydra.types import HydraContext, RunMode
from omegaconf import OmegaConf, open_dict

from flopsweep.plan import Environment
from hydra_plugins.flopsweep_repeats.compose_many import Composer
from hydra_plugins.flopsweep_repeats.once import MOST_CHECKED, refusal_line

GIB = 2**30
NO_GPU_HERE = Environment(cpu_count=2, host_memory_bytes=1024 * GIB)
"""A machine without a GPU whose memory every model's states fit (1 TiB): the free memory decides."""
FREE = 22 * GIB
"""What was free on the 24 GiB machine of the trial (``22.0 GiB is free now``)."""

loader = pytest.fixture(scope="module", name="loader")(config_loader)


def _sweeper(loader, overrides: list[str], jobs: list[list[str]]) -> SimpleNamespace:
    """What a sweeper has when it checks: the sweep's config, its batch, its Hydra context."""
    master = loader.load_configuration("config", overrides, run_mode=RunMode.MULTIRUN)
    return SimpleNamespace(
        config=master, overrides=[jobs], hydra_context=HydraContext(config_loader=loader, callbacks=None)
    )


def _plain(cfg) -> dict:
    """A composed config without Hydra's part (which names the overrides themselves), as a dict."""
    with open_dict(cfg):
        del cfg["hydra"]
    return OmegaConf.to_container(cfg, resolve=True)


def test_a_sweep_of_70_jobs_none_of_which_fits_is_refused_once(loader) -> None:
    """Was: 70 jobs (more than 64) were left to their jobs, each refused in a line of its own, exit 0. Now
    one line for the 70; its fix typed back passes."""
    jobs = [["model=gpt-1.3b", "device=cpu", f"seed={s}"] for s in range(70)]
    line = refusal_line(_sweeper(loader, ["device=cpu"], jobs), NO_GPU_HERE, free=FREE)
    assert line is not None and line.startswith("Invalid config: model='gpt-1.3b': on the CPU 1 rank needs")
    assert line.endswith(
        "(each of the sweep's 70 jobs is refused for it; job 0 needs the most). "
        "Fix: pick a smaller model (e.g. model=gpt-tiny)."
    )
    typed = [[*job, "model=gpt-tiny"] for job in jobs]
    assert refusal_line(_sweeper(loader, ["device=cpu"], typed), NO_GPU_HERE, free=FREE) is None


def test_a_sweep_where_a_late_job_fits_is_left_to_its_jobs_and_the_check_is_bounded(loader) -> None:
    """Job 69 of 70 fits (micro batch 1 of gpt-125m): the jobs decide. Past :data:`MOST_CHECKED` jobs the
    sweep is left to its jobs without composing any."""
    jobs = [["model=gpt-1.3b", "device=cpu", f"seed={s}"] for s in range(69)]
    jobs.append(["model=gpt-125m", "device=cpu", "batch.micro_batch_size=1"])
    assert refusal_line(_sweeper(loader, ["device=cpu"], jobs), NO_GPU_HERE, free=FREE) is None
    many = [["model=gpt-1.3b", "device=cpu", f"seed={s}"] for s in range(MOST_CHECKED + 1)]
    sweeper = _sweeper(loader, ["device=cpu"], many)
    sweeper.hydra_context = None  # composing any would fail: none is composed
    assert refusal_line(sweeper, NO_GPU_HERE, free=FREE) is None


@pytest.mark.parametrize(
    "job",
    [
        ["model=gpt-1.3b", "device=cpu", "seed=3", "batch.micro_batch_size=4", "timeout_s=60"],
        ["backend=ddp", "model=gpt-tiny", "model.n_layer=3", "device=cpu"],
        ["+sweep=backends", "backend=fsdp", "device=cpu", "seed=2"],
        ["model=llama-tiny", "device=cpu", "steps.measure=2", "tag=x"],
    ],
)
def test_the_cheap_composition_is_hydras(loader, job: list[str]) -> None:
    """Each job composed by :class:`Composer` (after another of its defaults list) is the config Hydra's
    ``load_sweep_config`` composes for it, Hydra's own part aside."""
    sweeper = _sweeper(loader, ["device=cpu"], [job])
    composer = Composer(sweeper)
    first = [o for o in job if o.lstrip("+").partition("=")[0] in ("model", "backend", "sweep")]
    composer.compose(first)  # the cached composition the job's plain values are merged onto
    assert composer.split(job)[0] == first
    ours = _plain(composer.compose(job))
    assert ours == _plain(loader.load_sweep_config(sweeper.config, job))
    assert composer.compositions == 1


def test_a_key_that_is_no_plain_value_is_composed_in_full(loader) -> None:
    """A key the config does not hold (``lr``) or a mapping (``batch``'s node) is left to Hydra's own
    composition, which refuses it as the job would."""
    composer = Composer(_sweeper(loader, ["device=cpu"], []))
    assert composer.split(["model=gpt-tiny", "lr=0.1"]) == (["model=gpt-tiny", "lr=0.1"], [])
    assert composer.split(["model=gpt-tiny", "seed=4"]) == (["model=gpt-tiny"], [("seed", 4)])
    with pytest.raises(Exception, match="lr"):
        composer.compose(["model=gpt-tiny", "lr=0.1"])

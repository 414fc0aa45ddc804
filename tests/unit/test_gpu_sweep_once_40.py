"""Session 40 (docs/reliability-11.md #782): a sweep every job of which sets ``device=cuda``, on a machine
without a GPU (``-m +sweep=backends``), is refused once, before any job, not job by job. Real Hydra
compositions of ``conf/`` through Hydra's own config loader and the sweeper's check
(``hydra_plugins.flopsweep_repeats.no_gpu_line``), a machine without a GPU given as an
:class:`flopsweep.plan.Environment`; no rank, no subprocess."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import config_loader
from hydra._internal.core_plugins.basic_launcher import BasicLauncher
from hydra.types import HydraContext, RunMode
from omegaconf import OmegaConf, open_dict

from flopsweep.job.device_fix import cpu_refusal, plan_accepted, sweep_no_gpu_error
from flopsweep.plan import Environment, NoGpuError, plan
from hydra_plugins.flopsweep_repeats import no_gpu_line

CONF = Path(__file__).resolve().parents[2] / "conf"
GIB = 2**30
NO_GPU = Environment(cpu_count=2, host_memory_bytes=1024 * GIB)
"""A machine without a GPU whose memory every model's states fit (1 TiB): the free memory decides."""
BACKENDS = ["single", "ddp", "fsdp", "zero1", "zero2", "zero3"]
"""The axis of sweep/backends.yaml (gpt-1.3b, bf16, micro batch 8, ``device: cuda``)."""


loader = pytest.fixture(scope="module", name="loader")(config_loader)


def _sweeper(loader, overrides: list[str], jobs: list[list[str]]) -> SimpleNamespace:
    """What ``RepeatingSweeper.sweep`` has when it checks: the sweep's config, its batches, its launcher."""
    master = loader.load_configuration("config", overrides, run_mode=RunMode.MULTIRUN)
    context = HydraContext(config_loader=loader, callbacks=None)
    return SimpleNamespace(config=master, overrides=[jobs], launcher=BasicLauncher(), hydra_context=context)


def _job(loader, sweeper: SimpleNamespace, job: list[str]):
    """The job's typed config (``RunConfig``), composed as the launcher composes it."""
    cfg = loader.load_sweep_config(sweeper.config, job)
    with open_dict(cfg):
        del cfg["hydra"]
    return OmegaConf.to_object(cfg)


def test_a_gpu_sweep_without_a_gpu_is_refused_once_with_a_fix_accepted_typed_back(loader) -> None:
    """Was: six jobs, each ``invalid`` in its own line (``device='cuda': no CUDA GPU is visible, and
    device=cpu is refused too ...``), exit 0. Now one line before any job; its fix, ``plan=true``, typed
    back plans every job here."""
    jobs = [[f"backend={b}", "+sweep=backends"] for b in BACKENDS]
    line = no_gpu_line(_sweeper(loader, ["+sweep=backends"], jobs), NO_GPU, free=16 * GIB)
    assert line is not None and "\n" not in line
    assert line.startswith(
        "Invalid config: device='cuda': no CUDA GPU is visible (each of the sweep's 6 jobs sets it), and "
        "device=cpu is refused too (job 0: on the CPU 1 rank needs about "
    )
    assert "est_peak_gib_per_rank 53.4 x 1.1 + 0.6 GiB per rank" in line  # the CPU's margin (#811)
    assert line.endswith(
        "this sweep is meant for GPUs. Fix: run the sweep on a GPU machine, or add plan=true to predict "
        "each job's step time and memory here (no worker starts)."
    )
    typed_back = _sweeper(loader, ["+sweep=backends", "plan=true"], [[*j, "plan=true"] for j in jobs])
    assert no_gpu_line(typed_back, NO_GPU, free=16 * GIB) is None  # a plan needs no GPU here
    for job in typed_back.overrides[0]:
        assert plan_accepted(_job(loader, typed_back, job), NO_GPU), job


def test_device_cpu_is_offered_only_where_the_cpu_takes_every_job(loader) -> None:
    jobs = [[f"backend={b}", "model=gpt-tiny", "device=cuda"] for b in ("single", "ddp")]
    sweeper = _sweeper(loader, ["model=gpt-tiny", "device=cuda"], jobs)
    assert no_gpu_line(sweeper, NO_GPU, free=16 * GIB) == (
        "Invalid config: device='cuda': no CUDA GPU is visible (each of the sweep's 2 jobs sets it). Fix: "
        "run the sweep on a GPU machine, or set device=cpu."
    )
    for job in jobs:  # typed back: every job's CPU run passes the plan and the launch's free memory
        assert cpu_refusal(_job(loader, sweeper, [*job, "device=cpu"]), NO_GPU, free=16 * GIB) is None


@pytest.mark.parametrize(
    ("overrides", "jobs"),
    [
        (["model=gpt-tiny"], [["model=gpt-tiny", "device=cuda"], ["model=gpt-tiny", "device=cpu"]]),
        (["+sweep=backends", "plan=true"], [["backend=single", "+sweep=backends", "plan=true"]]),
        (["model=gpt-tiny", "device=auto"], [["seed=1", "device=auto"]]),
    ],
)
def test_a_sweep_with_a_job_that_needs_no_gpu_is_left_to_its_jobs(loader, overrides, jobs) -> None:
    """A swept ``device=cuda,cpu``, a plan, ``device=auto``: some job runs, so none is refused for all."""
    assert no_gpu_line(_sweeper(loader, overrides, jobs), NO_GPU, free=16 * GIB) is None


def test_the_sweeps_rule_is_the_jobs_rule_over_its_jobs(loader) -> None:
    """:func:`sweep_no_gpu_error` says the first job the CPU refuses; ``device=cpu`` only where all pass."""
    sweeper = _sweeper(loader, [], [])
    jobs = [["model=gpt-tiny", "device=cuda", f"backend={b}"] for b in ("single", "ddp")]
    given = []
    for job in [*jobs, ["+sweep=backends", "backend=single"]]:
        with pytest.raises(NoGpuError) as err:
            plan(_job(loader, sweeper, job), NO_GPU)
        given.append(err.value.given)
    mixed = sweep_no_gpu_error(given, NO_GPU, 3, free=16 * GIB)
    assert "(job 2: on the CPU 1 rank needs about " in mixed.problem and "device=cpu" not in mixed.fix
    assert "est_peak_gib_per_rank 53.4 x 1.1 + 0.6 GiB per rank" in mixed.problem  # the CPU's margin (#811)
    assert sweep_no_gpu_error(given[:2], NO_GPU, 2, free=16 * GIB).fix.endswith("or set device=cpu")
    unproven = sweep_no_gpu_error(given[:2], NO_GPU, 80, free=16 * GIB)  # 78 jobs not composed
    assert "device=cpu" not in unproven.fix

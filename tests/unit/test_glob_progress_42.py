"""A glob sweep's progress lines count its jobs, and a CPU plan row says its host figure is the memory free
now (docs/reliability-13.md rows 1008, 1009)."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from flopsweep.callbacks import sweep_size
from flopsweep.job.dryrun import _fits
from flopsweep.plan import Environment, plan

CONF = Path(__file__).resolve().parents[2] / "conf"


def _sweep(*task: str) -> object:
    return OmegaConf.create({"hydra": {"sweeper": {"params": None}, "overrides": {"task": list(task)}}})


def test_a_glob_of_a_group_counts_its_option_files():
    matched = sorted(p.stem for p in (CONF / "model").glob("gpt-1*.yaml"))
    assert len(matched) >= 2
    assert sweep_size(_sweep("plan=true", "model=glob(gpt-1*)")) == len(matched)
    assert sweep_size(_sweep("model=glob(gpt-1*)", "seed=1,2")) == 2 * len(matched)
    assert sweep_size(_sweep("seed=range(0,3)")) == 3  # as before


def test_a_cpu_plan_row_names_its_host_figure_as_free_now(hydra_compose):
    p = plan(hydra_compose(["plan=true", "model=gpt-tiny", "device=cpu"]), Environment(cpu_count=2))
    fits, fits_on = _fits(p, 2**20, Environment(cpu_count=2), placed=False)
    assert fits is True
    assert fits_on.startswith("host (") and fits_on.endswith(" GiB free now for 1 rank)"), fits_on

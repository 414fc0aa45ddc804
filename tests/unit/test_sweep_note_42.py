"""Every sweeper says the note of a backends sweep of 1 CPU rank each (docs/reliability-13.md #970): the
default sweeper alone said it (#944); ``hydra/sweeper=tune`` and ``optuna_objective`` ran the same jobs
without a word. One decision, :func:`flopsweep.one_rank_sweep.sweep_note`, over each sweeper's jobs."""

from __future__ import annotations

import pytest
from helpers import config_loader
from omegaconf import OmegaConf

from flopsweep.one_rank_sweep import sweep_note
from hydra_plugins.flopsweep_repeats.once import study_jobs
from hydra_plugins.flopsweep_tune.judging import candidates

POOL = "hydra_plugins.flopsweep_pool.PoolLauncher"
SLURM = "hydra_plugins.flopsweep_slurm.FlopsweepSlurmLauncher"


def _config(launcher: str = "hydra._internal.core_plugins.basic_launcher.BasicLauncher", **keys: object):
    """The keys the note reads of a sweep's composed config, as ``conf/config.yaml`` sets them."""
    base = {"plan": False, "nnodes": 1, "nproc_per_node": "auto", "device": "cpu"} | keys
    return OmegaConf.create({**base, "hydra": {"launcher": {"_target_": launcher}}})


def test_the_tuner_s_set_ups_get_the_note_and_its_fix_is_accepted() -> None:
    combos = [["backend=ddp", "device=cpu"], ["backend=fsdp", "device=cpu"]]
    tuned = [list(c.overrides) for c in candidates(combos, {"backend"}, None, (1, 1))]
    note = sweep_note(tuned, _config())
    assert note is not None and "backend=ddp,fsdp compare no all-reduce or sharding" in note
    assert "add nproc_per_node=2" in note
    assert sweep_note([[*job, "nproc_per_node=2"] for job in tuned], _config()) is None  # the fix: no note


def test_an_optuna_study_s_space_gets_the_note() -> None:
    jobs, complete = study_jobs(["backend=choice(ddp,zero3)", "device=cpu", "model=gpt-tiny"])
    assert complete and len(jobs) == 2
    note = sweep_note(jobs, _config())
    assert note is not None and "backend=ddp,zero3 compare no all-reduce" in note


def test_the_pool_s_jobs_get_it_and_slurm_s_do_not() -> None:
    jobs = [["backend=ddp"], ["backend=fsdp"]]
    assert sweep_note(jobs, _config(POOL)) is not None  # the pool's jobs run here
    assert sweep_note(jobs, _config(SLURM)) is None  # Slurm's nodes may have GPUs: not this machine's
    assert sweep_note(jobs, _config(device="cuda")) is None


loader = pytest.fixture(scope="module", name="loader")(config_loader)


def test_the_optuna_sweeper_s_first_step_says_it(loader, capsys) -> None:
    """``OptunaSweeper.sweep``'s first step (``_refused_once``) over a real composition of ``conf/``: the
    study's trials fit here (gpt-tiny), so no refusal, and the note on stderr."""
    from types import SimpleNamespace

    from hydra.types import HydraContext, RunMode

    from hydra_plugins.flopsweep_optuna import _refused_once

    command = ["device=cpu", "model=gpt-tiny"]
    master = loader.load_configuration("config", command, run_mode=RunMode.MULTIRUN)
    context = HydraContext(config_loader=loader, callbacks=None)
    impl = SimpleNamespace(
        config=master, hydra_context=context, params={"backend": "choice(ddp,fsdp)"}, n_trials=4, overrides=[]
    )
    capsys.readouterr()
    _refused_once(impl, command)
    err = capsys.readouterr().err
    assert err.startswith("flopsweep: note: every job of this sweep runs on 1 rank on the CPU"), err
    assert "backend=ddp,fsdp compare no all-reduce or sharding" in err

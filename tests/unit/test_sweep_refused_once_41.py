"""Session 41 (docs/reliability-12.md #820-#823): a sweep every job of which is refused for one reason is
refused once, before any job, whatever its sweeper and launcher. #820: the launch's free host memory
(``-m +sweep=backends device=cpu``); #821: the CPU's micro batch fix named only where one fits; #822:
``hydra/launcher=submitit_local`` (any launcher whose jobs run here) and #823: the Optuna study
(``hydra/sweeper=optuna_objective``), for a GPU sweep on a machine without a GPU. Real Hydra compositions
of ``conf/`` through Hydra's own config loader, the jobs' own checks
(:func:`flopsweep.job.sweep_once.job_check`); the machine given as an
:class:`flopsweep.plan.Environment` and its free memory in bytes; no rank, no subprocess."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from helpers import config_loader
from hydra.types import HydraContext, RunMode
from omegaconf import OmegaConf, open_dict

from flopsweep.job.device_fix import plan_accepted
from flopsweep.job.sweep_once import HOST_MEMORY, NO_GPU, job_check, sweep_error
from flopsweep.launcher_choice import runs_here
from flopsweep.plan import Environment
from hydra_plugins.flopsweep_optuna import _refused_once
from hydra_plugins.flopsweep_repeats.once import jobs_refusal_line, refusal_line, study_jobs, trial_names

GIB = 2**30
NO_GPU_HERE = Environment(cpu_count=2, host_memory_bytes=1024 * GIB)
"""A machine without a GPU whose memory every model's states fit (1 TiB): the free memory decides."""
FREE = 22 * GIB
"""What was free on the 24 GiB machine of the trial (``22.0 GiB is free now``)."""
BACKENDS = ["single", "ddp", "fsdp", "zero1", "zero2", "zero3"]
"""The axis of sweep/backends.yaml (gpt-1.3b, bf16, micro batch 8, ``device: cuda``)."""

loader = pytest.fixture(scope="module", name="loader")(config_loader)


def _sweeper(loader, overrides: list[str], jobs: list[list[str]]) -> SimpleNamespace:
    """What a sweeper has when it checks: the sweep's config, its batches, its Hydra context."""
    master = loader.load_configuration("config", overrides, run_mode=RunMode.MULTIRUN)
    context = HydraContext(config_loader=loader, callbacks=None)
    return SimpleNamespace(config=master, overrides=[jobs], hydra_context=context)


def _job(loader, sweeper: SimpleNamespace, job: list[str]):
    """The job's typed config (``RunConfig``), composed as the launcher composes it."""
    cfg = loader.load_sweep_config(sweeper.config, job)
    with open_dict(cfg):
        del cfg["hydra"]
    return OmegaConf.to_object(cfg)


def test_a_cpu_sweep_no_job_of_which_fits_is_refused_once_with_a_fix_accepted_typed_back(loader) -> None:
    """#820. Was: six jobs each ``invalid`` in its own line (``on the CPU 1 rank needs about 59.3 GiB ...
    and 22.0 GiB is free now``), exit 0. Now one line naming the job that needs the most; its fix,
    ``model=gpt-tiny``, typed back: no refusal, and every job passes its own checks."""
    jobs = [[f"backend={b}", "+sweep=backends", "device=cpu"] for b in BACKENDS]
    line = refusal_line(_sweeper(loader, ["+sweep=backends", "device=cpu"], jobs), NO_GPU_HERE, free=FREE)
    assert line is not None and "\n" not in line
    assert line.startswith(
        "Invalid config: model='gpt-1.3b': on the CPU 1 rank needs about 64.7 GiB of host memory "
        "(plan=true's est_peak_gib_per_rank 58.3 x 1.1 + 0.6 GiB per rank"
    )
    assert line.endswith(
        "and 22.0 GiB is free now; it would swap or be killed by the OOM killer (each of the sweep's 6 jobs "
        "is refused for it; job 1 needs the most). Fix: pick a smaller model (e.g. model=gpt-tiny)."
    )
    typed = [[*job, "model=gpt-tiny"] for job in jobs]
    sweeper = _sweeper(loader, ["+sweep=backends", "device=cpu", "model=gpt-tiny"], typed)
    assert refusal_line(sweeper, NO_GPU_HERE, free=FREE) is None
    for job in typed:
        cfg = _job(loader, sweeper, job)
        assert cfg.model.name == "gpt-tiny" and job_check(cfg, NO_GPU_HERE, FREE, overrides=job) is None


def test_a_sweep_only_some_of_whose_jobs_do_not_fit_is_left_to_its_jobs(loader) -> None:
    """#820: the jobs that fit run; the one that does not is recorded ``invalid`` by its own check."""
    jobs = [["model=gpt-tiny", "device=cpu"], ["model=gpt-1.3b", "device=cpu"]]
    sweeper = _sweeper(loader, ["device=cpu"], jobs)
    assert refusal_line(sweeper, NO_GPU_HERE, free=FREE) is None
    refused = job_check(_job(loader, sweeper, jobs[1]), NO_GPU_HERE, FREE, overrides=jobs[1])
    assert refused is not None and refused.reason == HOST_MEMORY


def test_a_resumed_cpu_sweep_without_records_is_refused_as_any(loader, tmp_path) -> None:
    """#820, #920: with ``resume=true`` only a job whose record ``resume=true`` keeps is skipped before the
    host check (``tests/unit/test_resume_host_once_41.py``); with none kept, every job is checked."""
    jobs = [[f"backend={b}", "+sweep=backends", "device=cpu", "resume=true"] for b in BACKENDS[:2]]
    master = ["+sweep=backends", "device=cpu", "resume=true", f"hydra.sweep.dir={tmp_path}"]
    line = refusal_line(_sweeper(loader, master, jobs), NO_GPU_HERE, free=FREE)
    assert line is not None and "(each of the sweep's 2 jobs is refused for it; job 1 needs the most)" in line


def test_the_rule_needs_one_reason_for_every_job(loader) -> None:
    """#820: a sweep refused for two reasons (a GPU job, a CPU job too big) or not every job checked is
    left to its jobs; one reason over all says the job that needs the most."""
    sweeper = _sweeper(loader, [], [])
    gpu = job_check(_job(loader, sweeper, ["model=gpt-tiny", "device=cuda"]), NO_GPU_HERE, FREE)
    big = [["model=gpt-1.3b", "device=cpu", f"batch.micro_batch_size={n}"] for n in (1, 8)]
    cpu = [job_check(_job(loader, sweeper, job), NO_GPU_HERE, FREE, overrides=job) for job in big]
    assert gpu is not None and gpu.reason == NO_GPU and {c.reason for c in cpu} == {HOST_MEMORY}
    assert cpu[1].need_bytes > cpu[0].need_bytes > FREE
    assert sweep_error([gpu, cpu[0]], NO_GPU_HERE, 2, FREE) is None
    assert sweep_error(cpu, NO_GPU_HERE, 3, FREE) is None  # a third job not checked: it may fit
    both = str(sweep_error(cpu, NO_GPU_HERE, 2, FREE))
    assert f"needs about {cpu[1].need_bytes / GIB:.1f} GiB" in both and "job 1 needs the most" in both


def test_the_cpus_micro_batch_fix_is_named_only_where_one_fits_and_is_accepted(loader) -> None:
    """#821. Was: ``... or a smaller batch.micro_batch_size`` for gpt-1.3b at micro batch 8, whose micro
    batch 1 needs 34.6 GiB of 22 free. Now the fix names the value that fits, else the model alone."""
    sweeper = _sweeper(loader, [], [])
    one_3b = job_check(_job(loader, sweeper, ["model=gpt-1.3b", "device=cpu"]), NO_GPU_HERE, FREE)
    assert one_3b is not None and one_3b.error.fix == "pick a smaller model (e.g. model=gpt-tiny)"
    small = ["model=gpt-125m", "device=cpu", "batch.micro_batch_size=64"]
    refused = job_check(_job(loader, sweeper, small), NO_GPU_HERE, 6 * GIB)
    assert refused is not None
    assert refused.error.fix == "pick a smaller model (e.g. model=gpt-tiny) or set batch.micro_batch_size=1"
    typed = [*small, "batch.micro_batch_size=1"]
    assert job_check(_job(loader, sweeper, typed), NO_GPU_HERE, 6 * GIB, overrides=typed) is None


@pytest.mark.parametrize(
    ("launcher", "here"),
    [("submitit_local", True), ("pool", True), ("slurm_local", True), ("submitit_slurm", False)],
)
def test_every_launcher_whose_jobs_run_here_refuses_a_gpu_sweep_once(loader, launcher, here) -> None:
    """#822. Was: only Hydra's basic launcher (by name); ``hydra/launcher=submitit_local`` ran six jobs,
    each ``invalid``. Now every launcher but Slurm's (whose jobs run on its nodes)."""
    jobs = [[f"backend={b}", "+sweep=backends"] for b in BACKENDS[:2]]
    sweeper = _sweeper(loader, ["+sweep=backends", f"hydra/launcher={launcher}"], jobs)
    assert runs_here(sweeper.config.hydra.launcher._target_) is here
    line = refusal_line(sweeper, NO_GPU_HERE, free=FREE)
    assert (line is not None) is here
    if here:
        assert line.startswith(
            "Invalid config: device='cuda': no CUDA GPU is visible (each of the sweep's 2 "
        )


def test_the_studys_trials_are_every_combination_of_its_space() -> None:
    """#823: each choice and range value, an interval's two ends; past the cap, not all."""
    params = ["backend=single,ddp", "batch.micro_batch_size=range(1,4)", "optim.lr=interval(0.001,0.01)"]
    jobs, complete = study_jobs([*params, "device=cuda"])
    assert complete and len(jobs) == 12
    assert jobs[0] == ["backend=single", "batch.micro_batch_size=1", "optim.lr=0.001", "device=cuda"]
    assert jobs[-1] == ["backend=ddp", "batch.micro_batch_size=3", "optim.lr=0.01", "device=cuda"]
    many, complete = study_jobs(["batch.micro_batch_size=range(1,200)"])
    assert not complete and len(many) == 64


def test_an_optuna_study_of_a_gpu_sweep_is_refused_once_before_its_first_trial(loader, capsys) -> None:
    """#823. Was: each trial ``invalid`` in its own line, the study going on. Now one line, exit 2; with
    ``plan=true`` typed back, no refusal."""
    overrides = ["+sweep=backends"]  # the sweeper's own config is not read (the optuna extra: not in CI)
    sweeper = _sweeper(loader, overrides, [])
    impl = SimpleNamespace(params={"backend": ",".join(BACKENDS)}, n_trials=20, **vars(sweeper))
    jobs, complete = study_jobs(
        [f"backend={','.join(BACKENDS)}", *overrides]
    )  # params, then the command line
    names = trial_names(jobs)
    assert names == [f"backend={b}" for b in BACKENDS]
    line = jobs_refusal_line(
        impl, jobs, NO_GPU_HERE, FREE, total=20, units=("study", "trial"), complete=complete, names=names
    )
    assert line is not None and line.startswith(
        "Invalid config: device='cuda': no CUDA GPU is visible (each of the study's 20 trials sets it), and "
        "device=cpu is refused too (backend=single: on the CPU 1 rank needs about 59.3 GiB"
    )
    assert "this study is meant for GPUs. Fix: run the study on a GPU machine, or add plan=true" in line
    typed = SimpleNamespace(**{**vars(impl), **vars(_sweeper(loader, [*overrides, "plan=true"], []))})
    assert (
        jobs_refusal_line(typed, [[*job, "plan=true"] for job in jobs], NO_GPU_HERE, FREE, total=20) is None
    )
    for job in jobs[:2]:  # each trial's plan is accepted here (the first two: 1 s each)
        assert plan_accepted(_job(loader, typed, [*job, "plan=true"]), NO_GPU_HERE), job
    gpu_here = Environment(cpu_count=2, cuda_available=True, gpu_count=1, host_memory_bytes=1024 * GIB)
    assert jobs_refusal_line(impl, jobs, gpu_here, FREE, total=20) is None


def test_the_optuna_sweepers_hook_ends_the_study_in_one_line(loader, capsys, monkeypatch) -> None:
    """#823: ``OptunaSweeper.sweep``'s first step (:func:`_refused_once`): the line on stderr, exit 2."""
    import hydra_plugins.flopsweep_repeats.once as once

    monkeypatch.setattr(once, "_here", lambda: NO_GPU_HERE)  # the machine: without a GPU, as this one
    monkeypatch.setattr("flopsweep.local_gpus.no_gpu_here", lambda: True)
    sweeper = _sweeper(loader, ["+sweep=backends"], [])
    impl = SimpleNamespace(params={"backend": "single,ddp"}, n_trials=4, **vars(sweeper))
    with pytest.raises(SystemExit) as stop:
        _refused_once(impl, ["+sweep=backends"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("flopsweep: Invalid config: device='cuda': no CUDA GPU")

"""The sweep's jobs composed and checked before any starts (:func:`refusal_line`): a sweep every job of which
is refused for one reason (``device=cuda`` without a GPU here, or the launch's free host memory) gets one
line, exit 2, before anything is written (:func:`flopsweep.job.sweep_once.sweep_error`). Every sweeper of
flopsweep's asks it before its first job (the default ``basic_batched``: its batches; ``optuna_objective``:
its study's space, :func:`jobs_refusal_line`), whatever the launcher, where the jobs run on this machine
(:func:`flopsweep.launcher_choice.runs_here`: not Slurm's). Hydra imports this module when it scans its
plugins: the rest is imported when a sweep asks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MOST_COMPOSED = 64
"""The most jobs of a GPU sweep checked: it is refused on its first ones (each other sets ``device=cuda``
too, but ``device=cpu`` is not offered: unproven for the rest). A CPU sweep, refused for host memory, needs
every job checked: each is, composed cheaply
(:class:`hydra_plugins.flopsweep_repeats.compose_many.Composer`, at most
:data:`~hydra_plugins.flopsweep_repeats.compose_many.MOST_COMPOSITIONS` full compositions; more: left to its
jobs). Was (session 41): a CPU sweep of more than 64 jobs was left to its jobs, refused one by one."""

MOST_CHECKED = 1000
"""The most jobs of a CPU sweep checked before any starts (about 13 ms each once composed, plus 0.13 s per
full composition: 500 jobs of one defaults list took 5.0 s on the 2-core machine, session 41); a longer
sweep is left to its jobs, so that the check stays under about 15 s."""


def _resumed(config: Any, said: list[dict[str, str]]) -> bool:
    """Whether the sweep runs with ``resume=true`` (the config's or a job's own): a job whose folder holds
    a record ``resume=true`` keeps (:func:`flopsweep.job.resume.skipped_record`) is skipped before the
    launch's checks, so only the others are checked (:func:`_skipped`)."""
    default = str(config.get("resume")).lower()
    return any(s.get("resume", default).lower() == "true" for s in said)


def refusal_line(sweeper: Any, env: Any = None, free: int | None = None) -> str | None:
    """The one line refusing the sweep of ``sweeper`` (a sweeper of Hydra's basic kind: its ``config``, its
    batches in ``overrides``, its ``hydra_context``) before anything is written, else None:
    :func:`jobs_refusal_line` over every job of its batches. ``env``: the machine
    (:class:`flopsweep.plan.Environment`; None: this one, detected); ``free``: its free host memory, bytes
    (None: read now)."""
    jobs = [list(job) for batch in sweeper.overrides for job in batch]
    return jobs_refusal_line(sweeper, jobs, env, free)


def jobs_refusal_line(
    sweeper: Any,
    jobs: list[list[str]],
    env: Any = None,
    free: int | None = None,
    *,
    total: int | None = None,
    units: tuple[str, str] = ("sweep", "job"),
    complete: bool | None = None,
    plan_fix: str | None = None,
    names: Sequence[str] | None = None,
) -> str | None:
    """The one line refusing a sweep whose ``jobs`` (each job's overrides; ``total`` of them, default all,
    ``complete``: whether they are every job there can be; ``names``: how the line names each, None: ``job
    N``) are each refused for one reason, checked as each
    job checks itself (:func:`flopsweep.job.sweep_once.job_check`), else None: the jobs run elsewhere
    (Slurm), ``plan=true`` (a plan needs neither), a job of another device than the rest, a job that would
    start, or one refused for another reason (its own line). Only a sweep all of whose jobs set
    ``device=cuda`` (a GPU sweep: where no GPU is here, :func:`flopsweep.local_gpus.no_gpu_here` then
    torch's) or none does (a CPU sweep: the free host memory; with ``resume=true`` only the jobs it does not
    skip, :func:`_skipped`) is checked. Was: each job refused in its own
    line, the sweep going on, exit 0."""
    config = sweeper.config
    launcher = config.hydra.launcher.get("_target_", "") if "launcher" in config.hydra else ""
    from flopsweep.launcher_choice import runs_here
    from flopsweep.override_parsing import key_values

    if not jobs or not runs_here(str(launcher)) or str(config.get("plan")).lower() != "false":
        return None
    said = [key_values(job) for job in jobs]
    if any(s.get("plan", "false").lower() != "false" for s in said):
        return None
    devices = {s.get("device", str(config.get("device"))) for s in said}
    total = len(jobs) if total is None else total
    from flopsweep.local_gpus import no_gpu_here

    if devices == {"cuda"}:
        if env is None and not no_gpu_here():  # torch-free; a device file or nvidia-smi's GPU: the jobs' own
            return None
        checked = jobs[:MOST_COMPOSED]
    elif devices <= {"cpu", "auto"} and len(jobs) <= MOST_CHECKED:  # every job, composed cheaply
        if "auto" in devices and env is None and not no_gpu_here():  # auto may be a GPU's: the jobs decide
            return None
        checked = jobs
    else:
        return None
    env = env if env is not None else _here()
    if devices == {"cuda"} and env.cuda_available:
        return None
    if free is None:
        from flopsweep import hostmem

        free = hostmem.available_bytes()
    resumed = _resumed(config, said)
    if resumed and units != ("sweep", "job") and devices != {"cuda"}:
        return None  # a study's trial N is not its space's job N: its trials decide, as before
    return _checked_line(sweeper, checked, env, free, total, units, complete, plan_fix, names, resumed)


def _here() -> Any:
    """This machine as each job sees it: without torch where surely no GPU is here
    (:func:`flopsweep.local_gpus.no_gpu_here`), else torch's answer, after the job's own silencing of known
    warnings."""
    from flopsweep.local_gpus import no_gpu_here
    from flopsweep.plan import Environment
    from flopsweep.quiet import silence_known_warnings

    silence_known_warnings()  # as the job does before its imports: DeepSpeed's "Setting accelerator"
    return Environment.detect(no_gpu=no_gpu_here())


def _checked_line(
    sweeper: Any,
    jobs: list[list[str]],
    env: Any,
    free: int,
    total: int,
    units: tuple[str, str],
    complete: bool | None,
    plan_fix: str | None,
    names: Sequence[str] | None = None,
    resumed: bool = False,
) -> str | None:
    """:func:`jobs_refusal_line`'s line from each of ``jobs`` composed as its launcher composes it and
    checked (:func:`flopsweep.job.sweep_once.job_check`); stops at the first that would start or is refused
    for a reason of its own (None), so that a sweep that runs pays for one composition. ``resumed``
    (``resume=true``): a job whose folder holds a record ``resume=true`` keeps is skipped as the job skips
    itself (:func:`_skipped`), and the line counts the jobs left (``each of the sweep's 2 remaining jobs``,
    each named by its number); None where none is left. Was (session 41): a resumed sweep went unchecked."""
    from omegaconf import OmegaConf, open_dict

    from flopsweep.job.sweep_once import OTHER, job_check, sweep_error
    from hydra_plugins.flopsweep_repeats.compose_many import Composer

    composer = Composer(sweeper)  # Hydra's part too: a folder named by override_dirname is the job's
    refused, left = [], []
    for n, job in enumerate(jobs):
        try:
            cfg = composer.compose(job)
            choices = {k: str(v) for k, v in cfg.hydra.runtime.choices.items() if v is not None}
            folder = _job_folder(cfg, n) if resumed else None
            with open_dict(cfg):
                del cfg["hydra"]
            run_cfg = OmegaConf.to_object(cfg)
            if folder is not None and _skipped(run_cfg, env, choices, folder):
                continue
            check = job_check(run_cfg, env, free, choices=choices, overrides=job)
        except Exception:  # noqa: BLE001 - refused otherwise (composition, schema): the job's own line
            return None
        if check is None or check.reason == OTHER:
            return None
        refused.append(check)
        left.append(names[n] if names else f"{units[1]} {n}")
    if resumed and len(left) < len(jobs):  # some kept: the jobs left are the sweep
        if not left:
            return None
        total, units, names = total - (len(jobs) - len(left)), (units[0], f"remaining {units[1]}"), left
    if complete is None and len(jobs) < total:
        complete = False
    error = sweep_error(
        refused, env, total, free, units=units, complete=complete, plan_fix=plan_fix, names=names
    )
    return None if error is None else str(error)


def _job_folder(cfg: Any, num: int) -> Any:
    """The folder of the sweep's job number ``num`` whose composed config (Hydra's part included) is ``cfg``,
    as Hydra's launchers name it: ``hydra.sweep.dir`` / ``hydra.sweep.subdir`` at ``hydra.job.num``."""
    from pathlib import Path

    from omegaconf import open_dict

    with open_dict(cfg):
        cfg.hydra.job.num = num
    return Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)


def _skipped(cfg: Any, env: Any, choices: dict[str, str], folder: Any) -> bool:
    """Whether ``resume=true`` skips the job of ``cfg`` (a ``RunConfig``) in ``folder`` before its checks,
    as the job decides (:func:`flopsweep.job.resume.skipped_record` of its validated config); a job its plan
    refuses is not skipped (it is refused first, as the job refuses it)."""
    from flopsweep.config import ConfigError
    from flopsweep.job.resume import skipped_record
    from flopsweep.plan import plan
    from flopsweep.record import METRICS_FILE

    try:
        p = plan(cfg, env, choices=choices)
    except ConfigError:
        return False
    return skipped_record(folder / METRICS_FILE, p.cfg, quiet=True) is not None


def refused_once(line: str, launcher: Any = None) -> None:
    """Say ``line`` (:func:`refusal_line`'s) and end the sweep, exit 2: nothing written is left (a submitit
    launcher's folder, made empty and private where the sweep started, then the sweep's folder and lock:
    :func:`flopsweep.unstarted.remove_unstarted`). ``launcher``: the sweep's ``hydra.launcher``.

    Raises:
        SystemExit: always, status 2.
    """
    import contextlib
    import os
    import sys

    from flopsweep.hydrafiles import submitit_folder
    from flopsweep.text import printable
    from flopsweep.unstarted import remove_unstarted

    print(f"flopsweep: {printable(line)}", file=sys.stderr, flush=True)
    with contextlib.suppress(Exception):  # an empty folder only (rmdir), never a link's target
        if (folder := submitit_folder(launcher, make=False)) is not None:
            os.rmdir(folder)
    remove_unstarted()
    raise SystemExit(2)


def study_jobs(params: Sequence[str], most: int = MOST_COMPOSED) -> tuple[list[list[str]], bool]:
    """The trials an Optuna study over ``params`` (``hydra.sweeper.params`` as ``key=value``, then the
    command line's overrides, as hydra-optuna-sweeper reads them) can run, each as its overrides: every
    combination of each choice's values and each range's, an interval standing for its two ends (each memory
    key's estimate grows with its value, so the ends bound every trial's), at most ``most`` + 1 of them; and
    whether they are all (False past ``most``)."""
    import itertools

    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import Transformer

    axes = []
    for override in OverridesParser.create().parse_overrides(list(params)):
        key = override.get_key_element()
        if not override.is_sweep_override():
            axes.append([f"{key}={override.get_value_element_as_str()}"])
        elif override.is_interval_sweep():
            value = override.value()
            axes.append([f"{key}={value.start}", f"{key}={value.end}"])  # type: ignore[union-attr]
        else:
            axes.append([f"{key}={v}" for v in override.sweep_iterator(transformer=Transformer.encode)])
    jobs = [list(job) for job in itertools.islice(itertools.product(*axes), most + 1)]
    return jobs[:most], len(jobs) <= most


def trial_names(jobs: Sequence[Sequence[str]]) -> list[str]:
    """How a study's line names each of ``jobs`` (:func:`study_jobs`): the overrides that are not the same in
    every one (``backend=ddp``), else ``the trial``."""
    common = set.intersection(*(set(job) for job in jobs)) if jobs else set()
    return [" ".join(o for o in job if o not in common) or "the trial" for job in jobs]

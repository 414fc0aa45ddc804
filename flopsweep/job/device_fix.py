"""The job's refusal of ``device=cuda`` where no CUDA GPU is visible (:func:`no_gpu_error`, from the plan's
:class:`flopsweep.plan.NoGpuError`), whose fix is one the refusals accept when typed back. Torch-free.

Was: ``python run.py -m +sweep=backends`` on a machine without a GPU: ``device='cuda': no CUDA GPU is visible.
Fix: run on a GPU machine or set device=cpu``; typed back, ``device=cpu`` met the launch's host-memory check
(gpt-1.3b at micro batch 8 needs about 53 GiB on the CPU, 22.8 GiB free), whose fix offered ``set device=cuda
for a GPU sweep``: a loop of fixes, neither accepted. Now ``device=cpu`` is offered only where the same
config on the CPU passes the plan's checks and the launch's free-memory check (:func:`cpu_refusal`); else
the line says the run is meant for GPUs, and its fix is ``plan=true`` where that is accepted here
(:func:`plan_accepted`: the plan places it on GPUs that are not here), never ``device=cpu``. A sweep all
of whose jobs set ``device=cuda`` is refused once, before its first job (:func:`sweep_no_gpu_error`). The
CPU's own refusals offer ``device=cuda`` only where a GPU is visible (:mod:`flopsweep.job.hostcheck`,
:func:`flopsweep.plan.states_error`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

from flopsweep.config import ConfigError, RunConfig
from flopsweep.job.hostcheck import check_free_host_memory
from flopsweep.job.placement import plan_environment
from flopsweep.plan import NO_GPU, Environment, plan, resolve


def cpu_refusal(given: RunConfig, env: Environment, free: int | None = None) -> ConfigError | None:
    """What refuses ``given`` (a validated config) with ``device=cpu`` on this machine, else None: the
    plan's checks (:func:`flopsweep.plan.resolve`: the host's memory among them) and the launch's free host
    memory (:func:`flopsweep.job.hostcheck.check_free_host_memory`; ``free``: bytes, None: read now)."""
    try:
        check_free_host_memory(
            resolve(dataclasses.replace(given, device="cpu"), env), free, overrides=[], env=env
        )
    except ConfigError as exc:
        return exc
    return None


def plan_accepted(given: RunConfig, env: Environment) -> bool:
    """Whether ``given`` with ``plan=true`` is accepted here: validated and placed as ``plan=true`` places
    a GPU job on a machine without one (:func:`flopsweep.job.placement.plan_environment`)."""
    try:
        cfg, placed, _ = plan_environment(dataclasses.replace(given, plan=True), env)
        plan(cfg, placed)
    except ConfigError:
        return False
    return True


def hiding_variable(environ: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """``(NAME, VALUE)`` of the :data:`flopsweep.local_gpus.HIDING_VARIABLES` variable set here (each is read
    only where no GPU is seen: set empty or to ``-1`` it hides every GPU, set to ids it shows only those,
    none where they do not exist), else None. ``environ``: ``os.environ`` when None."""
    from flopsweep.local_gpus import HIDING_VARIABLES

    environ = os.environ if environ is None else environ
    return next(((name, environ[name]) for name in HIDING_VARIABLES if name in environ), None)


def no_gpu_words(environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(the problem, the first fix) of ``device=cuda`` where no GPU is seen: :data:`NO_GPU` and ``run on a
    GPU machine``; with a :func:`hiding_variable` set, that variable named and its fix to unset it
    (``CUDA_VISIBLE_DEVICES='' hides every GPU from this process ... Fix: unset CUDA_VISIBLE_DEVICES,
    ...``).
    Was: ``CUDA_VISIBLE_DEVICES= flopsweep model=llama-tiny device=cuda`` said only ``no CUDA GPU is visible.
    Fix: run on a GPU machine, or set device=cpu``. How the value hides them (``NoDevFiles``, ids of GPUs that
    are not here) and the value that shows one: :func:`flopsweep.local_gpus.hidden_words`."""
    hidden = hiding_variable(environ)
    if hidden is None:
        return NO_GPU, "run on a GPU machine"
    name, value = hidden
    from flopsweep.local_gpus import gpus_hidden, hidden_words, physical_gpu_count

    physical = None if gpus_hidden({name: value}) else physical_gpu_count()  # only where it names ids
    how, fix = hidden_words(name, value, physical)
    return (
        f"{NO_GPU} ({name}={value!r} {how})",
        f"{fix}, or run on a GPU machine" if fix else "run on a GPU machine",
    )


def no_gpu_error(given: RunConfig, env: Environment, free: int | None = None) -> ConfigError:
    """The refusal of ``device=cuda`` for ``given`` (as validated) where ``env`` sees no CUDA GPU: its fix
    ``set device=cpu`` where the CPU accepts the run (:func:`cpu_refusal`), else the CPU's refusal said and
    the run called one meant for GPUs, its fix a GPU machine or ``plan=true`` (:func:`plan_accepted`).
    ``free``: the free host memory, bytes (None: read now)."""
    cpu = cpu_refusal(given, env, free)
    none_seen, gpu_fix = no_gpu_words()
    if cpu is None:
        return ConfigError("device", "cuda", none_seen, f"{gpu_fix}, or set device=cpu")
    fix = gpu_fix.replace("run on", "run it on")
    if plan_accepted(given, env):
        fix += ", or add plan=true to predict its step time and memory here (no worker starts)"
    problem = f"{none_seen}, and device=cpu is refused too ({cpu.problem}): this run is meant for GPUs"
    return ConfigError("device", "cuda", problem, fix)


PLAN_FIX = "add plan=true to predict each job's step time and memory here (no worker starts)"
"""The plan's fix of a sweep meant for GPUs (:func:`sweep_no_gpu_error`)."""


def sweep_no_gpu_error(
    given: list[RunConfig],
    env: Environment,
    total: int,
    free: int | None = None,
    *,
    units: tuple[str, str] = ("sweep", "job"),
    plan_fix: str | None = PLAN_FIX,
    complete: bool | None = None,
    names: list[str] | None = None,
) -> ConfigError:
    """The one refusal of a sweep every one of whose ``total`` jobs sets ``device=cuda`` where ``env`` sees no
    CUDA GPU, before any job starts (``hydra_plugins.flopsweep_repeats.no_gpu_line``; the tuner's
    set-ups, ``units=("tuning", "set-up")``; was one line per job, each ``invalid``): :func:`no_gpu_error`'s
    rule over the jobs. ``given``: the jobs' configs as validated (the first ones where not all were
    composed). Its fix ``set device=cpu`` where the CPU accepts every job (all of them given), else the
    first job the CPU refuses said; ``plan_fix`` (None: none) where the plan accepts each job given.
    ``free``: the free host memory, bytes (None: read now). ``complete``: whether ``given`` are all the jobs
    there can be (default: ``len(given) == total``; an Optuna study's every trial,
    :mod:`flopsweep.job.sweep_once`). ``names``: how the line names each job given (None: ``job N``; a
    study's trial by its overrides, ``backend=ddp``)."""
    what, unit = units
    complete = len(given) == total if complete is None else complete
    jobs = (
        f"each of the {what}'s {total} {unit}s sets it" if total > 1 else f"the {what}'s one {unit} sets it"
    )
    refused = [(n, cpu) for n, cfg in enumerate(given) if (cpu := cpu_refusal(cfg, env, free)) is not None]
    none_seen, gpu_fix = no_gpu_words()
    gpu_fix = gpu_fix.replace("run on", f"run the {what} on")
    if not refused and complete:
        return ConfigError("device", "cuda", f"{none_seen} ({jobs})", f"{gpu_fix}, or set device=cpu")
    fix = gpu_fix
    if plan_fix and all(plan_accepted(cfg, env) for cfg in given):
        fix += f", or {plan_fix}"
    problem = f"{none_seen} ({jobs})"
    if refused:
        n, cpu = refused[0]
        problem += (
            f", and device=cpu is refused too ({names[n] if names else f'{unit} {n}'}: {cpu.problem}): this "
            f"{what} is meant for GPUs"
        )
    return ConfigError("device", "cuda", problem, fix)

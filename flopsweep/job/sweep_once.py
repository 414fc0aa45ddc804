"""A sweep that cannot run, refused once before any job starts (:func:`sweep_error`), whatever its sweeper
and launcher: the decision is the jobs' own checks (:func:`job_check`: the plan, then the launch's free
host memory) over every job, made in the sweep's process.

Was (session 41): ``-m +sweep=backends device=cpu`` on a 24 GiB machine printed six refusals, one a job
(``on the CPU 1 rank needs about 59.3 GiB of host memory ... and 22.0 GiB is free now``), exit 0, and
``hydra/launcher=submitit_local`` or ``hydra/sweeper=optuna_objective`` refused a GPU sweep on a machine
without a GPU job by job (session 40's once-before-any-job check named Hydra's basic launcher alone).
Now where every job is refused for one reason (:data:`NO_GPU`: ``device=cuda`` with no GPU here;
:data:`HOST_MEMORY`: the launch's free-memory check, :func:`flopsweep.job.hostcheck.check_free_host_memory`),
one line says so, its fix one the sweep accepts typed back; a sweep where some job would start, or a job is
refused for another reason (its own line, in its record), is left to its jobs as before.

The callers compose each job as its launcher would (``hydra_plugins.flopsweep_repeats.refusal_line``, the
Optuna study's ``hydra_plugins.flopsweep_optuna``) and give the typed configs here. Torch-free.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from flopsweep.config import ConfigError, RunConfig
from flopsweep.plan import Environment, NoGpuError, plan

NO_GPU = "no_gpu"
"""A job refused for ``device=cuda`` alone, no CUDA GPU being visible (:class:`flopsweep.plan.NoGpuError`)."""

HOST_MEMORY = "host_memory"
"""A job refused by the launch's free host memory check (:func:`flopsweep.hostmem.cpu_need_bytes`, CPU)."""

OTHER = "other"
"""A job refused for a reason of its own (validation, ``repeats``, a layout): its line, in its record."""


@dataclasses.dataclass(frozen=True)
class Refused:
    """Why one job of a sweep would be refused before any worker starts."""

    reason: str
    """:data:`NO_GPU`, :data:`HOST_MEMORY` or :data:`OTHER`."""
    error: ConfigError
    """The job's refusal (a :class:`flopsweep.plan.NoGpuError` for :data:`NO_GPU`)."""
    need_bytes: int = 0
    """:data:`HOST_MEMORY`: the host memory the job's ranks on this machine need, bytes (else 0)."""


def job_check(
    cfg: RunConfig,
    env: Environment,
    free: int,
    *,
    choices: dict[str, str] | None = None,
    overrides: Sequence[str] = (),
) -> Refused | None:
    """What refuses ``cfg`` (one job, as composed) before its workers, as the job itself decides
    (:func:`flopsweep.job.lifecycle.planned`, then ``ready``): the plan (:func:`flopsweep.plan.plan`), then
    the launch's free host memory (:func:`flopsweep.job.hostcheck.check_free_host_memory`, ``free``: bytes;
    it reads the launcher this process's Hydra config names, as the job's does). None: the job would start.
    ``overrides``: the job's own (the host check names the memory key they set)."""
    from flopsweep.job.hostcheck import check_free_host_memory

    try:
        p = plan(cfg, env, choices=choices or {})
    except NoGpuError as exc:
        return Refused(NO_GPU, exc)
    except ConfigError as exc:
        return Refused(OTHER, exc)
    try:
        check_free_host_memory(p, free, overrides=list(overrides), env=env)
    except ConfigError as exc:
        return Refused(HOST_MEMORY, exc, host_need_bytes(p))
    return None


def host_need_bytes(p) -> int:
    """The host memory the check of :func:`job_check` held ``p`` (a :class:`flopsweep.layout.Plan`) to,
    bytes: on the CPU :func:`flopsweep.hostmem.cpu_need_bytes` of the ranks' estimate, on GPUs the offloaded
    states' :func:`flopsweep.memory.offload_host_held_bytes` times the ranks; 0 where the estimate fails."""
    from flopsweep.hostmem import cpu_need_bytes
    from flopsweep.memory import offload_host_held_bytes, peak_bytes

    try:
        if p.cfg.device == "cpu":
            return cpu_need_bytes(peak_bytes(p.cfg, p.layout), p.nproc_per_node)
        return int(offload_host_held_bytes(p.cfg, p.layout) * p.nproc_per_node)
    except Exception:  # noqa: BLE001 - the job's check refused it all the same; the order only
        return 0


def sweep_error(
    refused: Sequence[Refused | None],
    env: Environment,
    total: int,
    free: int | None = None,
    *,
    units: tuple[str, str] = ("sweep", "job"),
    complete: bool | None = None,
    plan_fix: str | None = None,
    names: Sequence[str] | None = None,
) -> ConfigError | None:
    """The one refusal of a sweep of ``total`` jobs every one of which is refused for the same reason, else
    None (a job would start, or one is refused for a reason of its own, or for another reason than the rest:
    each job's own line). ``refused``: :func:`job_check` of the jobs checked, in order (the first ones where
    not all were); ``complete``: whether they are every job there can be (default: ``len(refused) ==
    total``); a sweep refused for host memory needs every job checked, one refused for ``device=cuda``
    the first ones (each of the rest sets ``device=cuda`` too, as the caller made sure).

    - :data:`NO_GPU`: :func:`flopsweep.job.device_fix.sweep_no_gpu_error` (``device=cpu`` offered only where
      the CPU takes every job), ``plan_fix`` its plan fix (None: its default);
    - :data:`HOST_MEMORY`: :func:`host_memory_error`, the job that needs the most said.

    ``units``: how the line names the sweep and its jobs (``("study", "trial")``); ``names``: how it names
    each job checked (None: ``job N``, its folder's number). ``free``: the free host memory, bytes (None:
    read now)."""
    from flopsweep.job.device_fix import PLAN_FIX, sweep_no_gpu_error

    complete = len(refused) == total if complete is None else complete
    if not refused or any(r is None for r in refused):
        return None
    reasons = {r.reason for r in refused}
    if reasons == {NO_GPU}:
        given = [r.error.given for r in refused]  # type: ignore[union-attr]
        fix = PLAN_FIX if plan_fix is None else plan_fix
        named = list(names) if names else None
        return sweep_no_gpu_error(
            given, env, total, free, units=units, plan_fix=fix, complete=complete, names=named
        )
    if reasons == {HOST_MEMORY} and complete:
        return host_memory_error(refused, total, units=units, names=names)  # type: ignore[arg-type]
    return None


def host_memory_error(
    refused: Sequence[Refused], total: int, *, units: tuple[str, str], names: Sequence[str] | None = None
) -> ConfigError:
    """The one line of a sweep every job of which the launch's free host memory check refuses: the line of
    the job that needs the most (its key, its need, what is free and its fix: a smaller model, or the
    memory key the command line set at a value that fits; ``device=cuda`` only where a GPU is visible),
    with the number of jobs. Its fix fits the job that needs the most, so it fits the others, whose
    estimates are smaller at the same value (the estimate grows with each memory key)."""
    what, unit = units
    n, worst = max(enumerate(refused), key=lambda item: item[1].need_bytes)
    error = worst.error
    jobs = f"the {what}'s one {unit}"
    if total > 1:
        jobs = f"each of the {what}'s {total} {unit}s is refused for it"
    problem = f"{error.problem} ({jobs}; {names[n] if names else f'{unit} {n}'} needs the most)"
    return ConfigError(error.key, error.value, problem, error.fix)

"""The tuner's refusal of a tuning all of whose set-ups need a GPU, on a machine without one
(:func:`no_gpu_line`): once, before any job, its fix one that is accepted typed back. Was: each set-up's
job refused in its own line (``device='cuda': no CUDA GPU is visible ... Fix: run it on a GPU machine, or
add plan=true ...``), whose ``plan=true`` the tuner refuses (``plan=true: the tuner measures runs``). A plan
answers the tuner's question without a GPU: the fix names the plan of the same ``space.*`` set-ups
(:func:`plan_command`) where the plan's own checks accept it. Imported when a tuning sweep judges its set-ups.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

TUNER_ONLY = ("hydra/sweeper", "repeats")
"""Keys of a tuning command line that a plan does not take (besides ``hydra.sweeper.*``): dropped from it."""

PLANNED_GPU = "H100"
"""The GPU the plan fix names (any of the peak table's: the user's own is not here to ask)."""


def plan_command(overrides: Sequence[str], nodes: tuple[int, int]) -> str | None:
    """The command that plans the tuner's ``space.*`` set-ups without a GPU: ``overrides`` (the tuning's
    command line) without the tuner's own keys (:data:`TUNER_ONLY`, ``hydra.sweeper.*``), with ``plan=true
    plan_clusters=[H100:N]`` (``nodes``: nnodes and ranks per node as the tuner placed them), each word as
    the shell takes it; None where the space is no ``space.*`` list (Hydra's axes: a plan ranks the space
    only), an override is a sweep, or the plan's checks refuse it
    (:func:`flopsweep.plan_command_line.command_line_problem`)."""
    from flopsweep.override_parsing import override_key, parsed_or_none
    from flopsweep.plan_command_line import command_line_problem
    from flopsweep.shown_overrides import typed_back

    kept = []
    for override in overrides:
        key = override_key(override)
        if key in TUNER_ONLY or key.startswith("hydra.sweeper."):
            continue
        parsed = parsed_or_none(override)
        if parsed is None or parsed.is_sweep_override():
            return None
        kept.append(override)
    if not any(override_key(o).startswith("space.") for o in kept):
        return None
    nnodes, per = nodes
    cluster = f"{PLANNED_GPU}:{per}" if nnodes == 1 else f"{PLANNED_GPU}:{nnodes}x{per}"
    command = [*kept, "plan=true", f"plan_clusters=[{cluster}]"]
    if command_line_problem(command) is not None:
        return None
    return " ".join(["flopsweep", *(shlex.quote(typed_back(o)) for o in command)])


def no_gpu_line(judging: Any, alive: Sequence[Any], env: Any = None, free: int | None = None) -> str | None:
    """The one line refusing a tuning every set-up of which (``alive``, the judged ones not pruned) sets
    ``device=cuda`` where no CUDA GPU is visible (:func:`flopsweep.local_gpus.no_gpu_here`, then torch's;
    ``env``: the machine, None: this one), each composed as its job would be and planned as its job plans
    itself (:func:`flopsweep.plan.plan`), else None (a GPU here, a set-up of another device, or one refused
    otherwise first: the job's own line). :func:`flopsweep.job.device_fix.sweep_no_gpu_error`'s rule, its
    plan fix :func:`plan_command`. ``free``: the free host memory, bytes (None: read now)."""
    from flopsweep.job.device_fix import sweep_no_gpu_error
    from flopsweep.plan import Environment, NoGpuError, plan

    if judging.gpus or not alive:  # nvidia-smi's GPUs (None for device=cpu)
        return None
    composed = [judging.compose(c.overrides) for c in alive]
    if any(cfg.device != "cuda" for cfg, _ in composed):
        return None
    if env is None:
        from flopsweep.local_gpus import no_gpu_here

        if not no_gpu_here():
            return None
        env = Environment.detect()  # torch's answer, as each job's
    if env.cuda_available:
        return None
    given = []
    for cfg, choices in composed:
        try:
            plan(cfg, env, choices=choices)
        except NoGpuError as exc:
            given.append(exc.given)
            continue
        except Exception:  # noqa: BLE001 - refused otherwise: the job's own line, in its record
            return None
        return None
    task = [str(o) for o in judging.s.config.hydra.overrides.task]
    command = plan_command(task, judging.nodes)
    fix = f"rank the same set-ups here without a GPU: {command}" if command else None
    return str(sweep_no_gpu_error(given, env, len(alive), free, units=("tuning", "set-up"), plan_fix=fix))

"""The note before a sweep over distributed backends whose every job runs one rank on the CPU (session 41,
docs/reliability-13.md #944): ``-m +sweep=backends device=cpu model=gpt-tiny`` ran DDP, FSDP and ZeRO 1-3 each
on 1 rank (``nproc_per_node=auto`` is 1 on the CPU) and said nothing, so the comparison compared no
all-reduce, no sharding. A note, not a refusal: the sweep runs as typed, its exit status unchanged.
Torch-free.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any


def _distributed(choice: str) -> bool:
    """Whether ``backend=CHOICE`` runs over several ranks where given them (not ``single``: its spec's
    ``max_ranks`` is 1; ``zero1``-``zero3`` are DeepSpeed's shorthands, no spec of their own)."""
    from flopsweep.backend_specs import backend_spec

    spec = backend_spec(choice)
    return spec is None or spec.max_ranks != 1


def one_rank_note(
    said: Sequence[Mapping[str, str]], config: Mapping[str, object], no_gpu: Callable[[], bool]
) -> str | None:
    """The line for a sweep whose jobs (``said``: each job's overrides as ``{key: value}``, the last of a key
    winning; ``config``: the sweep's composed config, for the keys a job does not set) sweep ``backend`` over
    at least one distributed backend, each on the CPU (``device=cpu``, or ``auto`` where ``no_gpu()``) with
    ``nproc_per_node`` ``auto`` or ``1`` and ``nnodes=1``: one rank each. None otherwise (a plan, a GPU, two
    ranks, one backend)."""
    if not said or any("backend" not in s for s in said):
        return None
    backends = list(dict.fromkeys(s["backend"] for s in said))

    def value(s: Mapping[str, str], key: str) -> str:
        return str(s.get(key, config.get(key))).strip().lower()

    distributed = [b for b in backends if _distributed(b)]
    if len(backends) < 2 or not distributed:
        return None
    if any(value(s, "plan") != "false" or value(s, "nnodes") != "1" for s in said):
        return None
    if any(value(s, "nproc_per_node") not in ("auto", "1") for s in said):
        return None
    devices = {value(s, "device") for s in said}
    if not devices <= {"cpu", "auto"} or ("auto" in devices and not no_gpu()):
        return None
    single = [b for b in backends if not _distributed(b)]
    then = f" (backend={single[0]} runs one rank only and is then refused on its own)" if single else ""
    return (
        "flopsweep: note: every job of this sweep runs on 1 rank on the CPU (nproc_per_node=auto is 1 "
        f"there), so backend={','.join(distributed)} compare no all-reduce or sharding; to compare them, add "
        f"nproc_per_node=2 (2 CPU ranks over gloo){then}"
    )


def sweep_note(jobs: Sequence[Sequence[str]], config: Any) -> str | None:
    """:func:`one_rank_note` for the jobs of any of flopsweep's sweepers (``jobs``: each job's overrides as
    typed, the last of a key winning; ``config``: the sweep's composed config, ``hydra.launcher`` with it),
    where those jobs run on this machine (:func:`flopsweep.launcher_choice.runs_here`: Hydra's basic
    launcher, ``pool``, ``submitit_local``, ``slurm_local``; not Slurm's nodes); else None. The one decision
    the default sweeper (its batches), ``optuna_objective`` (its study's space) and ``tune`` (its set-ups
    left after pruning) print before their first job. Was (session 41): the default sweeper's alone."""
    from flopsweep.launcher_choice import runs_here
    from flopsweep.local_gpus import no_gpu_here
    from flopsweep.override_parsing import key_values

    hydra = config.get("hydra") or {}
    launcher = (hydra.get("launcher") or {}).get("_target_", "")
    if not runs_here(str(launcher)):
        return None
    said = [key_values(job) for job in jobs]
    return one_rank_note(said, config, no_gpu_here)

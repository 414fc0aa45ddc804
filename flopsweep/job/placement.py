"""Where ``plan=true`` places a job (:func:`plan_environment`: GPUs that are not here, several
nodes), the notes its row carries for what it cannot check here, and the run's warning when it is
given ``plan_gpu`` (:func:`warn_plan_gpu`), which only ``plan=true`` reads.
"""

from __future__ import annotations

import dataclasses
import re

from flopsweep.config import ConfigError, RunConfig
from flopsweep.layout import Plan
from flopsweep.peak_row import PeakRow
from flopsweep.peaks import form_taken, lookup
from flopsweep.plan import Environment, fixed_nproc
from flopsweep.text import significant


def plan_environment(
    cfg: RunConfig, env: Environment, here_gpu: str | None = None
) -> tuple[RunConfig, Environment, list[str]]:
    """Where ``plan=true`` places ``cfg``: ``env`` (this machine, whose GPU is ``here_gpu``:
    :func:`torch_device_name`, None without one) changed to the machine the job is planned for,
    with a note for each change.

    - A GPU job for ``plan_gpu``, a GPU of the peak table that is not this machine's (``device=cuda``
      or ``auto``; ``auto`` with ``plan_gpu`` or ``plan_gpu_memory_gib`` and no GPU here plans as on
      GPUs) is placed as on that GPU: its compute capability, bf16 support and vendor
      (:class:`flopsweep.peak_row.PeakRow`, :attr:`Environment.planned_gpu`), so that the run's own
      rules refuse what it cannot run (fp8 below 8.9, bf16 on a V100, cuDNN on an AMD GPU). A plan of
      this machine's own GPU is this machine's.
    - A GPU job on a machine without GPUs and no such name (``plan_gpu_memory_gib`` alone,
      ``device=cuda``) is placed as on GPUs of compute capability 9.0 with bf16 (:data:`NO_GPU_NOTE`).
    - A plan for GPUs that are not here (``plan_gpu``, ``plan_gpu_memory_gib``) checks neither this
      host's memory nor its paths (``backend.nvme_path``): they are the target's
      (:func:`offload_host_note`, :func:`nvme_path_note` say so in the row).
    - ``nnodes`` > 1 outside Slurm is placed as the Slurm task it must run as (a run needs
      ``hydra/launcher=slurm``; the job's nodes like this one, or ``plan_gpu``'s).
    - A GPU that validation refuses (:func:`flopsweep.memory.planned_gpu_bytes`: a name the peak
      table does not know, with ``plan_gpu_memory_gib`` or without, ``plan_gpu=A100`` without its
      memory size, a size it is not sold in, a memory that is not positive) places
      nothing and notes nothing: the row is ``invalid`` with that refusal alone.
    """
    from flopsweep.memory import planned_gpu_bytes

    notes = []
    asked_gpu = cfg.plan_gpu is not None or cfg.plan_gpu_memory_gib is not None
    try:
        planned_gpu_bytes(cfg.plan_gpu, cfg.plan_gpu_memory_gib)
        refused = False
    except ConfigError:  # validate refuses the GPU asked for: it is placed nowhere
        refused = True
    if cfg.device == "auto" and asked_gpu and not env.cuda_available:  # a GPU question on a laptop
        cfg = dataclasses.replace(cfg, device="cuda")
    row = lookup(cfg.plan_gpu) if cfg.plan_gpu and cfg.device != "cpu" and not refused else None
    if row is not None and (here_gpu is None or lookup(here_gpu) is not row):
        if not env.cuda_available:
            nproc = fixed_nproc(cfg.nproc_per_node) or 1
            env = dataclasses.replace(env, cuda_available=True, gpu_count=nproc)
        env = dataclasses.replace(env, bf16_supported=row.bf16, capability=row.capability, planned_gpu=row)
        notes.append(placed_note(row, here_gpu))
        if taken := form_taken(cfg.plan_gpu):  # plan_gpu=H100: the SXM module's row, said once
            notes.append(taken)
    elif cfg.device == "cuda" and not env.cuda_available and not refused:
        nproc = fixed_nproc(cfg.nproc_per_node) or 1
        env = dataclasses.replace(
            env, cuda_available=True, gpu_count=nproc, bf16_supported=True, capability=(9, 0)
        )
        notes.append(NO_GPU_NOTE)
    if asked_gpu:  # the target's hosts are not this one: their memory and paths are not known here
        env = dataclasses.replace(env, host_memory_bytes=None, paths_here=False)
    if cfg.nnodes > 1 and not env.under_slurm:
        env = dataclasses.replace(env, in_submitit=True, under_slurm=True, slurm_job=True)
        notes.append(f"nnodes={cfg.nnodes}: planned as a Slurm job (a run needs -m hydra/launcher=slurm)")
    return cfg, env, notes


NO_GPU_NOTE = (
    "no GPU here: placed as on a GPU of capability 9.0 with bf16 (plan_gpu= names a GPU to plan for its "
    "capability)"
)
"""The plan row's note for a GPU job placed on a machine without GPUs and without a ``plan_gpu`` of
the peak table (:func:`plan_environment`)."""


def placed_note(row: PeakRow, here_gpu: str | None) -> str:
    """The plan row's note for a job placed on the GPU ``row`` (``plan_gpu``) that is not this
    machine's ``here_gpu``: ``placed as an A100 (capability 8.0, bf16)``, ``placed as a V100 SXM2
    (capability 7.0, no bf16)``, ``placed as an MI300X (AMD, capability 9.4, bf16)``."""
    article = "an" if row.name[0] in "AEFHILMNORSX" else "a"  # as the letter is said: an H100, a V100
    cap = f"capability {row.capability[0]}.{row.capability[1]}"
    cap = f"AMD, {cap}" if row.vendor == "amd" else cap
    where = "no GPU here" if here_gpu is None else f"not this machine's {here_gpu}"
    return f"{where}: placed as {article} {row.name} ({cap}, {'bf16' if row.bf16 else 'no bf16'})"


def offload_host_note(p: Plan) -> str:
    """For a plan of GPUs that are not here (``plan_gpu``, ``plan_gpu_memory_gib``), whose hosts'
    memory this machine cannot know: the host memory the offloaded states need per node
    (:func:`flopsweep.memory.offload_host_bytes` times the node's ranks, a lower bound), stated
    instead of checked; empty without offload."""
    from flopsweep.memory import offload_host_bytes, offload_host_held_bytes

    need = offload_host_bytes(p.cfg, p.layout) * p.nproc_per_node
    if not need:
        return ""
    held = offload_host_held_bytes(p.cfg, p.layout) * p.nproc_per_node
    return (
        f"offload needs at least {significant(need / 2**30, 4)} GiB of host memory per node, about "
        f"{significant(held / 2**30, 4)} GiB as measured on the H200's host (not checked: the planned "
        "GPUs' hosts are not this machine)"
    )


def nvme_path_note(cfg: RunConfig) -> str:
    """For a plan of GPUs that are not here: that ``backend.nvme_path`` of an NVMe offload is the
    target machine's, checked when the run launches; empty without NVMe offload."""
    nvme = any(getattr(cfg.backend, k, "none") == "nvme" for k in ("offload_optimizer", "offload_param"))
    path = getattr(cfg.backend, "nvme_path", None)
    if not (nvme and path):
        return ""
    return f"backend.nvme_path={path} is checked when the run launches (not here: another machine's path)"


def package_note(cfg: RunConfig) -> str:
    """For a plan of GPUs that are not here: that the attention kernel's package (``xformers``) is
    the target machine's, checked when the run launches; empty for a kernel of torch itself."""
    from flopsweep.attention import KERNELS

    package = KERNELS[cfg.attention.name].package
    if package is None:
        return ""
    return (
        f"attention={cfg.attention.name}: the {package} package is checked when the run launches (not here)"
    )


def warn_plan_gpu(cfg: RunConfig, device_name: str | None) -> str | None:
    """The one-line warning for a run (``plan=false``) given ``plan_gpu`` or ``plan_gpu_memory_gib``,
    which only ``plan=true`` reads; None when neither is set, when ``plan=true``, or when
    ``device_name`` (this machine's GPU, ``torch.cuda.get_device_name``; None on the CPU) is the GPU
    named (its model, ``H200`` of ``H200-141GB``, in the name, case ignored). A sweep file may name
    the GPUs it is written for (``layouts-8gpu-llama8b``: ``plan_gpu: H200``), so a run on them says
    nothing; elsewhere the run goes ahead on this machine's device and the line says so (a run given
    ``plan_gpu=H100`` trained on the local device in silence: a fresh-user trial)."""
    if cfg.plan:
        return None
    here = device_name or "this machine's CPU"
    if cfg.plan_gpu is not None:
        model = str(cfg.plan_gpu).split("-")[0].strip()
        if device_name and model and re.search(rf"\b{re.escape(model)}\b", device_name, re.IGNORECASE):
            return None  # a whole word of the name: H200 is not GH200's, A10 not A100's
        return (
            f"plan_gpu={cfg.plan_gpu} is read by plan=true only; this run measures {here}, not the "
            f"{cfg.plan_gpu} it names (add plan=true to plan for it)"
        )
    if cfg.plan_gpu_memory_gib is not None:
        return (
            f"plan_gpu_memory_gib={cfg.plan_gpu_memory_gib} is read by plan=true only; this run measures "
            f"{here} (add plan=true to plan for that memory)"
        )
    return None


def torch_device_name() -> str:
    """The name of GPU 0 (``torch.cuda.get_device_name``)."""
    import torch

    return torch.cuda.get_device_name(0)


DEEPSPEED_BACKENDS = frozenset({"deepspeed", "zero1", "zero2", "zero3"})
"""The ``backend=`` and ``space.backends`` names whose memory estimate reads DeepSpeed's own estimators
(:func:`flopsweep.zero_memory.deepspeed_states` imports ``deepspeed``, which imports torch)."""


def job_libraries(cfg: RunConfig) -> tuple[str, ...]:
    """The libraries of C code that the job of ``cfg`` imports, in the order to import them: ``run.py``
    imports them before the job starts, while a signal still ends the process or is held between jobs
    (:mod:`flopsweep.signals`). A SIGINT that landed inside such an import once the job had started left
    the module half-made (its C code swallows the ``KeyboardInterrupt``: ``module 'numpy' has no attribute
    'matrix'``): the job went on, the sweep's table failed and it exited 0.

    - a run: ``torch`` (its ranks, its record);
    - a plan of one set-up (``plan_gpu`` or this machine's GPU): ``torch`` (its placement reads this
      machine's GPU: :meth:`flopsweep.plan.Environment.detect`) and ``pandas`` (its table), and
      ``deepspeed`` for a DeepSpeed backend (its memory estimate);
    - a plan over clusters (``plan_clusters``): ``deepspeed`` where ``space.backends`` has a ZeRO
      backend, else nothing (its table is its own text: torch-free).
    """
    if not cfg.plan:
        return ("torch",)
    if cfg.plan_clusters:
        backends = {str(b) for b in (getattr(cfg.space, "backends", None) or ())}
        return ("deepspeed",) if backends & DEEPSPEED_BACKENDS else ()
    deepspeed = ("deepspeed",) if str(getattr(cfg.backend, "name", "")) in DEEPSPEED_BACKENDS else ()
    return ("torch", "pandas", *deepspeed)

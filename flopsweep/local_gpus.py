"""This machine's GPUs, known without torch where that can be (``nvidia-smi``, the device files, the
variables that hide GPUs) and asked of torch where it must (:func:`this_machine`, :func:`local_gpu_name`).

Torch-free at import: ``run.py`` refuses ``plan_clusters=[here]`` before Hydra on a machine that surely has
no GPU (:func:`no_gpu_here`); ``plan_clusters``' ``here`` (:func:`flopsweep.clusters.parse_cluster`) and the
tuner's machine at hand (``hydra/sweeper=tune``: :func:`gpus_here`) read it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

NVIDIA_SMI_TIMEOUT_S = 10
"""The deadline of ``nvidia-smi`` (:func:`gpus_here`), in seconds."""

GPU_DEVICE_NODES = ("/dev/nvidia[0-9]*", "/dev/kfd", "/dev/dxg")
"""The device files a GPU runtime opens, by ``glob``: NVIDIA's driver (one per GPU, ``/dev/nvidia0``; a
container is given those of its GPUs), ROCm's (``/dev/kfd``: torch's ROCm build answers ``torch.cuda`` too),
and WSL 2's GPU paravirtualisation (``/dev/dxg``: CUDA there has no ``/dev/nvidia*``)."""


def gpus_here() -> list[tuple[str, int]]:
    """``(name, memory bytes)`` of this machine's GPUs from ``nvidia-smi`` (torch-free; within
    :data:`NVIDIA_SMI_TIMEOUT_S`), ``[]`` without one or without the tool."""
    import shutil
    import subprocess

    tool = shutil.which("nvidia-smi")
    if tool is None:
        return []
    try:
        out = subprocess.run(
            [tool, "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT_S,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in out.splitlines()[:64]:
        name, _, mib = line.rpartition(",")
        if name.strip() and mib.strip().isdigit():
            gpus.append((name.strip(), int(mib) * 2**20))
    return gpus


HIDING_VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
"""The variables by which the CUDA and ROCm runtimes show a process only some GPUs (NVIDIA's CUDA
C Programming Guide, "CUDA Environment Variables"; ROCm's "GPU isolation techniques"): set empty, or
to a list whose first entry is no device id (``-1``, ``NoDevFiles``: :data:`DEVICE_ID`), they hide every
GPU, and torch then finds none (``torch.cuda.is_available()`` is False) on a machine with GPUs."""


DEVICE_ID = re.compile(r"(?:[0-9]{1,6}|(?:GPU|MIG)-[0-9A-Za-z/_.-]{1,120})")
r"""A device id that ``CUDA_VISIBLE_DEVICES`` accepts: an index, or a GPU or MIG UUID (or its prefix)
as ``nvidia-smi -L`` lists it (CUDA C Programming Guide, "CUDA Environment Variables"); digits 0-9 only
(``\d`` took ``٠``, an Arabic-Indic zero, which CUDA reads as no device). The runtime reads the list up
to its first entry that is not one (or names no GPU of the machine): only the GPUs before it are seen."""


def gpus_hidden(environ: Mapping[str, str] | None = None) -> str | None:
    """The ``NAME=VALUE`` of a :data:`HIDING_VARIABLES` variable that hides every GPU from this process
    (empty, or a first entry that is no device id, :data:`DEVICE_ID`: ``CUDA_VISIBLE_DEVICES=''``, ``=-1``,
    ``=NoDevFiles``, as a batch system sets it for a job given no GPU), else None. ``environ``: the
    environment (``os.environ`` when None)."""
    environ = os.environ if environ is None else environ
    for name in HIDING_VARIABLES:
        value = environ.get(name)
        if value is not None and not DEVICE_ID.fullmatch(value.split(",")[0].strip()):
            return f"{name}={value!r}"
    return None


def hidden_words(name: str, value: str, physical: int | None) -> tuple[str, str | None]:
    """How ``NAME=VALUE`` (a :data:`HIDING_VARIABLES` variable) leaves this process no GPU, as the words after
    ``NAME='VALUE'``, and the first fix (None: none but a GPU machine). ``physical``: this machine's GPUs
    whatever the variable says (:func:`physical_gpu_count`; None: unknown).

    - empty or ``-1``: ``hides every GPU from this process``, ``unset NAME``;
    - a first entry that is no id (``NoDevFiles``): ``names no GPU: 'NoDevFiles' is not an index or a
      GPU-/MIG- UUID, so it hides every GPU``, ``unset NAME``;
    - the index of a GPU that is not here (the runtime stops at it): ``7`` on a 1-GPU machine, ``names GPU
      7, and this machine has 1 GPU (index 0)``, ``set NAME=0 (a GPU of this machine), or unset NAME``;
      on a machine without GPUs, ``names GPU 7, and this machine has none``, None;
    - else (a UUID, or a GPU torch cannot use): ``shows it only the GPUs named, and torch sees none of
      them``, ``unset NAME``.
    """
    first, unset = value.split(",")[0].strip(), f"unset {name}"
    if not first or re.fullmatch(r"-[0-9]+", first):
        return "hides every GPU from this process", unset
    if not DEVICE_ID.fullmatch(first):
        return f"names no GPU: {first!r} is not an index or a GPU-/MIG- UUID, so it hides every GPU", unset
    if physical == 0:
        return f"names GPU {first}, and this machine has none", None
    if physical is not None and first.isdigit() and int(first) >= physical:
        has = "1 GPU (index 0)" if physical == 1 else f"{physical} GPUs (indices 0 to {physical - 1})"
        return (
            f"names GPU {first}, and this machine has {has}",
            f"set {name}=0 (a GPU of this machine), or {unset}",
        )
    return "shows it only the GPUs named, and torch sees none of them", unset


def physical_gpu_count() -> int | None:
    """This machine's NVIDIA GPUs whatever ``CUDA_VISIBLE_DEVICES`` says: its ``/dev/nvidia<N>`` device
    files (one per GPU; a container's, those it was given), read without a process. None where that
    cannot tell (another runtime's device files, ``/dev/kfd`` or ``/dev/dxg``, and no NVIDIA one)."""
    import glob

    count = len(glob.glob(GPU_DEVICE_NODES[0]))
    return None if not count and any(glob.glob(node) for node in GPU_DEVICE_NODES[1:]) else count


def no_gpu_here() -> bool:
    """Whether this machine surely has no GPU that torch could use, known without torch: a
    :data:`HIDING_VARIABLES` variable hides every GPU (:func:`gpus_hidden`: ``CUDA_VISIBLE_DEVICES=''``
    on a GPU host), or none of the :data:`GPU_DEVICE_NODES` exists and ``nvidia-smi``
    (:func:`gpus_here`) lists none. False when unsure (a device file is there: torch, in the job, says;
    :func:`this_machine`), so that ``run.py`` refuses ``plan_clusters=[here]`` before Hydra only where
    the job would."""
    import glob

    if gpus_hidden() is not None:
        return True
    return not any(glob.glob(pattern) for pattern in GPU_DEVICE_NODES) and not gpus_here()


def this_machine() -> tuple[str, int]:
    """``(GPU name, GPU count)`` of this machine, asked of torch; ``("", 0)`` without a GPU."""
    import torch

    if not torch.cuda.is_available():
        return "", 0
    return torch.cuda.get_device_name(0), torch.cuda.device_count()


def local_gpu_name() -> str | None:
    """This machine's GPU 0 as torch names it (:func:`this_machine`); None without a GPU, or when
    torch is not imported yet (never imported for a hint: seconds, and the torch-free paths stay so)."""
    import sys

    if "torch" not in sys.modules:
        return None
    try:
        name, count = this_machine()
    except Exception:  # noqa: BLE001 - no torch, no driver: no GPU to name
        return None
    return name if count > 0 else None

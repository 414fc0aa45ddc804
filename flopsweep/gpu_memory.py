"""The memory of the GPU that ``plan=true`` plans for (``plan_gpu=``, ``plan_gpu_memory_gib=``), from
the GPU table's rows (:attr:`flopsweep.peaks.PeakRow.memory_gib`). Torch-free."""

from __future__ import annotations

from flopsweep.config import MAX_BY_KEY, ConfigError
from flopsweep.peaks import GPU_MEMORY_GIB, PEAK_TABLE, lookup, memory_sizes_gb

GIB = 2**30


def planned_gpu_bytes(gpu: str | None, gpu_memory_gib: float | None) -> tuple[int, str] | None:
    """The memory of the GPU that ``plan=true`` plans for when it is not (or not only) the one
    here: ``(bytes, label)``, or None when neither key is set.

    Args:
        gpu: ``plan_gpu``: a device name of the peak table (:func:`flopsweep.peaks.lookup`:
            ``H100``, ``NVIDIA H100 80GB HBM3``, ``H200``, ``A100-40GB``); its memory is the
            table's (:attr:`flopsweep.peaks.PeakRow.memory_gib`: what the driver reports, ``H100``
            and ``H100-80GB`` alike 79.6 GiB), a size in the name (nominal GB, as vendors name
            devices) picking one of the sizes the device is sold in. Label: ``H100 SXM (79.6 GiB)``,
            ``A100 40 GB (40 GiB)``.
        gpu_memory_gib: ``plan_gpu_memory_gib``: the memory in GiB, as given; wins over the name's.

    Raises:
        ConfigError: a name the peak table does not know, naming those it knows (:func:`typed_gpu_names`;
            with or without ``gpu_memory_gib``), a
            memory that is not positive or finite or is over ``MAX_BY_KEY``'s bound, or,
            without ``gpu_memory_gib``, a size in the name the device
            is not sold in (``H100-94GB``) or a name of a device that comes in several sizes without one.
    """
    row = lookup(gpu) if gpu else None
    if gpu and row is None:  # with or without a memory: the name also places the job (its capability)
        names = ", ".join(typed_gpu_names())
        size = gpu.strip().lower().removesuffix("gib").removesuffix("gb").strip()
        fix = "use one of those"
        if size.replace(".", "", 1).isdigit():  # a memory size given as a name
            fix = f"use one of those, or plan_gpu_memory_gib={size} for a memory size in GiB"
        raise ConfigError("plan_gpu", gpu, f"is no device of the peak table ({names})", fix)
    if gpu_memory_gib is not None:
        most = MAX_BY_KEY["plan_gpu_memory_gib"]
        if not 0 < gpu_memory_gib <= most:  # nan and inf too: a plan row, not a traceback (trial 12b)
            raise ConfigError(
                "plan_gpu_memory_gib",
                gpu_memory_gib,
                f"must be a positive number of GiB, at most {most:g}",
                "set e.g. plan_gpu_memory_gib=80",
            )
        label = f"{gpu} ({gpu_memory_gib:g} GiB)" if gpu else f"{gpu_memory_gib:g} GiB"
        return int(gpu_memory_gib * GIB), label
    if row is None:
        return None
    sizes = GPU_MEMORY_GIB[row.name]
    several = len(set(sizes.values())) > 1
    named = memory_sizes_gb(gpu)
    size = next((gb for gb in named if gb not in sizes), None)  # a size it is not sold in
    if size is not None or (several and not named):
        raise ConfigError("plan_gpu", gpu, *_size_refusal(row.name, sizes, size))
    gb = named[0] if named else next(iter(sizes))
    gib = sizes[gb]
    return int(gib * GIB), f"{row.name} {gb:g} GB ({gib:g} GiB)" if several else f"{row.name} ({gib:g} GiB)"


def _size_refusal(name: str, sizes: dict[float, float], size: float | None) -> tuple[str, str]:
    """``(problem, fix)`` of :func:`planned_gpu_bytes`'s refusal of ``plan_gpu`` naming the device
    ``name`` (canonical) sold in ``sizes`` (:attr:`flopsweep.peaks.PeakRow.memory_gib`): with a
    ``size`` it is not sold in (nominal GB; the fix names a variant of the same family that is,
    ``H100-94GB``: ``H100-NVL``), or (``size`` None) without a size though it comes in several."""
    first = {gib: gb for gb, gib in reversed(sizes.items())}  # one size per memory (GH200: 96, not 480)
    sold = " or ".join(f"{gb:g} GB ({gib:g} GiB)" for gib, gb in reversed(first.items()))
    other = "or set plan_gpu_memory_gib= (GiB) for another memory"
    if size is None:
        return f"{name} comes in more than one memory size ({sold})", (
            f"name the size, e.g. plan_gpu={name.replace(' ', '-')}-{list(sizes)[-1]:g}GB, {other}"
        )
    family = [n for n, s in GPU_MEMORY_GIB.items() if size in s and n.split()[0] == name.split()[0]]
    variant = "".join(f"plan_gpu={n.replace(' ', '-')} ({size:g} GB), " for n in family)
    if len(first) > 1:
        return (
            f"names {size:g} GB; the {name} is sold with {sold}",
            f"name one of those sizes, {variant}{other}",
        )
    return f"names {size:g} GB; the {name} has {sold}", (
        f"drop the size (plan_gpu={name.replace(' ', '-')}), {variant}{other}"
    )


def typed_gpu_names() -> tuple[str, ...]:
    """The names of the peak table's devices as a user types them (``plan_gpu=``, a ``plan_clusters``
    entry), each one :func:`planned_gpu_bytes` takes: per row its short name, the row's name cut to its
    shortest alias (``H100``, ``H100-PCIe``, ``RTX-6000-Ada``), and that name with each memory size the
    device is sold in (``H100-80GB``; GB as vendors name devices). A device sold with several memories
    (``A100``: 40 and 80 GB) by its sized names alone (``A100-40GB``, ``A100-80GB``): its bare name is
    refused, since the memory would be a guess. In the table's order."""
    names: list[str] = []
    for row in PEAK_TABLE:
        alias = min(row.aliases, key=len)
        short = row.name[: len(alias)] if row.name.lower().startswith(alias) else alias.upper()
        short = short.replace(" ", "-")
        several = len(set(row.memory_gib.values())) > 1
        names += ([] if several else [short]) + [f"{short}-{gb:g}GB" for gb in row.memory_gib]
    return tuple(names)

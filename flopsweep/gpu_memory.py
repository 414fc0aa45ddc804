"""The memory of the GPU that ``plan=true`` plans for (``plan_gpu=``, ``plan_gpu_memory_gib=``), from
the GPU table's rows (:attr:`flopsweep.peak_row.PeakRow.memory_gib`). Torch-free."""

from __future__ import annotations

import re

from flopsweep.config import ConfigError, typed_form
from flopsweep.limits import MAX_BY_KEY
from flopsweep.lookalike import ascii_lookalike, misread
from flopsweep.peaks import GPU_MEMORY_GIB, PEAK_TABLE, lookup, memory_sizes_gb
from flopsweep.text import figure

GIB = 2**30
MIN_GPU_MEMORY_GIB = 1.0
"""The least ``plan_gpu_memory_gib``: every GPU current torch runs on (compute capability 5.0 and up)
has 2 GB or more, and the peak table's smallest has 16 GB, so a value under 1 GiB is a unit slip (MiB,
or bytes) or a typo: ``plan_gpu_memory_gib=0.001`` planned for 1 MiB and called every set-up unfit."""


def planned_gpu_bytes(gpu: str | None, gpu_memory_gib: float | None) -> tuple[int, str] | None:
    """The memory of the GPU that ``plan=true`` plans for when it is not (or not only) the one
    here: ``(bytes, label)``, or None when neither key is set.

    Args:
        gpu: ``plan_gpu``: a device name of the peak table (:func:`flopsweep.peaks.lookup`:
            ``H100``, ``NVIDIA H100 80GB HBM3``, ``H200``, ``A100-40GB``); its memory is the
            table's (:attr:`flopsweep.peak_row.PeakRow.memory_gib`: what the driver reports, ``H100``
            and ``H100-80GB`` alike 79.6 GiB), a size in the name (nominal GB, as vendors name
            devices) picking one of the sizes the device is sold in. Label: ``H100 SXM (79.6 GiB)``,
            ``A100 40 GB (40 GiB)``.
        gpu_memory_gib: ``plan_gpu_memory_gib``: the memory in GiB, as given; wins over the name's.
            The label names the GPU as the table spells it (:func:`canonical_gpu_name`: ``h100``: ``H100``).

    Raises:
        ConfigError: a name the peak table does not know, naming those it knows (:func:`typed_gpu_names`;
            with or without ``gpu_memory_gib``; ``did you mean`` the name misread, ``H2OO``: ``H200``), a
            memory that is not positive or finite, under :data:`MIN_GPU_MEMORY_GIB` or over
            ``MAX_BY_KEY``'s bound, or,
            without ``gpu_memory_gib``, a size in the name the device
            is not sold in (``H100-94GB``) or a name of a device that comes in several sizes without one.
    """
    row = lookup(gpu) if gpu else None
    if gpu and row is None:  # with or without a memory: the name also places the job (its capability)
        names = ", ".join(typed_gpu_names())
        size = gpu.strip().lower().removesuffix("gib").removesuffix("gb").strip()
        fix = f"use one of those, e.g. plan_gpu={nearest_gpu_name(gpu)}"
        if (alike := ascii_lookalike(gpu, typed_gpu_names())) is not None:  # 'Н100', a Cyrillic Н
            fix = f"did you mean plan_gpu={alike[0]}? ({alike[1]})"
        elif (slip := misread(gpu.strip(), typed_gpu_names())) is not None:  # H2OO, letters O for zeros
            fix = f"did you mean plan_gpu={slip[0]}? ({slip[1]})"
        elif size.replace(".", "", 1).isdigit():  # a memory size given as a name
            fix = f"use one of those, or plan_gpu_memory_gib={size} for a memory size in GiB"
        raise ConfigError("plan_gpu", gpu, f"is no device of the peak table ({names})", fix)
    if gpu_memory_gib is not None:
        most = MAX_BY_KEY["plan_gpu_memory_gib"]
        if not 0 < gpu_memory_gib <= most:  # nan and inf too: a plan row, not a traceback (trial 12b)
            raise ConfigError(
                "plan_gpu_memory_gib",
                gpu_memory_gib,
                f"must be a positive number of GiB, at most {typed_form(most)}",
                "set e.g. plan_gpu_memory_gib=80",
            )
        if gpu_memory_gib < MIN_GPU_MEMORY_GIB:  # 0.001: no GPU is that small (MiB meant?)
            raise ConfigError(
                "plan_gpu_memory_gib",
                gpu_memory_gib,
                f"is under {typed_form(MIN_GPU_MEMORY_GIB)} GiB, less than any GPU's memory "
                "(the unit is GiB, not MiB)",
                "set the GPU's memory in GiB, e.g. plan_gpu_memory_gib=80 (an H100's), or drop it",
            )
        shown = typed_form(gpu_memory_gib)
        label = f"{canonical_gpu_name(gpu)} ({shown} GiB)" if gpu else f"{shown} GiB"
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
    return (
        int(gib * GIB),
        f"{row.name} {figure(gb, 6)} GB ({figure(gib, 6)} GiB)"
        if several
        else f"{row.name} ({figure(gib, 6)} GiB)",
    )


def _size_refusal(name: str, sizes: dict[float, float], size: float | None) -> tuple[str, str]:
    """``(problem, fix)`` of :func:`planned_gpu_bytes`'s refusal of ``plan_gpu`` naming the device
    ``name`` (canonical) sold in ``sizes`` (:attr:`flopsweep.peak_row.PeakRow.memory_gib`): with a
    ``size`` it is not sold in (nominal GB; the fix names a variant of the same family that is,
    ``H100-94GB``: ``H100-NVL``), or (``size`` None) without a size though it comes in several."""
    first = {gib: gb for gb, gib in reversed(sizes.items())}  # one size per memory (GH200: 96, not 480)
    sold = " or ".join(f"{figure(gb, 6)} GB ({figure(gib, 6)} GiB)" for gib, gb in reversed(first.items()))
    other = "or set plan_gpu_memory_gib= (GiB) for another memory"
    if size is None:
        return f"{name} comes in more than one memory size ({sold})", (
            f"name the size, e.g. plan_gpu={name.replace(' ', '-')}-{typed_form(list(sizes)[-1])}GB, {other}"
        )
    family = [n for n, s in GPU_MEMORY_GIB.items() if size in s and n.split()[0] == name.split()[0]]
    variant = "".join(f"plan_gpu={n.replace(' ', '-')} ({figure(size, 6)} GB), " for n in family)
    if len(first) > 1:
        return (
            f"names {figure(size, 6)} GB; the {name} is sold with {sold}",
            f"name one of those sizes, {variant}{other}",
        )
    return f"names {figure(size, 6)} GB; the {name} has {sold}", (
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
        names += ([] if several else [short]) + [f"{short}-{typed_form(gb)}GB" for gb in row.memory_gib]
    return tuple(names)


_SPELLED = {
    **{w.lower(): w for row in PEAK_TABLE for w in row.name.split()},  # H100, SXM, PCIe, NVL, Ada, MI300X
    **{w.lower(): w for w in ("NVIDIA", "Tesla", "AMD", "Instinct", "Generation", "HBM2e", "HBM3e")},
}
"""Words of device names as the peak table (and vendors) spell them, by their lower case."""


def canonical_gpu_name(name: str) -> str:
    """A device name a user typed (``plan_gpu``, a ``plan_clusters`` entry) spelled as the peak table
    spells it, for labels and rows: ``h100``: ``H100``; ``h100-pcie-80gb``: ``H100-PCIe-80GB``;
    ``nvidia a100-sxm4-40gb``: ``NVIDIA A100-SXM4-40GB``. Each word is re-cased (the table's spelling,
    else upper case), the separators kept, so the name still names the same row
    (:func:`flopsweep.peaks.lookup`) and size; a name the table does not know is returned as given."""
    if lookup(name) is None:
        return name
    parts = re.split(r"([\s_\-]+)", name.strip())
    return "".join(p if i % 2 else _SPELLED.get(p.lower(), p.upper()) for i, p in enumerate(parts))


def nearest_gpu_name(gpu: str) -> str:
    """The name of the peak table (:func:`typed_gpu_names`) nearest ``gpu``
    (:func:`flopsweep.lookalike.near_names`: case and letters read as digits aside, ``H2OO``: ``H200``;
    else by its letters, cutoff 0.4), for a refusal's fix to type; ``H100`` where none is near
    (``foo``, ``B999``)."""
    import difflib

    from flopsweep.lookalike import near_names

    names = {name.lower(): name for name in typed_gpu_names()}
    near = near_names(gpu.strip(), list(names.values()), n=1)
    near = near or [
        names[m] for m in difflib.get_close_matches(gpu.strip().lower(), list(names), n=1, cutoff=0.4)
    ]
    return near[0] if near else "H100"

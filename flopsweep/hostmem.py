"""Host memory as the OOM killer sees it: the machine's, or less under a cgroup memory limit.

``psutil.virtual_memory()`` reads ``/proc/meminfo``, which in a container or a Slurm job with
``--mem`` (``ConstrainRAMSpace=yes`` in ``cgroup.conf``) still shows the whole machine; the kernel
kills a process when its cgroup reaches the cgroup's limit. The limit is read from cgroup v2
(``memory.max`` of the process's cgroup and of each ancestor below the mount point, the smallest
wins; ``max`` is no limit) or v1 (``memory.limit_in_bytes`` of the ``memory`` controller's cgroup;
a value near 2**63 is no limit), as the kernel's cgroup documentation
(``Documentation/admin-guide/cgroup-v2.rst``, "memory.max") describes. Every read is bounded and
follows no link (:func:`flopsweep.safe_read.read_regular`); anything unreadable means no limit known.
"""

from __future__ import annotations

from pathlib import Path

from flopsweep.safe_read import RecordError, read_regular

CGROUP_ROOT = Path("/sys/fs/cgroup")
"""Where the cgroup file systems are mounted (v2 alone, or one folder per v1 controller)."""

PROC_CGROUP = Path("/proc/self/cgroup")
"""The process's cgroups: ``0::/path`` (v2) and ``N:memory:/path`` (v1), one per line."""

_READ_LIMIT = 1 << 16
"""Bytes read at most from one cgroup or proc file (sysfs reports 4096 bytes for every file)."""

_NO_LIMIT_V1 = 1 << 62
"""cgroup v1 writes an unset limit as the largest page-aligned 64-bit value; above this: none."""


def _read(path: Path) -> str | None:
    try:
        return read_regular(path, _READ_LIMIT).decode("ascii", "replace").strip()
    except RecordError:
        return None


def _paths(proc_cgroup: Path) -> dict[str, str]:
    """``{"v2": path, "memory": path}`` from ``/proc/self/cgroup`` (absent keys: not in use)."""
    found: dict[str, str] = {}
    for line in (_read(proc_cgroup) or "").splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            found["v2"] = path
        elif "memory" in controllers.split(","):
            found["memory"] = path
    return found


def _inside(root: Path, path: str) -> list[Path]:
    """The folders from ``root/path`` up to ``root``, deepest first, those that exist (a cgroup
    namespace mounts the process's own cgroup at ``root``, where ``path`` is ``/``)."""
    parts = [p for p in path.split("/") if p and p not in (".", "..")]
    folders = [root.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]
    return [f for f in folders if f.is_dir() and not f.is_symlink()]


def _number(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def cgroup_limit_bytes(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> int | None:
    """The smallest cgroup memory limit over this process's cgroup and its ancestors, in bytes;
    None when there is none or it cannot be read. ``root``, ``proc_cgroup``: the mount point and
    the process's cgroup file (other values for tests)."""
    paths = _paths(proc_cgroup)
    limits = []
    if "v2" in paths:
        for folder in _inside(root, paths["v2"]):
            limits.append(_number(_read(folder / "memory.max")))  # "max": None
    if "memory" in paths:
        for folder in _inside(root / "memory", paths["memory"]):
            value = _number(_read(folder / "memory.limit_in_bytes"))
            limits.append(value if value is not None and value < _NO_LIMIT_V1 else None)
    known = [v for v in limits if v is not None]
    return min(known) if known else None


def total_bytes() -> int:
    """The host memory a process here may use: the machine's physical memory
    (``psutil.virtual_memory().total``), or its cgroup's limit when that is smaller."""
    import psutil

    total = psutil.virtual_memory().total
    limit = cgroup_limit_bytes()
    return min(total, limit) if limit is not None else total


def available_bytes() -> int:
    """The host memory free for a new process: ``psutil.virtual_memory().available``, or less
    when the cgroup limit leaves less above what this process's deepest cgroup already uses (its
    ``memory.current`` / ``memory.usage_in_bytes``; when that cannot be read, the limit alone)."""
    import psutil

    free = psutil.virtual_memory().available
    limit = cgroup_limit_bytes()
    if limit is None:
        return free
    used = _cgroup_usage_bytes() or 0
    return max(0, min(free, limit - used))


CPU_RSS_FACTOR = 1.10
"""What a CPU rank's resident set is taken to be over its memory estimate
(:func:`flopsweep.memory.peak_bytes`), beside :data:`CPU_RSS_BASE_BYTES`. Measured here (session 40,
torch 2.x on the CPU, ``activation_checkpointing=full``, bf16, micro batch 1, ``model.seq_len=512``,
one rank): gpt-125m estimated 1.875 GiB, peak RSS 2.561 GiB; gpt-350m estimated 5.280 GiB, peak RSS
6.241 GiB: RSS = 1.081 x estimate + 0.534 GiB (the bf16 copies autocast makes of the weights, the
allocator's slack, and torch's own libraries). That line puts gpt-1.3b (estimated 19.7 GiB) at 21.8
GiB, which the OOM killer ended twice with about 21 GiB free; taken as 1.10 and 0.6 GiB."""

CPU_RSS_BASE_BYTES = 600 * 2**20
"""What a CPU rank holds whatever its model (torch's libraries, Python, the gloo buffers), bytes: the
measured 0.534 GiB of :data:`CPU_RSS_FACTOR`'s line, rounded up to 0.6 GiB (importing torch alone
holds about 0.21 GiB)."""


def cpu_need_bytes(peak_per_rank: int | float, nproc: int) -> int:
    """The host memory ``nproc`` CPU ranks of one machine are taken to need, bytes: each rank's
    estimate ``peak_per_rank`` (bytes, :func:`flopsweep.memory.peak_bytes`) times
    :data:`CPU_RSS_FACTOR`, plus :data:`CPU_RSS_BASE_BYTES`, times ``nproc``. The one margin the
    launch's check, ``plan=true``'s ``fits``, the tuner and the CPU search hold the free memory to."""
    return int(max(1, nproc) * (peak_per_rank * CPU_RSS_FACTOR + CPU_RSS_BASE_BYTES))


def cpu_peak_allowed(free: int, nproc: int) -> int:
    """The largest estimate per rank (bytes, as :func:`flopsweep.memory.peak_bytes`) whose
    :func:`cpu_need_bytes` for ``nproc`` ranks fits ``free`` bytes; 0 when not even the base fits."""
    return max(0, int((free / max(1, nproc) - CPU_RSS_BASE_BYTES) / CPU_RSS_FACTOR))


def _cgroup_usage_bytes(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> int | None:
    """The bytes charged to this process's deepest memory cgroup (v2 ``memory.current``, else v1
    ``memory.usage_in_bytes``); None when neither can be read."""
    paths = _paths(proc_cgroup)
    for key, sub, name in (
        ("v2", root, "memory.current"),
        ("memory", root / "memory", "memory.usage_in_bytes"),
    ):
        found = _inside(sub, paths[key]) if key in paths else []
        if found and (used := _number(_read(found[0] / name))) is not None:
            return used
    return None

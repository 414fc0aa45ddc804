"""Host memory as the OOM killer sees it: the machine's, or less under a cgroup memory limit.

``psutil.virtual_memory()`` reads ``/proc/meminfo``, which in a container or a Slurm job with
``--mem`` (``ConstrainRAMSpace=yes`` in ``cgroup.conf``) still shows the whole machine; the kernel
kills a process when its cgroup reaches the cgroup's limit. The limit is read from cgroup v2
(``memory.max`` of the process's cgroup and of each ancestor below the mount point, the smallest
wins; ``max`` is no limit) or v1 (``memory.limit_in_bytes`` of the ``memory`` controller's cgroup;
a value near 2**63 is no limit), as the kernel's cgroup documentation
(``Documentation/admin-guide/cgroup-v2.rst``, "memory.max") describes. Every read is bounded and
follows no link (:func:`flopsweep.files.read_regular`); anything unreadable means no limit known.
"""

from __future__ import annotations

from pathlib import Path

from flopsweep.files import RecordError, read_regular

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

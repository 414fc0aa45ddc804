"""Messages: how the sweep and the analysis write counts and sizes.

Torch-free and imports nothing of flopsweep: the job, the launchers, the Hydra callbacks and the
analysis all use it, so that every message writes a count with its noun (``1 run``, ``2 runs``) and
a size in bytes (``12.0 KiB``) the same way.
"""

from __future__ import annotations


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``count`` and ``noun`` as a message writes them: ``1 run``, ``0 runs``, ``3 runs``.

    Args:
        noun: the singular, e.g. ``"run"``, ``"ok run"``, ``"visible GPU"`` (the last word takes
            the ``s``).
        many: the plural when adding ``s`` is wrong, e.g. ``"mismatches"`` for ``"mismatch"``.
    """
    return f"{count} {noun if count == 1 else many or noun + 's'}"


def format_bytes(n: float) -> str:
    """Bytes as ``512 B``, ``12.0 KiB``, ``3.5 GiB``."""
    unit = "B"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            break
        n /= 1024
    return f"{n:.0f} B" if unit == "B" else f"{n:.1f} {unit}"

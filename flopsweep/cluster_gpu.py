"""The refusal of a cluster name (``plan_clusters``) whose GPU the peak table does not know: the name
with the GPU first for ``8xH100``, the name misread for ``H2OO:8`` (letters O for zeros), else every GPU
name the table knows. Torch-free."""

from __future__ import annotations

import re
from collections.abc import Callable

from flopsweep.config import ConfigError
from flopsweep.gpu_memory import typed_gpu_names
from flopsweep.lookalike import misread
from flopsweep.peaks import lookup

_COUNT_FIRST = re.compile(r"(?P<n>\d+)\s*[x*]\s*(?P<gpu>.+)", re.I)
"""A GPU part written count first (``8xH100``), as people say "8x H100"."""


def unknown_gpu(gpu: str, text: str, every_gpu_fix: str, parses: Callable[[str], bool]) -> ConfigError:
    """The refusal of a cluster name whose GPU the peak table does not know: every name it knows, or,
    for ``8xH100``, the name with the GPU first (``H100:8``), for ``H2OO:8`` the name misread (``H200:8``).
    ``every_gpu_fix``: the fix that names every GPU; ``parses``: whether a cluster name is taken
    (:mod:`flopsweep.clusters`' own, which imports this module)."""

    count_first = _COUNT_FIRST.fullmatch(gpu)
    if count_first and lookup(count_first.group("gpu")) is not None:
        n, name = count_first.group("n"), count_first.group("gpu")
        rest = text.split(":")[1:]
        size = rest.pop(0) if rest and re.fullmatch(r"\d+(x\d+)?", rest[0]) else n
        example = ":".join([name, size, *rest])
        if not parses(example):  # its network is wrong too: the name without it
            example = f"{name}:{size}, then a network if any (ib400, 40GBps, 320Gbps)"
        return ConfigError(
            "plan_clusters", text, f"{gpu!r} puts the count before the GPU", f"the GPU comes first: {example}"
        )
    if (slip := misread(gpu, typed_gpu_names())) is not None:  # H2OO:8, a letter O for a zero
        meant = text.replace(gpu, slip[0], 1)
        return ConfigError(
            "plan_clusters",
            text,
            f"{gpu!r} is no device of the peak table",
            f"did you mean {meant}? ({slip[1]})",
        )
    return ConfigError("plan_clusters", text, f"{gpu!r} is no device of the peak table", every_gpu_fix)

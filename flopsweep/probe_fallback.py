"""The console and record lines of a run's step-time probes that fell back (``metrics.predicted``'s
``source`` and ``probe.fallback``), and the words a prediction's ``source`` names them by
(:mod:`flopsweep.forecast` writes them). Torch-free.
"""

from __future__ import annotations

from typing import Any

from flopsweep.text import printable

FELL_BACK = "compute probe fell back: "
"""How a prediction's ``source`` names a compute probe that fell back (:mod:`flopsweep.forecast`)."""


LAYERS_FELL_BACK = "layer probe fell back: "
"""How a prediction's ``source`` names a layer probe that could not be used (:mod:`flopsweep.forecast`)."""

CPU_FELL_BACK = "cpu probe fell back: "
"""How a prediction's ``source`` names a CPU step probe (:mod:`flopsweep.cpu_probe`) that was not used."""


def probe_fallback_line(predicted: dict[str, Any] | None) -> str | None:
    """The console line of a run's ``metrics.predicted`` whose compute probe (``predict.probe=true``)
    fell back, naming why and what the prediction used instead; None when it did not (or there was
    no probe). The record keeps the same under ``metrics.predicted.probe.fallback`` and ``source``."""
    predicted = predicted or {}
    source = str(predicted.get("source") or "")
    why = (predicted.get("probe") or {}).get("fallback")
    if not why and FELL_BACK in source:
        why = source.split(FELL_BACK, 1)[1]
    if not why:
        return None
    why = printable(str(why))[:300]
    return f"predict.probe: the compute probe fell back ({why}); predicted from: {_used(source)}"


def _used(source: str) -> str:
    """What a prediction's ``source`` says it used, without the probes' fallbacks ("none" when it
    starts with one); printable, at most 300 characters."""
    used = source
    for fell in (LAYERS_FELL_BACK, CPU_FELL_BACK, FELL_BACK):
        if used.startswith(fell):
            return "none"
        used = used.split(f"; {fell}", 1)[0]
    return printable(used)[:300] or "none"


def layer_fallback_line(predicted: dict[str, Any] | None) -> str | None:
    """The one line of a run's ``metrics.predicted`` whose layer probe (``predict.layer_probe=true``)
    fell back: ``"predict.layer_probe: the layer probe fell back (WHY); predicted from: SOURCE"``,
    naming why (``metrics.predicted.layer_probe.fallback``, or why its times could not be
    extrapolated) and what the prediction used instead; None when it did not fall back (or did not
    run). The CPU step probe's (:mod:`flopsweep.cpu_probe`): ``"predict.cpu_probe: the CPU step probe
    fell back (WHY); ..."``."""
    predicted = predicted or {}
    source = str(predicted.get("source") or "")
    for head, key, what in (
        (LAYERS_FELL_BACK, "predict.layer_probe", "the layer probe"),
        (CPU_FELL_BACK, "predict.cpu_probe", "the CPU step probe"),
    ):
        if head in source:
            why = printable(source.split(head, 1)[1].split(f"; {FELL_BACK}", 1)[0])[:300]
            return f"{key}: {what} fell back ({why}); predicted from: {_used(source)}"
    return None


def probe_fallback_lines(predicted: dict[str, Any] | None) -> list[str]:
    """The record warnings of a run's ``metrics.predicted``: one line per step-time probe that fell
    back (:func:`layer_fallback_line`, then :func:`probe_fallback_line`); empty when none did."""
    return [line for line in (layer_fallback_line(predicted), probe_fallback_line(predicted)) if line]

"""The one line a space that leaves no set-up ends with, as ``plan=true`` and the tuner print it
(:func:`nothing_line`): how many set-ups were dropped, the commonest cause among them and its fix.
Torch-free.

Where some set-ups pass the rules (:func:`refusal`), the cause is the commonest among those alone: a
rule's fix would lead to set-ups of the kind that failed anyway. A dropped set-up's reason counts in its
cause (:func:`cause`): every ``over memory`` reason is one cause (each has its own figures), every ``no
bus bandwidth ... (in a node)`` one (whatever the collective), likewise ``(across nodes)``; any other
reason is a cause of its own. Each cause names its fix: the reason's own ``Fix:`` (a rule's refusal, a
layout no set-up on the ranks, a collective with no bandwidth); else :data:`CAUSE_FIXES` (over memory:
what takes less memory per rank); else, for a ``no prediction`` reason, :data:`NO_PREDICTION_FIX`; else
the caller's.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence

from flopsweep.comm_time import NO_INTER_NODE_FIX, NO_INTRA_NODE_FIX

OVER_MEMORY = "over memory"
"""A dropped set-up's status when its estimate leaves less than ``space.min_headroom`` free."""

NO_BANDWIDTH = re.compile(r"no bus bandwidth for \w+ \((in a node|across nodes)\)")
"""The reason :func:`flopsweep.comm_time.comm_seconds` gives a collective with no bandwidth."""

CAUSE_FIXES: Mapping[str, str] = {
    OVER_MEMORY: (
        "list set-ups that need less memory per rank (smaller space.micro_batches, full in "
        "space.checkpointing, fsdp or zero3 in space.backends, tp or pp in space.layouts), or lower "
        "space.min_headroom"
    ),
    "no bus bandwidth in a node": NO_INTRA_NODE_FIX,
    "no bus bandwidth across nodes": NO_INTER_NODE_FIX,
}
"""The fix of each cause that counts several reasons, where the reason names none."""

NO_PREDICTION_FIX = (
    "give predict.calibration=PATH (a record of such a set-up; its probe gives the bandwidth too); "
    "plan.csv's reason column says what each set-up lacked"
)
"""The fix of a ``no prediction`` reason that names none (the step model lacked an input)."""

SPACE_KEY_OF = (
    ("parallel.", "space.layouts"),
    ("batch.micro_batch_size", "space.micro_batches"),
    ("batch.grad_accum", "space.micro_batches"),
    ("backend", "space.backends"),
    ("activation_checkpointing", "space.checkpointing"),
    ("precision", "space.precisions"),
)
"""The ``space.*`` list behind each key a set-up sets (by prefix): where a rule's fix must be made
under the tuner or ``plan_clusters``."""


def cause(reason: str) -> str:
    """The cause ``reason`` counts in: :data:`OVER_MEMORY`; ``no bus bandwidth in a node`` or ``...
    across nodes`` (:data:`NO_BANDWIDTH`, any collective); else the reason itself (without a closing
    full stop)."""
    if reason.startswith(OVER_MEMORY):
        return OVER_MEMORY
    missing = NO_BANDWIDTH.search(reason)
    if missing:
        return f"no bus bandwidth {missing.group(1)}"
    return reason.rstrip(". ")


def nothing_line(
    reasons: Sequence[str], *, who: str, headline: str, fix: str, fixes: Mapping[str, str] | None = None
) -> str:
    """One line for a space that leaves no set-up:
    ``<who>: <headline>: all N dropped; the commonest reason (k of N): <reason>. Fix: <fix>``.

    Args:
        reasons: one line per dropped set-up (``over memory: estimated ...``, ``refused: ...``,
            ``no prediction: ...``).
        fix: the fix of a cause that names none and that neither :data:`CAUSE_FIXES` nor
            :data:`NO_PREDICTION_FIX` covers.
        fixes: the caller's fix per cause, in place of :data:`CAUSE_FIXES`' (``plan=true`` adds
            ``plan_clusters`` to over memory's).

    Where some set-ups pass the rules (:func:`refusal`), the cause is the commonest among them alone:
    a rule's fix leads to set-ups of the kind that failed anyway (``single`` refused on 2 GPUs, its
    fix "pick backend=ddp", beside ``ddp`` set-ups all over memory). The commonest cause
    (:func:`cause`) is said by one of its reasons: over memory by the least estimate, another cause
    by its commonest text. The fix: the reason's own ``Fix:``, with the
    ``space.*`` list behind a refused key (:data:`SPACE_KEY_OF`); else the cause's.
    """
    if not reasons:
        return f"{who}: no set-up to rank (the space gives none). Fix: {fix}"
    n = len(reasons)
    accepted = [r for r in reasons if not refusal(r)]
    if accepted and len(accepted) < n:  # a rule's fix would lead to set-ups that failed on their own
        told = nothing_line(accepted, who=who, headline=headline, fix=fix, fixes=fixes)
        m = len(accepted)
        return told.replace(
            f"all {m} dropped; the commonest reason (",
            f"all {n} dropped, {n - m} refused by the rules; among the {m} they accept, "
            "the commonest reason (",
            1,
        )
    causes = [cause(r) for r in reasons]
    key, count = Counter(causes).most_common(1)[0]
    said = [r.rstrip(". ") for r, c in zip(reasons, causes, strict=True) if c == key]
    if key == OVER_MEMORY:
        least = min(said, key=_estimate_gib)
        reason = f"{OVER_MEMORY} (the least: {least.removeprefix(OVER_MEMORY).lstrip(': ')})"
    else:
        reason = Counter(said).most_common(1)[0][0]
    own = {**CAUSE_FIXES, **(fixes or {})}.get(key)
    if "Fix: " in reason:
        tail = ""
    elif own:
        tail = f". Fix: {own}"
    elif reason.startswith("no prediction"):
        tail = f". Fix: {NO_PREDICTION_FIX}"
    else:
        tail = f". Fix: {fix}"
    refused = re.match(r"refused: ([\w.]+)=", reason)
    space_key = next((k for p, k in SPACE_KEY_OF if refused and refused.group(1).startswith(p)), None)
    if (
        space_key and tail == ""
    ):  # the rule's fix names a key the set-ups set, which space.* refuses beside it
        tail = f" (with space.*, {refused.group(1)} comes from {space_key}: change that list instead)"
    return f"{who}: {headline}: all {n} dropped; the commonest reason ({count} of {n}): {reason}{tail}"


def refusal(reason: str) -> bool:
    """A reason the rules or the placing gave (``refused: ...``, ``space.layouts: ...``), not the
    set-up's own figures (``over memory``, ``no prediction``)."""
    return reason.startswith(("refused", "space.layouts:"))


def _estimate_gib(reason: str) -> float:
    """The ``estimated X GiB`` of an over-memory reason (inf without one)."""
    match = re.search(r"estimated ([\d.e+]+) GiB", reason)
    try:
        return float(match.group(1)) if match else math.inf
    except ValueError:
        return math.inf

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
from flopsweep.config import typed_form
from flopsweep.text import figure

OVER_MEMORY = "over memory"
"""A dropped set-up's status when its estimate leaves less than ``space.min_headroom`` free."""

NO_BANDWIDTH = re.compile(r"no bus bandwidth for \w+ \((in a node|across nodes)\)")
"""The reason :func:`flopsweep.comm_time.comm_seconds` gives a collective with no bandwidth."""

CAUSE_FIXES: Mapping[str, str] = {
    OVER_MEMORY: (
        "list set-ups that need less memory per rank (smaller space.micro_batches, full in "
        "space.checkpointing, fsdp or zero3 in space.backends, tp, pp or cp in space.layouts), or lower "
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


DEFAULT_HEADROOM = 0.1
"""``space.min_headroom``'s default (:class:`flopsweep.config.SpaceConfig`): a headroom above it that
prunes every set-up is named first (:func:`headroom_fix`)."""

_OVER = re.compile(
    r"estimated ([\d.e+]+) GiB per rank, over [\d.e+-]+% of ([\d.e+]+) GiB "
    r"\(.*space\.min_headroom=([\d.e+-]+)\)"
)
"""An over-memory reason (:func:`flopsweep.plan_assess.assess`): the estimate, the memory, the headroom."""


def headroom_fix(reasons: Sequence[str]) -> tuple[str, float] | None:
    """The fix that names ``space.min_headroom`` for set-ups all over memory (``reasons``, each
    ``over memory: estimated X GiB per rank, over P% of C GiB (...; space.min_headroom=H)``), and the
    headroom it had: a value that keeps at least one (the default 0.1 where that does, else the
    largest share of 2 decimals the least estimate leaves), with how many it keeps; None where none
    fits even with no headroom (or no reason says its figures)."""
    figures = []
    for r in reasons:
        m = _OVER.search(r)
        if m:
            try:
                figures.append(tuple(float(x) for x in m.groups()))
            except ValueError:
                continue
    if not figures:
        return None
    least = min(figures, key=lambda f: f[0] / f[1])
    peak, capacity, had = least
    largest = 1 - peak * 1.005 / capacity  # the most headroom the least estimate leaves (said to 3 digits)
    if largest < 0:
        return None
    value = (
        DEFAULT_HEADROOM if largest >= DEFAULT_HEADROOM else max(0.0, math.floor(largest * 100 - 1e-9) / 100)
    )
    if value >= had:
        return None
    kept = sum(1 for p, c, _ in figures if p <= (1 - value) * c)
    from flopsweep.text import percent

    return (
        f"lower space.min_headroom: {typed_form(had)} leaves the estimate {percent(1 - had)} of the "
        f"memory, and the "
        f"least set-up needs {figure(peak)} GiB of {figure(capacity)} GiB ({percent(peak / capacity)}); "
        f"space.min_headroom={typed_form(value)} keeps {kept} of them"
        + (
            " (less left free than the default 0.1: the estimate may miss)"
            if value < DEFAULT_HEADROOM
            else ""
        )
    ), had


SPACE_LISTS = (
    ("backend", "backends"),
    ("precision", "precisions"),
    ("activation_checkpointing", "checkpointing"),
    ("batch.micro_batch_size", "micro_batches"),
)
"""A set-up key a rule's fix names, and the ``space.*`` list that gives it (:func:`space_fix`)."""

_NAMED = re.compile(
    r"\b(backend|precision|activation_checkpointing|batch\.micro_batch_size|parallel\.(?:tp|pp|cp|ep))=([\w.-]+)"
)
_MORE = re.compile(r"^((?:,\s*(?:or\s+)?[\w.-]+(?![\w.-]*=))+)")


def space_fix(reason: str, space: object, who: str = "plan") -> tuple[str, bool] | None:
    """A rule's fix (``reason``'s ``Fix: ...``) in the terms of the space that made the set-up: each
    alternative (``, or ``) that sets a key a set-up takes from ``space.*`` says the list instead
    (``set parallel.ep=1`` -> ``drop ep2 from space.layouts (space.layouts=[dp])``, ``backend=fsdp``
    -> ``list fsdp in space.backends``; under ``who="plan"`` ``nproc_per_node=1`` -> clusters of
    one GPU in ``plan_clusters``), the others kept (``pick an MoE config (model=hf ...)``).
    Returns the fix and whether an alternative names a value the space lists already (its set-ups
    failed on their own: the fix leads to another refusal); None without a ``Fix:`` or a
    ``space`` (``Space``, its ``backends``, ``layouts`` ... tuples), or where the fix names no such key."""
    head, found, fix = reason.partition("Fix: ")
    refused = re.match(r"refused: parallel\.(tp|pp|cp|ep)=(\d+)", reason)
    if not found or space is None:
        return None
    out, tried = [], False
    alts = fix.rstrip(". ").split(", or ")
    for alt in alts:
        m = _NAMED.search(alt)
        ranks = re.search(r"\bnproc_per_node=(\d+)", alt)
        if who == "plan" and ranks and m is None:  # each cluster's name gives its ranks: the plan ignores it
            k = ranks.group(1)
            out.append(f"name clusters of {k} GPU(s) in plan_clusters (e.g. plan_clusters=[H100:{k}])")
            continue
        split = re.search(r"set batch\.micro_batch_size x batch\.grad_accum to a multiple of (\d+)", alt)
        if (
            split and m is None
        ):  # the pipeline's micro-batches: the space's micro batches give the local batch
            have = [int(v) for v in getattr(space, "micro_batches", ())]
            k = int(split.group(1))
            tried = tried or any(v % k == 0 for v in have)
            listed = ",".join(map(str, [*have, k]))
            out.append(f"list a multiple of {k} in space.micro_batches (space.micro_batches=[{listed}])")
            continue
        if m is None:
            out.append(alt)
            continue
        key, first = m.group(1), m.group(2)
        if key.startswith("parallel."):
            kind, n = key.removeprefix("parallel."), int(first) if first.isdigit() else 0
            layouts = tuple(getattr(space, "layouts", ()))
            gone = f"{kind}{refused.group(2)}" if refused and refused.group(1) == kind else None
            kept = [lay for lay in layouts if lay != gone]
            if n <= 1 and gone:
                out.append(f"drop {gone} from space.layouts (space.layouts=[{','.join(kept or ['dp'])}])")
            elif n > 1:
                tried = tried or f"{kind}{n}" in layouts
                listed = ",".join(dict.fromkeys([*kept, f"{kind}{n}"]))
                out.append(f"list {kind}{n} in space.layouts (space.layouts=[{listed}])")
            else:
                out.append(alt)
            continue
        more = _MORE.match(alt[m.end() :])  # pick backend=ddp, fsdp, deepspeed
        values = [first, *(re.split(r",\s*(?:or\s+)?", more.group(1))[1:] if more else [])]
        values += [
            v for k, v in _NAMED.findall(alt[m.end() :]) if k == key
        ]  # precision=bf16 or precision=fp16
        listed = dict(SPACE_LISTS)[key]
        have = [str(v) for v in getattr(space, listed, ())]
        tried = tried or any(v.strip("'\"") in have for v in values)
        new = [v for v in dict.fromkeys(values) if v not in have] or values
        out.append(
            f"list {' or '.join(new)} in space.{listed} (space.{listed}=[{','.join([*have, new[0]])}])"
        )
    if out == alts:
        return None
    return f"{head}Fix: {', or '.join(out)}", tried


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
    reasons: Sequence[str],
    *,
    who: str,
    headline: str,
    fix: str,
    fixes: Mapping[str, str] | None = None,
    space: object = None,
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
        space: the :class:`flopsweep.space.Space` the set-ups came from: a rule's fix is said in
            its lists (:func:`space_fix`), and where every set-up is refused, a reason whose fix names
            a value the space lists already (``backend=fsdp`` beside ``fsdp`` set-ups refused for a
            dense model) is passed over for one whose fix leads out (trial 24: ``space.layouts=[ep2]``
            on a dense model said "backend=fsdp").

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
        told = nothing_line(accepted, who=who, headline=headline, fix=fix, fixes=fixes, space=space)
        m = len(accepted)
        return told.replace(
            f"all {m} dropped; the commonest reason (",
            f"all {n} dropped, {n - m} refused by the rules; among the {m} they accept, "
            "the commonest reason (",
            1,
        )
    spaced = {
        r.rstrip(". "): space_fix(r.rstrip(". "), space, who) for r in dict.fromkeys(reasons) if refusal(r)
    }
    out = [r for r in reasons if not (spaced.get(r.rstrip(". ")) or ("", False))[1]]  # fixes that lead out
    causes = [cause(r) for r in (out or reasons)]
    key, count = Counter(causes).most_common(1)[0]
    first = "the commonest reason" if len(out) in (0, n) else "the reason to fix first"
    said = [r.rstrip(". ") for r, c in zip(out or reasons, causes, strict=True) if c == key]
    if key == OVER_MEMORY:
        least = min(said, key=_estimate_gib)
        reason = f"{OVER_MEMORY} (the least: {least.removeprefix(OVER_MEMORY).lstrip(': ')})"
    else:
        reason = Counter(said).most_common(1)[0][0]
    rewritten = spaced.get(reason)
    if rewritten:
        reason = rewritten[0]  # the rule's fix in space.* terms
    own = {**CAUSE_FIXES, **(fixes or {})}.get(key)
    if key == OVER_MEMORY and (headroom := headroom_fix(said)):  # the key that pruned them, with a value
        text, had = headroom
        if had > DEFAULT_HEADROOM or (own or "").startswith("none found"):
            own = text if (own or "").startswith("none found") else f"{text}, or {own}"
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
        space_key and tail == "" and not rewritten
    ):  # the rule's fix names a key the set-ups set, which space.* refuses beside it
        tail = f" (with space.*, {refused.group(1)} comes from {space_key}: change that list instead)"
    others = (
        ""
        if first == "the commonest reason"
        else "; the others' fixes name set-ups the space lists, refused too"
    )
    return f"{who}: {headline}: all {n} dropped; {first} ({count} of {n}{others}): {reason}{tail}"


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

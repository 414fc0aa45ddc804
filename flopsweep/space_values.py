"""The values of ``space.*`` lists (:class:`flopsweep.config.SpaceConfig`) as read and as shown, torch-free:
a layout's degree read as a number (:func:`normal_layout`) and bounded by the largest world size
(:func:`max_world_size`), a list shown as typed in a refusal (:func:`typed_list`: ``[null,maybe]``, not
Python's ``[None, 'maybe']``). :class:`flopsweep.space.Space` reads and checks them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from flopsweep.limits import MAX_BY_KEY

SPACE_KEYS = (
    "backends",
    "layouts",
    "checkpointing",
    "precisions",
    "micro_batches",
    "compile",
    "min_headroom",
    "top",
)
"""The ``space.*`` keys (:class:`flopsweep.config.SpaceConfig`): the plan's and the tuner's."""

LIST_KEYS = SPACE_KEYS[:6]
"""The ``space.*`` keys that list a set-up's options (every combination is a set-up); a sweep over one
of them (``-m 'space.backends=[ddp],[fsdp]'``) is refused: the fix is one list."""

DECIDED_BY = {
    "backend": ("space.backends", "{}"),
    "activation_checkpointing": ("space.checkpointing", "{}"),
    "precision": ("space.precisions", "{}"),
    "batch.micro_batch_size": ("space.micro_batches", "{}"),
    "parallel.dp_replicate": ("space.layouts", "hsdp"),
    "parallel.dp_shard": ("space.layouts", "hsdp"),
    "parallel.tp": ("space.layouts", "tp{}"),
    "parallel.pp": ("space.layouts", "pp{}"),
    "parallel.cp": ("space.layouts", "cp{}"),
    "parallel.ep": ("space.layouts", "ep{}"),
}
"""A job's key that each set-up of a plan over ``plan_clusters`` (and of a ``space.*`` tuning sweep) sets
from a ``space.*`` list -> that list's key and how a value is written in it (``parallel.tp=2``:
``space.layouts=[tp2]``). Given beside them it was ignored in silence; it is refused before Hydra
(:func:`flopsweep.plan_command_line.command_line_problem`). ``compile`` is decided only where
``space.compile`` lists values (empty: the job's own)."""

BESIDE_SPACE_KEYS = frozenset({*DECIDED_BY, "parallel", "batch", "search.model"})
"""The keys refused beside a plan over ``plan_clusters`` or a ``space.*`` tuning sweep, however set:
:data:`DECIDED_BY`'s, a ``parallel`` mapping of its degrees, and the searches (``batch=auto``,
``search.model=largest``). A sweep file's option pick or axis of one is checked with the command line
(:func:`flopsweep.sweep_file_keys.values_problem`), as its plain values are."""

LAYOUT = re.compile(r"dp|hsdp|(tp|pp|cp|ep)(\d+)")
"""``space.layouts`` values: ``dp``, ``hsdp``, ``tpN``, ``ppN``, ``cpN`` (``parallel.cp=N``: each sequence
over N consecutive ranks, in a node where N divides its GPUs, FSDP2 over every rank, torchtitan's FSDP x
CP; :func:`flopsweep.context_parallel.check` refuses it off FSDP2, with a kernel without context
parallel, heads N does not divide or a ``model.seq_len`` not of ``2N`` equal chunks), ``epN`` (expert
parallel over FSDP2's ranks: an MoE model's; the rules refuse it on a dense one). A degree is read as a number
(:func:`normal_layout`: ``cp02`` is ``cp2``, as ``space.micro_batches=[02]`` is 2; ``tp1`` is ``dp``)."""


def normal_layout(layout: object) -> str:
    """``layout`` with its degree written as a number (``cp02``: ``cp2``), a degree of 1 (``tp1``,
    ``pp1``, ``cp1``, ``ep1``: the default ``parallel.*``) as ``dp``; another value as it is."""
    m = LAYOUT.fullmatch(str(layout))
    if m is None or m.group(1) is None or not m.group(2).strip("0"):
        return str(layout)  # dp, hsdp, cp0 (refused by Space.check), no layout at all
    digits = m.group(2).lstrip("0")
    return "dp" if digits == "1" else f"{m.group(1)}{digits}"


def max_world_size() -> int:
    """The most ranks a run may have: ``nnodes``' bound (:data:`flopsweep.limits.MAX_BY_KEY`) times
    ``nproc_per_node``'s (:data:`flopsweep.checks.MAX_NPROC_PER_NODE`), 1,024,000,000; no layout degree
    above it divides a world size."""
    from flopsweep.checks import MAX_NPROC_PER_NODE

    return int(MAX_BY_KEY["nnodes"]) * MAX_NPROC_PER_NODE


def listed(value: Any) -> str:
    """One value of a ``space.*`` list as typed: ``null``, ``true``, a text without quotes (``maybe``),
    but one Hydra reads as another type, quoted as it must be typed (``'true'``, ``'1'``)."""
    if isinstance(value, str) and re.fullmatch(r"|true|false|null|[-+.\deE]+", value.strip().lower()):
        return repr(value)
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def typed_list(values: Iterable[Any]) -> str:
    """``values`` as a list is typed (``[ddp,nope]``, ``[null]``), each as :func:`listed` writes it."""
    return "[" + ",".join(map(listed, values)) + "]"


def known_fix(key: str, values: Iterable[Any], known: tuple[str, ...], default: tuple[str, ...]) -> str:
    """The fix of a ``space.*`` list holding a value not among ``known``: ``list some of those, e.g.
    space.backends=[fsdp]``, each value known kept, each other one its nearest known name (``FSDP`` ->
    ``fsdp``, ``fsdp2`` -> ``fsdp``) or dropped, else ``default`` (the key's own list): it had said "list
    some of those" alone, naming no list to type. Another word for an option names it first
    (:func:`flopsweep.config.synonym`, the choice keys' table: ``off`` -> ``none``, ``bfloat16`` -> ``bf16``,
    ``true`` -> ``full``; it had named ``none,selective,full`` for ``[off]``)."""
    import difflib

    from flopsweep.config import synonym

    fixed = []
    for v in values:
        text = str(v)
        near = [k for k in known if k.lower() == text.lower()] or difflib.get_close_matches(text, known, n=1)
        fixed += [text] if text in known else [meant] if (meant := synonym(text, list(known))) else near[:1]
    if {"deepspeed", "zero3"} <= set(fixed):  # one backend, two names (Space.from_config refuses both)
        fixed.remove("deepspeed")
    return f"list some of those, e.g. {key}=[{','.join(dict.fromkeys(fixed) or default)}]"


DEFAULT_LAYOUTS_FIX = ("dp", "hsdp", "tp2")
"""The list a ``space.layouts`` fix gives where it keeps none of the values typed."""


def layouts_fix(values: Iterable[Any]) -> str:
    """The fix of a ``space.layouts`` holding a value that is no layout: ``e.g. space.layouts=[tp2]``,
    each layout kept, each other value its lower case where that is one (``TP2`` -> ``tp2``, ``DP`` ->
    ``dp``) or dropped, else :data:`DEFAULT_LAYOUTS_FIX`. It had said ``e.g. space.layouts=[dp,hsdp,tp2]``
    whatever was typed, dropping the layouts given (``[tp4,tp9x]``) and naming no ``tp2`` for ``TP2``
    (docs/reliability-10.md #603), where the other ``space.*`` lists kept theirs (:func:`known_fix`)."""

    def layout(text: str) -> bool:
        m = LAYOUT.fullmatch(text)
        return m is not None and (m.group(2) or "1").strip("0") != ""

    kept: list[str] = []
    for v in values:
        text = str(v)
        kept += [text] if layout(text) else [low] if layout(low := text.strip().lower()) else []
    return f"e.g. space.layouts=[{','.join(dict.fromkeys(kept) or DEFAULT_LAYOUTS_FIX)}]"

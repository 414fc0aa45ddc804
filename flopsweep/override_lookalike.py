"""The ASCII override meant by one that Hydra's grammar cannot read for a non-ASCII look-alike of an ASCII
letter (``plan_gpu=Н100``, a Cyrillic ``Н``; ``model=llama-tinу``; ``steps.mеasure=3``), for
:func:`flopsweep.override_grammar.syntax_problem`'s "did you mean". In a sweep (``plan_gpu=H100,Н100``) every
item must be a name the key takes, and the note names the item that holds the look-alike with its ASCII
spelling: quoting the whole sweep, the grammar's fix, made one string no key takes. Torch-free.
"""

from __future__ import annotations

import os

from flopsweep.overrides import CONF

_ITEM_EDGES = ",()[]{}"
"""What ends an item of a sweep's value (``a,b``, ``choice(a,b)``, ``[a,b]``)."""


def meant_override(override: str) -> tuple[str, str] | None:
    """The ASCII override meant by one that holds non-ASCII look-alikes of ASCII characters
    (:func:`flopsweep.lookalike.ascii_fold`), and a note naming the first, where the folded override
    names a key the schema knows (``steps.mеasure=3``) or an option of its config group
    (``model=llama-tinу``), or a value of a fixed form or a name its key takes (``plan_gpu``'s peak-table
    names, :func:`flopsweep.value_sets.choices`); in a sweep, every item of it, the note naming the item
    with the look-alike and its ASCII spelling (:func:`item_note`); else None. A free string
    (``tag=ünï``) keeps its characters: quoting it is the fix.

    Returns ``(folded override, note)``: ``("plan_gpu=H100", "'Н' (U+041D CYRILLIC CAPITAL LETTER EN)
    looks like ASCII 'H'")``."""
    from flopsweep.lookalike import ascii_fold, fold_char, named
    from flopsweep.override_parsing import parsed_or_none
    from flopsweep.override_schema import known_keys
    from flopsweep.overrides import group_choice_problem

    folded = ascii_fold(override)
    if folded is None or folded == override:
        return None
    if (parsed := parsed_or_none(folded)) is None:  # the folded text is no override either
        return None
    key = parsed.key_or_group
    group = key.startswith("hydra/") or os.path.isdir(os.path.join(CONF, key))
    sweep = parsed.is_sweep_override()
    if not (group and group_choice_problem([folded]) is None) and (
        key not in known_keys()
        or override.partition("=")[0].isascii()  # a free string keeps its characters: tag=ünï
        and not typed_value(key)
        and not all(_taken(key, str(v)) for v in _items(parsed))
    ):
        return None
    first = next(c for c in override if not c.isascii())
    note = f"{named(first)} looks like ASCII {fold_char(first)!r}"
    return folded, item_note(override, folded, note) if sweep else note


def _items(parsed) -> list:
    """The values of a parsed override: each of a choice sweep (``H100,H200``, ``choice(...)``), else the
    one value; a range or glob gives none a name could match (``[object]``, never taken)."""
    value = parsed.value()
    if parsed.is_sweep_override():
        return list(getattr(value, "list", None) or [object()])
    return [value]


def _taken(key: str, value: str) -> bool:
    """Whether ``value`` is a name ``key`` takes: a device of the peak table for ``plan_gpu``
    (:func:`flopsweep.peaks.lookup`), else one of :func:`flopsweep.value_sets.choices`'s (``device=cpu``)."""
    from flopsweep.peaks import lookup
    from flopsweep.value_sets import choices

    return lookup(value) is not None if key == "plan_gpu" else value in choices().get(key, ((),))[0]


def item_note(override: str, folded: str, note: str) -> str:
    """``note`` said of the item of a sweep's value that holds ``override``'s first look-alike, with its
    ASCII spelling: ``its item Н100: 'Н' (...) looks like ASCII 'H' (H100 in ASCII)``. ``folded`` is
    ``override`` folded character by character (:func:`flopsweep.lookalike.ascii_fold`: one ASCII
    character each, so the two align)."""
    _, _, value = override.partition("=")
    if value.isascii():  # the look-alike is in the key (steps.mеasure=3,4): no item to name
        return note
    start = len(override) - len(value)
    at = next(i for i, c in enumerate(value) if not c.isascii())
    low = max(value.rfind(e, 0, at) for e in _ITEM_EDGES) + 1
    high = min((i for e in _ITEM_EDGES if (i := value.find(e, at)) >= 0), default=len(value))
    item, ascii_item = value[low:high].strip(), folded[start + low : start + high].strip()
    return f"its item {item}: {note} ({ascii_item} in ASCII)"


def typed_value(key: str) -> bool:
    """Whether :class:`flopsweep.config.RunConfig`'s ``key`` takes a value of a fixed form (a number, a
    boolean, a list: ``repeats=２``, ``plan_clusters=[Н100:8]``), whose look-alikes are never meant, not
    a free string (``tag=ünï`` keeps its characters)."""
    from omegaconf import ListConfig
    from omegaconf.nodes import BooleanNode, EnumNode, FloatNode, IntegerNode

    from flopsweep.config import RunConfig
    from flopsweep.override_schema import structured_schema

    node = structured_schema(RunConfig)
    for part in key.split("."):
        getter = getattr(node, "_get_node", None)
        node = getter(part) if getter is not None else None
        if node is None:
            return False  # a key of an option group's schema, or a section: its value is not read here
    return isinstance(node, IntegerNode | FloatNode | BooleanNode | EnumNode | ListConfig)

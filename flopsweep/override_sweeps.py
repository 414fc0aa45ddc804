"""Refusals of a sweep's values on a command line before Hydra starts (``run.py``), torch-free: each
function takes the overrides as typed and returns one line (``Invalid config: ...``), or None when it
has nothing to say.

These are the sweeps Hydra runs other than meant, or stops on with a traceback: a key given twice, of
which Hydra keeps the last (:func:`repeated_sweep_problem`), a sweep of one-value elements over a key
that takes a list (:func:`list_sweep_problem`), and a ``range()`` of step 0 or of floats on a key that
takes a whole number (:func:`range_problem`). Imported by ``run.py``; it imports
:mod:`flopsweep.override_schema` and :mod:`flopsweep.override_parsing`, never
:mod:`flopsweep.overrides` (the refusals of one value, beside it).
"""

from __future__ import annotations

import math
import os
import shlex

from flopsweep.override_schema import CONF, key_schemas


def repeated_sweep_problem(overrides: list[str]) -> str | None:
    """One line for a key (or config group) given twice on one command line (``-m
    batch.micro_batch_size=1,2 batch.micro_batch_size=3``, ``steps.measure=1 steps.measure=2``,
    ``model=gpt-tiny model=llama-tiny``, ``+x=1 ++x=2``, ``~x x=1``, ``hydra.sweep.dir=a hydra.sweep.dir=b``):
    Hydra keeps the last override of a key, so the first was dropped without a word (a sweep ran one
    job, a value was not the one run), else None. The fix is to keep one. A config group added twice
    (``+sweep=a +sweep=b``) Hydra refuses itself: :func:`flopsweep.sweep_axes.sweep_level_problem`'s line."""
    from flopsweep.override_parsing import overrides_of, parsed_all_or_none

    given = overrides_of(overrides, deletions=True)  # flags out
    if (parsed := parsed_all_or_none(given)) is None:  # syntax_problem's
        return None
    seen: dict[tuple[str, str | None], object] = {}
    for o in parsed:
        key = (o.key_or_group, o.package)
        first = seen.setdefault(key, o)
        if first is not o and not (
            first.is_add() and o.is_add() and os.path.isdir(os.path.join(CONF, key[0]))
        ):
            name = (
                o.key_or_group
            )  # a group added twice (+sweep=a +sweep=b) is sweep_axes' line: Hydra refuses it
            sweep = o.is_sweep_override() or first.is_sweep_override()  # type: ignore[attr-defined]
            return (
                f"Invalid config: {first.input_line} and {o.input_line}: {name} is given twice and Hydra "  # type: ignore[attr-defined]
                f"keeps only the last, so {first.input_line} would be dropped without a word. Fix: give "  # type: ignore[attr-defined]
                f"{name} once" + _once_fix(name, first.input_line, o.input_line, sweep=sweep)  # type: ignore[attr-defined]
            )
    return None


def _once_fix(name: str, first: str, last: str, *, sweep: bool) -> str:
    """The end of :func:`repeated_sweep_problem`'s fix, an override to type: the values of both in one
    sweep (``batch.micro_batch_size=1,2`` and ``=3``: ``batch.micro_batch_size=1,2,3``) where both are
    plain lists of ``name=``, else the general form; one value each: the last, which Hydra would run
    (``e.g. 'plan_clusters=[A100-40GB:8]'``; it had said "keep one", naming none)."""
    values = [line.partition("=")[2] for line in (first, last)]
    plain = all(line.startswith(f"{name}=") for line in (first, last)) and not any(
        set(v) & set("()[]{}'\"\\$ ") or not v for v in values
    )
    if sweep:
        if not plain:
            return f" (a sweep lists every value: {name}=a,b,c)."
        merged = ",".join(dict.fromkeys(x for v in values for x in v.split(",")))
        return f" (a sweep lists every value): {name}={merged}."
    return f": keep one, e.g. {shlex.quote(last)} (the last, which Hydra would run)."


def _list_node(parsed: list, key: str) -> object | None:
    """The schema's list node of ``key`` (``space.layouts``, ``plan_clusters``) in the option the command
    line picks for its group (else conf/config.yaml's), else None: a key that takes no list."""
    from omegaconf import OmegaConf

    for schema, option in key_schemas(parsed, key):
        path = key.partition(".")[2] if option else key
        parent_key, _, leaf = path.rpartition(".")
        parent = OmegaConf.select(schema, parent_key) if parent_key else schema
        if OmegaConf.is_dict(parent) and leaf in parent and OmegaConf.is_list(parent._get_node(leaf)):
            return parent._get_node(leaf)
    return None


def list_sweep_problem(overrides: list[str]) -> str | None:
    """One line for a sweep of one-value elements over a key that takes a list (``space.layouts=dp,tp2``,
    ``plan_clusters=H100:8,H200:8``, ``-m space.micro_batches=range(1,4)``), or a sweep function inside
    such a list (``space.micro_batches=[range(1,4)]``), else None. Was: without ``-m``, "add -m", whose jobs
    were each refused as one value, not a list; with ``-m``, the first value alone told as a list of one
    (``space.micro_batches=[1]``), the others dropped; inside a list, Hydra's ``RangeSweep(tags=set(), ...)``
    named as the bad element. The fix is the one list of every value; a sweep of lists, one job each
    (``-m 'plan_clusters=[H100:8],[H200:8]'``), is left as it is."""
    from hydra.core.override_parser.types import Sweep

    from flopsweep.override_parsing import override_parser, parsed_overrides, sets_config_key
    from flopsweep.override_schema import sweep_values

    if (parsed := parsed_overrides(overrides)) is None:  # syntax_problem's
        return None
    for o in parsed:
        key = o.key_or_group
        if not sets_config_key(o) or "=" not in (o.input_line or ""):
            continue
        value = o.value()
        if o.is_sweep_override():
            values = sweep_values(o)
            if not values or all(isinstance(v, list | dict) or v is None for v in values):
                continue  # a sweep of lists, one job each; a glob, an interval: their own lines
            items = values
            why = f"{key} takes a list, and a sweep gives each job one value of it, not the list"
        elif isinstance(value, list) and any(isinstance(v, Sweep) for v in value):
            items = []
            for v in value:
                if isinstance(v, Sweep):
                    inner = override_parser().parse_override(f"x={_sweep_text(v)}")
                    items.extend(sweep_values(inner))
                else:
                    items.append(v)
            why = "a sweep function cannot stand inside a list: Hydra keeps it as one element"
        else:
            continue
        if _list_node(parsed, key) is None:
            continue
        shown = ",".join(
            "null" if v is None else str(v).lower() if isinstance(v, bool) else str(v) for v in items
        )
        several = ",".join(f"[{'null' if v is None else v}]" for v in items[:2])
        return (
            f"Invalid config: {o.input_line}: {why}. Fix: write one list: {key}=[{shown}]"
            f" (several lists, one job each: -m '{key}={several}')."
        )
    return None


def _sweep_text(sweep: object) -> str:
    """A sweep element of a list as the grammar writes it (``range(1,4)``, ``choice(1,2)``), so that its
    values are listed as a sweep override's are."""
    from hydra.core.override_parser.types import ChoiceSweep, RangeSweep

    if isinstance(sweep, RangeSweep):
        return f"range({sweep.start},{sweep.stop},{sweep.step})"
    if isinstance(sweep, ChoiceSweep):
        return "choice(" + ",".join(map(str, sweep.list)) + ")"
    return "choice()"


def range_problem(overrides: list[str]) -> str | None:
    """One line for a ``range()`` sweep whose values Hydra cannot list as meant, else None: a zero step
    (``seed=range(0,4,0)``, ``sort(range(1,3,0))``: Python's ``range()`` raised "arg 3 must not be
    zero", a 20-line traceback) or a float start or step on a key that takes a whole number
    (``seed=range(0,4,0.5)``: its values 0.0, 0.5, ..., whose first was told as one value, ``seed=0``).
    The fix is a non-zero, whole-number step."""
    from hydra.core.override_parser.types import RangeSweep
    from omegaconf.nodes import IntegerNode

    from flopsweep.override_parsing import parsed_overrides

    if (parsed := parsed_overrides(overrides)) is None:  # syntax_problem's
        return None
    for o in parsed:
        value = o.value()
        if not isinstance(value, RangeSweep):
            continue
        key, text = o.key_or_group, o.input_line
        start, stop, step = value.start, value.stop, value.step
        if step == 0:
            return (
                f"Invalid config: {text}: range() with step 0 lists no values (its step is what is added to "
                f"each value). Fix: give a non-zero step, e.g. {key}=range({start},{stop},1)."
            )
        if not any(isinstance(v, float) for v in (start, stop, step)) or key.startswith("hydra"):
            continue
        if any(isinstance(node, IntegerNode) for node in _leaf_nodes(parsed, key)):
            up = step > 0
            whole = max(1, round(abs(step))) * (1 if up else -1)
            first = math.floor(start) if up else math.ceil(start)
            last = math.ceil(stop) if up else math.floor(stop)  # the same whole values short of the stop
            return (
                f"Invalid config: {text}: {key} takes a whole number, and a range with a float start, stop "
                f"or step gives floats ({', '.join(str(v) for v in list(o.sweep_iterator())[:3])}, ...). "
                f"Fix: use whole numbers, e.g. {key}=range({first},{last},{whole})."
            )
    return None


def _leaf_nodes(parsed: list, key: str) -> list:
    """The schema nodes of ``key`` in the schemas :func:`key_schemas` looks it up in (none where no
    schema has it)."""
    nodes = []
    for schema, option in key_schemas(parsed, key):
        path = key.partition(".")[2] if option else key
        node = schema if path else None  # precision=range(1,3): a group's choice, no node
        for part in path.split(".") if path else ():
            getter = getattr(node, "_get_node", None)
            node = getter(part) if getter is not None else None
            if node is None:
                break
        if node is not None:
            nodes.append(node)
    return nodes

"""Why a typed key of the schema cannot take a value, as one line (``Invalid config: key=value: why. Fix:
...``), torch-free: :func:`value_problem`, which :func:`flopsweep.overrides.type_problem` calls for each
override and each value of a choice sweep, before Hydra starts. The value of another type (``seed=1.5``,
``steps.measure=abc``), ``null`` where the key is not optional, a list for one value and one value for a
list, a value for a section, an element a typed list cannot hold (``space.micro_batches=[1.5]``), a whole
number written as a float (``1e3``), and a number the job would refuse by its value alone: beyond its bound
(:data:`flopsweep.limits.MAX_BY_KEY`) or below it (:data:`flopsweep.lower_bounds.MIN_BY_KEY`), out of its
range (:func:`flopsweep.checks.number_problem`), in the job's words. The fix's example is the picked
option's YAML value, else the schema's default.
"""

from __future__ import annotations

import os

from flopsweep.override_schema import CONF, read_conf_yaml

_KINDS = {
    "IntegerNode": ("a whole number", "5"),
    "FloatNode": ("a number", "0.5"),
    "BooleanNode": ("true or false", "true"),
    "StringNode": ("one text value", "NAME"),
}
"""The schema's scalar node types by name: what a value must be (``a whole number``) and an example."""


NULL_DEFAULT_EXAMPLES = {"budget.tokens": "15e12"}
"""The example of a key whose default is null and whose values exclude its kind's example (``0.5``
tokens: a token budget is a whole number >= 1, :func:`flopsweep.checks.validate_cost`)."""


def _example(key: str, node: object, kind: tuple[str, str], option: str) -> tuple[str, str]:
    """The example of a fix for ``key`` and where it comes from: the picked option's YAML value
    (``model=gpt-tiny``'s), else the schema's default, else :data:`NULL_DEFAULT_EXAMPLES`' or ``kind``'s."""
    group, _, leaf = key.partition(".")
    if option:
        path = os.path.join(CONF, group, f"{option}.yaml")
        own = read_conf_yaml(path).get(leaf) if os.path.isfile(path) else None
        if isinstance(own, bool | int | float | str) and own != "":
            return (str(own).lower() if isinstance(own, bool) else str(own)), f" ({group}={option}'s)"
    default = node._value()  # type: ignore[attr-defined]
    if default is None or default == "" or isinstance(default, list | dict):
        return NULL_DEFAULT_EXAMPLES.get(key, kind[1]), ""
    return (str(default).lower() if isinstance(default, bool) else str(default)), " (its default)"


def _bound_problem(
    head: str, key: str, value: int | float, node: object, option: str, float_: bool
) -> str | None:
    """The line for a whole number beyond its key's bound (:data:`flopsweep.limits.MAX_BY_KEY`, else
    :data:`flopsweep.limits.MAX_INT`), as :func:`flopsweep.checks.check_bounds` would refuse it in the
    job: the bound, an example that passes (the picked option's value, else the default) and the
    check a large value meets next (:func:`flopsweep.key_needs.memory_note`); None within it."""
    from flopsweep.key_needs import memory_note
    from flopsweep.limits import MAX_BY_KEY, MAX_INT

    limit = int(MAX_BY_KEY.get(key, MAX_INT))
    if abs(value) <= limit:
        return None
    example, whose = _example(key, node, _KINDS["IntegerNode"], option)
    if not whose and node._is_optional():  # type: ignore[attr-defined]  # batch.global_batch_size: unset
        example, whose = "null", " (its default)"
    side = f"at most {limit}" if value > 0 else f"at least -{limit}"
    written = " written as a float, and" if float_ else ""
    how = ", without a point or exponent" if float_ else ""
    return (
        f"{head} is a whole number{written} beyond the bound of {limit}. "
        f"Fix: write a whole number {side}{how}, e.g. {key}={example}{whose}{memory_note(key)}."
    )


def _written(key: str, value: object, given: dict[str, str] | None) -> str:
    """``key=value`` as a fix writes it: after the overrides it needs on the command line's options
    (:func:`flopsweep.key_needs.needed`: ``nnodes=1000`` on ``backend=single`` needs ``backend=ddp``),
    with the check it still meets (:func:`flopsweep.key_needs.still_meets`)."""
    from flopsweep.key_needs import needed, still_meets

    given = given or {}
    extra = needed(key, str(value), given)
    replaced = [f"{k}={given[k]}" for k in (e.partition("=")[0] for e in extra) if k in given]
    line = " ".join([*extra, f"{key}={value}"]) + (f" in place of {' '.join(replaced)}" if replaced else "")
    note = still_meets(key, str(value), given)
    return f"{line} ({note})" if note else line


def _nproc_problem(head: str, value: object, given: dict[str, str] | None) -> str | None:
    """Why ``nproc_per_node`` (a text key: ``auto`` or a count) cannot take a number, as the job would
    refuse it (:func:`flopsweep.plan.resolve_nproc`, :func:`flopsweep.checks.check_bounds`), before
    Hydra makes a run folder: a whole number written as a float (``2.0``), a count beyond
    :data:`flopsweep.checks.MAX_NPROC_PER_NODE` (``1e12`` too); else None (text, a count below 1: the
    job's line). The fix writes a count with what it needs (``backend=ddp nproc_per_node=2``)."""
    from flopsweep.checks import MAX_NPROC_PER_NODE

    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    if value > MAX_NPROC_PER_NODE:
        return (
            f"{head} is beyond the bound of {MAX_NPROC_PER_NODE} ranks per node. Fix: set "
            f"nproc_per_node=auto, or a count of ranks: {_written('nproc_per_node', 2, given)}."
        )
    if isinstance(value, float) and value >= 1:
        return (
            f"{head} is a whole number written as a float. Fix: write it without a point or exponent: "
            f"{_written('nproc_per_node', int(value), given)}."
        )
    return None


def value_problem(
    key: str,
    value: object,
    node: object,
    option: str,
    typed: str | None = None,
    given: dict[str, str] | None = None,
) -> str | None:
    """Why ``node`` of the schema cannot take ``value`` (one line), else None. ``typed``: the value as
    the command line wrote it, which the line echoes for a number (``1e12``, not ``1000000000000.0``)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    from flopsweep.config import cut

    if typed is not None and isinstance(value, int | float) and not isinstance(value, bool) and typed.strip():
        shown = cut(typed.strip())  # a 400-digit number: its first digits and its length
    elif (
        typed is not None
        and (isinstance(value, list | dict) or isinstance(node, ListConfig))
        and typed.strip()
    ):
        shown = cut(typed.strip())  # [null,1e30] as typed, not [None,1e+30]; space.compile=yes, not 'yes'
    elif isinstance(value, list):
        shown = "[" + ",".join("null" if v is None else str(v) for v in value) + "]"
    elif isinstance(value, bool):
        shown = str(value).lower()
    else:
        shown = "null" if value is None else repr(value) if isinstance(value, str) else str(value)
    head = f"Invalid config: {key}={shown}:"
    if key == "nproc_per_node" and isinstance(value, int | float) and not isinstance(value, bool):
        return _nproc_problem(head, value, given)  # a count, given as a number; text is the job's
    optional = node._is_optional()  # type: ignore[attr-defined]
    if isinstance(node, DictConfig):
        if isinstance(value, dict):  # fault={kind:oom,rank:1}: Hydra merges a mapping into the section
            return None
        first = next(iter(node), "KEY")
        example = node[first] if first in node and not OmegaConf.is_config(node[first]) else "..."
        example = str(example).lower() if isinstance(example, bool) else example
        return (
            f"{head} {key} is a section of keys, not a value. Fix: set one of its keys, e.g. "
            f"{key}.{first}={example}."
        )
    if isinstance(node, ListConfig):
        if value is None and not optional:
            return (
                f"{head} takes a list, not null. Fix: write a list, e.g. {key}={list_example(node)}; "
                "or drop the override."
            )
        if value is not None and not isinstance(value, list):
            from flopsweep.lookalike import list_text

            if isinstance(value, str) and (meant := list_text(value)):  # '"[H100:8,]"': a list, quoted
                return f"{head} is one string, not a list (its quotes make it one). Fix: {key}={meant}"
            return f"{head} is one value, not a list. Fix: write a list: {key}={_one_list(value, node)}."
        return _element_problem(head, key, value or [], node, typed)
    kind = _KINDS.get(type(node).__name__)
    if kind is None:
        return None
    example, whose = _example(key, node, kind, option)
    fix = f"set {key} to {kind[0]}, e.g. {key}={example}{whose}"
    if not whose and key not in NULL_DEFAULT_EXAMPLES and node._is_optional():  # type: ignore[attr-defined]
        # a whole number unset by default (batch.global_batch_size=0.5 was told "e.g. ...=5", which the
        # micro batch 4 refuses): its default, as the bound's line gives it (#609)
        fix = f"set {key} to {kind[0]} or null, e.g. {key}=null (its default)"
    if value is None:
        return None if optional else f"{head} takes {kind[0]}, not null. Fix: {fix}, or drop the override."
    if isinstance(value, list | dict):
        what = "a list" if isinstance(value, list) else "a mapping"
        several = several_hint(key, "a,b") if isinstance(value, list) else ""
        return f"{head} takes {kind[0]}, not {what}. Fix: {fix}{several}."
    try:
        converted = node.validate_and_convert(value)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - omegaconf's ValidationError and its kin
        if kind[0] == "a whole number" and isinstance(value, float) and value.is_integer():
            # 1e3 or 4.0: a whole number written as a float, which the typed key does not convert
            if problem := _bound_problem(head, key, value, node, option, True) or _number_problem(
                head, key, int(value), node, option, "IntegerNode"
            ):
                return problem  # the rewritten number would be refused (0.0 -> 0): its own fix, never that
            return (
                f"{head} is a whole number written as a float. Fix: write it without a point or "
                f"exponent: {_written(key, int(value), given)}."
            )
        note, several = _quoted_sweep(key, value, node)
        return f"{head} is not {kind[0]}{note}. Fix: {fix}{several}."
    if kind[0] == "true or false" and type(value) is int and value not in (0, 1):
        return f"{head} is not true or false (OmegaConf reads any whole number but 0 as true). Fix: {fix}."
    if kind[0] == "a whole number" and isinstance(converted, int) and not isinstance(value, bool):
        # the job's check_bounds, before Hydra, on the value as the job reads it (00 and '0' are 0): the
        # upper bound's own line, then the lower (nnodes=0)
        if isinstance(value, str) and typed is not None and typed.strip():  # 00 as typed, not '00'
            head = f"Invalid config: {key}={cut(typed.strip())}:"
        return _bound_problem(head, key, converted, node, option, False) or _number_problem(
            head, key, converted, node, option, "IntegerNode"
        )
    if kind[0] == "a number" and isinstance(converted, float):
        return _number_problem(
            head, key, converted, node, option
        )  # the job's bounds and ranges, before Hydra
    return None


def several_hint(key: str, values: str) -> str:
    """The hint that several values are a sweep: ``; several, one job each: -m KEY=VALUES`` (``a,b`` for a
    list given, ``1,2`` for a quoted string of them: :func:`_quoted_sweep`)."""
    return f"; several, one job each: -m {key}={values}"


def _quoted_sweep(key: str, value: object, node: object) -> tuple[str, str]:
    """For a quoted string of values the key takes each of (``batch.micro_batch_size="1,2"``): (that the
    quotes made it one string, :func:`several_hint`'s sweep of them); else ("", ""). Was: only ``is not a
    whole number ... e.g. batch.micro_batch_size=4``."""
    if not isinstance(value, str) or "," not in value:
        return "", ""
    parts = [part.strip() for part in value.split(",")]
    try:
        for part in parts:
            node.validate_and_convert(part)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - omegaconf's ValidationError and its kin
        return "", ""
    if not all(parts):
        return "", ""
    return f" (the quotes made {value!r} one string)", several_hint(key, ",".join(parts))


def _number_problem(
    head: str, key: str, value: float, node: object, option: str, kind: str = "FloatNode"
) -> str | None:
    """The line for a number that the job would refuse by its value alone
    (:func:`flopsweep.checks.number_problem`: beyond :data:`flopsweep.limits.MAX_BY_KEY`, else
    :data:`flopsweep.limits.MAX_FLOAT`; below :data:`flopsweep.lower_bounds.MIN_BY_KEY`, ``timeout_s=0``,
    ``nnodes=0``; not finite; out of the key's range, ``optim.lr=-1``, ``predict.overlap=2``), with the
    job's fix and an example that passes (the picked option's value, else the default, else null for an
    optional key); None when the job would take it. ``kind``: the schema node's (``IntegerNode``)."""
    from flopsweep.checks import number_problem

    error = number_problem(key, value)
    if error is None:
        return None
    example, whose = _example(key, node, _KINDS[kind], option)
    if not whose and node._is_optional():  # type: ignore[attr-defined]  # cost.usd_per_gpu_hour: unset
        example, whose = "null", " (its default)"
    fix = error.fix
    if fix.startswith("set e.g. ") and f"{key}=" not in fix:  # cost's "set e.g. 2.5, or null"
        fix = f"set e.g. {key}={fix.removeprefix('set e.g. ')}"
    elif f"{key}=" not in fix:  # the bound's "set optim.lr to at most 1e+12"
        fix = f"{fix}, e.g. {key}={example}{whose}"
    return f"{head} {error.problem}. Fix: {fix}."


_ELEMENTS = {
    int: ("a whole number", "whole numbers"),
    float: ("a number", "numbers"),
    str: ("a text value", "text values"),
    bool: ("true or false", "true or false values"),
}
"""What a typed list of the schema holds, by its element type."""


def list_example(node: object) -> str:
    """A list the typed list ``node`` takes, for a fix: ``[false,true]`` for one of true or false
    (``space.compile``, whose default ``[]`` is no example), else its default list, else ``[a,b]``."""
    from omegaconf import OmegaConf

    if getattr(node._metadata, "element_type", None) is bool:  # type: ignore[attr-defined]
        return "[false,true]"
    default = OmegaConf.to_container(node) if not node._is_none() else None  # type: ignore[attr-defined]
    return "[" + ",".join(map(str, default)) + "]" if default else "[a,b]"


def _one_list(value: object, node: object) -> str:
    """The list of one value that a typed list ``node`` takes for the single ``value`` given in its place:
    ``[true]`` for ``yes`` or ``1`` in a list of true or false; ``[dp]`` for ``dp``; :func:`list_example`'s
    where the value is none the list holds (``{a:1}``, ``''``: ``[{'a': 1}]`` or ``[]`` were refused too)."""
    element = getattr(node._metadata, "element_type", None)  # type: ignore[attr-defined]
    words = {"true": "true", "yes": "true", "on": "true", "1": "true", "false": "false", "no": "false"}
    words |= {"off": "false", "0": "false"}
    if element is bool:
        return f"[{words[str(value).lower()]}]" if str(value).lower() in words else list_example(node)
    if isinstance(value, dict | list) or str(value).strip() == "" or _element_problem("", "", [value], node):
        return list_example(node)
    return f"[{str(value).lower() if isinstance(value, bool) else value}]"


def _typed_items(typed: str | None, count: int) -> list[str] | None:
    """The items of a list as typed (``[1,1e30]``: ``1``, ``1e30``), where ``count`` of them split out."""
    text = (typed or "").strip()
    items = [t.strip() for t in text[1:-1].split(",")] if text.startswith("[") and text.endswith("]") else []
    return items if len(items) == count and all(items) else None


def _element_problem(head: str, key: str, values: list, node: object, typed: str | None = None) -> str | None:
    """Why the typed list ``node`` cannot hold one of ``values`` (``space.micro_batches=[1.5]``,
    ``[a]``, ``[null]``: Hydra's five-line "could not be converted to Integer"), else None. The fix's
    example is :func:`list_example`'s; for a whole number written as a float (``[2,1e3]``) the list
    with ints (``[2,1000]``), as a key of one whole number gets, unless one is beyond the bound
    (:data:`ELEMENT_BOUNDS`, else :data:`flopsweep.limits.MAX_INT`): ``[1e30]``, told as typed."""
    from omegaconf import ListConfig

    from flopsweep.limits import MAX_BY_KEY, MAX_INT

    element = getattr(node._metadata, "element_type", None)  # type: ignore[attr-defined]
    if element not in _ELEMENTS:
        return None
    one, many = _ELEMENTS[element]
    items = _typed_items(typed, len(values)) or [None] * len(values)
    floats = []  # whole numbers written as floats ([1e3]): told after any other bad item, whose fix differs
    for item, text in zip(values, items, strict=True):
        try:
            ListConfig([item], element_type=element)
        except Exception:  # noqa: BLE001 - omegaconf's ValidationError and its kin
            if element is int and isinstance(item, float) and item.is_integer():
                floats.append((item, text or str(item)))
                continue
            shown = "null" if item is None else text or (repr(item) if isinstance(item, str) else str(item))
            return f"{head} {shown} is not {one}. Fix: list {many}, e.g. {key}={list_example(node)}."
    bound = ELEMENT_BOUNDS.get(key)
    most = int(MAX_BY_KEY[bound]) if bound else MAX_INT
    if big := [text for item, text in floats if abs(item) > most]:  # [1e30]: no 31-digit int to write
        whose = f"{bound}'s bound" if bound else "the bound"
        fix = f"list {many} up to it, e.g. {key}={list_example(node)}"
        return f"{head} {big[0]} is beyond {whose} of {most}. Fix: {fix}."
    if floats:  # as space.top=1e3 is told
        whole = [int(v) if isinstance(v, float) and v.is_integer() else v for v in values]
        return (
            f"{head} {floats[0][1]} is a whole number written as a float. Fix: write it without a point "
            f"or exponent: {key}=[{','.join(map(str, whole))}]."
        )
    return None


ELEMENT_BOUNDS = {"space.micro_batches": "batch.micro_batch_size"}
"""A typed list whose items are values of another key, and that key: its bound
(:data:`flopsweep.limits.MAX_BY_KEY`) is theirs."""

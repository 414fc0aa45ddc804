"""A refusal of a sweep file's value said in the file's own form, torch-free.

The command line's checks refuse a file's value (``steps: {measure: 3.0}``) with the command line's fix
(``Fix: ... steps.measure=3.``). Typed back, that override did not help: Hydra merges the file's value
into the typed config before the command line's (``In 'sweep/X': ValidationError ... Value '3.0' of type
'float' could not be converted to Integer``, exit 1), and a ``hydra.sweeper.params`` axis of the file was
refused again for a key the command line now gave (docs/reliability-12.md, session 41). Here:

- :func:`in_file_form`: the fix's ``KEY=VALUE`` written as the file writes it, ``Fix: write steps:
  {measure: 3} in sweep/X.yaml``; an axis, ``Fix: write batch.micro_batch_size: 4,2 under
  hydra.sweeper.params in sweep/X.yaml`` (the refused value replaced in its list).
- :func:`merged_problem`: a plain value the command line gives again is still merged first, so its
  type is checked (the checks Hydra's merge stands for, :data:`run.FILE_MERGE_CHECKS`), its line naming
  the command line's value that would replace it.
- :func:`as_the_file_writes`: a number YAML spells its own way (``.inf``) shown as written.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from flopsweep.override_parsing import override_key

PARAMS = "hydra.sweeper.params"
"""Where a sweep file's axes are (:func:`flopsweep.conf_files.params_of`)."""


def _trimmed(text: str) -> tuple[str, str]:
    """A value the fix text writes (``3.``, ``15e12,``, ``4)``) and the punctuation after it."""
    value = text.rstrip(".,;?")
    while value.endswith(")") and value.count(")") > value.count("("):
        value = value[:-1].rstrip(".,;?")
    return value, text[len(value) :]


def _nested(key: str, value: str) -> str:
    """``steps.measure`` and ``3`` as the file nests them: ``steps: {measure: 3}``."""
    parts = key.split(".")
    return "".join(f"{p}: {{" for p in parts[:-1]) + f"{parts[-1]}: {value}" + "}" * (len(parts) - 1)


def in_file_form(line: str, path: str, *, axis: str | None = None, replaced_by: str | None = None) -> str:
    """``line`` (``Invalid config: <where>: KEY=VALUE: <why>. Fix: <fix>.``, a refusal of the sweep file
    ``path``'s value of ``KEY``) with each ``KEY=V`` of its fix as the file writes it, the file named:
    ``Fix: write it without a point or exponent: steps: {measure: 3} in sweep/X.yaml.``; ``axis`` (the
    file's ``KEY=a,b`` of :data:`PARAMS`): ``... e.g. KEY: 4,b under hydra.sweeper.params in sweep/X.yaml.``
    (the refused value replaced in its list; a fix's ``(its default)`` said of the value where the list has
    others: ``KEY: 4,2 (4 is its default)``). ``replaced_by``: what replaces the file's value once Hydra
    has merged it, as said (:func:`merged_problem`; said, with ``or drop KEY there``). A line whose fix
    names no ``KEY=``, another key's (``... model=llama3.1-8b``), drops ``KEY``, or speaks of the file's
    params already, is returned as it is."""
    head, sep, fix = line.partition(" Fix: ")
    said = head.removeprefix("Invalid config: ").split(": ", 1)[-1]
    m = re.match(r"\+?([\w.]+)=(\S*?):? ", said)
    if not sep or m is None or PARAMS in fix:
        return line
    key, refused = m.group(1), m.group(2).strip("'\"")
    had = [v.strip().strip("'\"") for v in (axis or "").partition("=")[2].split(",")]

    def form(found: re.Match) -> str:
        value, after = _trimmed(found.group(1))
        if axis is None:
            return _nested(key, value) + after + (found.group(2) or "")
        new = ",".join(dict.fromkeys(value if v == refused else v for v in had)) if refused in had else value
        if found.group(2) and new != value:  # "(its default)" is said of the value, not of the list
            return f"{key}: {new}{after} ({value} is its default)"
        return f"{key}: {new}{after}{found.group(2) or ''}"

    body = fix.rstrip().removesuffix(".")
    named = set(re.findall(r"(?<![\w./-])\+?([\w.]+)=", body))
    if named != {key} or re.search(rf"\bdrop {re.escape(key)}\b", body):  # other keys, or "drop": as it is
        return line
    new = re.sub(rf"(?<![\w./-])\+?{re.escape(key)}=(\S+)( \(its default\))?", form, body)
    if new == body:
        return line
    verb = "write " if body.lstrip("+").startswith(f"{key}=") else ""
    where = f" under {PARAMS}" if axis is not None else ""
    why = (
        f" (Hydra reads the file's value before the {replaced_by}, which replaces it)" if replaced_by else ""
    )
    drop = f", or drop {key} there" if replaced_by else ""
    return f"{head.rstrip('.')}{why}. Fix: {verb}{new}{where} in {path}{drop}."


def merged_problem(
    own: Iterable[str],
    given: dict[str, str],
    picks: list[str],
    checks: tuple[Callable[[list[str]], str | None], ...],
    axes: Iterable[str] = (),
) -> tuple[str, str] | None:
    """``(line, what replaces the value, as said)`` for the first plain value of the file (``own``, each
    ``KEY=VALUE``) whose key the command line gives again (``given``: key -> its override; ``command
    line's steps.measure=4``) or the file's own axis does (``axes``, each ``KEY=a,b`` of :data:`PARAMS`;
    ``hydra.sweeper.params axis steps.measure=3,2``) and that one of ``checks`` refuses (checked after the
    options ``picks`` picks, so an option's keys are typed); else None. Hydra merges the file's value
    before either, so a value its typed key cannot take stops Hydra with its own error though the
    command line's or the axis's would replace it."""
    replacing = {override_key(a): f"{PARAMS} axis {a}" for a in axes}
    replacing |= {k: f"command line's {o}" for k, o in given.items()}
    for o in own:
        key = override_key(o)
        if key not in replacing:
            continue
        for check in checks:
            if problem := check([*picks, o]):
                return problem, replacing[key]
    return None


YAML_NON_FINITE = {".inf": "inf", "+.inf": "inf", "-.inf": "-inf", ".nan": "nan"}
"""YAML's spellings of the numbers no float holds (any case: ``.Inf``, ``.NaN``) and the value an override
writes for each (:func:`flopsweep.sweep_file_keys.file_overrides`: ``inf``, which Hydra's grammar reads
as the same number)."""


def as_the_file_writes(said: str, written: dict[str, str]) -> str:
    """``said`` (``budget.tokens=inf: ...``) with the refused value as the sweep file writes it (``written``:
    each scalar's text by dotted key) where that is YAML's spelling (``tokens: .inf``:
    ``budget.tokens=.inf``; ``.nan``); else ``said``."""
    head, colon, rest = said.partition(":")
    key, eq, value = head.partition("=")
    text = written.get(key) if eq else None
    if text is None or YAML_NON_FINITE.get(text.strip().lower()) != value:
        return said
    return f"{key}={text.strip()}{colon}{rest}"


def flow_comma_problem(text: str, path: str) -> str | None:
    """One line for a decimal comma inside a ``{...}`` mapping of the sweep file ``path`` (its ``text``),
    else None: ``cost: {usd_per_gpu_hour: 2,50}`` is to YAML two entries, ``usd_per_gpu_hour: 2`` and a key
    ``50`` of no value, which had been refused as ``cost.50=null: no such key`` (none of the keys of cost is
    near 50). Said as the command line's decimal comma of that key
    (:func:`flopsweep.decimal_comma.decimal_comma_problem`: prices and the keys it knows), the fix in the
    file's form: ``Fix: write cost: {usd_per_gpu_hour: 2.50} in sweep/X.yaml.``"""
    import yaml
    from omegaconf._utils import get_yaml_loader

    from flopsweep.decimal_comma import decimal_comma_problem

    try:
        todo = [(yaml.compose(text, Loader=get_yaml_loader()), "")]
    except yaml.YAMLError:
        return None
    while todo:
        node, prefix = todo.pop()
        if not isinstance(node, yaml.MappingNode):
            continue
        pairs = [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)]
        todo += [(v, f"{prefix}{k.value}.") for k, v in pairs]
        for (k1, v1), (k2, v2) in zip(pairs, pairs[1:], strict=False) if node.flow_style else ():
            whole = isinstance(v1, yaml.ScalarNode) and re.fullmatch(r"-?\d+", v1.value) and not v1.style
            empty = isinstance(v2, yaml.ScalarNode) and v2.value == "" and re.fullmatch(r"\d+", k2.value)
            if not (whole and empty):
                continue
            typed = f"{v1.value},{k2.value}"
            if problem := decimal_comma_problem([f"{prefix}{k1.value}='{typed}'"]):
                said = problem.removeprefix("Invalid config: ").replace(
                    ". Fix: ",
                    f"; in a {{...}} mapping YAML reads the comma as the end of an entry: {k1.value}: "
                    f"{v1.value} and a key {k2.value}. Fix: ",
                    1,
                )
                return in_file_form(f"Invalid config: {path}: {said}", path)
    return None

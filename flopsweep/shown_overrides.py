"""A job's overrides as the user typed them, for the lines and tables that show them. Torch-free.

Hydra's sweepers write each job's overrides back from their parsed values, escaping the grammar's
special characters (``hydra.core.override_parser.types.Override``: ``tag='${seed}'`` typed is the
job's ``tag=$\\{seed\\}``), so the plan's table printed ``every job: tag=$\\{seed\\}``, a form no one
typed. :func:`as_typed` drops an escape wherever Hydra's parser reads the override the same without it.
"""

from __future__ import annotations

import functools
import re
import shlex
import sys
from collections.abc import Iterable, Sequence
from typing import Any

_ESCAPED = re.compile(r"\\([(){}\[\]:=,])")
"""An escaped special character of Hydra's grammar, but a space or tab (a shown line is split at those)
and a backslash."""


@functools.lru_cache(maxsize=1)
def _parser():  # noqa: ANN202 - Hydra's OverridesParser, imported on first use
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


@functools.lru_cache(maxsize=4096)
def _reading(override: str) -> tuple[object, ...] | None:
    try:
        o = _parser().parse_override(override)
    except Exception:  # noqa: BLE001 - an override Hydra cannot parse is shown as it is
        return None
    return (o.type, o.key_or_group, o.package, o.value_type, repr(o.value()))


@functools.lru_cache(maxsize=4096)
def as_typed(override: str) -> str:
    """``override`` (``tag=$\\{seed\\}``) without Hydra's escapes (``tag=${seed}``) when Hydra's parser
    reads both the same (key, package, kind and value), else as it is (``tag=a\\,b``: ``a,b`` unescaped is
    a sweep of two values); a float Hydra wrote back (``budget.tokens=1000000000000.0`` of a sweep file's
    ``1e12``) in its compact exact form, ``budget.tokens=1e12`` (:func:`_compact`)."""
    if "\\" not in override:
        return _compact(override)
    plain = _ESCAPED.sub(r"\1", override)
    if plain == override or (read := _reading(plain)) is None or read != _reading(override):
        return override
    return _compact(plain)


def _compact(override: str) -> str:
    """``budget.tokens=1e12`` for Hydra's ``budget.tokens=1000000000000.0`` (and ``1.5e13`` for its
    ``15000000000000.0``, ``1e-8`` for ``1e-08``): a float in Python's own form, the one Hydra writes a swept
    value back in, in :func:`flopsweep.config.typed_form`'s compact exact form where Hydra reads both the
    same; any other value (``2.50``, ``3.0``, a list, a sweep) as it is."""
    from flopsweep.config import typed_form

    value = override.partition("=")[2]
    try:
        number = float(value)
    except ValueError:
        return override
    if value != repr(number) or (short := typed_form(number)) == value:
        return override
    compact = f"{override[: len(override) - len(value)]}{short}"
    return compact if _reading(compact) == _reading(override) is not None else override


def shown(overrides: Iterable[str]) -> str:
    """``overrides`` joined by spaces, each :func:`typed_back`: ``seed=0 tag=${seed} budget.tokens=15e12``."""
    typed = typed_sources()
    return " ".join(typed_back(o, typed) for o in overrides)


SWEEP_TYPED: list[str] = []
"""The sweep file's ``hydra.sweeper.params`` as ``KEY=VALUE`` words, kept by the sweep process when its sweep
starts (:func:`keep_sweep_params`): there Hydra's config of a job is set only while the job runs."""


def sweep_params(config: Any) -> list[str]:
    """``config``'s (a composed config's ``hydra`` node's) ``hydra.sweeper.params`` as ``KEY=VALUE`` words
    (``budget.tokens=1e12,15e12``, as the sweep file typed them); ``[]`` where it has none."""
    try:
        params = config.sweeper.get("params") or {}
        return [
            f"{k}={v}" for k, v in params.items() if isinstance(k, str) and isinstance(v, str | int | float)
        ]
    except Exception:  # noqa: BLE001 - a sweeper without params (the tuner's space), or no Hydra node
        return []


def keep_sweep_params(config: Any) -> None:
    """Keep the sweep config's ``hydra.sweeper.params`` (:data:`SWEEP_TYPED`) for the lines of the sweep
    process (the plan's table, its best commands), read by :func:`typed_sources`."""
    SWEEP_TYPED[:] = sweep_params(config.hydra)


def typed_sources() -> list[str]:
    """What the user typed, as ``KEY=VALUE`` words: this process's command line, then the sweep file's
    ``hydra.sweeper.params`` (``budget.tokens=1e12,15e12``: the running job's Hydra config's, else those the
    sweep kept, :data:`SWEEP_TYPED`), whose values Hydra writes back as floats (``15000000000000.0``)."""
    from hydra.core.hydra_config import HydraConfig

    own = sweep_params(HydraConfig.get()) if HydraConfig.initialized() else []
    return list(sys.argv[1:]) + (own or SWEEP_TYPED)


def typed_back(override: str, typed: Sequence[str] | None = None) -> str:
    """``override`` as the command line or sweep file (``typed``; default :func:`typed_sources`) wrote it
    where Hydra's parser reads that one the same (:func:`as_typed` otherwise): a sweeper writes each job's
    overrides back from their values, so ``budget.tokens=1e12`` came back as ``budget.tokens=1000000000000.0``
    in a sweep's best command and the tuner's winner line."""
    key = override.partition("=")[0]
    read = None
    for t in typed_sources() if typed is None else typed:
        if t != override and t.partition("=")[0] == key:
            read = read or _reading(override)
            for one in (t, *(f"{key}={v}" for v in _elements(t.partition("=")[2]))):
                if read is not None and _reading(one) == read:
                    return one
    return as_typed(override)


def typed_value(key: str, value: Any, typed: Sequence[str] | None = None) -> str:
    """``value`` of ``key`` (``hydra.sweeper.memory_gib``) as ``typed`` (default :func:`typed_sources`: the
    command line) spelled it, where Hydra's parser reads that spelling as ``value`` (``0.000001``, not
    ``1e-6``; ``1e-400``, which Hydra reads as 0.0, not ``0``), else :func:`flopsweep.config.typed_form`.
    For a refusal's ``KEY=VALUE``: docs/tuning.md promises the value as typed."""
    import math

    from flopsweep.config import typed_form

    exact = repr(value) if isinstance(value, float) and math.isfinite(value) else typed_form(value)
    read = _reading(f"{key}={exact}")
    for word in reversed(typed_sources() if typed is None else typed):  # the last one given wins
        name, _, spelled = word.partition("=")
        if name.lstrip("+") == key and read is not None and _reading(f"{key}={spelled}") == read:
            return spelled
    return typed_form(value)


def _elements(value: str) -> list[str]:
    """The values of a sweep typed as ``a,b,c`` or ``choice(a,b,c)`` (``2.50,3`` -> ``2.50``, ``3``), split
    at the commas outside brackets and quotes; ``[]`` for a value of no comma. A job of
    ``cost.usd_per_gpu_hour=2.50,3`` was shown ``cost.usd_per_gpu_hour=2.5``, Hydra's value, where the
    whole typed sweep was compared to it (docs/reliability-10.md #604)."""
    if value.startswith("choice(") and value.endswith(")"):  # choice(2.50,3), Hydra's other form
        value = value[len("choice(") : -1] + ("," if "," not in value else "")
    from flopsweep.override_multirun import split_choices

    parts = split_choices(value)  # None with a bracket or quote left open: nothing to compare
    return [p.strip() for p in parts] if parts and len(parts) > 1 else []


def _string_of(override: str) -> str | None:
    """The one value Hydra's parser reads in ``override``, as text (a number or a boolean as Python
    writes it: ``1``, ``True``); None for a sweep, a list or dict, or an override it cannot parse."""
    try:
        o = _parser().parse_override(override)
    except Exception:  # noqa: BLE001 - Hydra's parse errors: no value
        return None
    if o.is_sweep_override():
        return None
    value = o.value()
    return value if isinstance(value, str) else str(value) if isinstance(value, int | float) else None


def string_word(key: str, value: str) -> str:
    """``KEY=VALUE`` as one word of a POSIX shell command line that Hydra's parser reads back as the one
    string ``value``, for a fix or a hint to type: plain where Hydra reads it so
    (``hydra.sweep.dir=/tmp/out``, the value shell-quoted where the shell needs it:
    ``hydra.sweep.dir='/tmp/a b'``),
    else the value in Hydra's quotes inside the shell's (``'hydra.run.dir="out,x"'``: unquoted, a comma
    makes a sweep of ``out`` and ``x``; a bracket, a list). As is, shell-quoted, when no form reads back."""
    plain = f"{key}={value}"
    if _string_of(plain) == value:
        return f"{key}={shlex.quote(value)}" if shlex.quote(key) == key else shlex.quote(plain)
    for quote in ('"', "'"):
        text = f"{key}={quote}{value}{quote}"
        if quote not in value and _string_of(text) == value:
            return shlex.quote(text)
    return shlex.quote(plain)


def folder_word(key: str, folder: object) -> str:
    """``key=folder`` as one word to type back, which the shell and Hydra read as the one folder
    (:func:`string_word`): ``hydra.sweep.dir=/tmp/out`` as is, a comma, space or quote written so
    (``'hydra.sweep.dir="/tmp/a,b"'``; was ``hydra.sweep.dir=/tmp/a,b``, which Hydra reads as a sweep of
    two folders, session 40)."""
    return string_word(key, str(folder))

"""A job's overrides as the user typed them, for the lines and tables that show them. Torch-free.

Hydra's sweepers write each job's overrides back from their parsed values, escaping the grammar's
special characters (``hydra.core.override_parser.types.Override``: ``tag='${seed}'`` typed is the
job's ``tag=$\\{seed\\}``), so the plan's table printed ``every job: tag=$\\{seed\\}``, a form no one
typed. :func:`as_typed` drops an escape wherever Hydra's parser reads the override the same without it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

_ESCAPED = re.compile(r"\\([(){}\[\]:=,])")
"""An escaped special character of Hydra's grammar, but a space or tab (a shown line is split at those)
and a backslash."""


@functools.lru_cache(maxsize=1)
def _parser():  # noqa: ANN202 - Hydra's OverridesParser, imported on first use
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


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
    a sweep of two values)."""
    if "\\" not in override:
        return override
    plain = _ESCAPED.sub(r"\1", override)
    if plain == override or (read := _reading(plain)) is None or read != _reading(override):
        return override
    return plain


def shown(overrides: Iterable[str]) -> str:
    """``overrides`` joined by spaces, each :func:`as_typed`: ``seed=0 tag=${seed}``."""
    return " ".join(as_typed(o) for o in overrides)

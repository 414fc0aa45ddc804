"""A value held to a set of names (:func:`require_choice`) and the "did you mean" of a name
(:func:`near_name`, through :func:`flopsweep.lookalike.near_names`: case, the letters O, l, I read as
digits and other scripts' digits aside). Torch-free; out of :mod:`flopsweep.config`, which imports
nothing of flopsweep."""

from __future__ import annotations

from flopsweep.config import ConfigError, synonym
from flopsweep.lookalike import misread, near_names


def require_choice(key: str, value: str, allowed, example: str | None = None) -> None:
    """Raise :class:`ConfigError` unless ``value`` is in ``allowed``; the fix names an example (the group
    option, ``attention=sdpa``, for a ``group.name`` key), or the near name (:func:`near_name`), with what
    was misread (``1f1b``: ``did you mean parallel.pp_schedule=1F1B? (options are case-sensitive)``;
    ``lF1B``: ``... ('l' is a letter, not the digit '1')``)."""
    if value not in allowed:
        allowed, example = list(allowed), example or key.removesuffix(".name")
        near = near_name(value, [str(a) for a in allowed]) if isinstance(value, str) else None
        slip = misread(value, [near]) if near else None
        case = " (options are case-sensitive)" if near and near.lower() == value.lower() else ""
        case = f" ({slip[1]})" if slip else case
        fix = f"did you mean {example}={near}?" if near else f"pick one of those, e.g. {example}={allowed[0]}"
        raise ConfigError(key, value, f"must be one of {', '.join(allowed)}", fix + case)


def near_name(name: str, names: list[str]) -> str | None:
    """The one of ``names`` that ``name`` is another word for (:func:`flopsweep.config.synonym`: ``gpu`` ->
    ``cuda``), else the one nearest ``name`` (:func:`flopsweep.lookalike.near_names`: the same once case and
    the letters O, l, I read as digits are set aside, ``H2OO``: ``H200``; else ``difflib``, cutoff 0.6),
    else None."""
    if meant := synonym(name, names):
        return meant
    return next(iter(near_names(name, names, n=1)), None)

"""A cluster's own price: the ``@PRICE`` that ends a ``plan_clusters`` name, in US dollars per GPU-hour.

``plan_clusters=[H100:8x8:ib400@2.49,H200:64@3.5,here@2.0]`` prices each cluster at its own figure; a
name without one is priced at ``cost.usd_per_gpu_hour`` (null: no dollars for its rows). The price is
what a row's dollars are at (``budget_usd``, ``predicted_usd_per_million_tokens``, the
``usd_per_gpu_hour`` column) and so what ``objective=usd_per_million_tokens`` ranks H100 and H200
clusters by. Hydra's grammar takes ``@`` in a list element unquoted.

Torch-free; imports nothing of flopsweep but :mod:`flopsweep.config` (``objective.py`` reads it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from flopsweep.config import ConfigError
from flopsweep.limits import MAX_BY_KEY

PRICE_MARK = "@"
"""What separates a cluster name from its price: ``H100:8x8@2.49``."""
_NUMBER = re.compile(r"\+?(\d+(\.\d*)?|\.\d+)(e[+-]?\d+)?", re.I | re.ASCII)
"""A price as written: a plain decimal number of ASCII digits, an exponent allowed (``2.49``, ``1e3``); no
sign but ``+``, no ``_`` (Python's ``float`` reads ``1_000``), no unit, no other script's digits (``float``
reads ``٢.5`` as 2.5)."""
EXAMPLE_PRICE = "2.5"
"""The price a fix writes as its example: never a number made of what was typed (``@0x10`` is no ``@010``)."""


def _fix(name: str, price: str = EXAMPLE_PRICE) -> str:
    return (
        f"end the name with its USD per GPU-hour, e.g. plan_clusters=[{name}@{price}], or drop the @ to "
        "price it at cost.usd_per_gpu_hour"
    )


def split_price(text: str) -> tuple[str, float | None]:
    """``(name, price)`` of a ``plan_clusters`` entry: ``H100:8x8:ib400@2.49`` is
    ``("H100:8x8:ib400", 2.49)`` (US dollars per GPU-hour); a name without ``@`` is ``(text, None)``.
    A price of 0 is taken (GPUs already paid for), as ``cost.usd_per_gpu_hour=0`` is.

    Raises:
        ConfigError: one line naming ``plan_clusters``, the entry, the price and the fix: ``@`` with
            nothing after it, ``@`` twice, a price that is no number (``@abc``, ``@$2``, a price before
            the network: ``H100:8@2.5:ib400``), not finite (``@inf``, ``@nan``), below 0, or above
            ``cost.usd_per_gpu_hour``'s bound (:data:`flopsweep.limits.MAX_BY_KEY`, 1e6).
    """
    text = str(text).strip()
    name, mark, written = text.partition(PRICE_MARK)
    name = name.strip()  # H100:8 @2.5: Hydra keeps the space inside a list element
    if not mark:
        return text, None
    if PRICE_MARK in written:
        first = written.split(PRICE_MARK)[0]
        first = first if _NUMBER.fullmatch(first) else EXAMPLE_PRICE
        raise ConfigError(
            "plan_clusters",
            text,
            f"gives {text.count(PRICE_MARK)} prices ('@' more than once)",
            _fix(name, first),
        )
    if not written:
        raise ConfigError("plan_clusters", text, "gives no price after its '@'", _fix(name))
    if ":" in written:  # H100:8@2.5:ib400: the price goes last
        price, _, rest = written.partition(":")
        meant = f"{name}:{rest}@{price if _NUMBER.fullmatch(price) else EXAMPLE_PRICE}"
        raise ConfigError(
            "plan_clusters",
            text,
            f"its price {written!r} is not last",
            f"put the @PRICE at the end of the name, e.g. plan_clusters=[{meant}]",
        )
    if written.lstrip("+-").lower() in ("inf", "infinity", "nan"):
        raise ConfigError("plan_clusters", text, f"its price {written} is not a finite number", _fix(name))
    if not _NUMBER.fullmatch(written.removeprefix("-")):
        foreign = [c for c in written if c.isdigit() and not c.isascii()]
        raise ConfigError(
            "plan_clusters",
            text,
            f"its price {written!r} is not a number of US dollars per GPU-hour"
            + (f" (digits 0-9 only: {''.join(foreign)!r} is another script's)" if foreign else ""),
            f"write the number alone in digits 0-9, no $, _, 0x or unit: e.g. plan_clusters=[{name}@"
            f"{EXAMPLE_PRICE}] (USD per GPU-hour)",
        )
    price = float(written) + 0.0  # -0: 0
    if price == 0 and re.search(r"[1-9]", written.lower().partition("e")[0]):  # 1e-400: below a float's least
        raise ConfigError(
            "plan_clusters",
            text,
            f"its price {written} rounds to 0 (below the least a float holds, about 5e-324)",
            _fix(name) + " (or @0 for GPUs already paid for)",
        )
    most = MAX_BY_KEY["cost.usd_per_gpu_hour"]
    if price < 0:
        raise ConfigError(
            "plan_clusters", text, f"its price {written} is below 0 US dollars per GPU-hour", _fix(name)
        )
    if price > most:
        raise ConfigError(
            "plan_clusters",
            text,
            f"its price {written} is above {most:,.0f} US dollars per GPU-hour "
            "(cost.usd_per_gpu_hour's bound)",
            _fix(name),
        )
    return name, price


def has_price(text: object) -> bool:
    """Whether a ``plan_clusters`` entry names its own price (an ``@``; :func:`split_price` checks it)."""
    return PRICE_MARK in str(text)


def entries(clusters: object) -> list[str]:
    """The entries of ``plan_clusters`` as a config holds it (a list) or a command line writes it (the
    text ``[H100:8@2.5,H200:8]``, a sweep's ``[A],[B,C]`` too); ``[]`` for None, ``null`` or an
    interpolation."""
    if clusters is None:
        return []
    if isinstance(clusters, str):
        if "${" in clusters or clusters.strip().lower() in ("", "null", "none"):
            return []
        return [e.strip() for e in re.split(r"[\[\],'\"]+", clusters) if e.strip()]  # as Hydra: H100:8 @2.5
    if isinstance(clusters, Iterable):
        return [str(e).strip() for e in clusters if str(e).strip()]
    return []


def entry_kind_problem(
    names: Sequence[object], once: Callable[[list[str]], list[str]] | None = None
) -> ConfigError | None:
    """One line for a ``plan_clusters`` entry that is no name, else None: a null (``[H100:8,null]`` was
    refused as ``'None' is no device of the peak table``), a ``true``/``false`` (``'True' is no device``)
    or a list or mapping inside the list (``[H100:8,[H200:8]]``: ``"['H200" is no device``). The fix is
    the list with such entries dropped, a nested list's names spliced in where it stood, then passed
    through ``once`` (the caller's: a name of a cluster already listed dropped, for the fix
    ``[H100:1x8,[H100:8]]`` gave, ``[H100:1x8,H100:8]``, was refused as naming one cluster twice).

    Raises nothing; returns the :class:`flopsweep.config.ConfigError` to raise."""
    kept: list[str] = []
    bad: object = None
    for entry in names:
        if entry is None or isinstance(entry, bool):
            bad = ("null" if entry is None else str(entry).lower()) if bad is None else bad
        elif isinstance(entry, Mapping):
            bad = bad if bad is not None else "a mapping"
        elif isinstance(entry, Sequence) and not isinstance(entry, str):
            bad = bad if bad is not None else "a list"
            kept += [str(n).strip() for n in entry if isinstance(n, str | int | float) and str(n).strip()]
        else:
            kept.append(str(entry).strip())
    if bad is None:
        return None
    inside = bad in ("a list", "a mapping")
    what = f"holds {bad} inside the list" if inside else f"holds {bad}, which names no cluster"
    kept = once(kept) if once is not None else kept
    fix = f"plan_clusters=[{','.join(kept)}]" if kept else "e.g. plan_clusters=[H100:8]"
    return ConfigError("plan_clusters", _typed_list(names), what, f"name each cluster once as a text: {fix}")


def _typed_list(names: Sequence[object]) -> str:
    """``names`` as typed on the command line (``[H100:8,null,[H200:8]]``), for the refusal's value."""
    if names is None:
        return "null"
    if isinstance(names, bool):  # as typed: true, not Python's True
        return str(names).lower()
    if isinstance(names, Sequence) and not isinstance(names, str):
        return "[" + ",".join(_typed_list(n) for n in names) + "]"
    return "{...}" if isinstance(names, Mapping) else str(names)


def decimal_comma_problem(names: list[str]) -> ConfigError | None:
    """One line for a price written with a decimal comma (``[H100:8@2,5]``: Hydra's list splits it into
    ``H100:8@2`` and a cluster named ``5``), else None: an entry of ASCII digits alone right after one whose
    price is a whole number."""
    for before, entry in zip(names, names[1:], strict=False):
        name, mark, price = str(before).strip().partition(PRICE_MARK)
        if (
            mark
            and re.fullmatch(r"\d+", price, re.ASCII)
            and re.fullmatch(r"\d+", str(entry).strip(), re.ASCII)
        ):
            typed = f"{name}@{price},{str(entry).strip()}"
            return ConfigError(
                "plan_clusters",
                typed,
                f"its price {price},{str(entry).strip()} has a decimal comma (the list splits there, leaving "
                f"{str(entry).strip()!r} as a cluster name)",
                f"write a decimal point: plan_clusters=[{name}@{price}.{str(entry).strip()}]",
            )
    return None


_SIZE = re.compile(r"(?P<n>\d+)(?P<sign>\s*\S\s*|\s+)(?P<m>\d+)", re.ASCII)
"""A size of two whole numbers and what stands between them (``8×8``, ``8 x 8``, ``8X8``, ``8*8``)."""


def size_sign(entry: str) -> tuple[str, str] | None:
    """``(sign, entry)`` for a ``plan_clusters`` entry whose size (between the GPU's ``:`` and the next
    ``:`` or ``@``) is two whole numbers joined by something other than ``x`` that is meant as it: a
    capital ``X``, ``*``, an ``x`` between spaces, or a non-ASCII sign drawn like ``x`` or meant for
    multiplication (``×`` U+00D7, ``✕`` U+2715, ``⨉``, Cyrillic ``х``: :func:`flopsweep.lookalike.fold_char`,
    Unicode's math and other symbols); ``entry`` with ``x`` in its place. None for any other entry."""
    import unicodedata

    from flopsweep.lookalike import fold_char

    name, at, price = str(entry).strip().partition(PRICE_MARK)
    gpu, colon, rest = name.partition(":")
    size, colon2, network = rest.partition(":")
    match = _SIZE.fullmatch(size.strip())
    if not colon or not match or match.group("sign") == "x":
        return None
    sign = match.group("sign")
    core = sign.strip()
    meant = (
        core in ("x", "X", "*")
        or not core.isascii()
        and ((fold_char(core) or "").lower() == "x" or unicodedata.category(core) in ("Sm", "So"))
    )
    if not meant:
        return None
    return sign, f"{gpu}:{match.group('n')}x{match.group('m')}{colon2}{network}{at}{price}"


def times_sign_problem(names: list[str]) -> ConfigError | None:
    """One line for an entry whose size is written with a sign meant as ``x`` (:func:`size_sign`:
    ``H100:8×8``, ``H100:8✕8``, ``H100:8X8``, ``H100:8*8``, ``H100:8 x 8``), else None; the fix writes every
    entry's ``x``. Unquoted, Hydra's grammar refuses a non-ASCII sign
    (:func:`flopsweep.override_grammar.syntax_problem` names it); quoted (``["H100:8×8"]``) the entry
    read as a GPU with no size ("gives no size"), and ``8X8`` as a size that is no whole number."""
    from flopsweep.lookalike import named

    entries = [str(n).strip() for n in names]
    for entry in entries:
        if found := size_sign(entry):
            sign = found[0].strip()
            written = ",".join((size_sign(e) or ("", e))[1] for e in entries)
            if sign in ("", "x"):
                what, fix = "its size is written with spaces around its x", "write it without spaces"
            else:
                said = "a capital X" if sign == "X" else repr(sign) if sign.isascii() else named(sign)
                what, fix = f"its size is written with {said}, not the letter x", "write x"
            return ConfigError("plan_clusters", entry, what, f"{fix}: plan_clusters=[{written}]")
    return None


def sizes_written(text: str) -> str:
    """``text`` (one ``plan_clusters`` entry, or a bracketed list of them) with each size written with
    ``x`` (:func:`size_sign`): ``[H100:8X8,H200:1x8]`` -> ``[H100:8x8,H200:1x8]``, so that a fix never
    writes a size refused again."""
    inner = text.strip()
    bracketed = inner.startswith("[") and inner.endswith("]")
    entries = (inner[1:-1] if bracketed else inner).split(",")
    written = ",".join((size_sign(e) or ("", e.strip()))[1] for e in entries)
    return f"[{written}]" if bracketed else written


def check_prices(names: list[str]) -> None:
    """Each entry's price checked as a plan reads it (:func:`decimal_comma_problem`, :func:`split_price`).

    Raises:
        ConfigError: the first bad price's one line.
    """
    if problem := decimal_comma_problem(names):
        raise problem
    for name in names:
        split_price(name)


def unpriced(clusters: object) -> list[str]:
    """The entries of ``plan_clusters`` (:func:`entries`) that give no ``@PRICE``, in order."""
    return [e for e in entries(clusters) if not has_price(e)]


def priced_at(named: Iterable[object]) -> set[float]:
    """The prices the ``plan_clusters`` values ``named`` (each a list or a command line's text,
    :func:`entries`) give as ``@PRICE``; a bad one is left out (the plan refuses it)."""
    out = set()
    for clusters in named:
        for entry in entries(clusters):
            try:
                price = split_price(entry)[1]
            except ConfigError:
                continue
            if price is not None:
                out.add(price)
    return out


def price_lines_of(rows: Iterable[tuple[str, float | None]], priced: set[float]) -> list[str]:
    """The lines under a sweep's table that say each cluster's price and where it comes from, as a
    plan's: ``price: 2.5 USD per GPU-hour for H100:1x8:ib400 (@2.5 in plan_clusters)``, ``... for every
    cluster (cost.usd_per_gpu_hour)``; ``rows``: each row's ``(cluster, usd_per_gpu_hour)``; ``priced``:
    the prices some ``@PRICE`` gives (:func:`priced_at`), the others being ``cost.usd_per_gpu_hour``'s.
    No line for a cluster without a price."""
    groups: dict[tuple[float, str], list[str]] = {}
    for cluster, price in rows:
        if price is None:
            continue
        source = f"@{price:.15g} in plan_clusters" if price in priced else "cost.usd_per_gpu_hour"
        labels = groups.setdefault((price, source), [])
        if cluster not in labels:
            labels.append(cluster)
    one = len(groups) == 1
    return [
        f"price: {price:.15g} USD per GPU-hour for {'every cluster' if one else ', '.join(labels)} ({source})"
        for (price, source), labels in groups.items()
    ]

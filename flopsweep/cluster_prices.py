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
from collections.abc import Iterable

from flopsweep.config import MAX_BY_KEY, ConfigError

PRICE_MARK = "@"
"""What separates a cluster name from its price: ``H100:8x8@2.49``."""
_NUMBER = re.compile(r"\+?(\d+(\.\d*)?|\.\d+)(e[+-]?\d+)?", re.I)
"""A price as written: a plain decimal number, an exponent allowed (``2.49``, ``1e3``); no sign but ``+``,
no ``_`` (Python's ``float`` reads ``1_000``), no unit."""


def _fix(name: str, price: str = "2.5") -> str:
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
            ``cost.usd_per_gpu_hour``'s bound (:data:`flopsweep.config.MAX_BY_KEY`, 1e6).
    """
    text = str(text).strip()
    name, mark, written = text.partition(PRICE_MARK)
    if not mark:
        return text, None
    if PRICE_MARK in written:
        first = written.split(PRICE_MARK)[0] or "2.5"
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
        meant = f"{name}:{rest}@{price}" if _NUMBER.fullmatch(price) else f"{name}:{rest}@2.5"
        raise ConfigError(
            "plan_clusters",
            text,
            f"its price {written!r} is not last",
            f"put the @PRICE at the end of the name, e.g. plan_clusters=[{meant}]",
        )
    if written.lstrip("+-").lower() in ("inf", "infinity", "nan"):
        raise ConfigError("plan_clusters", text, f"its price {written} is not a finite number", _fix(name))
    if not _NUMBER.fullmatch(written.removeprefix("-")):
        digits = re.sub(r"[^\d.]", "", written)  # $2.5, 2.5usd: 2.5
        example = digits if _NUMBER.fullmatch(digits) else "2.5"
        raise ConfigError(
            "plan_clusters",
            text,
            f"its price {written!r} is not a number of US dollars per GPU-hour",
            f"write the number alone, no $ or unit: e.g. plan_clusters=[{name}@{example}] (USD per GPU-hour)",
        )
    price = float(written) + 0.0  # -0: 0
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
        return [e for e in re.split(r"[\[\],\s'\"]+", clusters) if e]
    if isinstance(clusters, Iterable):
        return [str(e).strip() for e in clusters if str(e).strip()]
    return []


def unpriced(clusters: object) -> list[str]:
    """The entries of ``plan_clusters`` (:func:`entries`) that give no ``@PRICE``, in order."""
    return [e for e in entries(clusters) if not has_price(e)]

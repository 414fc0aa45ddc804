"""The number fields of a ``config.json`` (``model=hf``), as :func:`flopsweep.models.hf_files.check_raw`
reads them: which fields are numbers, which may be null, their ranges, and the ``(field, value)``
pairs of the top level, the RoPE sections and a ``text_config``. Torch-free; no transformers import."""

from __future__ import annotations

import math
from typing import Any

from flopsweep.config import typed_form
from flopsweep.text import printable

MAX_POSITIONS = 2**24
"""The largest ``max_position_embeddings`` taken (16,777,216; Llama 4 Scout has 10,485,760). Some
models allocate buffers by it (GPT-Neo: a ``max_position_embeddings^2`` mask per layer), which the
memory estimate counts; this bounds the meta-device build that counts them."""


def key_label(key: object) -> str:
    """A JSON key as a message shows it: controls escaped (:func:`flopsweep.text.printable`), at most
    40 characters (a longer one: its first 32, then ``...(N characters)``)."""
    text = printable(key)
    return text if len(text) <= 40 else f"{text[:32]}...({len(text)} characters)"


POSITIVE_NUMBERS = ("rope_theta", "rotary_emb_base", "factor")
"""Numbers that must be above 0 where given, at the top or in ``rope_scaling``/``rope_parameters``
(a negative RoPE base or scaling factor builds, and trains on NaN), with every ``*_eps``/``*_epsilon``."""
NOT_NULL = (
    "rope_theta",
    "rotary_emb_base",
    "factor",
    "low_freq_factor",
    "high_freq_factor",
    "original_max_position_embeddings",
    "partial_rotary_factor",
    "rotary_pct",
)
"""Numbers that may not be null where given (transformers fills in no default for them and fails in
the RoPE arithmetic: ``None ** Tensor``)."""
FRACTIONS = ("rotary_pct",)
"""Shares that must be above 0 and at most 1 (GPT-NeoX's share of each head that RoPE turns)."""
PROBABILITY = ("dropout", "_pdrop")
"""Names containing (or ending in, for GPT-2's ``resid_pdrop``) these are dropout probabilities,
from 0 to 1 (``nn.Dropout`` refuses others only once the model is built)."""
ROPE_SECTIONS = ("rope_scaling", "rope_parameters")
"""The config.json sections that parameterise RoPE (older and newer transformers)."""
ROPE_NOT_NUMBERS: dict[str, type] = {
    "rope_type": str,
    "type": str,
    "truncate": bool,
    "short_factor": list,
    "long_factor": list,
}
"""Fields of a RoPE section that are not one number: the type's name, YaRN's ``truncate`` flag, and
LongRoPE's per-frequency factor lists (each of numbers). Every other field of the section is a number."""
NONNEGATIVE_NUMBERS = ("initializer_range",)
"""Numbers that must not be below 0: a negative ``initializer_range`` builds on the meta device and
fails only in the rank's real initialisation (``normal expects std >= 0.0``)."""
EPS = ("_eps", "_epsilon")
"""Name endings of a normalisation's epsilon (``rms_norm_eps``, ``layer_norm_epsilon``)."""
MAX_NUMBERS = {
    "rope_theta": 1e12,
    "rotary_emb_base": 1e12,
    "factor": 1e4,
    "_factor": 1e4,
    "_eps": 1.0,
    "_epsilon": 1.0,
    "initializer_range": 10.0,
}
"""The largest value taken of each float field, by its name or its name's ending (``_factor``:
``low_freq_factor``, ``partial_rotary_factor``, ``routed_scaling_factor``), at the top or in
``rope_scaling``/``rope_parameters``; finite but absurd values (a ``factor`` or ``rope_theta`` of
1e308) build on the meta device and train on inf and NaN. ``rope_theta`` must also be above 1 (at or
below it the rotary frequencies no longer fall; a tiny base overflows them), the factors and eps
above 0 as before. Each bound is far above what released models use: the RoPE base ``rope_theta``
10^4 (GPT-NeoX) to 10^7 (Qwen2.5-1M), at most 10^12; a RoPE scaling ``factor`` 2 to 64 (Llama 3.1:
8, DeepSeek-V3: 40), other factors 0.25 to 4, at most 10^4; a norm's ``*_eps`` 10^-12 to 10^-5, at
most 1; ``initializer_range`` 0.02, at most 10. Every other
number of a RoPE section (``beta_fast`` 32, ``mscale`` 1, ``original_max_position_embeddings``) is
at least 0 and at most :data:`MAX_POSITIONS`."""


def _number_range(field: str) -> tuple[float, float, bool]:
    """``(low, high, low_taken)`` of the number ``field`` (as :func:`config_numbers` names it): the range
    its value must fall in (module constants above), ``low`` itself taken when ``low_taken``;
    ``(-inf, inf, True)`` for a field left unbounded (the config class's to check)."""
    name = field.rsplit(".", 1)[-1]
    if name in ("rope_theta", "rotary_emb_base"):  # at or below 1 theta^(-2i/d) no longer falls
        return 1.0, MAX_NUMBERS[name], False
    if name in FRACTIONS:
        return 0.0, 1.0, False
    if _is_probability(name):
        return 0.0, 1.0, True
    high = next((v for k, v in MAX_NUMBERS.items() if name == k or (k[0] == "_" and name.endswith(k))), None)
    if name in POSITIVE_NUMBERS or name.endswith(EPS):
        return 0.0, high or math.inf, False
    if name in NONNEGATIVE_NUMBERS or high is not None:
        return 0.0, high or math.inf, True
    if field.startswith(("rope_scaling.", "rope_parameters.")):
        return 0.0, float(MAX_POSITIONS), True
    return -math.inf, math.inf, True


def _is_probability(name: str) -> bool:
    return "dropout" in name or name.endswith("_pdrop")


def _numeric(field: str) -> bool:
    """Whether ``field`` (as :func:`config_fields` names it) must hold a number (or, where
    :data:`NOT_NULL` allows, null): the RoPE base and factors, a norm's epsilon, a dropout, a share,
    and every field of a RoPE section but :data:`ROPE_NOT_NUMBERS`."""
    name, section = field.rsplit(".", 1)[-1], field.rsplit(".", 1)[0] if "." in field else ""
    if section.rsplit(".", 1)[-1] in ROPE_SECTIONS:
        return name not in ROPE_NOT_NUMBERS
    return (
        name in POSITIVE_NUMBERS + NONNEGATIVE_NUMBERS + FRACTIONS
        or name.endswith((*EPS, "_factor"))
        or _is_probability(name)
    )


def field_type_problem(field: str, raw: Any) -> tuple[str, str] | None:
    """``(what is wrong, the fix)`` of ``field``'s value ``raw`` by its type, or None: a number field
    (:func:`_numeric`) must hold a JSON number (a bool passes here: :func:`field_range_problem` refuses
    it), null only where :data:`NOT_NULL` does not name it; a RoPE section's
    :data:`ROPE_NOT_NUMBERS` their type (a list of numbers for the factor lists). ``field`` is named as
    :func:`config_fields` names it (``rope_scaling.factor``); e.g. ``("not a number", "give rope_theta a
    JSON number")``."""
    name = field.rsplit(".", 1)[-1]
    in_rope = "." in field and field.rsplit(".", 1)[0].rsplit(".", 1)[-1] in ROPE_SECTIONS
    if in_rope and name in ROPE_NOT_NUMBERS:
        kind = ROPE_NOT_NUMBERS[name]
        if raw is None or isinstance(raw, kind) and not (kind is str and isinstance(raw, bool)):
            if kind is list and not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in raw):
                return "a list that is not all numbers", f"give {field} a list of JSON numbers"
            return None
        what = {str: "a string", bool: "true or false", list: "a list of numbers"}[kind]
        return f"not {what}", f"give {field} {what}"
    if not _numeric(field):
        return None
    if raw is None:
        if name in NOT_NULL:
            return "null, and transformers fills in no default for it", f"give {field} a JSON number"
        return None
    if not isinstance(raw, (int, float)):
        return "not a number", f"give {field} a JSON number"
    return None


def _range_text(low: float, high: float, low_taken: bool) -> str:
    """``above 0 and at most 10000``, ``from 0 to 10``, as the fix of an out-of-range number says it."""
    top = _num(high) if high < math.inf else ""
    if low_taken:
        return f"from {_num(low)} to {top}" if top else f"of at least {_num(low)}"
    return f"above {_num(low)} and at most {top}" if top else f"above {_num(low)}"


def _num(x: float) -> str:
    """A bound as a message writes it: ``16777216``, ``10000``, ``1e12``, ``0.5``."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e9 else typed_form(x)


def config_fields(data: dict[str, Any]) -> list[tuple[str, Any]]:
    """``(field, value)`` of the top level and of ``rope_scaling``/``rope_parameters`` (as
    ``rope_scaling.factor``), and the same of a ``text_config`` object (``text_config.rope_theta``),
    every value whatever its type; keys as :func:`key_label` shows them."""
    found = [(key_label(k), v) for k, v in data.items()]
    for section in ROPE_SECTIONS:
        if isinstance(data.get(section), dict):
            found += [(f"{section}.{key_label(k)}", v) for k, v in data[section].items()]
    if isinstance(text := data.get("text_config"), dict):  # a multimodal config's text model
        found += [(f"text_config.{field}", v) for field, v in config_fields({**text, "text_config": None})]
    return found


def config_numbers(data: dict[str, Any], bools: bool = False) -> list[tuple[str, float]]:
    """The ``(field, value)`` of :func:`config_fields` whose value is an int or a float, bools left
    out unless ``bools``."""
    found = config_fields(data)
    return [(k, v) for k, v in found if isinstance(v, (int, float)) and (bools or not isinstance(v, bool))]


def field_range_problem(field: str, raw: float) -> tuple[str, str] | None:
    """``(what is wrong, the fix)`` of the number ``field`` (as :func:`config_numbers` names it, bools
    included) against its range (:func:`_number_range`: :data:`MAX_NUMBERS`, :data:`POSITIVE_NUMBERS`,
    :data:`NONNEGATIVE_NUMBERS`, :data:`FRACTIONS`, dropouts from 0 to 1), or None when it is within.
    The first part is the whole clause after the file's path, e.g. ``("has rope_theta=0.5, not above
    1", "give rope_theta a number above 1 and at most 1e+12")``. A bool is refused only where a RoPE
    base, a factor, an epsilon or a non-negative number belongs (``has factor=True, a bool``)."""
    name = field.rsplit(".", 1)[-1]
    low, high, low_taken = _number_range(field)
    if isinstance(raw, bool):
        if name in POSITIVE_NUMBERS + NONNEGATIVE_NUMBERS or name.endswith((*EPS, "_factor")):
            return f"has {field}={raw}, a bool", f"give {field} a number"
        return None
    span = _range_text(low, high, low_taken)
    if not low_taken and not raw > low:
        return f"has {field}={raw}, not above {_num(low)}", f"give {field} a number {span}"
    if low_taken and raw < low:
        return f"has {field}={raw}, below {_num(low)}", f"give {field} a number {span}"
    if raw > high:
        return (
            f"has {field}={typed_form(raw)}, beyond the bound of {_num(high)}",
            f"give {field} a number {span}",
        )
    return None

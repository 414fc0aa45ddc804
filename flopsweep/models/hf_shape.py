"""What a ``config.json`` of ``model=hf`` must describe: every shape field, and unquantised weights;
torch-free (``transformers``' config classes are imported inside :func:`missing_shape_problem`, for
their defaults only).

``transformers`` fills a field the file does not give with its config class's default: a Qwen3 file
without ``num_hidden_layers`` (or with it misspelt, ``num_hiden_layers``, which the class keeps as an
unknown attribute) built 32 blocks of 4096 hidden units, not the file's model, ran and recorded it
under the file's ``_name_or_path`` (session 38's trial). A real ``config.json`` gives every shape field,
so a missing one is refused before anything is built.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from flopsweep.config import ConfigError


def brief(value: Any) -> str:
    """``repr(value)`` (controls escaped by ``repr``), at most 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:48]}...({len(text)} characters)"


def _class_default(model_type: str, field: str) -> tuple[str, Any]:
    """``(class name, value)``: what ``transformers``' config class of ``model_type`` gives ``field``
    when the file does not (``("Qwen3Config", 32)`` for ``num_hidden_layers``); the value None where
    there is no class or it cannot be built bare."""
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING

        cls = CONFIG_MAPPING[model_type]
        return cls.__name__, getattr(cls(), field, None)
    except Exception:  # noqa: BLE001 - a default is only said, never needed
        return "its config class", None


FIXED_DEFAULT_SIZES = ("intermediate_size",)
"""Sizes a file may leave out only where its config class derives them: a class whose default is a
fixed number (Qwen3's MLP of 22016, Llama's 11008, whatever ``hidden_size`` is) built that MLP for a
128-wide model; a class with None (GPT-Neo's 4 x hidden) derives it and passes."""


def missing_shape_problem(
    data: Mapping[str, Any], fields: Iterable[str], aliases: Mapping[str, set[str]], model_type: str
) -> tuple[str, str] | None:
    """``(problem, fix)`` for the first shape field of ``fields`` (``num_hidden_layers``,
    ``hidden_size``, ``num_attention_heads``, ``vocab_size``), then of :data:`FIXED_DEFAULT_SIZES`
    whose class default is a fixed number, that ``data`` (the file's top-level
    object) gives under none of its names (``aliases``: the config class's ``attribute_map``, GPT-Neo's
    ``num_layers``, GPT-2's ``n_embd``) or gives as null, else None. The fix names a key of the file
    that looks like a misspelling of the field (``num_hiden_layers``; case aside, ``Num_Hidden_Layers``,
    whose fix had been the class default, a model the file does not describe), else the field to add."""
    for field in (*fields, *FIXED_DEFAULT_SIZES):
        names = aliases.get(field, {field})
        if any(data.get(name) is not None for name in names):
            continue
        owner, default = _class_default(model_type, field)
        if field in FIXED_DEFAULT_SIZES and not isinstance(default, int):  # None: derived (4 x hidden)
            continue
        others = sorted(names - {field})
        also = f" (nor {', '.join(others)})" if others else ""
        given = " as null" if field in data else ""
        built = f"{owner}'s default" + (f", {default}" if default is not None else "")
        problem = (
            f"gives no {field}{also}{given}: transformers would build {built}, "
            "a model the file does not describe, under the file's name"
        )
        known = set().union(*aliases.values()) if aliases else set()
        unknown = [key for key in data if key not in known and key != field]
        lowered = {key.lower(): key for key in reversed(unknown)}  # Num_Hidden_Layers: its own case aside
        near = [lowered[k] for k in difflib.get_close_matches(field.lower(), list(lowered), n=1, cutoff=0.85)]
        if near:
            return problem, f'rename {near[0]} to {field} in the file: "{field}": {json.dumps(data[near[0]])}'
        return problem, f'write the model\'s {field} in the file, e.g. "{field}": {default or 2}'
    return None


QUANTIZATION_KEYS = ("quantization_config", "quantization")
"""The fields with which a ``config.json`` describes quantised weights (``transformers``'
``quantization_config``: bitsandbytes, GPTQ, AWQ, FP8 ...; ``quantization`` in some exports)."""


def quantized_problem(src: Any) -> None:
    """Refuse a ``config.json`` that describes quantised weights (a :data:`QUANTIZATION_KEYS` field,
    at the top or in a nested ``text_config``): flopsweep builds the model from the config alone and
    measures unquantised training (bf16/fp32 weights, full gradients), so the record would claim the
    quantised model it names while another ran.

    Raises:
        ConfigError: naming ``model.config``, the field (and its ``quant_method``) and the fix.
    """
    for where, node in (("", src.data), ("text_config.", src.data.get("text_config"))):
        if not isinstance(node, dict):
            continue
        key = next((k for k in QUANTIZATION_KEYS if node.get(k) is not None), None)
        if key is None:
            continue
        method = node[key].get("quant_method") if isinstance(node[key], dict) else None
        shown = f" (quant_method {brief(method)})" if method is not None else ""
        raise ConfigError(
            "model.config",
            str(src.path),
            f"has {where}{key}{shown}: it describes quantised weights, and flopsweep measures "
            "unquantised training (the record would claim the quantised model)",
            f"give the config.json of the unquantised model, or remove {where}{key} from a copy of it",
        )


def head_dim_note(data: Mapping[str, Any], built: Any) -> str | None:
    """One line where the file states no ``head_dim`` and ``transformers``' config class, built from the
    file (``built``), gives one other than ``hidden_size / num_attention_heads``: Qwen3's class default
    is 128 whatever the width (a 128-wide, 4-head file builds 4 heads of 128, attention 512 wide), while
    Mistral's derives ``hidden / heads`` (no line). The model is built as ``transformers`` builds it, as
    ``AutoModelForCausalLM.from_config`` of the same file would; the line says so in the run's log and
    its record's ``warnings``. None where the file states it, where it states a head size of multi-head
    latent attention (``qk_rope_head_dim``, ``v_head_dim``: DeepSeek-V3's class derives ``head_dim``
    from them), or where the class derives ``hidden / heads`` (or gives None, which its model reads so).
    """
    if any(str(key).endswith("head_dim") and data[key] is not None for key in data):
        return None
    head_dim = getattr(built, "head_dim", None)
    hidden = getattr(built, "hidden_size", None)
    heads = getattr(built, "num_attention_heads", None)
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (head_dim, hidden, heads)):
        return None
    if hidden % heads == 0 and head_dim == hidden // heads:
        return None
    return (
        f"hf_head_dim: the file gives no head_dim, and transformers' {type(built).__name__} builds "
        f"head_dim={head_dim} (its default), not hidden_size/num_attention_heads={hidden}/{heads}: "
        f"{heads} heads x {head_dim} = {heads * head_dim}-wide attention beside a {hidden}-wide residual, "
        "as transformers builds this file; for heads of hidden/heads, write "
        f'"head_dim": {max(1, hidden // heads)} in a copy of the file'
    )

"""The ``config.json`` of ``model=hf``, torch-free: where it is, its bytes, its keys and their checks.

``model.config`` is a path to a ``config.json`` (or the folder holding one) or the name of a file
shipped in ``hf_configs/`` beside this module. Plain ``json``: neither ``transformers`` nor torch is
imported here, except ``transformers``' config classes inside :func:`hf_config` (its checks).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flopsweep.config import MAX_BY_KEY, MAX_INT, ConfigError
from flopsweep.files import RecordError, read_regular

SHIPPED = Path(__file__).parent / "hf_configs"
"""The shipped configs, ``NAME.json`` each (written from the public model cards; no weights)."""
MAX_CONFIG_BYTES = 1 << 20
"""The largest ``config.json`` read (1 MiB; real ones are a few KiB)."""
KEY = "model.config"


@dataclass(frozen=True, kw_only=True)
class Source:
    """One ``config.json``: where it is, its bytes' SHA-256 (hex) and its parsed keys."""

    path: Path
    sha256: str
    data: dict[str, Any]

    @property
    def label(self) -> str:
        """``_name_or_path``, else the file's stem (its folder's name for ``config.json``)."""
        if name := self.data.get("_name_or_path"):
            return str(name)
        return self.path.parent.name if self.path.name == "config.json" else self.path.stem


def config_path(value: str) -> Path:
    """The file ``model.config=value`` names: a shipped ``NAME``, else a path (a folder means its
    ``config.json``), resolved through links (a Hugging Face cache's snapshot links to its blobs).

    Raises:
        ConfigError: naming ``model.config`` for a link loop or a path that cannot be resolved.
    """
    shipped = SHIPPED / f"{value}.json"
    if "/" not in value and shipped.is_file():
        return shipped
    try:
        path = Path(value).expanduser()
        return (path / "config.json" if path.is_dir() else path).resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # a link loop: ELOOP, or pathlib's "Symlink loop"
        raise ConfigError(
            KEY, value, f"cannot be resolved ({exc})", "give a config.json path that is no link loop"
        ) from None


def _shipped_names() -> str:
    return ", ".join(sorted(p.stem for p in SHIPPED.glob("*.json")))


@functools.lru_cache(maxsize=64)
def load(value: str) -> Source:
    """Read and parse ``model.config=value`` (at most :data:`MAX_CONFIG_BYTES`).

    Raises:
        ConfigError: naming ``model.config`` for a missing or unreadable file or malformed JSON.
    """
    path = config_path(value)
    if not path.exists():
        raise ConfigError(
            KEY,
            value,
            f"is neither a shipped config nor an existing file ({path} does not exist)",
            f"give a config.json path or its folder, or a shipped name: {_shipped_names()}",
        )
    try:
        raw = read_regular(path, MAX_CONFIG_BYTES)
    except RecordError as exc:
        raise ConfigError(KEY, value, f"cannot be read ({exc})", "give a readable config.json") from None
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, or an int over 4300 digits
        raise ConfigError(KEY, value, f"is not valid JSON ({exc})", "give a model's config.json") from None
    if not isinstance(data, dict):
        raise ConfigError(KEY, value, "is JSON but not an object", "give a model's config.json")
    return Source(path=path, sha256=hashlib.sha256(raw).hexdigest(), data=data)


def _causal_lm_types() -> dict[str, str]:
    """``model_type -> class name`` of ``transformers``' causal-LM auto mapping; ConfigError without it."""
    try:
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    except ImportError:
        raise ConfigError(
            "model", "hf", "needs the transformers package, which is not installed", "pip install -e '.[hf]'"
        ) from None
    return dict(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def hf_config(src: Source, *, attn: str = "sdpa", experts: str = "eager") -> Any:
    """The ``transformers`` config of ``src`` (no cache; ``experts`` for MoE layers).

    Raises:
        ConfigError: naming ``model.config`` when it is no causal LM ``transformers`` builds natively,
            or its ``architectures`` are not all ``*ForCausalLM`` (e.g. GPT-2's ``GPT2LMHeadModel``).
    """
    from transformers import AutoConfig

    value = str(src.path)
    model_type = src.data.get("model_type")
    known = _causal_lm_types()
    archs = src.data.get("architectures") or []
    fix = "give the config.json of a *ForCausalLM model (Llama, Qwen3, Mistral, Mixtral, DeepSeek-V3, ...)"
    if model_type not in known:
        what = f"model_type {model_type!r}" + (f", architectures {archs}" if archs else "")
        raise ConfigError(
            KEY, value, f"is not a causal language model transformers builds natively ({what})", fix
        )
    if not all(str(a).endswith("ForCausalLM") for a in archs):
        raise ConfigError(
            KEY,
            value,
            f"names architectures {archs}: flopsweep builds *ForCausalLM classes only "
            f"(a masked LM, or GPT-2's *LMHeadModel, is not supported)",
            fix,
        )
    keys = {k: v for k, v in src.data.items() if k not in ("model_type", "torch_dtype", "dtype", "auto_map")}
    check_raw(src)
    from huggingface_hub.errors import StrictDataclassError

    try:
        cfg = AutoConfig.for_model(model_type, **keys)
    except StrictDataclassError as exc:  # the config class's own field and class validators
        raise _field_error(value, exc) from None
    except (ValueError, TypeError, KeyError) as exc:
        raise ConfigError(KEY, value, f"is refused by transformers: {exc}", "fix the config.json") from None
    cfg.use_cache = False
    cfg._experts_implementation = experts
    cfg._attn_implementation = attn
    return cfg


def _field_error(value: str, exc: Exception) -> ConfigError:
    """One line for a validation error of ``huggingface_hub``'s strict dataclasses (transformers' config
    classes): ``Validation error for field 'head_dim': TypeError: ...``, the field named in the fix."""
    text = " ".join(str(exc).split())
    field = re.search(r"field '(\w+)'", text)
    where = f"its {field.group(1)} field" if field else "the field it names"
    return ConfigError(
        KEY, value, f"is refused by transformers: {text}", f"correct {where} in the config.json (or drop it)"
    )


def _raw_bounds() -> dict[str, float]:
    """The largest value of each integer field of a ``config.json``: the shape fields take their
    flopsweep key's bound (``config.MAX_BY_KEY``: ``num_hidden_layers`` that of ``model.n_layer``)."""

    return {field: MAX_BY_KEY[f"model.{key}"] for key, field in SHAPE_KEYS.items()}


def check_raw(src: Source) -> None:
    """The file's numbers before transformers builds anything from them (a ``num_hidden_layers`` of
    10^12 made transformers fill per-layer lists until memory ran out): each shape field
    (:data:`SHAPE_KEYS`) a whole number (no bool, string or fraction) within its flopsweep key's bound,
    every other whole number within ``config.MAX_INT``.

    Raises:
        ConfigError: naming ``model.config``, the JSON field, its value and the fix.
    """

    bounds = _raw_bounds()
    value = str(src.path)
    for field, raw in src.data.items():
        if field in bounds and raw is not None and (isinstance(raw, bool) or not isinstance(raw, int)):
            raise ConfigError(
                KEY, value, f"has {field}={raw!r}, not a whole number", f"write {field} as a JSON integer"
            )
        if isinstance(raw, int) and not isinstance(raw, bool) and abs(raw) > bounds.get(field, MAX_INT):
            bound = int(bounds.get(field, MAX_INT))
            shown = str(raw) if len(str(raw)) <= 20 else f"{str(raw)[:12]}...({len(str(raw))} digits)"
            raise ConfigError(
                KEY,
                value,
                f"has {field}={shown}, beyond the bound of {bound}",
                f"give model.config a config.json with {field} at most {bound}",
            )


SHAPE_KEYS = {
    "n_layer": "num_hidden_layers",
    "n_embd": "hidden_size",
    "n_head": "num_attention_heads",
    "vocab_size": "vocab_size",
}
"""flopsweep's shape keys and the ``config.json`` keys they are read from."""


def is_moe(data: dict[str, Any]) -> bool:
    """Whether a config.json's ``data`` is a mixture of experts: it routes each token to
    ``num_experts_per_tok`` experts (Qwen3-MoE, OLMoE, DeepSeek-V3, Mixtral)."""
    return bool(data.get("num_experts_per_tok"))

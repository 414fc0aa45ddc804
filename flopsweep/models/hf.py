"""Any Hugging Face causal LM from its ``config.json`` (``model=hf``): schema, module, counts, FLOPs.

``transformers`` (the ``hf`` extra) builds the model from the file alone, with random weights and
no download (``AutoConfig.for_model`` + ``AutoModelForCausalLM.from_config``); ``trust_remote_code``
is never passed, so only the architectures ``transformers`` ships run. ``model.config`` is a
path to a ``config.json`` (or the folder holding one) or the name of a file shipped in
``hf_configs/`` beside this module (``qwen3-1.7b``, ``mistral-7b-v0.1``, ``mistral-7b-v0.3``,
``qwen3-30b-a3b``, ``moonlight-16b-a3b``, ``olmoe-1b-7b``, ``llama3.2-1b`` and a CPU-sized
``*-tiny`` of each kind).

The module (:class:`HFCausalLM`) keeps the built-ins' contract: ``forward(tokens[B, s + 1])``
returns the mean next-token loss, and ``head_loss`` is the part after the decoder's final norm
(the LM head and the fp32 cross-entropy). The blocks are the decoder layers, found from the
model's own ``_no_split_modules`` class names (the units ``transformers`` never splits).

FLOPs are counted, not derived: ``FlopCounterMode`` over one forward and backward of one
sequence on the meta device (no memory), with ``eager`` attention (the full ``s x s`` square of
the convention) and, for MoE, the ``batched_mm`` experts (each token's top-k experts, exactly the
active parameters; the router and shared experts are ordinary layers). Cached by the config's
SHA-256 and the sequence length. ``tests/test_hf.py`` checks them against a real CPU step.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from flopsweep.config import MAX_BY_KEY, MAX_INT, AttentionConfig, ConfigError
from flopsweep.files import RecordError, read_regular
from flopsweep.options import HF_ATTENTION, HF_EXPERTS, HFConfig

CONFIG = HFConfig
ZERO_INIT = False  # see ModelFamily.zero_init

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


def _from_config(src: Source, attn: str, experts: str) -> nn.Module:
    from transformers import AutoModelForCausalLM

    cfg = hf_config(src, attn=attn, experts=experts)
    return AutoModelForCausalLM.from_config(cfg, attn_implementation=attn, dtype=torch.float32)


class HFCausalLM(nn.Module):
    """A ``transformers`` ``*ForCausalLM`` behind the built-ins' contract.

    ``forward(tokens)`` runs the base model (``hf.base_model``: embeddings, decoder layers, final
    norm) and :meth:`head_loss` (the output embeddings and the cross-entropy in fp32).
    """

    def __init__(self, hf: nn.Module) -> None:
        super().__init__()
        self.hf = hf

    def forward(self, tokens: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Loss of one micro batch.

        Args:
            tokens: LongTensor ``[batch, seq_len + 1]``; inputs ``tokens[:, :-1]``, targets ``tokens[:, 1:]``.
            attention_mask: None (causal, as runs use it), or a ready 4-D additive mask
                ``[batch, 1, s, s]`` (the FLOP count on the meta device, where transformers cannot
                build one).

        Returns:
            Scalar mean cross-entropy (fp32).
        """
        idx, targets = tokens[:, :-1], tokens[:, 1:]
        out = self.hf.base_model(input_ids=idx, attention_mask=attention_mask, use_cache=False)
        return self.head_loss(out.last_hidden_state, targets)

    def head_loss(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """LM head (tied or not) and cross-entropy in fp32; ``x``: ``(B, T, C)`` after the final norm."""
        logits = self.hf.get_output_embeddings()(x)
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


def build(cfg: HFConfig, attention: AttentionConfig) -> HFCausalLM:
    """The model in fp32 on the current default device, ``attention`` as its ``attn_implementation``."""
    return HFCausalLM(_from_config(load(cfg.config), HF_ATTENTION[attention.name], cfg.experts))


def blocks(model: HFCausalLM) -> nn.ModuleList:
    """The decoder layers: the first ``ModuleList`` whose children are all of the model's
    ``_no_split_modules`` classes."""
    names = set(model.hf._no_split_modules or ())
    for module in model.modules():
        if isinstance(module, nn.ModuleList) and len(module) and all(_name(m) in names for m in module):
            return module
    raise ValueError(f"{type(model.hf).__name__} has no ModuleList of its _no_split_modules {sorted(names)}")


def _name(module: nn.Module) -> str:
    """The class name, looking through ``checkpoint_wrapper`` and ``torch.compile``."""
    inner = getattr(module, "_checkpoint_wrapped_module", module)
    return type(getattr(inner, "_orig_mod", inner)).__name__


def tied_parameters(model: HFCausalLM) -> list[nn.Parameter]:
    """The input embedding's weight when the LM head shares it (used outside the embedding)."""
    inp, out = model.hf.get_input_embeddings(), model.hf.get_output_embeddings()
    return [inp.weight] if out is not None and out.weight is inp.weight else []


def experts_modules(model: nn.Module) -> list[nn.Module]:
    """The MoE experts modules: ``transformers`` 5's ``*Experts``, every expert's weights in 3-D tensors."""
    return [
        m
        for m in model.modules()
        if type(m).__name__.endswith("Experts") and any(p.dim() == 3 for p in m.parameters(recurse=False))
    ]


def zero3_leaf_modules(model: HFCausalLM) -> list[type]:
    """The MoE layers' classes (each experts module's parent), for ``deepspeed.utils.set_z3_leaf_modules``:
    ZeRO-3 gathers a leaf's parameters once, not per expert the data-dependent routing calls."""
    experts = {id(m) for m in experts_modules(model)}
    parents = {type(p) for p in model.modules() if any(id(c) in experts for c in p.children())}
    return sorted(parents, key=lambda t: t.__name__)


SHAPE_KEYS = {
    "n_layer": "num_hidden_layers",
    "n_embd": "hidden_size",
    "n_head": "num_attention_heads",
    "vocab_size": "vocab_size",
}
"""flopsweep's shape keys and the ``config.json`` keys they are read from."""


def _set_fields(cfg: HFConfig, src: Source) -> None:
    """Fill the shape keys from the file; a key set by hand to another value is refused (a sweep
    over ``model.n_layer`` would otherwise run the same model under other names)."""
    for key, field in SHAPE_KEYS.items():
        try:
            value = int(src.data.get(field, 0))
        except (TypeError, ValueError):
            value = 0
        given = getattr(cfg, key)
        if given and given != value:
            raise ConfigError(
                f"model.{key}",
                given,
                f"model=hf takes the model's shape from model.config, whose {field} is {value}",
                f"drop the model.{key} override, or give model.config a copy of the config.json with "
                f"{field} changed",
            )
        setattr(cfg, key, value)
    if not cfg.name:
        cfg.name = src.label


def is_moe(data: dict[str, Any]) -> bool:
    """Whether a config.json's ``data`` is a mixture of experts: it routes each token to
    ``num_experts_per_tok`` experts (Qwen3-MoE, OLMoE, DeepSeek-V3, Mixtral)."""
    return bool(data.get("num_experts_per_tok"))


def check(cfg: HFConfig) -> None:
    """Read ``model.config`` and refuse what cannot be built; fill ``n_layer``, ``n_embd``,
    ``n_head``, ``vocab_size`` (and an empty ``name``) from it (see :class:`HFConfig`).

    Raises:
        ConfigError: a missing path, malformed JSON, no causal LM, no transformers, a bad ``model.experts``
            (unknown, or other than the default on a dense model).
    """
    if cfg.experts not in HF_EXPERTS:
        raise ConfigError(
            "model.experts", cfg.experts, "is no experts implementation", f"pick one of {HF_EXPERTS}"
        )
    src = load(cfg.config)
    hf_config(src)
    if cfg.experts != HFConfig.experts and not is_moe(src.data):
        raise ConfigError(
            "model.experts",
            cfg.experts,
            f"picks an MoE experts implementation, and {src.label} is a dense model (no "
            "num_experts_per_tok in its config.json): nothing would run it",
            f"drop model.experts (the default, {HFConfig.experts}), or pick an MoE config such as "
            "model.config=qwen3-moe-tiny",
        )
    _set_fields(cfg, src)
    for key in ("n_layer", "n_embd", "n_head", "vocab_size"):
        if getattr(cfg, key) <= 0:
            raise ConfigError(
                KEY, cfg.config, f"gives model.{key}={getattr(cfg, key)}", "give a complete config.json"
            )


@functools.lru_cache(maxsize=16)
def _meta(sha256: str, value: str) -> dict[str, Any]:
    """Counts of the model built on the meta device: parameters, active parameters, largest tensor."""
    with torch.device("meta"):
        model = _from_config(load(value), "eager", "batched_mm")
    total = sum(p.numel() for p in model.parameters())
    data = load(value).data
    k = data.get("num_experts_per_tok")
    inactive = 0
    for m in experts_modules(model):
        n_experts = next(p.shape[0] for p in m.parameters(recurse=False) if p.dim() == 3)
        params = sum(p.numel() for p in m.parameters())
        inactive += params - params * int(k) // n_experts
    largest = max(p.numel() for p in model.parameters())
    return {"n_params": total, "n_active_params": total - inactive, "largest": largest}


def _src(cfg: HFConfig) -> Source:
    return load(cfg.config)


def n_params(cfg: HFConfig) -> int:
    """Every parameter of the built module (a tied LM head once), counted on the meta device."""
    src = _src(cfg)
    return _meta(src.sha256, cfg.config)["n_params"]


def n_active_params(cfg: HFConfig) -> int:
    """:func:`n_params` less the experts a token does not use: each experts module counts
    ``top_k / n_experts`` of its weights (``num_experts_per_tok``); the router and shared experts
    count whole. Equal to :func:`n_params` for a dense model."""
    src = _src(cfg)
    return _meta(src.sha256, cfg.config)["n_active_params"]


@functools.lru_cache(maxsize=64)
def counted_flops(sha256: str, value: str, seq_len: int, recompute: str) -> int:
    """FLOPs of one forward and backward of one sequence of ``seq_len`` tokens, counted by
    ``FlopCounterMode`` on the meta device (see the module docstring), with the recompute of
    ``recompute``: ``none``; ``early_stop`` (each block in non-reentrant ``checkpoint_wrapper``, as
    ``activation_checkpointing=full`` runs eager blocks); ``full`` (the base model's forward
    once more: a compiled block re-runs whole)."""
    from torch.utils.flop_counter import FlopCounterMode

    from flopsweep import checkpointing
    from flopsweep.config import CheckpointingConfig

    with torch.device("meta"):
        model = HFCausalLM(_from_config(load(value), "eager", "batched_mm"))
        tokens = torch.zeros(1, seq_len + 1, dtype=torch.long)
        mask = torch.zeros(1, 1, seq_len, seq_len)
    if recompute == "early_stop":
        full = CheckpointingConfig(name="full")
        checkpointing.policy(full).apply(blocks(model), full)
    elif recompute not in ("none", "full"):
        raise ValueError(f"unknown recompute {recompute!r}; expected none, early_stop or full")
    with FlopCounterMode(display=False) as counter:
        model(tokens, attention_mask=mask).backward()
    total = counter.get_total_flops()
    if recompute == "full":
        with FlopCounterMode(display=False) as fwd, torch.no_grad():
            model.hf.base_model(input_ids=tokens[:, :-1], attention_mask=mask, use_cache=False)
        total += fwd.get_total_flops()
    return int(total)


def model_flops(cfg: HFConfig, tokens: int, density: float = 1.0) -> float:
    """FLOPs of one optimizer step over ``tokens`` tokens, no recompute: the counted FLOPs per token
    times ``tokens``. ``density`` is 1 for every kernel ``model=hf`` takes (``flopsweep.rules``)."""
    src = _src(cfg)
    return counted_flops(src.sha256, cfg.config, cfg.seq_len, "none") / cfg.seq_len * tokens


def hardware_flops(cfg: HFConfig, tokens: int, density: float = 1.0, recompute: str = "none") -> float:
    """:func:`model_flops` plus what ``recompute`` re-runs (see :func:`counted_flops`)."""
    src = _src(cfg)
    return counted_flops(src.sha256, cfg.config, cfg.seq_len, recompute) / cfg.seq_len * tokens


def eq3_flops(cfg: HFConfig, global_batch: int, recompute_forward: bool) -> None:
    """None: eq. 3 describes a GPT block only."""
    return None


def info(cfg: HFConfig) -> dict[str, Any]:
    """The record's ``model`` section: ``arch`` ``hf``, the name, the config's value and its
    architecture and SHA-256, the shape read from it, ``n_params`` and ``n_active_params``."""
    src = _src(cfg)
    archs = src.data.get("architectures") or [src.data.get("model_type", "")]
    return {
        "name": cfg.name,
        "arch": "hf",
        "config": cfg.config,
        "hf_architecture": str(archs[0]),
        "config_sha256": src.sha256,
        "n_layer": cfg.n_layer,
        "n_embd": cfg.n_embd,
        "n_head": cfg.n_head,
        "seq_len": cfg.seq_len,
        "vocab_size": cfg.vocab_size,
        "n_params": n_params(cfg),
        "n_active_params": n_active_params(cfg),
    }


def memory(cfg: HFConfig) -> dict[str, int]:
    """Shapes for :mod:`flopsweep.memory`, as Llama's (an approximation for other layers): the two
    norm inputs and their normalised values as the residual part; norm outputs, q, k, v, attention
    out and four SwiGLU tensors of the active MLP width (``top_k + shared`` experts for MoE) as the
    rest; compiled, the norm inputs and two SwiGLU tensors fewer (see ``llama.memory``)."""
    d = _src(cfg).data
    h = cfg.n_embd
    hd = int(d.get("head_dim") or h // cfg.n_head)
    kv = int(d.get("num_key_value_heads") or cfg.n_head) * hd
    if is_moe(d):
        shared = int(d.get("n_shared_experts") or 0)
        expert = d.get("moe_intermediate_size") or d.get("intermediate_size", 4 * h)  # OLMoE: the latter
        ffn = int(expert) * (int(d["num_experts_per_tok"]) + shared)
    else:
        ffn = int(d.get("intermediate_size", 4 * h))
    largest = max(cfg.vocab_size * h, _meta(_src(cfg).sha256, cfg.config)["largest"])
    other = 3 * h + cfg.n_head * hd + 2 * kv + 4 * ffn
    return {
        "residual": 4 * h,
        "other": other,
        "residual_compiled": 2 * h,
        "other_compiled": other - 2 * ffn,
        "largest_layer_params": largest,
    }

"""Any Hugging Face causal LM from its ``config.json`` (``model=hf``): the torch-free shape.

This module imports neither torch nor ``transformers``: the file is read by :mod:`.hf_files`
(plain ``json``), and the module, its parameter counts and its FLOPs come from :mod:`.hf_nn`
(:data:`TORCH_MODULE`), imported the first time they are asked for (``check`` imports
``transformers``' config classes, which import torch).

``transformers`` (the ``hf`` extra) builds the model from the file alone, with random weights and
no download (``AutoConfig.for_model`` + ``AutoModelForCausalLM.from_config``); ``trust_remote_code``
is never passed, so only the architectures ``transformers`` ships run. ``model.config`` is a
path to a ``config.json`` (or the folder holding one) or the name of a file shipped in
``hf_configs/`` beside this module (``qwen3-1.7b``, ``mistral-7b-v0.1``, ``mistral-7b-v0.3``,
``qwen3-30b-a3b``, ``moonlight-16b-a3b``, ``olmoe-1b-7b``, ``llama3.2-1b`` and a CPU-sized
``*-tiny`` of each kind).

The module (``hf_nn.HFCausalLM``) keeps the built-ins' contract: ``forward(tokens[B, s + 1])``
returns the mean next-token loss, and ``head_loss`` is the part after the decoder's final norm
(the LM head and the fp32 cross-entropy). The blocks are the decoder layers, found from the
model's own ``_no_split_modules`` class names (the units ``transformers`` never splits).

FLOPs are counted, not derived: ``FlopCounterMode`` over one forward and backward of one
sequence on the meta device (no memory), with ``eager`` attention (the full ``s x s`` square of
the convention) and, for MoE, the ``batched_mm`` experts (each token's top-k experts, exactly the
active parameters; the router and shared experts are ordinary layers). Cached by the config's
SHA-256 and the sequence length. ``tests/unit/test_hf.py`` checks them against a real CPU step.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from flopsweep import lazy
from flopsweep.config import ConfigError, ModelConfig
from flopsweep.limits import MAX_BY_KEY
from flopsweep.models.hf_files import (  # noqa: F401 - the names callers use as hf.*
    KEY,
    MAX_CONFIG_BYTES,
    SHA_KEY,
    SHAPE_KEYS,
    SHIPPED,
    Source,
    check_raw,
    config_path,
    error_line,
    hf_config,
    is_moe,
    load,
    source,
    validated_bytes,
)
from flopsweep.setup_spec import SetupSpec

HF_ATTENTION: dict[str, str] = {"sdpa": "sdpa", "standard": "eager", "flex": "flex_attention"}
"""``attention=`` option -> the ``attn_implementation`` a ``transformers`` model is built with
(``model=hf``); every other kernel is refused (``flopsweep.rules.hf_attention``)."""

HF_EXPERTS = ("eager", "grouped_mm", "batched_mm")
"""``model.experts`` values: ``transformers``' experts implementations of an MoE layer."""


@dataclass(kw_only=True)
class HFConfig(ModelConfig):
    """A Hugging Face ``transformers`` causal LM built from its ``config.json`` (random weights, no
    download; ``flopsweep.models.hf``).

    ``n_layer``, ``n_embd``, ``n_head`` and ``vocab_size`` are read from the file by validation
    (``num_hidden_layers``, ``hidden_size``, ``num_attention_heads``, ``vocab_size``), and ``name``
    too when left empty (the file's ``_name_or_path``, else its stem, or its folder's name for a
    ``config.json``). A shape key set by hand that disagrees with the file is refused (the file is the
    model: edit a copy of it instead). ``seq_len`` is the run's own. ``config_sha256`` is filled
    from the file too.
    """

    name: str = ""
    """From the file (``_name_or_path``, else its stem or folder name) when empty; a value set by
    hand must be the file's."""
    arch: str = "hf"
    n_layer: int = 0
    """From the file's ``num_hidden_layers`` (0: not given); a value set by hand must agree with it."""
    n_embd: int = 0
    """From the file's ``hidden_size`` (0: not given); a value set by hand must agree with it."""
    n_head: int = 0
    """From the file's ``num_attention_heads`` (0: not given); a value set by hand must agree with it."""
    vocab_size: int = 0
    """From the file's ``vocab_size`` (0: not given); a value set by hand must agree with it."""
    config: str = "qwen3-tiny"
    """A path to a ``config.json`` or to the folder holding one, or the name of a config shipped in
    ``flopsweep/models/hf_configs/NAME.json`` (``qwen3-1.7b``, ``qwen3-tiny``, ...)."""
    experts: str = "eager"
    """MoE experts implementation (:data:`HF_EXPERTS`): ``eager`` loops over the experts hit,
    ``grouped_mm`` one grouped GEMM (CUDA, bf16), ``batched_mm`` gathers each token's expert
    weights (memory ``tokens x top_k`` expert matrices). A dense model (no ``num_experts_per_tok``) takes
    only the default: validation refuses another, which nothing would run."""
    config_sha256: str = ""
    """The SHA-256 (hex) of the ``config.json`` bytes validation read; filled by validation (empty:
    not yet read). Set by hand, the file must have that hash. Validation reads the file once: the
    ranks build from those bytes, and the job key and set-up key (``flopsweep.identity``) include
    the hash, so ``resume=true`` runs a changed file again."""


CONFIG = HFConfig
COLUMNS = (
    SetupSpec(
        name="experts",
        path="config.model.experts",
        header="experts",
        description="MoE experts implementation of model=hf (eager, grouped_mm, batched_mm)",
    ),
)
"""The family's own set-up columns (:data:`flopsweep.columns.SETUP_SPECS` takes them in)."""
UNSHOWN_KEYS = ("config.model.config", "config.model.config_sha256")
"""The knobs no column shows: the model's name stands for the file (the record keeps its hash)."""
ZERO_INIT = False  # see ModelFamily.zero_init
TORCH_MODULE = "flopsweep.models.hf_nn"
"""The module (torch, ``transformers``) that builds the model and counts it on the meta device."""
PARALLELIZE = None
"""No tensor-parallel plan: ``parallel.tp > 1`` is refused (``rules.tensor_parallel_shapes``)."""


__getattr__ = lazy.attributes_of(TORCH_MODULE, __name__)
"""The torch names (``HFCausalLM``, ``build``, ``blocks``, ``counted_flops``, ...) of
:data:`TORCH_MODULE` (torch, ``transformers``)."""


def _counts(cfg: HFConfig) -> dict[str, Any]:
    """Parameters, active parameters, the largest tensor and the registered buffers' bytes, counted
    on the meta device by :data:`TORCH_MODULE` (which imports torch and ``transformers`` then; cached
    per file content)."""
    return lazy.module(TORCH_MODULE).meta_counts(source(cfg))


def _counted_flops(cfg: HFConfig, recompute: str) -> int:
    """FLOPs of one sequence counted by :data:`TORCH_MODULE` (``hf_nn.counted_flops``)."""
    return lazy.module(TORCH_MODULE).counted_flops(source(cfg), cfg.seq_len, recompute)


def _set_fields(cfg: HFConfig, src: Source, built: Any) -> None:
    """Fill the shape keys from the file as transformers reads it (``built``, its config: aliases such
    as GPT-Neo's ``num_layers`` and the class's defaults applied); a key set by hand to another value is
    refused (a sweep over ``model.n_layer`` would otherwise run the same model under other names), and
    so is a ``name`` set by hand that is not the file's (:attr:`Source.label`)."""
    for key, field in SHAPE_KEYS.items():
        try:
            value = int(getattr(built, field, 0) or 0)
        except (TypeError, ValueError, OverflowError):
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
    if cfg.name and cfg.name != src.label:  # a label of another model (flopsweep.model_identity)
        raise ConfigError(
            "model.name",
            cfg.name,
            f"model=hf names the model from model.config, whose name is {src.label!r}; set by hand, the "
            "file's model would run under another name",
            "drop the model.name override, or give model.config a copy of the config.json with "
            "_name_or_path changed",
        )
    if not cfg.name:
        cfg.name = src.label


def check(cfg: HFConfig) -> None:
    """Read ``model.config`` once and refuse what cannot be built; fill ``n_layer``, ``n_embd``,
    ``n_head``, ``vocab_size`` (and an empty ``name``) from it (see :class:`HFConfig`) and
    ``config_sha256`` (the bytes kept: :func:`flopsweep.models.hf_files.source`).

    The file's own checks come first (``hf_files.parse``, ``check_raw``, ``check_built``), then the
    model is built once on the meta device (no memory) and runs one forward and backward of one
    sequence there (:func:`_built`): what transformers cannot build or run is refused here.

    Raises:
        ConfigError: a missing path, malformed JSON, no causal LM, no transformers, a bad ``model.experts``
            (unknown, or other than the default on a dense model), a ``model.config_sha256`` that is not
            the file's, any value transformers or the meta-device build refuses (naming ``model.config``).
    """
    src, built = check_file(cfg)
    _set_fields(cfg, src, built)
    for key in ("n_layer", "n_embd", "n_head", "vocab_size"):
        if getattr(cfg, key) <= 0:
            raise ConfigError(
                KEY, cfg.config, f"gives model.{key}={getattr(cfg, key)}", "give a complete config.json"
            )
    cfg.config_sha256 = src.sha256
    _built(cfg, src)


def check_file(cfg: HFConfig) -> tuple[Source, Any]:
    """The part of :func:`check` that needs no model built: ``model.experts``, ``model.config_sha256``
    and the file's own checks (:func:`flopsweep.models.hf_files.source`, ``hf_config``: ``parse``,
    ``check_raw``, ``transformers``' config class, ``check_built``). Returns the file and its built
    ``transformers`` config. Imports ``transformers`` (and torch); run before Hydra by
    :func:`flopsweep.model_identity.shape_problem` on the command line's ``model.config``.

    Raises:
        ConfigError: as :func:`check` does, naming the key, the value and the fix.
    """
    if cfg.experts not in HF_EXPERTS:
        raise ConfigError(
            "model.experts", cfg.experts, "is no experts implementation", f"pick one of {HF_EXPERTS}"
        )
    if cfg.config_sha256 and not re.fullmatch(r"[0-9a-f]{64}", str(cfg.config_sha256)):
        raise ConfigError(
            SHA_KEY, cfg.config_sha256, "is not a SHA-256 (64 lower-case hex digits)", "leave it unset"
        )
    src = source(cfg)
    built = hf_config(src)
    if cfg.experts != HFConfig.experts and not is_moe(src.data):
        raise ConfigError(
            "model.experts",
            cfg.experts,
            f"picks an MoE experts implementation, and {src.label} is a dense model (no "
            "num_experts_per_tok in its config.json): nothing would run it",
            f"drop model.experts (the default, {HFConfig.experts}), or pick an MoE config such as "
            "model.config=qwen3-moe-tiny",
        )
    return src, built


def _built(cfg: HFConfig, src: Source) -> None:
    """Build the model of ``src`` on the meta device and count one forward and backward of one
    sequence there (``hf_nn.meta_counts``, ``hf_nn.counted_flops``: what the estimates and the record
    take anyway, cached), at ``cfg.seq_len`` when that is within its bound (else 8 tokens: the bound
    is refused by ``checks.check_bounds``, naming ``model.seq_len``).

    Raises:
        ConfigError: naming ``model.config`` and the exception, on one line, for anything that fails:
            a negative or zero size, heads that do not fit the width, an unknown activation or RoPE
            type, a padding index past the vocabulary, shapes that do not meet in the forward.
    """
    seq_len = cfg.seq_len if 0 < cfg.seq_len <= MAX_BY_KEY["model.seq_len"] else 8
    nn_module = lazy.module(TORCH_MODULE)
    try:
        nn_module.meta_counts(src)
        nn_module.counted_flops(src, seq_len, "none")
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever transformers raises is this file's fault
        raise ConfigError(
            KEY,
            cfg.config,
            f"cannot be built and run by transformers on the meta device ({error_line(exc)})",
            "correct the value the error names in the config.json (a size, a count, an activation or "
            "RoPE type), or give the config.json of a model transformers builds",
        ) from None
    _positions(cfg, src, nn_module)


def _positions(cfg: HFConfig, src: Source, nn_module: Any) -> None:
    """``model.seq_len`` against the file's ``max_position_embeddings`` (or its alias, e.g.
    ``n_positions``): refused above it for a family with a table of positions, learned or precomputed
    (``hf_nn.learned_positions``: its rows end there, a longer sequence indexes out of range), a
    warning for the others (RoPE or ALiBi extrapolate past the length the weights were made for).

    Raises:
        ConfigError: naming ``model.seq_len``, the value, the file's key and value and the fix.
    """
    limit = getattr(hf_config(src), "max_position_embeddings", None)
    if not isinstance(limit, int) or isinstance(limit, bool) or cfg.seq_len <= limit:
        return
    family = src.data.get("model_type", "this")
    if nn_module.learned_positions(src):
        raise ConfigError(
            "model.seq_len",
            cfg.seq_len,
            f"is above max_position_embeddings={limit} of {cfg.config}, whose {family} family keeps a "
            f"table of {limit} positions (a longer sequence indexes past it)",
            f"set model.seq_len={limit} or less, or raise max_position_embeddings in the config.json",
        )
    logging.getLogger("flopsweep").warning(
        "model.seq_len=%d is above max_position_embeddings=%d of %s: the %s family's positions "
        "(RoPE or ALiBi) extrapolate past the length its config names (fix: set model.seq_len=%d or "
        "less, or raise max_position_embeddings in the config.json)",
        cfg.seq_len,
        limit,
        cfg.config,
        family,
        limit,
    )


def n_params(cfg: HFConfig) -> int:
    """Every parameter of the built module (a tied LM head once), counted on the meta device."""
    return _counts(cfg)["n_params"]


def n_active_params(cfg: HFConfig) -> int:
    """:func:`n_params` less the experts a token does not use: each experts module counts
    ``top_k / n_experts`` of its weights (``num_experts_per_tok``); the router and shared experts
    count whole. Equal to :func:`n_params` for a dense model."""
    return _counts(cfg)["n_active_params"]


def model_flops(cfg: HFConfig, tokens: int, density: float = 1.0) -> float:
    """FLOPs of one optimizer step over ``tokens`` tokens, no recompute: the counted FLOPs per token
    times ``tokens``. ``density`` is 1 for every kernel ``model=hf`` takes (``flopsweep.rules``); another
    scales the attention square (:func:`_dense_flops`: 0.5, causal attention's half, for the timing bound
    ``metrics.executed_tflops_floor``)."""
    return _dense_flops(cfg, "none", density) / cfg.seq_len * tokens


def hardware_flops(cfg: HFConfig, tokens: int, density: float = 1.0, recompute: str = "none") -> float:
    """:func:`model_flops` plus what ``recompute`` re-runs (``hf_nn.counted_flops``)."""
    return _dense_flops(cfg, recompute, density) / cfg.seq_len * tokens


def _dense_flops(cfg: HFConfig, recompute: str, density: float) -> float:
    """FLOPs of one sequence with the attention square scaled by ``density``. The counted FLOPs are
    ``C(s) = a s + b s^2`` (the weights' and the token-wise operations' per token, the score square's
    per token pair, eager attention counting the whole square); counted again at ``h = s // 2`` tokens,
    ``b = (C(s)/s - C(h)/h) / (s - h)``, and the result is ``C(s) - (1 - density) b s^2``."""
    full = _counted_flops(cfg, recompute)
    s, h = cfg.seq_len, cfg.seq_len // 2
    if density == 1.0 or h < 1:
        return float(full)
    half = lazy.module(TORCH_MODULE).counted_flops(source(cfg), h, recompute)
    square = (full / s - half / h) / (s - h) * s * s
    return full - (1.0 - density) * max(0.0, square)


def eq3_flops(cfg: HFConfig, global_batch: int, recompute_forward: bool) -> None:
    """None: eq. 3 describes a GPT block only."""
    return None


def info(cfg: HFConfig) -> dict[str, Any]:
    """The record's ``model`` section: ``arch`` ``hf``, the name, the config's value and its
    architecture and SHA-256, the shape read from it, ``n_params`` and ``n_active_params``."""
    src = source(cfg)
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


EAGER_EXPERT_GRADIENTS = 2
"""Whole stacked-experts gradients that ``experts=eager`` holds beyond the parameter's own gradient while
a block runs backward. ``transformers``' eager experts (``OlmoeExperts.forward``, Qwen3-MoE's and
Mixtral's alike) index the 3-D weight once per expert hit (``self.gate_up_proj[expert_idx]``), whose
backward (``select_backward``) makes a zero tensor of the whole parameter for that expert's gradient;
autograd sums the 64 of them out of place into the parameter's input buffer, so while the last
``gate_up_proj`` one is added the old sum, the new sum and that expert's whole-size gradient are live,
with ``down_proj``'s running sum: ``3 G + D`` where the estimate counts the gradients ``G + D``
(``G``: the largest stacked tensor, ``gate_up_proj``). Counted on the CPU
(``tests/unit/test_memory_experts.py``: autograd's made tensors in one experts module's backward)."""


def memory(cfg: HFConfig) -> dict[str, int]:
    """Shapes for :mod:`flopsweep.memory`, as Llama's (an approximation for other layers): the two
    norm inputs and their normalised values as the residual part; norm outputs, q, k, v, attention
    out and four SwiGLU tensors of the active MLP width (``top_k + shared`` experts for MoE) as the
    rest; compiled, the block input and the rest less the SwiGLU's SiLU output plus ``wo``'s output
    (``llama.memory``'s compiled count: Inductor recomputes the norms' inputs and the SiLU). Plus
    ``buffer_bytes``: every registered buffer of the module (persistent or not: GPT-Neo's causal
    masks, ``max_position_embeddings^2`` bytes per layer; rotary ``inv_freq``), measured on the
    meta-device build, in bytes; ``backward_temporaries`` as Llama's SwiGLU, ``2 ffn``; with
    ``experts=eager``, ``eager_expert_gradients``: ``2 x`` the largest stacked experts tensor (elements,
    in the parameters' dtype), see :data:`EAGER_EXPERT_GRADIENTS`. ``residual_split_compiled``,
    ``other_split_compiled`` as Llama's, ``2h`` and ``2h + 2q + 2kv + 4 ffn`` (for MoE layers, which ZeRO-3
    gathers whole as one leaf module and so one compiled piece, an upper bound)."""
    d = source(cfg).data
    h = cfg.n_embd
    hd = _whole(d, "head_dim", default=built_head_dim(cfg) or h // cfg.n_head)
    kv = _whole(d, "num_key_value_heads", default=cfg.n_head) * hd
    ffn = _whole(d, "intermediate_size", default=4 * h)
    if is_moe(d):
        shared = _whole(d, "n_shared_experts", default=0)
        expert = _whole(d, "moe_intermediate_size", default=ffn)  # OLMoE: intermediate_size
        ffn = expert * (_whole(d, "num_experts_per_tok", default=1) + shared)
    counts = _counts(cfg)
    largest = max(cfg.vocab_size * h, counts["largest"])
    other = 3 * h + cfg.n_head * hd + 2 * kv + 4 * ffn
    return {
        "residual": 4 * h,
        "other": other,
        "residual_compiled": h,
        "other_compiled": other + cfg.n_head * hd - ffn,
        "largest_layer_params": largest,
        "buffer_bytes": counts["buffer_bytes"],
        "backward_temporaries": 2 * ffn,
        "residual_split_compiled": 2 * h,
        "other_split_compiled": 2 * h + 2 * cfg.n_head * hd + 2 * kv + 4 * ffn,
        "eager_expert_gradients": EAGER_EXPERT_GRADIENTS * counts.get("largest_expert", 0)
        if is_moe(d) and cfg.experts == "eager"
        else 0,
    }


_BUILT: dict[tuple[str, str], tuple[int | None, str | None]] = {}
""":func:`built_head_dim` and :func:`head_dim_note` per file (path, SHA-256): the plan asks once a set-up."""


def _head_dim(cfg: HFConfig) -> tuple[int | None, str | None]:
    from flopsweep.models.hf_shape import head_dim_note

    src = source(cfg)
    key = (str(src.path), src.sha256)
    if key not in _BUILT:
        built = hf_config(src)
        value = getattr(built, "head_dim", None)
        _BUILT[key] = (
            value if isinstance(value, int) and value > 0 else None,
            head_dim_note(src.data, built),
        )
    return _BUILT[key]


def built_head_dim(cfg: HFConfig) -> int | None:
    """The ``head_dim`` ``transformers``' config class gives the file (its own, or the class's default or
    derivation where the file states none: Qwen3's 128, Mistral's hidden/heads); None where the class has
    none (GPT-NeoX, OLMoE: ``hidden / heads``)."""
    return _head_dim(cfg)[0]


SHORT_SEQUENCE = 8
"""A sequence this many times shorter than the file's context (``max_position_embeddings``) is said
(:func:`short_sequence_note`)."""


def short_sequence_note(cfg: HFConfig, overrides: Sequence[str]) -> str | None:
    """The note a plan prints where ``model.seq_len`` was not given (``overrides``: the job's, as typed) and
    the schema's default is at least :data:`SHORT_SEQUENCE` times below the file's ``max_position_embeddings``
    (or ``n_positions``): ``model=hf model.config=olmoe-1b-7b`` planned at 128 tokens of its 4096 with the
    only word ``kept from the job: model.seq_len=128`` (session 43). Its fix names the file's length, which
    :func:`_positions` accepts. None otherwise (what runs is unchanged)."""
    if any(o.lstrip("+~").partition("=")[0] == "model.seq_len" for o in overrides):
        return None
    data = source(cfg).data
    limit = next((data[k] for k in ("max_position_embeddings", "n_positions") if k in data), None)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < SHORT_SEQUENCE * cfg.seq_len:
        return None
    return (
        f"flopsweep: note: model.seq_len={cfg.seq_len} (the default) is {limit // cfg.seq_len}x below "
        f"max_position_embeddings={limit} of {cfg.config}: this plans {cfg.seq_len}-token sequences; for its "
        f"context length, set model.seq_len={limit}"
    )


def head_dim_note(cfg: HFConfig) -> str | None:
    """:func:`flopsweep.models.hf_shape.head_dim_note` of ``cfg``'s file: the line the run logs and keeps
    in its record's ``warnings`` where the class's ``head_dim`` is not the file's ``hidden/heads``."""
    return _head_dim(cfg)[1]


def _whole(data: dict[str, Any], key: str, *, default: int) -> int:
    """``data[key]`` when it is a positive whole number, else ``default``."""
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default

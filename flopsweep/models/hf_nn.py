"""The ``model=hf`` module (torch, ``transformers``): :class:`HFCausalLM` and the meta-device counts.

Loaded on the rank through ``ModelFamily.torch_module``, and by :mod:`flopsweep.models.hf` when it
counts parameters and FLOPs (``FlopCounterMode`` on the meta device; see that module's docstring).
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import nn

from flopsweep.config import AttentionConfig, ConfigError
from flopsweep.models.hf import HF_ATTENTION, HFConfig
from flopsweep.models.hf_files import Source, brief, hf_config, source
from flopsweep.models.layers import next_token_loss


def _from_config(src: Source, attn: str, experts: str, built: Any = None) -> nn.Module:
    """The ``transformers`` model of ``src`` in fp32; ``built``: its :func:`hf_config`, when read already."""
    from transformers import AutoModelForCausalLM

    cfg = built if built is not None else hf_config(src, attn=attn, experts=experts)
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
            attention_mask: None (causal, as runs use it), or a 2-D padding mask of ones
                ``[batch, s]`` (long; the FLOP count on the meta device, where transformers cannot
                build a mask from None: OPT derives its positions and BLOOM its ALiBi from it).

        Returns:
            Scalar mean cross-entropy (fp32).
        """
        idx, targets = tokens[:, :-1], tokens[:, 1:]
        out = self.hf.base_model(input_ids=idx, attention_mask=attention_mask, use_cache=False)
        return self.head_loss(out.last_hidden_state, targets)

    def head_loss(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """LM head (tied or not) and cross-entropy in fp32; ``x``: ``(B, T, C)`` after the final norm."""
        return next_token_loss(self.hf.get_output_embeddings()(x), targets)


def build(cfg: HFConfig, attention: AttentionConfig) -> HFCausalLM:
    """The model in fp32 on the current default device, ``attention`` as its ``attn_implementation``,
    from the file validation read (``hf_files.source``: on a rank, the bytes its job sent).

    A ``cfg.n_layer`` below the file's ``num_hidden_layers`` builds the file's first ``n_layer``
    decoder layers only (a shallow copy for :mod:`flopsweep.layer_probe`; validation refuses such a
    value from the user): built on the meta device, the rest dropped, then allocated on the default
    device and initialised by ``init_weights``. Each kept layer keeps its index, so its kind (dense or
    MoE, its attention type) is the full model's."""
    src, attn = source(cfg), HF_ATTENTION[attention.name]
    built = hf_config(src, attn=attn, experts=cfg.experts)
    if not 0 < cfg.n_layer < built.num_hidden_layers:
        return HFCausalLM(_from_config(src, attn, cfg.experts, built))
    device = torch.get_default_device()
    with torch.device("meta"):
        model = HFCausalLM(_from_config(src, attn, cfg.experts, built))
    del blocks(model)[cfg.n_layer :]
    model = model.to_empty(device=device)
    with torch.device(device):
        model.hf.init_weights()
    return model


def kind_sequence(cfg: HFConfig, attention: AttentionConfig) -> list[int]:
    """Each decoder layer's kind as a number, in layer order (:func:`layer_kinds`; 0 the first
    layer's kind): Moonlight's ``[0, 1, 1, ...]`` (one dense layer, then MoE ones). Built on the
    meta device, so no memory is taken."""
    with torch.device("meta"):
        model = build(cfg, attention)
    layers = blocks(model)
    kinds = [0] * len(layers)
    for number, group in enumerate(layer_kinds(layers)):
        for i in group:
            kinds[i] = number
    return kinds


def blocks(model: HFCausalLM) -> nn.ModuleList:
    """The decoder layers: the first ``ModuleList`` whose children are all of the model's
    ``_no_split_modules`` classes."""
    names = set(model.hf._no_split_modules or ())
    for module in model.modules():
        if isinstance(module, nn.ModuleList) and len(module) and all(_name(m) in names for m in module):
            return module
    raise ValueError(f"{type(model.hf).__name__} has no ModuleList of its _no_split_modules {sorted(names)}")


def probe_model(cfg: HFConfig, attention: AttentionConfig) -> tuple[HFCausalLM, list[int]]:
    """The model of ``cfg`` on the meta device with one decoder layer of each kind
    (:func:`layer_kinds`, in order of first appearance), and how many layers of the whole model
    each kept one stands for: what :mod:`flopsweep.compute_probe` times (an MoE layer and a dense one,
    e.g. Moonlight's first dense layer, are timed apart). :func:`materialize` puts it on a device."""
    with torch.device("meta"):
        model = build(cfg, attention)
    layers = blocks(model)
    kinds = layer_kinds(layers)
    kept = [layers[group[0]] for group in kinds]
    del layers[:]
    layers.extend(kept)
    return model, [len(group) for group in kinds]


def materialize(model: HFCausalLM, device: torch.device, seed: int) -> HFCausalLM:
    """``model`` (on the meta device) allocated on ``device`` in fp32 and initialised by transformers'
    own ``init_weights`` from ``seed`` (tied weights stay tied)."""
    model = model.to_empty(device=device)
    torch.manual_seed(seed)
    with torch.device(device):
        model.hf.init_weights()
    return model


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


ACTIVATION_KEYS = ("hidden_act", "hidden_activation", "activation_function")
"""config.json fields that name an activation by its key in ``transformers.activations.ACT2CLS``."""


def check_activations(src: Source) -> None:
    """Each activation field of ``src`` (:data:`ACTIVATION_KEYS`, where given) names one of
    ``transformers.activations.ACT2CLS`` (transformers builds the MLP's activation as
    ``ACT2FN[name]``, a ``KeyError`` with no field named, otherwise), and each RoPE type
    (``rope_scaling``/``rope_parameters``' ``rope_type`` or ``type``) one of
    ``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS`` or ``default``.

    Raises:
        ConfigError: naming ``model.config``, the field, its value and the names transformers knows.
    """
    from transformers.activations import ACT2CLS
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    rope_types = {"default", *ROPE_INIT_FUNCTIONS}
    for section in ("rope_scaling", "rope_parameters"):
        node = src.data.get(section)
        for key in ("rope_type", "type") if isinstance(node, dict) else ():
            value = node.get(key)
            if value is not None and (not isinstance(value, str) or value not in rope_types):
                raise ConfigError(
                    "model.config",
                    str(src.path),
                    f"has {section}.{key}={brief(value)}, a RoPE type transformers does not know",
                    f"give {section}.{key} one of {', '.join(sorted(rope_types))}",
                )
    for key in ACTIVATION_KEYS:
        value = src.data.get(key)
        if value is not None and (not isinstance(value, str) or value not in ACT2CLS):
            raise ConfigError(
                "model.config",
                str(src.path),
                f"has {key}={brief(value)}, an activation transformers does not know",
                f"give {key} one of {', '.join(sorted(ACT2CLS))}",
            )


ATTN_SUPPORT = {"sdpa": "_supports_sdpa", "flex_attention": "_supports_flex_attn"}
"""The class flag by which ``transformers`` says a ``*ForCausalLM`` takes an ``attn_implementation``
(``eager`` every class takes)."""


def attention_problem(src: Source, attn: str) -> str | None:
    """Why the ``*ForCausalLM`` class of ``src`` cannot take ``attn_implementation=attn`` (its class
    flag, :data:`ATTN_SUPPORT`, is False: BLOOM and MPT have neither ``sdpa`` nor ``flex_attention``
    in transformers 5.25), naming the family (``model_type``) and the class; None when it can."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    flag = ATTN_SUPPORT.get(attn)
    model_type = src.data.get("model_type")
    if flag is None or not isinstance(model_type, str):
        return None
    try:
        cls = MODEL_FOR_CAUSAL_LM_MAPPING[type(AutoConfig.for_model(model_type))]
    except (KeyError, ValueError):
        return None  # an unknown family: the build names it
    if getattr(cls, flag, True):
        return None
    return f"the {model_type} family ({cls.__name__}) has no {attn} attention in transformers"


@functools.lru_cache(maxsize=2)
def _meta_model(src: Source) -> HFCausalLM:
    """The model of ``src`` on the meta device (``eager`` attention, ``batched_mm`` experts), built
    once per config for :func:`meta_counts` and :func:`counted_flops` (a 1,024-layer config takes
    seconds to build). :func:`counted_flops` puts its decoder layers back after each count."""
    with torch.device("meta"):
        return HFCausalLM(_from_config(src, "eager", "batched_mm"))


def learned_positions(src: Source) -> bool:
    """Whether the model of ``src`` keeps a table of positions whose rows end at
    ``max_position_embeddings`` (a longer sequence indexes past them): a learned one, an ``nn.Embedding``
    besides its input embeddings (OPT's ``embed_positions``, GPT-2's and GPTBigCode's ``wpe``), or a
    precomputed one, a buffer with that many rows (GPT-J's and CodeGen's sinusoidal
    ``rotary_emb.embed_positions``: ``IndexError`` past it). Other RoPE and ALiBi families keep none."""
    model = _meta_model(src).hf
    tokens = model.get_input_embeddings()
    if any(isinstance(m, nn.Embedding) and m is not tokens for m in model.modules()):
        return True
    limit = getattr(model.config, "max_position_embeddings", None)
    return isinstance(limit, int) and any(b.dim() >= 1 and b.shape[0] == limit for b in model.buffers())


@functools.lru_cache(maxsize=16)
def meta_counts(src: Source) -> dict[str, Any]:
    """Counts of the model of ``src`` built on the meta device (cached by its SHA-256): parameters,
    active parameters, the largest tensor (elements), ``largest_expert``, the largest 3-D stacked
    experts tensor (elements; 0 for a dense model), and ``buffer_bytes``, the bytes of every
    registered buffer (persistent or not, each once) as the fp32 build makes them."""
    check_activations(src)
    model = _meta_model(src).hf
    total = sum(p.numel() for p in model.parameters())
    k = src.data.get("num_experts_per_tok")
    inactive = largest_expert = 0
    for m in experts_modules(model):
        largest_expert = max(
            [largest_expert] + [p.numel() for p in m.parameters(recurse=False) if p.dim() == 3]
        )
        n_experts = next(p.shape[0] for p in m.parameters(recurse=False) if p.dim() == 3)
        params = sum(p.numel() for p in m.parameters())
        inactive += params - params * int(k) // n_experts
    largest = max(p.numel() for p in model.parameters())
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    return {
        "n_params": total,
        "n_active_params": total - inactive,
        "largest": largest,
        "largest_expert": largest_expert,
        "buffer_bytes": buffers,
    }


@functools.lru_cache(maxsize=64)
def counted_flops(src: Source, seq_len: int, recompute: str) -> int:
    """FLOPs of one forward and backward of one sequence of ``seq_len`` tokens of the model of ``src``
    (cached by its SHA-256), counted by
    ``FlopCounterMode`` on the meta device (see the module docstring), with the recompute of
    ``recompute``: ``none``; ``early_stop`` (each block in non-reentrant ``checkpoint_wrapper``, as
    ``activation_checkpointing=full`` runs eager blocks); ``full`` (the base model's forward
    once more: what records before session 30 counted for a compiled block).

    The decoder layers are counted by kind (:func:`layer_kinds`: the same class, parameters and
    submodules), not one by one: one layer of each kind runs in the counted model, then one more of
    each kind that repeats gives its FLOPs per layer, and the total is
    ``counted + sum((layers of the kind - 1) x its FLOPs)``: exact for layers of one kind alike, and
    a pass over a few layers instead of all (a 1,024-layer config counted in seconds, not minutes).
    """
    if recompute not in ("none", "early_stop", "full"):
        raise ValueError(f"unknown recompute {recompute!r}; expected none, early_stop or full")
    model = _meta_model(src)
    with torch.device("meta"):
        tokens = torch.zeros(1, seq_len + 1, dtype=torch.long)
        mask = torch.ones(1, seq_len, dtype=torch.long)  # no padding: what None means, every family
    layers = blocks(model)
    every = list(layers)
    kinds = layer_kinds(layers)
    try:
        if len(every) <= len(kinds) + 1:  # as few layers as kinds: count them all
            return _count(model, layers, every, tokens, mask, recompute)
        firsts = [every[group[0]] for group in kinds]
        base = _count(model, layers, firsts, tokens, mask, recompute)
        total = base
        for first, group in zip(firsts, kinds, strict=True):
            if len(group) > 1:
                one_more = _count(model, layers, [*firsts, first], tokens, mask, recompute) - base
                total += (len(group) - 1) * one_more
        return int(total)
    finally:  # the cached model as built: its own layers, unwrapped, no gradients
        del layers[:]
        layers.extend(every)
        model.zero_grad(set_to_none=True)


LAYER_KIND_ATTRS = ("attention_type", "layer_type", "sliding_window")
"""Attributes by which ``transformers`` marks a layer's attention kind, on the layer (older models,
``attention_type``) or its attention module (``layer_type``, ``sliding_window``)."""


def layer_kinds(layers: nn.ModuleList) -> list[list[int]]:
    """The indices of ``layers`` grouped by kind, in order of first appearance: layers of one kind
    have the same class, the same parameter names and shapes, the same submodule names and classes,
    and the same per-layer attention kind on the layer or any submodule (:data:`LAYER_KIND_ATTRS`:
    ``transformers`` 5 keeps ``layer_type`` and ``sliding_window`` on the attention module, e.g.
    Qwen3's ``layer_types``), so that each runs the same operations (an MoE layer and a dense one, a
    sliding-window layer and a full one, or a linear-attention layer, are kinds of their own)."""
    groups: dict[tuple, list[int]] = {}
    for i, layer in enumerate(layers):
        key = (
            _name(layer),
            tuple((n, tuple(p.shape)) for n, p in layer.named_parameters()),
            tuple((n, type(m).__name__) for n, m in layer.named_modules()),
            tuple(
                (n, a, str(getattr(m, a)))
                for n, m in layer.named_modules()
                for a in LAYER_KIND_ATTRS
                if getattr(m, a, None) is not None
            ),
        )
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def _count(
    model: HFCausalLM,
    layers: nn.ModuleList,
    run: list[nn.Module],
    tokens: torch.Tensor,
    mask: torch.Tensor,
    recompute: str,
) -> int:
    """FLOPs of one forward and backward of ``model`` with ``layers`` holding ``run`` (a layer may be
    in it twice), each wrapped for ``recompute``, and the base model's forward once more for ``full``."""
    from torch.utils.flop_counter import FlopCounterMode

    from flopsweep import checkpointing
    from flopsweep.config import CheckpointingConfig

    del layers[:]
    layers.extend(run)
    if recompute == "early_stop":
        full = CheckpointingConfig(name="full")
        checkpointing.policy(full).apply(layers, full)
    with FlopCounterMode(display=False) as counter:
        model(tokens, attention_mask=mask).backward()
    total = counter.get_total_flops()
    if recompute == "full":
        with FlopCounterMode(display=False) as fwd, torch.no_grad():
            model.hf.base_model(input_ids=tokens[:, :-1], attention_mask=mask, use_cache=False)
        total += fwd.get_total_flops()
    return int(total)

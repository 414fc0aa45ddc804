"""Model families: each a torch-free shape (schema, weights, counts, FLOPs) and a torch module.

``MODELS`` maps ``model.arch`` to a :class:`ModelFamily` (as torchtitan's ``ModelSpec`` does). The
family holds its arithmetic as callables of its shape module (``gpt2``, ``llama``, ``hf``: no torch),
and its torch code as an import path (``gpt2_nn``, ``llama_nn``, ``hf_nn``, built from the shared
decoder parts of :mod:`flopsweep.models.layers`), loaded on the rank the first time a backend asks
for ``build``, ``blocks``, ``tied_parameters``, the tensor-parallel plan or the ZeRO-3 leaves. So the
estimators, the metrics and validation import this package without torch. Backends, metrics and the
job ask the family; nothing outside this package knows a family's field names. A shape module
declares the family's schema (``CONFIG``, a :class:`~flopsweep.config.ModelConfig` subclass) and
its knobs' analysis columns (``COLUMNS``, ``UNSHOWN_KEYS``), which :mod:`flopsweep.options` and
:mod:`flopsweep.columns` read from :data:`MODELS`. So adding a family is a shape module and a torch
module here, one line in ``MODELS`` and one YAML file per size under ``conf/model/``.

FLOPs conventions (docs/metrics.md, "FLOPs"), for ``T`` tokens per optimizer step:

- **model FLOPs**: ``6 * P_matmul * T`` for every weight matmul, forward and backward,
  the LM head included, plus the attention scores ``12 * l * h_attn * s * T * density``
  (``Q K^T`` and ``softmax(.) V``, forward 4, backward 8, over the full ``s x s``
  square: the convention of PaLM, nanoGPT, torchtitan and llm-foundry). No recompute.
- **hardware FLOPs**: the model FLOPs plus the forward work that activation
  checkpointing recomputes and that actually runs.

Neither counts norms, activations, softmax, the residual adds, the embedding lookup
or the optimizer: together they are below 1% of the matmul work at the sizes
benchmarked (they are memory-bound, which is why they still cost time).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from flopsweep import lazy
from flopsweep.config import ModelConfig
from flopsweep.models import gpt2, hf, llama
from flopsweep.setup_spec import SetupSpec


@dataclass(frozen=True, kw_only=True)
class ModelFamily:
    """What the rest of flopsweep needs from a model family: torch-free arithmetic, and the import
    path of its torch code.

    Attributes (torch-free, callables of the shape module):
        config: the family's schema, a :class:`~flopsweep.config.ModelConfig` subclass
            (stored as ``schema/model/base_<arch>``; the size options extend it).
        n_params: ``cfg -> int``, the module's own parameter count.
        n_active_params: ``cfg -> int``, the parameters one token uses (MoE: its top-k experts);
            ``n_params`` for a dense family.
        model_flops: ``(cfg, tokens, density) -> float`` FLOPs per optimizer step.
        hardware_flops: ``(cfg, tokens, density, recompute) -> float``: model FLOPs plus
            the recompute of ``recompute`` (``"none"``, ``"early_stop"``, ``"full"``, ``"selective"``).
        eq3_flops: ``(cfg, global_batch, recompute_forward) -> float | None``:
            Narayanan et al. eq. 3 (``f = 4`` when the checkpointing policy recomputes the
            forward) where the family is GPT-shaped, else None.
        check: ``cfg -> None``; raises ``ConfigError`` for an impossible shape.
        info: ``cfg -> dict``: the record's ``model`` section.
        memory: ``cfg -> {"residual", "other", "largest_layer_params"}``: activation elements per
            token and layer kept for backward (the residual-stream part separately) and the
            largest layer, for :mod:`flopsweep.memory`; optionally ``buffer_bytes``, the module's
            registered buffers in bytes (``hf``: measured on the meta device), ``backward_temporaries``
            (elements a token its MLP's backward makes beyond what it keeps; 0 if absent) and
            ``selective_compiled`` and ``selective_eager`` (what compiled and eager ``selective`` keep
            beyond the block input and the attention's saved tensors; absent: the policy's estimate),
            ``residual_split_compiled`` and ``other_split_compiled`` (what a compiled block keeps when its
            graph breaks at every submodule, DeepSpeed ZeRO-3; absent: the ``_compiled`` figures) and
            ``eager_expert_gradients`` (elements of whole stacked-experts gradients a block's backward holds
            beyond its own, ``hf`` MoE with ``experts=eager``; 0 if absent).
        tensor_parallel_dims: ``cfg -> {config key: size}``: the sizes that tensor parallelism splits
            into ``parallel.tp`` equal parts (heads, KV heads, MLP width, vocabulary), for the
            divisibility check before launch (``rules.tensor_parallel_shapes``); None with no plan.
        torch_module: the import path of the family's torch module (``build``, ``blocks``,
            ``tied_parameters``, the plan, optionally ``zero3_leaf_modules`` and ``probe_model``), loaded by
            :meth:`torch`.
        parallelize: the name of the tensor-parallel plan in ``torch_module`` (torchtitan's
            ``ModelSpec.parallelize_fn``), or None: the family refuses ``parallel.tp > 1``
            (``rules.tensor_parallel_shapes``), decided without importing torch.
        columns: the family's own set-up columns (:class:`~flopsweep.setup_spec.SetupSpec`, the shape
            module's ``COLUMNS``), placed in :data:`flopsweep.columns.SETUP_SPECS` after the shared
            model columns (``hf``: ``experts``).
        unshown: record paths of the family's knobs that no column shows (``UNSHOWN_KEYS``: the
            model's name stands for them), for :data:`flopsweep.columns.UNSHOWN_KEYS`.
        positive: the shape keys that must be at least 1 whatever the rest (``POSITIVE_KEYS``:
            ``n_layer``, ``n_embd``, ...), refused before Hydra (:mod:`flopsweep.value_sets`) as
            ``check`` refuses them; empty (``hf``: 0 reads the size from the file).
        zero_init: build under ``deepspeed.zero.Init`` for ZeRO-3 (each parameter partitioned as it is
            made). False (``hf``): build whole on the host and let ``deepspeed.initialize`` partition,
            because ``transformers`` initialises its weights after construction, which a partitioned
            parameter would miss (the weights would differ from the other backends').

    Torch callables (properties, each loading ``torch_module`` on first use, on the rank):
        build: ``(model_cfg, attention_cfg) -> nn.Module`` in fp32 on the current default device;
            ``module(tokens[B, s + 1])`` returns the mean next-token loss and ``module.head_loss``
            is the part after the last block.
        blocks: the repeated transformer blocks of a built module, in order (FSDP2 ``fully_shard``
            units, :mod:`flopsweep.checkpointing` and compile regions).
        tied_parameters: parameters used outside their own module's forward (ZeRO-3
            ``register_external_parameter``), e.g. a tied LM head.
        tensor_parallel_plan: ``(module) -> {submodule name: ParallelStyle}`` for
            ``torch.distributed.tensor.parallel.parallelize_module`` on the ``tp`` sub-mesh, applied
            by :mod:`flopsweep.tensor_parallel`; None when ``parallelize`` is None.
        zero3_leaf_modules: ``(module) -> [module classes]`` for ``deepspeed.utils.set_z3_leaf_modules``
            under ZeRO-3 (MoE layers, whose routing calls experts data-dependently); None: none.
        probe_model: ``(model_cfg, attention_cfg) -> (module on the meta device, [layers per kept
            block])``: a copy with one block of each kind for :mod:`flopsweep.compute_probe`, with
            ``materialize(module, device, seed)`` beside it (``hf``); None: the probe builds the
            family with ``n_layer=1`` (every block alike).
    """

    config: type[ModelConfig]
    n_params: Callable[[Any], int]
    n_active_params: Callable[[Any], int]
    model_flops: Callable[[Any, int, float], float]
    hardware_flops: Callable[[Any, int, float, str], float]
    eq3_flops: Callable[[Any, int, bool], float | None]
    check: Callable[[Any], None]
    info: Callable[[Any], dict[str, Any]]
    memory: Callable[[Any], dict[str, int]]
    torch_module: str
    parallelize: str | None = None
    tensor_parallel_dims: Callable[[Any], dict[str, int]] | None = None
    zero_init: bool = True
    columns: tuple[SetupSpec, ...] = ()
    unshown: tuple[str, ...] = ()
    positive: tuple[str, ...] = ()

    def torch(self) -> ModuleType:
        """The family's torch module (imports torch; :mod:`importlib` caches it)."""
        return lazy.module(self.torch_module)

    @property
    def build(self) -> Callable[..., Any]:
        return self.torch().build

    @property
    def blocks(self) -> Callable[[Any], Sequence[Any]]:
        return self.torch().blocks

    @property
    def tied_parameters(self) -> Callable[[Any], list[Any]]:
        return self.torch().tied_parameters

    @property
    def tensor_parallel_plan(self) -> Callable[[Any], dict[str, Any]] | None:
        return None if self.parallelize is None else getattr(self.torch(), self.parallelize)

    @property
    def zero3_leaf_modules(self) -> Callable[[Any], list[type]] | None:
        return getattr(self.torch(), "zero3_leaf_modules", None)

    @property
    def probe_model(self) -> Callable[[Any, Any], tuple[Any, list[int]]] | None:
        return getattr(self.torch(), "probe_model", None)


def _spec(module: ModuleType) -> ModelFamily:
    """A family from a shape module's public names (see :class:`ModelFamily`); optional names are
    read from the module's own namespace, never through its lazy ``__getattr__`` (which imports torch)."""
    own = vars(module)
    return ModelFamily(
        config=module.CONFIG,
        n_params=module.n_params,
        n_active_params=own.get("n_active_params", module.n_params),
        model_flops=module.model_flops,
        hardware_flops=module.hardware_flops,
        eq3_flops=module.eq3_flops,
        check=module.check,
        info=module.info,
        memory=module.memory,
        torch_module=module.TORCH_MODULE,
        parallelize=module.PARALLELIZE,
        tensor_parallel_dims=own.get("tensor_parallel_dims"),
        zero_init=own.get("ZERO_INIT", True),
        columns=tuple(own.get("COLUMNS", ())),
        unshown=tuple(own.get("UNSHOWN_KEYS", ())),
        positive=tuple(own.get("POSITIVE_KEYS", ())),
    )


MODELS: dict[str, ModelFamily] = {
    "gpt2": _spec(gpt2),
    "llama": _spec(llama),
    "hf": _spec(hf),
}
"""Model families by ``model.arch``."""


def family(cfg: ModelConfig) -> ModelFamily:
    """The family of ``cfg`` (``cfg.arch``); validation has checked that it exists."""
    return MODELS[cfg.arch]


def recorded_config(model: Any, default_arch: str | None = None) -> tuple[ModelFamily, Any] | None:
    """The family and its model config read from a record's ``config.model`` section (a dict; its keys that
    the family's config has, the others left out), the family by ``arch`` (``default_arch`` where the section
    names none); None for a section that is no mapping, an unknown family, ``hf`` (its counts need torch) or
    values the config refuses (TypeError, ValueError). Torch-free."""
    fam = MODELS.get(model.get("arch", default_arch)) if isinstance(model, Mapping) else None
    if fam is None or fam is MODELS["hf"]:
        return None
    names = {f.name for f in dataclasses.fields(fam.config)}
    try:
        return fam, fam.config(**{k: v for k, v in model.items() if k in names})
    except (TypeError, ValueError):
        return None

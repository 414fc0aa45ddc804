"""Model families: each owns its shape schema, its module, its parameter count and its FLOPs.

``MODELS`` maps ``model.arch`` to a :class:`ModelFamily` (as torchtitan's model
specs do). Backends, metrics and the job ask the family; nothing outside this
package knows a family's field names. Adding a family is one module here, one
line in ``MODELS`` and one YAML file per size under ``conf/model/``.

FLOPs conventions (docs/design.md, "FLOPs"), for ``T`` tokens per optimizer step:

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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from flopsweep.config import ModelConfig
from flopsweep.models import gpt2, hf, llama


@dataclass(frozen=True)
class ModelFamily:
    """What the rest of flopsweep needs from a model family.

    Attributes:
        config: the family's schema, a :class:`~flopsweep.config.ModelConfig` subclass
            (stored as ``schema/model/base_<arch>``; the size options extend it).
        build: ``(model_cfg, attention_cfg) -> nn.Module`` in fp32
            on the current default device; ``module(tokens[B, s + 1])`` returns the mean
            next-token loss and ``module.head_loss`` is the part after the last block.
        blocks: the repeated transformer blocks of a built module, in order (FSDP2
            ``fully_shard`` units, :mod:`flopsweep.checkpointing` and compile regions).
        tied_parameters: parameters used outside their own module's forward (ZeRO-3
            ``register_external_parameter``), e.g. a tied LM head.
        n_params: ``cfg -> int``, the module's own parameter count.
        model_flops: ``(cfg, tokens, density) -> float`` FLOPs per optimizer step.
        hardware_flops: ``(cfg, tokens, density, recompute) -> float``: model FLOPs plus
            the recompute of ``recompute`` (``"none"``, ``"early_stop"``, ``"full"``).
        eq3_flops: ``(cfg, global_batch, recompute_forward) -> float | None``:
            Narayanan et al. eq. 3 (``f = 4`` when the checkpointing policy recomputes the
            forward) where the family is GPT-shaped, else None.
        check: ``cfg -> None``; raises ``ConfigError`` for an impossible shape.
        info: ``cfg -> dict``: the record's ``model`` section.
        memory: ``cfg -> {"residual", "other", "largest_layer_params"}``: activation elements per
            token and layer kept for backward (the residual-stream part separately) and the
            largest layer, for :mod:`flopsweep.memory`.
        tensor_parallel_plan: ``(module) -> {submodule name: ParallelStyle}``, the family's plan for
            ``torch.distributed.tensor.parallel.parallelize_module`` on the ``tp`` sub-mesh (torchtitan's
            per-model ``parallelize.py``), from the module's ``TENSOR_PARALLEL_PLAN``; applied by
            :mod:`flopsweep.tensor_parallel`. None: the family refuses ``parallel.tp > 1``
            (``rules.tensor_parallel_shapes``).
        tensor_parallel_dims: ``cfg -> {config key: size}``: the sizes that tensor parallelism splits
            into ``parallel.tp`` equal parts (heads, KV heads, MLP width, vocabulary), for the
            divisibility check before launch (``rules.tensor_parallel_shapes``); None with the plan.
        zero3_leaf_modules: ``(module) -> [module classes]`` for ``deepspeed.utils.set_z3_leaf_modules``
            under ZeRO-3 (MoE layers, whose routing calls experts data-dependently); None: none.
        zero_init: build under ``deepspeed.zero.Init`` for ZeRO-3 (each parameter partitioned as it is
            made). False (``hf``): build whole on the host and let ``deepspeed.initialize`` partition,
            because ``transformers`` initialises its weights after construction, which a partitioned
            parameter would miss (the weights would differ from the other backends').
    """

    config: type[ModelConfig]
    build: Callable[..., Any]
    blocks: Callable[[Any], Sequence[Any]]
    tied_parameters: Callable[[Any], list[Any]]
    n_params: Callable[[Any], int]
    model_flops: Callable[[Any, int, float], float]
    hardware_flops: Callable[[Any, int, float, str], float]
    eq3_flops: Callable[[Any, int, bool], float | None]
    check: Callable[[Any], None]
    info: Callable[[Any], dict[str, Any]]
    memory: Callable[[Any], dict[str, int]]
    tensor_parallel_plan: Callable[[Any], dict[str, Any]] | None = None
    tensor_parallel_dims: Callable[[Any], dict[str, int]] | None = None
    zero3_leaf_modules: Callable[[Any], list[type]] | None = None
    zero_init: bool = True


def _spec(module: Any) -> ModelFamily:
    """A family from a model module's public names (see :class:`ModelFamily`)."""
    return ModelFamily(
        config=module.CONFIG,
        build=module.build,
        blocks=module.blocks,
        tied_parameters=module.tied_parameters,
        n_params=module.n_params,
        model_flops=module.model_flops,
        hardware_flops=module.hardware_flops,
        eq3_flops=module.eq3_flops,
        check=module.check,
        info=module.info,
        memory=module.memory,
        tensor_parallel_plan=getattr(module, "TENSOR_PARALLEL_PLAN", None),
        tensor_parallel_dims=getattr(module, "tensor_parallel_dims", None),
        zero3_leaf_modules=getattr(module, "zero3_leaf_modules", None),
        zero_init=getattr(module, "ZERO_INIT", True),
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

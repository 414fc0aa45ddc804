"""fp8 (float8) training of the GPT's Linear layers through torchao.

What torchao converts: ``torchao.float8.convert_to_float8_training`` swaps each selected
``nn.Linear`` (subclasses included, so the GPT's ``Linear``) for
``torchao.float8.Float8Linear``. Its forward casts input and weight to float8 e4m3 with
dynamic scales (``tensorwise``: one scale per tensor; ``rowwise``: one per row, powers of 2)
and runs the three matmuls of a Linear (output, grad_input, grad_weight) with
``torch._scaled_mm``; the output comes back in the input's precision (bf16 under autocast)
and the master weights stay as they are (fp32 or bf16 parameters; only the cast copies
are float8). Bias add stays high precision.

What stays bf16 (or the run's precision): the tied LM head, which is
``F.linear(x, wte.weight)`` and not a module, so torchao never sees it (and it is also
excluded by name, see :data:`LM_HEAD_NAMES`); the token and position embeddings; the
LayerNorms; attention scores and softmax (SDPA / flex); GELU; the cross-entropy (fp32).
So fp8 only speeds up the Linear GEMMs in the blocks, about ``24 * l * h^2`` of the
``~ 24 * l * h^2 + 4 * l * s * h + 2 * h * V`` FLOPs per token of a forward.

Requirements: ``torch._scaled_mm`` needs a CUDA GPU of compute capability 8.9 or newer
(Ada sm_89, Hopper sm_90, Blackwell sm_100/120); both Linear dims must be divisible by 16.
FSDP2 float8 all-gather (``enable_fsdp_float8_all_gather``) exists only for tensorwise
scaling; then call :func:`precompute_scales` after each optimizer step.

Sources:
    https://github.com/pytorch/ao/blob/main/torchao/float8/README.md
    https://github.com/pytorch/ao/blob/main/torchao/float8/config.py (recipes)
    https://github.com/pytorch/ao/blob/main/torchao/float8/fsdp_utils.py

torch and torchao are imported inside the functions, so importing this module is cheap.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import nn

RECIPES = {"fp8": "tensorwise", "fp8-rowwise": "rowwise"}
"""Precision option name -> torchao ``Float8LinearRecipeName`` value."""

LM_HEAD_NAMES = frozenset({"lm_head", "output"})  # GPT-2 style, and Llama's untied head
"""Module names never converted: the LM head stays bf16 (torchtitan does the same). The GPT's
head is tied (``F.linear(x, wte.weight)``, not a module); Llama's untied head is ``output``."""

DIVISOR = 16
"""torchao's float8 matmul (``torch._scaled_mm``) needs in_features and out_features % 16 == 0."""

REASON_SHAPE = f"shape not divisible by {DIVISOR}"

FP8_MEMORY_KEYS = ("fp8_linear_params", "fp8_compiled_inputs")
"""The keys of a family's ``memory(cfg)`` (:attr:`flopsweep.models.ModelFamily.memory`) that the memory
estimate reads under an fp8 precision (:mod:`flopsweep.memory_terms`, :mod:`flopsweep.activation_memory`);
a family without them is estimated as bf16. From torchao 0.18's ``float8_linear.py``:

- ``fp8_linear_params``: the weight elements of one block's ``nn.Linear`` layers that
  :func:`convert` swaps (both dimensions divisible by :data:`DIVISOR`). ``Float8Linear.forward``
  casts its fp32 weight to float8 inside ``matmul_with_hp_or_float8_args`` (not an op autocast
  casts) and saves the fp32 weight itself, so autocast keeps no bf16 copy of these weights
  (``single``, DDP; measured: Llama 3.2 1B eager fp8 peaked 1.81 GiB, ``2 B x`` its 0.973 B converted
  weights, below bf16).
- ``fp8_compiled_inputs``: elements per token and layer of the bf16 Linear inputs that a compiled
  fp8 block does not keep: the backward of ``matmul_with_hp_or_float8_args`` reads its input only
  through its float8 casts, so the partitioner of ``torch.compile`` keeps neither the bf16 input nor
  (being cheap, elementwise on saved tensors) the cast, and recomputes both in backward from what
  the block keeps anyway, where that input is the output of a norm (from the norm's saved input and
  statistics) or of the MLP's activation (from the up-projections' outputs); an input another op's
  backward keeps (attention's output, read by SDPA's backward) stays. So the two norm outputs and
  the down-projection's input, ``2h + ffn``. Eager keeps the bf16 input (``ctx.save_for_backward(input_hp,
  ...)``): nothing less. Measured on one H200, compiled, tensorwise and rowwise alike, against bf16:
  ``2 (2h + ffn)`` bytes per token and layer less beyond the weights' copies for Llama 3.2 1B and 3B
  and gpt-1.3b (7.81, 17.50 and 11.25 GiB less at micro batch 8, to 0.01 GiB)."""


FP8_CAST_KEYS = ("fp8_linear_params", "fp8_linear_inputs", "fp8_linear_outputs")
"""The keys of a family's ``memory(cfg)`` that the eager float8 cast traffic reads
(:mod:`flopsweep.fp8_cast`): the converted weights of one block (elements) and, per token and block, the
elements of the converted Linears' inputs (the sum of their ``in_features``) and outputs (of their
``out_features``): what torchao casts a token (:func:`fp8_linear_features`). A family without them
(``hf``) has no cast term."""


def fp8_linear_features(*shapes: tuple[int, int]) -> tuple[int, int]:
    """``(sum of in_features, sum of out_features)`` of the ``(in_features, out_features)`` Linear shapes
    that :func:`convert` converts (both divisible by :data:`DIVISOR`): the elements per token of their
    inputs and outputs (torch-free, for the families' ``memory``)."""
    kept = [(i, o) for i, o in shapes if i % DIVISOR == 0 and o % DIVISOR == 0]
    return sum(i for i, _ in kept), sum(o for _, o in kept)


def fp8_linear_elements(*shapes: tuple[int, int]) -> int:
    """The weight elements of the ``(in_features, out_features)`` Linear shapes that :func:`convert`
    converts (both divisible by :data:`DIVISOR`; torch-free, for the families' ``memory``)."""
    return sum(i * o for i, o in shapes if i % DIVISOR == 0 and o % DIVISOR == 0)


REASON_LM_HEAD = "LM head"

MIN_CAPABILITY = (8, 9)
INSTALL_HINT = "pip install -e '.[fp8]'"


def _reason(name: str, module: nn.Module, exclude: Iterable[str]) -> str:
    """Why ``module`` (an ``nn.Linear``) is not converted, or ``""`` when it is."""
    if name in exclude:
        return REASON_LM_HEAD
    if module.in_features % DIVISOR or module.out_features % DIVISOR:
        return REASON_SHAPE
    return ""


def conversion_plan(model: nn.Module, exclude: Iterable[str] = LM_HEAD_NAMES) -> list[tuple[str, bool, str]]:
    """Which ``nn.Linear`` submodules :func:`convert` would swap to ``Float8Linear``.

    Args:
        model: the model, before conversion.
        exclude: fully-qualified module names to keep in high precision (the LM head).

    Returns:
        ``(name, converted, reason)`` for every ``nn.Linear`` in ``model.named_modules()``
        order; ``reason`` is ``""`` when converted, else ``"LM head"`` or
        ``"shape not divisible by 16"``.
    """
    from torch import nn

    exclude = frozenset(exclude)
    plan = []
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            reason = _reason(name, module, exclude)
            plan.append((name, not reason, reason))
    return plan


def convert(
    model: nn.Module,
    recipe: str,
    *,
    fsdp_float8_all_gather: bool = False,
    exclude: Iterable[str] = LM_HEAD_NAMES,
) -> list[str]:
    """Swap the eligible Linear layers of ``model`` (in place) for torchao ``Float8Linear``.

    Call before ``torch.compile`` and before FSDP wrapping, as torchao's README does.

    Args:
        model: the model; its parameters are kept (master weights unchanged).
        recipe: ``"tensorwise"`` or ``"rowwise"`` (values of :data:`RECIPES`), or a key of
            :data:`RECIPES` (``"fp8"``, ``"fp8-rowwise"``).
        fsdp_float8_all_gather: tensorwise only: FSDP2 all-gathers float8 weights
            (``Float8LinearConfig.enable_fsdp_float8_all_gather``).
        exclude: module names kept in high precision.

    Returns:
        Fully-qualified names of the converted modules.

    Raises:
        ValueError: unknown recipe, or float8 all-gather asked with rowwise scaling.
    """
    import dataclasses

    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    recipe = RECIPES.get(recipe, recipe)
    if recipe not in RECIPES.values():
        raise ValueError(f"unknown fp8 recipe {recipe!r}; expected one of {sorted(RECIPES.values())}")
    if fsdp_float8_all_gather and recipe != "tensorwise":
        raise ValueError(f"fsdp_float8_all_gather needs the tensorwise recipe; {recipe} has none")
    config = Float8LinearConfig.from_recipe_name(recipe)
    if fsdp_float8_all_gather:
        config = dataclasses.replace(config, enable_fsdp_float8_all_gather=True)

    exclude = frozenset(exclude)
    converted: list[str] = []

    def module_filter_fn(module: nn.Module, fqn: str) -> bool:
        ok = not _reason(fqn, module, exclude)
        if ok:
            converted.append(fqn)
        return ok

    convert_to_float8_training(model, config=config, module_filter_fn=module_filter_fn)
    return converted


def precompute_scales(model: nn.Module) -> None:
    """After ``optimizer.step()``: one all-reduce computing all float8 weight scales.

    Wraps ``torchao.float8.precompute_float8_dynamic_scale_for_fsdp``; it only acts on
    ``Float8Linear`` weights that are FSDP2 DTensors with float8 all-gather (tensorwise),
    and returns at once otherwise. No-op when torchao is not installed or nothing is float8.
    """
    try:
        from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp
        from torchao.float8.float8_linear import Float8Linear
    except ImportError:
        return
    if any(isinstance(m, Float8Linear) and m.config.enable_fsdp_float8_all_gather for m in model.modules()):
        precompute_float8_dynamic_scale_for_fsdp(model)


def requirement_problem(device_type: str, capability: tuple[int, int] | None) -> str | None:
    """Why fp8 training cannot run here, in one line, or ``None`` when it can.

    Args:
        device_type: ``"cuda"``, ``"cpu"``, ...
        capability: ``torch.cuda.get_device_capability()`` for CUDA, else ``None``.
    """
    need = "fp8 needs a CUDA GPU of compute capability 8.9 or newer (Ada, Hopper, Blackwell)"
    if device_type != "cuda":
        return f"{need}; this is {device_type}"
    if capability is None:
        return f"{need}; the compute capability of this GPU is unknown"
    if tuple(capability) < MIN_CAPABILITY:
        return f"{need}; this GPU is {capability[0]}.{capability[1]} (sm_{capability[0]}{capability[1]})"
    try:
        import torchao.float8  # noqa: F401
    except ImportError as e:
        return f"torchao is not installed ({e}); {INSTALL_HINT}"
    return None

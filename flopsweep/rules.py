"""Cross-axis rules: combinations of two or more config groups that cannot run.

The validation convention (docs/design.md, "Validation"): a rule is a function of the typed
config that returns nothing and raises :class:`~flopsweep.config.ConfigError` naming the key,
the value and the fix. A rule about one option's own knobs lives with its registry (the
family's ``check``, the policy's ``check``, ...); a rule that needs two axes lives here, in
:data:`RULES`, which :func:`flopsweep.plan.validate` runs in order before any worker starts.
Nothing here needs the machine: rules that do (devices, GPUs, capability) are in
:func:`flopsweep.plan.resolve`.
"""

from __future__ import annotations

from collections.abc import Callable

from flopsweep import pipeline
from flopsweep.config import ConfigError, RunConfig
from flopsweep.options import HF_ATTENTION
from flopsweep.precision import PRECISIONS


def fp8_all_gather(cfg: RunConfig) -> None:
    """``precision.fp8_all_gather`` needs FSDP2 (``backend=fsdp``: only it all-gathers the weights
    that torchao casts to float8 first) and the tensorwise recipe (``precision=fp8``: torchao's
    ``enable_fsdp_float8_all_gather`` supports tensorwise scaling only). Without this rule the
    rowwise recipe failed on every rank at the model build (status ``error``), and DDP, single
    and DeepSpeed ignored the flag in silence."""
    if not getattr(cfg.precision, "fp8_all_gather", False):
        return
    if PRECISIONS[cfg.precision.name].fp8_recipe != "tensorwise":
        raise ConfigError(
            "precision.fp8_all_gather",
            True,
            f"torchao's float8 all-gather supports tensorwise scaling only, and precision="
            f"{cfg.precision.name} is {PRECISIONS[cfg.precision.name].fp8_recipe}",
            "pick precision=fp8 (tensorwise), or set precision.fp8_all_gather=false",
        )
    if cfg.backend.name != "fsdp":
        raise ConfigError(
            "precision.fp8_all_gather",
            True,
            f"only FSDP2 all-gathers the weights, and backend={cfg.backend.name} does not",
            "set backend=fsdp, or set precision.fp8_all_gather=false",
        )


def warmup_when_compiling(cfg: RunConfig) -> None:
    """A run that compiles on its first step (``compile=true``, FlexAttention) must warm up, or
    compilation is timed."""
    compiles = cfg.compile or cfg.attention.name == "flex" or getattr(cfg.attention, "impl", "") == "flex"
    if compiles and cfg.steps.warmup == 0:
        what = "compile=true" if cfg.compile else f"attention={cfg.attention.name} (FlexAttention compiles)"
        raise ConfigError(
            "steps.warmup",
            0,
            f"{what} compiles on the first step, which would then be measured",
            "set steps.warmup=2 or more",
        )


def hf_attention(cfg: RunConfig) -> None:
    """``model=hf`` builds its attention by ``attn_implementation`` (:data:`HF_ATTENTION`): ``sdpa``,
    ``standard`` (``eager``) or ``flex`` (``flex_attention``); the other kernels are flopsweep's own
    and a ``transformers`` model cannot call them."""
    if cfg.model.arch == "hf" and cfg.attention.name not in HF_ATTENTION:
        raise ConfigError(
            "attention",
            cfg.attention.name,
            "is not an attn_implementation of transformers models (model=hf)",
            "pick attention=sdpa, attention=standard (eager) or attention=flex (flex_attention)",
        )


RULES: list[Callable[[RunConfig], None]] = [
    fp8_all_gather,
    warmup_when_compiling,
    hf_attention,
    pipeline.check,  # parallel.pp with the backend, the model's layers, the batch keys
]
"""Every cross-axis rule, in the order :func:`check` runs them (the first broken one is reported)."""


def check(cfg: RunConfig) -> None:
    """Run every rule of :data:`RULES` on ``cfg``.

    Raises:
        ConfigError: from the first rule that ``cfg`` breaks.
    """
    for rule in RULES:
        rule(cfg)

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

from flopsweep.config import SEARCH_GROW, SEARCH_MODES, ConfigError, RunConfig, require_choice
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


def model_search(cfg: RunConfig) -> None:
    """``search.*``: known values, a range of blocks that is not empty, a positive budget, and a
    model whose ``n_layer`` may change (``model=hf`` reads it from its ``config.json``)."""
    s = cfg.search
    require_choice("search.model", s.model, SEARCH_MODES, "search.model")
    require_choice("search.grow", s.grow, SEARCH_GROW, "search.grow")
    if s.min_n_layer < 1 or s.max_n_layer < s.min_n_layer:
        raise ConfigError(
            "search.max_n_layer",
            s.max_n_layer,
            f"the search needs 1 <= search.min_n_layer <= search.max_n_layer (min is {s.min_n_layer})",
            "set search.min_n_layer=1 and search.max_n_layer to the most blocks to try, such as 256",
        )
    if s.memory_budget_gib is not None and s.memory_budget_gib <= 0:
        raise ConfigError(
            "search.memory_budget_gib",
            s.memory_budget_gib,
            "must be a positive number of GiB",
            "set it such as search.memory_budget_gib=80, or null for the device's memory",
        )
    if s.model == "largest" and cfg.model.arch == "hf":
        raise ConfigError(
            "search.model",
            "largest",
            "model=hf takes n_layer from its config.json, so the search cannot grow it",
            "search a flopsweep family (model=llama3.2-1b, gpt-1.3b), or set search.model=none",
        )


RULES: list[Callable[[RunConfig], None]] = [fp8_all_gather, warmup_when_compiling, hf_attention, model_search]
"""Every cross-axis rule, in the order :func:`check` runs them (the first broken one is reported)."""


def check(cfg: RunConfig) -> None:
    """Run every rule of :data:`RULES` on ``cfg``.

    Raises:
        ConfigError: from the first rule that ``cfg`` breaks.
    """
    for rule in RULES:
        rule(cfg)

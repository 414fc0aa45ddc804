"""What the config alone decides, checked before anything else: :func:`validate`.

Choices, sizes, bounds, which keys belong to which option, and the cross-axis rules
(:mod:`flopsweep.rules`); nothing of the machine (that is :func:`flopsweep.plan.resolve`). Each
registry is asked whether the option exists and its schema is the node's:
``flopsweep.models.MODELS``, ``flopsweep.attention.KERNELS``, ``flopsweep.backend_specs.BACKEND_SPECS``,
``flopsweep.precision.PRECISIONS`` and ``flopsweep.checkpointing.POLICIES``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from pathlib import Path

from flopsweep import (
    attention,
    checkpointing,
    memory,
    objective,
    precision,
    rules,
)
from flopsweep.backend_specs import BACKEND_SPECS
from flopsweep.choices import require_choice
from flopsweep.config import BatchConfig, ConfigError, OptimConfig, RunConfig, require_positive, typed_form
from flopsweep.deepspeed_config import ZERO_SHORTHANDS
from flopsweep.expert_parallel import routed_experts
from flopsweep.key_needs import degree_line, given_of, memory_note, model_splits
from flopsweep.layout import check_built
from flopsweep.limits import (
    FAULT_KINDS,
    FAULT_PHASES,
    MAX_BY_KEY,
    MAX_FLOAT,
    MAX_INT,
    MAX_REPEATS,
    MAX_TAG_CHARS,
    PLAN_FORMATS,
)
from flopsweep.lower_bounds import MIN_BY_KEY
from flopsweep.models import MODELS
from flopsweep.options import AutoBatchConfig, owners
from flopsweep.override_schema import added_key_error, kinds_said, picks

DEVICES = ("auto", "cuda", "cpu")
BATCHES = {"fixed": BatchConfig, "auto": AutoBatchConfig}
"""Batch options by ``batch.name`` and their schemas."""

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
"""The checkout's Hydra config directory: one YAML file per option of each group."""


def option_names(group: str) -> list[str]:
    """The options a user picks for ``group`` (``model`` -> ``gpt-1.3b``, ..., ``gpt-tiny``, ...):
    the YAML files of ``conf/<group>/``, sorted. The schema nodes ``<group>/base_<option>`` that
    those files extend (:mod:`flopsweep.store`) are not options."""
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def option_schemas() -> dict[str, dict[str, type]]:
    """Every group's options and their schema classes, from the registries (which import torch;
    :data:`flopsweep.options.OPTION_SCHEMAS` is the torch-free list of those with knobs of their own)."""
    return {
        "model": {arch: fam.config for arch, fam in MODELS.items()},
        "attention": {name: spec.config for name, spec in attention.KERNELS.items()},
        "backend": {name: spec.schema for name, spec in BACKEND_SPECS.items()},
        "precision": {name: spec.config for name, spec in precision.PRECISIONS.items()},
        "batch": dict(BATCHES),
        "activation_checkpointing": {name: spec.config for name, spec in checkpointing.POLICIES.items()},
    }


def validate(cfg: RunConfig, choices: Mapping[str, str] | None = None) -> RunConfig:
    """Check every value and combination that the config alone decides.

    Depends on nothing but ``cfg`` and Hydra's ``choices`` (no torch, no environment). Returns
    ``cfg`` unchanged.

    Args:
        choices: the option picked in each config group, as Hydra records it
            (``HydraConfig.get().runtime.choices``: ``{"backend": "zero2", ...}``); the typed config
            keeps only the option's registry key (``backend.name=deepspeed``). None when unknown.

    Raises:
        ConfigError: naming the key, the value and the fix.
    """
    check_choices(cfg, choices or {})
    _reject_unknown_keys(cfg)
    _check_options(cfg)
    check_bounds(cfg)  # the values given, by their own names, before any rule relates them
    MODELS[cfg.model.arch].check(cfg.model)
    checkpointing.policy(cfg.activation_checkpointing).check(cfg.activation_checkpointing)
    require_choice("device", cfg.device, DEVICES, "device")
    check_bounds(cfg)  # again: model=hf's check fills its shape from the file
    _validate_sizes(cfg)
    experts = routed_experts(cfg) if cfg.parallel.ep > 1 else 0
    given, splits = given_of(cfg), model_splits(cfg, experts)
    check_built(
        cfg.parallel,
        cfg.backend.name,
        lambda name, value, backend: degree_line(
            name, value, {**given, "backend": backend}, splits.get(name)
        ),
    )
    _validate_optim(cfg.optim)
    validate_cost(cfg)
    validate_predict(cfg)
    require_choice("fault.kind", cfg.fault.kind, FAULT_KINDS, "fault.kind")
    require_choice("fault.phase", cfg.fault.phase, FAULT_PHASES, "fault.phase")
    require_choice("plan_format", cfg.plan_format, PLAN_FORMATS)  # was JSON for any value but table or csv
    objective.spec_of(cfg.objective)
    if unset := objective.inputs_problem(
        cfg.objective,
        {
            "cost.usd_per_gpu_hour": cfg.cost.usd_per_gpu_hour,
            "budget.tokens": cfg.budget.tokens,
            "plan_clusters": list(cfg.plan_clusters) if cfg.plan else [],  # each may price its own rows
        },
    ):
        raise unset
    check_repeats(cfg)
    rules.check(cfg)  # the cross-axis rules (flopsweep.rules.RULES)
    memory.planned_gpu_bytes(cfg.plan_gpu, cfg.plan_gpu_memory_gib)  # a device name plan=true knows
    return cfg


def check_choices(cfg: RunConfig, choices: Mapping[str, str]) -> None:
    """The options Hydra composed say what the config holds. (A schema node is no option: it is
    stored outside the group, :mod:`flopsweep.store`, so Hydra refuses ``model=base_gpt2`` itself.)

    - ``model=<option>`` fixes ``model.name`` and ``model.arch`` (:func:`check_model_identity`).
    - ``backend=zero1``/``zero2``/``zero3`` fix the ZeRO stage
      (:data:`flopsweep.deepspeed_config.ZERO_SHORTHANDS`); a ``backend.zero_stage`` that differs would
      run another stage under the option's name. ``backend=deepspeed`` leaves it free.

    Raises:
        ConfigError: naming the key, the value and the fix.
    """
    check_model_identity(cfg, choices)
    choice = str(choices.get("backend") or "")
    stage = ZERO_SHORTHANDS.get(choice)
    value = getattr(cfg.backend, "zero_stage", stage)
    if stage is not None and value != stage:
        other = f"backend=zero{value}, or " if f"zero{value}" in ZERO_SHORTHANDS else ""
        raise ConfigError(
            "backend.zero_stage",
            value,
            f"contradicts backend={choice}, which is ZeRO stage {stage}",
            f"drop the backend.zero_stage override (backend={choice} sets it), or pick {other}"
            f"backend=deepspeed backend.zero_stage={value}",
        )


def check_model_identity(cfg: RunConfig, choices: Mapping[str, str]) -> None:
    """``model.name`` and ``model.arch`` are what the picked model option says
    (:mod:`flopsweep.model_identity`): a blank name is refused always; with Hydra's ``choices``, a name
    other than the option's (``model.name=llama3.1-8b`` on ``model=gpt-tiny``) and a family other than
    its own (``model=llama3.1-8b model.arch=gpt2``), in the line the command line's check gives before
    Hydra. Without choices (a search's probe sizes, named ``<name>-L<n>``; a config built in code) the
    schema checks of :func:`_check_options` stand.

    Raises:
        ConfigError: naming the key, the value and the fix.
    """
    from flopsweep.model_identity import arch_problem, name_problem

    choice = str(choices.get("model") or "")
    name = cfg.model.name
    if choice:
        problem = name_problem(name, choice) or arch_problem(cfg.model.arch, choice)
    elif isinstance(name, str) and not name.strip() and (name or cfg.model.arch != "hf"):
        problem = name_problem(name, choice)  # blank ('' is hf's default: named from its file)
    else:
        problem = None
    if problem is not None:
        raise problem


def _check_options(cfg: RunConfig) -> None:
    """Each group's option exists, and the config node has that option's schema.

    A node of another option's schema means the name was changed by hand
    (``attention.name=blocksparse`` on ``attention=sdpa``): the option's knobs and
    defaults would be missing, so the option must be picked as a group option.
    """
    groups = option_schemas()
    if cfg.model.arch not in groups["model"]:  # model.arch=gpt2 on model=llama-tiny: refused below
        own = [k for k in groups["model"] if k != "hf"]
        raise ConfigError(
            "model.arch",
            cfg.model.arch,
            f"must be one of {', '.join(groups['model'])}, and the model option sets it",
            f"drop the override, or pick a model option: {picks('model', own, near=cfg.model.name)}",
        )
    for group in ("attention", "backend"):
        require_choice(f"{group}.name", getattr(cfg, group).name, list(groups[group]), group)
    require_choice("precision.name", cfg.precision.name, list(groups["precision"]))
    require_choice("batch.name", cfg.batch.name, list(groups["batch"]))
    ac = cfg.activation_checkpointing.name
    require_choice("activation_checkpointing.name", ac, list(groups["activation_checkpointing"]))
    for group in groups:
        node = getattr(cfg, group)
        value = node.arch if group == "model" else node.name
        own = {f.name for f in dataclasses.fields(groups[group][value])}
        missing = sorted(own - {f.name for f in dataclasses.fields(node)})
        extra = sorted({f.name for f in dataclasses.fields(node)} - own)
        if extra and group == "model":  # model=llama3.1-8b model.arch=gpt2: the option's own keys unread
            raise ConfigError(
                "model.arch",
                value,
                f"was set by hand on an option of another family, whose keys ({', '.join(extra)}) {value} "
                "would not read: the option's sizes would be built as another model under its name",
                "drop the model.arch override (the option sets it), or pick an option of that family",
            )
        if missing:
            key = "arch" if group == "model" else "name"
            pick = (
                picks(group, [value], near=getattr(node, "name", None))
                if group == "model"
                else f"{group}={value}"
            )
            raise ConfigError(
                f"{group}.{key}",
                value,
                f"was set by hand on an option of another kind, so its own keys ({', '.join(missing)}) "
                "and their defaults are missing",
                f"pick the option itself: {pick}",
            )


def _reject_unknown_keys(node: object, prefix: str = "") -> None:
    """Refuse attributes that are not fields of the node's schema.

    Hydra's ``+key=value`` and ``++key=value`` add keys past the schema's struct
    check, and ``OmegaConf.to_object`` then sets them as plain attributes: a typo
    such as ``+model.n_layers=3`` would be ignored in silence, and a
    ``+model._target_=...`` would ride along. A key of another option
    (``+attention.window_blocks=2`` on ``attention=sdpa``) names that option.
    """
    names = [f.name for f in dataclasses.fields(node)]
    for key, value in vars(node).items():
        if key not in names:
            group = prefix.rstrip(".")
            if group in option_schemas() and owners(group, key):
                here = getattr(node, "name", getattr(node, "arch", "?"))
                own = picks(group, owners(group, key), near=here)  # options, not kinds: model=llama-tiny
                raise ConfigError(
                    f"{prefix}{key}",
                    value,
                    f"belongs to {kinds_said(group, owners(group, key))}, not to {group}={here}",
                    f"drop the override, or pick {own}",
                )
            # the job cannot tell '+' from '++': the line says both (the command line's names the one typed)
            raise added_key_error(f"{prefix}{key}", value, prefix.rstrip("."), names)
        if dataclasses.is_dataclass(value):
            _reject_unknown_keys(value, f"{prefix}{key}.")


MAX_NPROC_PER_NODE = 10**6
"""The most ranks per node ``nproc_per_node`` may name before any machine is asked (a GPU node has
8; :func:`flopsweep.plan.resolve` then caps CPU ranks at a multiple of the cores and GPU ranks at
the GPUs)."""


def check_repeats(cfg: RunConfig) -> None:
    """``repeats`` within 1..:data:`~flopsweep.limits.MAX_REPEATS` and ``repeat`` one of its rounds
    (0 .. repeats - 1).

    Raises:
        ConfigError: naming the key, the value and the fix.
    """
    if not 1 <= cfg.repeats <= MAX_REPEATS:
        raise ConfigError(
            "repeats", cfg.repeats, f"must be 1 to {MAX_REPEATS}", f"set repeats=3 (at most {MAX_REPEATS})"
        )
    if not 0 <= cfg.repeat < cfg.repeats:
        raise ConfigError(
            "repeat",
            cfg.repeat,
            f"must be a round of repeats={cfg.repeats} (0 to {cfg.repeats - 1})",
            "drop repeat=: the sweeper sets it from repeats=",
        )


def check_bounds(cfg: RunConfig) -> None:
    """Every number of the config within bounds: :data:`MAX_BY_KEY` for the keys it names,
    :data:`MAX_INT` or :data:`MAX_FLOAT` (and finite) for the others; ``nproc_per_node`` at most
    :data:`MAX_NPROC_PER_NODE`; ``tag`` at most :data:`MAX_TAG_CHARS` characters; the lower bounds the value
    alone decides (:data:`flopsweep.lower_bounds.MIN_BY_KEY`). Lower bounds that depend on the option or
    on other keys stay with their own checks.

    Raises:
        ConfigError: naming the key, the value (shortened when long), the bound and the fix.
    """
    for key, value in _numbers(cfg):
        check_number(key, value)
    if len(cfg.tag) > MAX_TAG_CHARS:
        raise ConfigError(
            "tag",
            cfg.tag,
            f"is {len(cfg.tag)} characters, over the bound of {MAX_TAG_CHARS} "
            "(it is copied into every record and line)",
            f"shorten the tag to at most {MAX_TAG_CHARS} characters",
        )
    nproc = str(cfg.nproc_per_node)
    if nproc.isdigit() and (len(nproc) > 7 or int(nproc) > MAX_NPROC_PER_NODE):
        raise ConfigError(
            "nproc_per_node",
            nproc,
            f"is beyond the bound of {MAX_NPROC_PER_NODE} ranks per node",
            "set nproc_per_node=auto or the ranks of one node",
        )


def check_number(key: str, value: int | float) -> None:
    """``value`` of ``key`` finite, at least its :data:`~flopsweep.lower_bounds.MIN_BY_KEY` bound, and within
    :data:`MAX_BY_KEY`, else :data:`MAX_INT` (an int) or :data:`MAX_FLOAT` (a float): the one table of
    bounds, which :func:`check_bounds` and the command line's check (:func:`number_problem`) read.

    Raises:
        ConfigError: naming the key, the value, the bound and the fix.
    """
    limit = MAX_BY_KEY.get(key, MAX_INT if isinstance(value, int) else MAX_FLOAT)
    if isinstance(value, float) and not math.isfinite(value):
        low = MIN_BY_KEY.get(key)
        if low is not None and low.problem.startswith("must be a finite"):  # timeout_s: its own line
            raise ConfigError(key, value, low.problem, low.fix)
        raise ConfigError(key, value, "must be a finite number", f"set {key} to a finite value")
    if (low := MIN_BY_KEY.get(key)) is not None and low.refuses(value):
        raise ConfigError(key, value, low.problem, low.fix or f"set {key} to a positive integer")
    if abs(value) > limit:
        bound = _bound_text(limit, whole=isinstance(value, int))
        side = f"to at most {bound}" if value > 0 else f"to at least -{bound}"
        raise ConfigError(
            key, value, f"is beyond the bound of {bound}", f"set {key} {side}{memory_note(key)}"
        )


_ALONE: dict[str, Callable[[RunConfig], None]] = {
    "optim": lambda cfg: _validate_optim(cfg.optim),
    "cost": lambda cfg: validate_cost(cfg),
    "budget": lambda cfg: validate_cost(cfg),
    "predict": lambda cfg: validate_predict(cfg),
    "timeout_s": lambda cfg: _validate_timeout(cfg),
}
"""The checks of a section (or a top-level key) whose keys' ranges the value alone decides
(``optim.lr > 0``, ``predict.overlap`` in [0, 1], ``timeout_s > 0``, ...), run by :func:`number_problem`
on the schema's defaults."""


def number_problem(key: str, value: int | float) -> ConfigError | None:
    """Why the number ``value`` of the float key ``key`` would be refused in the job by the value alone,
    else None: its bound (:func:`check_number`) and, for a key of :data:`_ALONE`'s sections, that
    section's own check run on the schema's defaults with ``value`` in place (the same code the job
    runs, so the ranges live in one place). The command line's check before Hydra
    (:func:`flopsweep.override_values.value_problem`) calls it."""
    try:
        check_number(key, value)
        section, _, leaf = key.partition(".")
        if section in _ALONE and not leaf:  # a top-level key (timeout_s)
            cfg = RunConfig()
            setattr(cfg, section, value)
            _ALONE[section](cfg)
        elif section in _ALONE and "." not in leaf:
            cfg = RunConfig()
            part = getattr(cfg, section)
            if not dataclasses.is_dataclass(part) or leaf not in {f.name for f in dataclasses.fields(part)}:
                return None
            setattr(part, leaf, value)
            _ALONE[section](cfg)
    except ConfigError as e:
        return e if e.key == key else None
    return None


def _bound_text(limit: float, *, whole: bool) -> str:
    """``limit`` as a fix may quote it: every digit for an integer key (``2147483647``: ``2.15e+09``
    would be past it), else 3 significant figures when they do not round above it, as one types them
    (``1e12``, :func:`flopsweep.config.typed_form`; was ``1e+12``). No 1,000 separators: Hydra would read
    a list."""
    if whole or limit < 1e9:
        return f"{limit:.0f}"
    short = typed_form(float(f"{limit:.3g}"))
    return short if float(short) <= limit else f"{limit:.0f}"


def _numbers(node: object, prefix: str = "") -> list[tuple[str, int | float]]:
    """``(key, value)`` of every int and float field of ``node`` and its sub-configs (not bools)."""
    found: list[tuple[str, int | float]] = []
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if dataclasses.is_dataclass(value):
            found.extend(_numbers(value, f"{prefix}{f.name}."))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            found.append((f"{prefix}{f.name}", value))
    return found


def _validate_sizes(cfg: RunConfig) -> None:
    # Every family's, model=hf's too (its shape comes from the file; the sequence is the run's own).
    # Each key's own lower bound (model.seq_len >= 1, timeout_s > 0, ...): MIN_BY_KEY, by check_bounds.
    nproc = str(cfg.nproc_per_node)
    _validate_global_batch(cfg.batch, cfg.nnodes * int(nproc) if nproc.isdigit() else 1)
    limit = getattr(cfg.batch, "max_micro_batch_size", None)
    if limit is not None and limit < cfg.batch.micro_batch_size:
        raise ConfigError(
            "batch.max_micro_batch_size",
            limit,
            f"is below batch.micro_batch_size={cfg.batch.micro_batch_size}",
            "raise batch.max_micro_batch_size or lower batch.micro_batch_size",
        )
    _validate_timeout(cfg)  # finite and > 0 (also MIN_BY_KEY's, before Hydra)


def _validate_timeout(cfg: RunConfig) -> None:
    if not (cfg.timeout_s > 0 and math.isfinite(cfg.timeout_s)):
        raise ConfigError(
            "timeout_s", cfg.timeout_s, "must be a finite number of seconds > 0", "set e.g. timeout_s=1800"
        )


def _validate_global_batch(batch: BatchConfig, world: int = 1) -> None:
    """``batch.global_batch_size`` is positive and divides by the micro batch (the data-parallel
    degree is checked by :func:`flopsweep.plan.resolve`; the fix's example is a multiple of the micro
    batch x the ``world`` ranks, which every data-parallel degree divides: a multiple of the micro
    batch alone, 8 for 8 ranks, was then refused as no multiple of 64), and needs ``batch=fixed``:
    ``batch=auto`` changes the micro batch after validation."""
    total = batch.global_batch_size
    if total is None:
        return
    if batch.name == "auto":
        raise ConfigError(
            "batch.global_batch_size",
            total,
            "batch=auto searches the micro batch after validation, so grad_accum cannot be set from it",
            "use batch=fixed with batch.micro_batch_size, or drop batch.global_batch_size",
        )
    if total < 1 or total % batch.micro_batch_size:
        raise ConfigError(
            "batch.global_batch_size",
            total,
            f"is not a positive multiple of batch.micro_batch_size={batch.micro_batch_size}",
            f"set batch.global_batch_size to a multiple of {batch.micro_batch_size}"
            + (" x the data-parallel ranks" if world > 1 else "")
            + f", e.g. batch.global_batch_size={batch.micro_batch_size * world}",
        )


def validate_cost(cfg: RunConfig) -> None:
    """``cost.usd_per_gpu_hour`` null or >= 0; ``budget.tokens`` null or a whole number >= 1 (bounds:
    :func:`check_bounds`). Part of :func:`validate`; a plan's checks before its rows call it too
    (:mod:`flopsweep.job.plandecide`).

    Raises:
        ConfigError: naming the key, its value and the fix.
    """
    price, tokens = cfg.cost.usd_per_gpu_hour, cfg.budget.tokens
    if price is not None and price < 0:
        raise ConfigError(
            "cost.usd_per_gpu_hour",
            price,
            "must be >= 0 US dollars",
            "set e.g. cost.usd_per_gpu_hour=2.5 (your price per GPU-hour), or cost.usd_per_gpu_hour=null",
        )
    if tokens is not None and not (math.isfinite(tokens) and tokens >= 1 and float(tokens).is_integer()):
        # a fraction (0.5) planned "days 3e-12" before session 37: a budget counts whole tokens
        raise ConfigError(
            "budget.tokens",
            tokens,
            "must be a whole number of tokens >= 1",
            "set e.g. budget.tokens=15e12, or budget.tokens=null",
        )


def validate_predict(cfg: RunConfig) -> None:
    """``predict.*``: positive node and GPU counts and bandwidths, overlap in [0, 1], a positive
    ``compute_scale``, a ``layer_probe_max_spread`` of at least 1, a ``layer_probe_settle`` in
    ``[0, 1)`` (bounds: :func:`check_bounds`). Part of :func:`validate`; a plan row placed on
    ``predict.gpus_per_node`` x ``predict.nnodes`` calls it first
    (:func:`flopsweep.job.dryrun.predicted_cluster`).

    Raises:
        ConfigError: naming the key, its value and the fix.
    """
    p = cfg.predict
    for key in ("gpus_per_node", "nnodes"):
        if (value := getattr(p, key)) is not None:
            require_positive(f"predict.{key}", value, f"set predict.{key}=8, or null for the run's own")
    for key in ("intra_node_gbps", "inter_node_gbps", "compute_scale"):
        if (value := getattr(p, key)) is not None and not value > 0:
            raise ConfigError(
                f"predict.{key}", value, "must be a positive number", f"set e.g. predict.{key}=1"
            )
    if p.overlap is not None and not 0 <= p.overlap <= 1:
        raise ConfigError("predict.overlap", p.overlap, "must be a share in [0, 1]", "set e.g. 0.8, or null")
    if not p.layer_probe_max_spread >= 1:  # a copy's slowest step is never under its median
        raise ConfigError(
            "predict.layer_probe_max_spread",
            p.layer_probe_max_spread,
            "must be at least 1 (a copy's second slowest timed step over its median)",
            "set e.g. predict.layer_probe_max_spread=1.5",
        )
    settle = p.layer_probe_settle
    if not 0 <= settle < 1:
        raise ConfigError(
            "predict.layer_probe_settle",
            settle,
            "must be a share in [0, 1): the most a copy's last 3 steps may differ, over the fastest",
            "set e.g. predict.layer_probe_settle=0.05, or 0 for no early stop",
        )


def _validate_optim(o: OptimConfig) -> None:
    """AdamW settings: finite, with lr and eps > 0, grad_clip >= 0 (0: no clipping), betas in [0, 1),
    weight decay >= 0."""
    checks = {
        "lr": (o.lr > 0, "1e-4"),
        "eps": (o.eps > 0, "1e-8"),
        "grad_clip": (o.grad_clip >= 0, "1.0"),
        "beta1": (0 <= o.beta1 < 1, "0.9"),
        "beta2": (0 <= o.beta2 < 1, "0.95"),
        "weight_decay": (o.weight_decay >= 0, "0.1"),
    }
    for key, (ok, example) in checks.items():
        value = getattr(o, key)
        if not (ok and math.isfinite(value)):
            raise ConfigError(
                f"optim.{key}",
                value,
                "is out of range for AdamW (lr, eps > 0; grad_clip >= 0; betas in [0, 1); "
                "weight_decay >= 0; all finite)",
                f"set e.g. optim.{key}={example}",
            )

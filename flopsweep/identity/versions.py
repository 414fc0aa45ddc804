"""The record upgrade chain: a ``metrics.json`` record of any schema version brought to the current one.

The version is read explicitly. Each older version has a named function that turns it into the
next one, so a record written by an old flopsweep compares (:mod:`flopsweep.identity`) and loads
(:mod:`analysis.schema`, which re-exports this) as the current schema
(:data:`flopsweep.record.SCHEMA_VERSION`):

- ``schema_version 0`` (the layout before the v1 contract): run and system
  fields at the top level (``run_id``, ``started_at``, ``finished_at``,
  ``overrides``, ``hostname``, ``device_name``, ``world_size``, ``torch``), the
  error as a plain message string, and flat metric keys
  (``iteration_time_s_mean``, ``iteration_time_s_median``, ``tokens_per_s``,
  ``tflops_per_device``, ``mfu``, ``peak_cuda_allocated_bytes``, ...) with no
  ``model`` section. :func:`upgrade_v0_to_v1` converts it.
- ``schema_version 1``: GPT-2 only; its ``model_tflops_per_device`` was eq. 3 with
  f = 3 and ``hfu`` eq. 3 with f = 4 under checkpointing, and it had
  ``effective_tflops_per_device``. :func:`upgrade_v1_to_v2` recomputes the v2
  FLOPs figures from the config (the v1 -> v2 mapping is in its docstring).

The v0 and v1 arithmetic is written out here. Torch-free: imports :mod:`flopsweep.record` and
:mod:`flopsweep.files` only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from flopsweep.record import METRIC_KEYS, SCHEMA_VERSION
from flopsweep.safe_read import RecordError

Record = dict[str, Any]


V1_METRIC_KEYS = (
    "iteration_time_s",
    "tokens_per_s",
    "tokens_per_s_per_device",
    "tflops_per_device",
    "model_tflops_per_device",
    "mfu",
    "hfu",
    "peak_tflops",
    "peak_tflops_source",
    "peak_cuda_allocated_bytes",
    "peak_cuda_reserved_bytes",
    "per_rank",
    "peak_host_rss_bytes",
    "swap_used_bytes",
    "loss_first",
    "loss_last",
    "effective_tflops_per_device",
    "flops_convention",
)
"""The ``metrics`` keys of schema version 1."""

V1_FLOPS_CONVENTION = (
    "upgraded from schema_version 1 by analysis.schema.upgrade_v1_to_v2: model_flops_per_iteration = "
    "6 T (12 l h^2 + V h) + 12 l h s T rho and hardware_flops_per_iteration = model + the checkpointing "
    "recompute, from the config (T = micro_batch_size x grad_accum x world_size x seq_len); "
    "tflops_per_device is the recorded eq. 3 figure"
)


# --- v0 -> v1 -------------------------------------------------------------------------------------------


def _v0_run(old: Record) -> Record:
    keys = ("started_at", "finished_at", "overrides", "job_num")
    return {"id": old.get("run_id"), **{k: old.get(k) for k in keys}}


def _v0_system(old: Record) -> Record:
    keys = (
        "hostname",
        "device_name",
        "device_count",
        "world_size",
        "torch",
        "cuda",
        "deepspeed",
        "xformers",
        "python",
        "git_sha",
    )
    return {k: old.get(k) for k in keys}


def _v0_metrics(flat: Record) -> Record:
    out: Record = dict.fromkeys(V1_METRIC_KEYS)
    out.update({k: v for k, v in flat.items() if k in V1_METRIC_KEYS and k != "iteration_time_s"})
    stats = ("mean", "median", "min", "max", "std")
    times = {s: flat.get(f"iteration_time_s_{s}") for s in stats}
    out["iteration_time_s"] = {**times, "values": flat.get("iteration_time_s_values")}
    return out


def gpt2_n_params(n_layer: int, n_embd: int, seq_len: int, vocab_size: int) -> int:
    """Parameters of the GPT-2 of v0/v1 records (tied LM head): ``l (12 h^2 + 13 h) + V h + s h + 2 h``."""
    h = n_embd
    return n_layer * (12 * h * h + 13 * h) + vocab_size * h + seq_len * h + 2 * h


def _positive_ints(*values: Any) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values)


def _v0_model(config: Record) -> Record | None:
    m = config.get("model")
    if not isinstance(m, dict):
        return None
    shape = [m.get(k) for k in ("n_layer", "n_embd", "seq_len", "vocab_size")]
    return {**m, "n_params": gpt2_n_params(*shape) if _positive_ints(*shape) else None}


def upgrade_v0_to_v1(old: Record) -> Record:
    """Convert a ``schema_version 0`` record (flat layout, see the module doc) to version 1.

    Fields v0 did not record (``model_tflops_per_device``, ``hfu``, ``per_rank``, the
    error's type and phase, ...) become null. Missing sections are left missing, so the
    required-key check still reports them.
    """
    new: Record = {"schema_version": 1, "status": old.get("status")}
    err = old.get("error")
    new["error"] = None if err is None else {"type": None, "message": str(err), "phase": None, "rank": None}
    if "run_id" in old:
        new["run"] = _v0_run(old)
    if isinstance(old.get("config"), dict):
        new["config"] = old["config"]
        new["model"] = _v0_model(old["config"])
    new["system"] = _v0_system(old)
    if isinstance(old.get("metrics"), dict):
        new["metrics"] = _v0_metrics(old["metrics"])
    return new


# --- v1 -> v2 -------------------------------------------------------------------------------------------


def _section(record: Record, *path: str) -> Record:
    value: Any = record
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, dict) else {}


def finite(value: Any) -> float | None:
    """``value`` as a finite float, or None (bools, text, null, NaN, and numbers too big for a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        out = float(value)
    except OverflowError:
        return None
    return out if math.isfinite(out) else None


CHECKPOINTING_BOOLS = {True: "full", False: "none"}
"""The policy each old record's boolean ``config.activation_checkpointing`` means."""


def checkpointing_name(value: Any) -> str | None:
    """The activation checkpointing policy of a record's ``config.activation_checkpointing``: the
    ``name`` of the config group node (``{"name": "full"}``, records since the policy registry),
    or ``full``/``none`` for the boolean of older records; None when missing or unreadable."""
    if isinstance(value, bool):
        return CHECKPOINTING_BOOLS[value]
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        return value["name"]
    return None


def recompute_mode(config: Record) -> str:
    """What activation checkpointing recomputes (as ``flopsweep.checkpointing.recompute_mode``, for
    ``none`` and ``full``): ``none``; ``early_stop`` (eager blocks under non-reentrant checkpoint, and
    compiled blocks, whose partitioner re-runs only what backward reads: :mod:`flopsweep.recompute_read`)."""
    if checkpointing_name(config.get("activation_checkpointing")) in (None, "none"):
        return "none"
    return "early_stop"


def v1_flops(record: Record) -> tuple[int, int, float, float] | None:
    """``(global batch, tokens per step, model FLOPs, hardware FLOPs)`` of one optimizer step of a
    v1 (GPT-2) record, from its config and ``system.world_size``; None when a value is missing.

    Tokens ``T = micro_batch_size x grad_accum x world_size x seq_len``, density ``rho =
    config.attention.density`` (1 when missing, except for ``blocksparse``: None then):

    - model FLOPs ``6 T (12 l h^2 + V h) + 12 l h s T rho`` (every weight matmul forward and
      backward, the LM head included; attention scores over the full ``s x s`` square);
    - hardware FLOPs: the model FLOPs plus, per layer, ``2 T 8 h^2 + 4 h s T rho`` when
      checkpointing recomputes an eager block (``early_stop``: all forward matmuls but the
      MLP out-projection), eager or compiled (the partitioner re-runs only what backward reads).

    Raises:
        RecordError: when the numbers are too large for a float (the FLOPs overflow).
    """
    cfg = _section(record, "config")
    model, batch = _section(cfg, "model"), _section(cfg, "batch")
    l, h, s, v = (model.get(k) for k in ("n_layer", "n_embd", "seq_len", "vocab_size"))  # noqa: E741
    micro, accum = batch.get("micro_batch_size"), batch.get("grad_accum", 1)
    world = _section(record, "system").get("world_size")
    if not _positive_ints(l, h, s, v, micro, accum, world):
        return None
    attention = _section(cfg, "attention")
    density = attention.get("density")
    if density is None and attention.get("name") == "blocksparse":
        return None  # the fraction computed is unknown: no figure rather than a dense guess
    rho = 1.0 if density is None else finite(density)
    if rho is None or rho < 0:
        return None
    global_batch = micro * accum * world
    tokens = global_batch * s
    per_layer_recompute = {"none": 0, "early_stop": 8, "full": 12}[recompute_mode(cfg)]
    try:
        weights = l * 12 * h * h + v * h  # exact integers
        model_flops = 6.0 * weights * tokens + 12.0 * l * h * s * tokens * rho
        extra = 0.0
        if per_layer_recompute:
            extra = l * (2.0 * per_layer_recompute * h * h * tokens + 4.0 * h * s * tokens * rho)
        hardware_flops = model_flops + extra
    except OverflowError:
        raise RecordError("the config's sizes are too large: its FLOPs overflow a float") from None
    if not (math.isfinite(model_flops) and math.isfinite(hardware_flops)):
        raise RecordError("the config's sizes are too large: its FLOPs overflow a float")
    return global_batch, tokens, model_flops, hardware_flops


def per_device_tflops(flops: Any, mean_time_s: Any, world_size: Any) -> float | None:
    """``flops / (mean_time_s x world_size x 1e12)``, or None when an input is missing, not
    positive or not finite, or the result overflows."""
    f, t, w = finite(flops), finite(mean_time_s), finite(world_size)
    if f is None or t is None or w is None or t <= 0 or w <= 0 or isinstance(world_size, float):
        return None
    out = f / (t * w * 1e12)
    return out if math.isfinite(out) else None


def _ratio(value: float | None, peak: Any) -> float | None:
    p = finite(peak)
    return value / p if value is not None and p else None


def upgrade_v1_to_v2(old: Record) -> Record:
    """Convert a ``schema_version 1`` record (GPT-2 only) to version 2: the v1 -> v2 mapping.

    - ``metrics.model_flops_per_iteration`` and ``hardware_flops_per_iteration``: from the
      config, see :func:`v1_flops`; ``global_batch_size``, ``tokens_per_step`` and
      ``recompute`` with them (the same arithmetic).
    - ``model_tflops_per_device`` and ``hardware_tflops_per_device`` = those FLOPs /
      (``iteration_time_s.mean`` x ``world_size`` x 1e12); ``mfu`` / ``hfu`` = those /
      ``metrics.peak_tflops``. The v1 values (eq. 3 with f = 3, and f = 4 under
      checkpointing) are replaced.
    - ``tflops_per_device`` stays as recorded (eq. 3 as published, which v2 keeps);
      ``effective_tflops_per_device`` is dropped; ``iteration_time_s.cv`` = std / mean.
    - Keys v1 did not measure (``measured_matmul_tflops``, ``matmul_fraction``,
      ``peak_tflops_fp8``, ``mfu_fp8``, ``loss_finite``, ``warmup_steps``,
      ``unsteady_steps``, ``fp8_layers``) are null; ``warnings`` is ``[]``.
    - ``model.arch`` and ``config.model.arch`` are ``gpt2``; a dense attention without
      ``density`` gets 1.0 (a block-sparse one stays unknown, and its FLOPs null);
      ``system.world_size`` 0 (a run that never launched) becomes null.

    Metrics of a run that is not ``ok`` stay null. Sections that are missing or not
    objects are left as they are, for the required-key check to report.

    Raises:
        RecordError: when the config's sizes are so large that the FLOPs overflow.
    """
    new: Record = {**old, "schema_version": 2}
    new["warnings"] = old.get("warnings") if isinstance(old.get("warnings"), list) else []
    if isinstance(old.get("config"), dict):
        cfg = new["config"] = dict(old["config"])
        if isinstance(cfg.get("model"), dict):
            cfg["model"] = {"arch": "gpt2", **cfg["model"]}
        att = cfg.get("attention")
        if isinstance(att, dict) and att.get("density") is None and att.get("name") != "blocksparse":
            cfg["attention"] = {**att, "density": 1.0}
    if isinstance(old.get("model"), dict):
        new["model"] = {**old["model"], "arch": old["model"].get("arch", "gpt2")}
    if isinstance(old.get("system"), dict) and old["system"].get("world_size") == 0:
        new["system"] = {**old["system"], "world_size": None}
    if not isinstance(old.get("metrics"), dict):
        return new
    m: Record = dict.fromkeys(METRIC_KEYS)
    m.update({k: v for k, v in old["metrics"].items() if k != "effective_tflops_per_device"})
    for key in ("model_tflops_per_device", "hfu", "mfu"):
        m[key] = None  # v1's eq. 3 figures; recomputed below
    it = m.get("iteration_time_s")
    if isinstance(it, dict):
        mean, std = finite(it.get("mean")), finite(it.get("std"))
        m["iteration_time_s"] = {**it, "cv": std / mean if mean and std is not None else it.get("cv")}
    new["metrics"] = m
    if new.get("status") != "ok":
        return new
    cfg = _section(new, "config")
    m["recompute"] = recompute_mode(cfg) if "activation_checkpointing" in cfg else None
    m["flops_convention"] = V1_FLOPS_CONVENTION
    counted = v1_flops(new)
    if counted is None:
        return new
    global_batch, tokens, model_flops, hardware_flops = counted
    world = _section(new, "system").get("world_size")
    mean = it.get("mean") if isinstance(it, dict) else None
    model_tflops = per_device_tflops(model_flops, mean, world)
    hardware_tflops = per_device_tflops(hardware_flops, mean, world)
    m.update(
        global_batch_size=global_batch,
        tokens_per_step=tokens,
        model_flops_per_iteration=model_flops,
        hardware_flops_per_iteration=hardware_flops,
        model_tflops_per_device=model_tflops,
        hardware_tflops_per_device=hardware_tflops,
        mfu=_ratio(model_tflops, m.get("peak_tflops")),
        hfu=_ratio(hardware_tflops, m.get("peak_tflops")),
    )
    return new


# UPGRADES[v] turns a version-v record into version v + 1.
UPGRADES: dict[int, Callable[[Record], Record]] = {0: upgrade_v0_to_v1, 1: upgrade_v1_to_v2}


def upgrade(record: Record) -> Record:
    """Bring a record of any known version up to :data:`SCHEMA_VERSION`.

    Raises:
        RecordError: when ``schema_version`` is missing, not an integer, or newer
            than this analysis knows.
    """
    if "schema_version" not in record:
        raise RecordError("missing required key 'schema_version'")
    version = record["schema_version"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise RecordError(f"schema_version {version!r} is not a non-negative integer")
    if version > SCHEMA_VERSION:
        raise RecordError(
            f"schema_version {version} is newer than this analysis reads "
            f"(up to {SCHEMA_VERSION}); update flopsweep to read it"
        )
    while version < SCHEMA_VERSION:
        record = UPGRADES[version](record)
        version += 1
    return record

"""The columns of the analysis and how each is shown, declared once.

Metrics have :data:`flopsweep.record.METRIC_SPECS` (key, unit, header, direction) and their presentation in
:mod:`flopsweep.column_spec` (:data:`COLUMN_SPECS`, handed on here: the default table, format, the order
``--width`` hides in), with the columns the analysis makes (``speedup``); the knobs that define a run's
set-up (model, kernel, backend and its options, precision, batch, ranks, device) have :data:`SETUP_SPECS`.
The analysis (``analysis.load``, ``display``, ``query``, ``plots``) reads every set-up fact from here: the
column, where it is in the record, its short header and legend text, and, derived from the option schemas
(:mod:`flopsweep.options`), its type and which option it belongs to (``zero_stage`` is blank for a run that
is not DeepSpeed). A new knob is one line here (or one line in :data:`UNSHOWN_KEYS`:
``tests/unit/test_columns.py`` checks that every key of every schema is one or the other), except a model
family's own knobs, which its shape module declares beside its schema (``COLUMNS``, ``UNSHOWN_KEYS``:
``model.experts`` in :mod:`flopsweep.models.hf`), taken in from :data:`flopsweep.models.MODELS`.

Torch-free: imports :mod:`flopsweep.config`, :mod:`flopsweep.options`, :mod:`flopsweep.layout`, the
column specs (:mod:`flopsweep.column_spec`, :mod:`flopsweep.setup_spec`) and the families' shape modules
(:mod:`flopsweep.models`) only.
"""

from __future__ import annotations

import dataclasses
import types
import typing

from flopsweep.column_spec import (  # noqa: F401 - flopsweep.columns.X: the analysis imports them there
    COLUMN_SPECS,
    FORMATS,
    HIDE_SETUP,
    TABLE,
    ColumnSpec,
)
from flopsweep.config import RunConfig
from flopsweep.layout import COLUMN_DEGREES, DEGREE_SPECS
from flopsweep.models import MODELS
from flopsweep.options import GROUP_BASES, GROUP_KEY, OPTION_SCHEMAS, base_keys, owners
from flopsweep.setup_spec import KINDS, SHOW, SetupSpec  # noqa: F401 - re-exported

S = SetupSpec
SETUP_SPECS: list[SetupSpec] = [
    S(name="model", path="config.model.name", header="model", show="table"),
    S(name="arch", path="config.model.arch", header="arch", show="distinct"),  # the model's name says it
    S(
        name="attention",
        path="config.attention.name",
        header="attn",
        description="attention kernel",
        show="table",
    ),
    S(
        name="attention_density",
        path="config.attention.density",
        header="density",
        description="fraction of attention blocks computed",
    ),
    S(
        name="attention_layout",
        path="config.attention.layout",
        header="attn_layout",
        description="block-sparse layout",
    ),
    S(
        name="attention_impl",
        path="config.attention.impl",
        header="impl",
        description="block-sparse implementation",
    ),
    S(
        name="block_size",
        path="config.attention.block_size",
        header="block",
        description="attention block size (tokens)",
    ),
    S(name="backend", path="config.backend.name", header="backend", show="table"),
    S(
        name="zero_stage",
        path="config.backend.zero_stage",
        header="zero",
        description="DeepSpeed ZeRO stage",
        show="table",
    ),
    S(
        name="reshard_after_forward",
        path="config.backend.reshard_after_forward",
        header="reshard",
        description="FSDP2 reshards after forward",
    ),
    S(
        name="reduce_bucket_size",
        path="config.backend.reduce_bucket_size",
        header="reduce_bkt",
        description="DeepSpeed reduce bucket (elements)",
    ),
    S(
        name="stage3_prefetch_bucket_size",
        path="config.backend.stage3_prefetch_bucket_size",
        header="prefetch_bkt",
        description="ZeRO-3 prefetch bucket (elements)",
    ),
    S(
        name="stage3_param_persistence_threshold",
        path="config.backend.stage3_param_persistence_threshold",
        header="persist_thr",
        description="ZeRO-3 persistence threshold (elements)",
    ),
    S(
        name="zero_hpz_partition_size",
        path="config.backend.zero_hpz_partition_size",
        header="hpz",
        description="ZeRO++ hpZ: secondary partition size (1: off)",
    ),
    S(
        name="zero_quantized_weights",
        path="config.backend.zero_quantized_weights",
        header="qwz",
        description="ZeRO++ qwZ: quantized weight all-gather",
    ),
    S(
        name="zero_quantized_gradients",
        path="config.backend.zero_quantized_gradients",
        header="qgz",
        description="ZeRO++ qgZ: quantized gradient reduce-scatter",
    ),
    S(
        name="cpu_offload",
        path="config.backend.cpu_offload",
        header="cpu_offload",
        description="FSDP2 CPUOffloadPolicy (states and optimizer step on the host)",
    ),
    S(
        name="offload_optimizer",
        path="config.backend.offload_optimizer",
        header="off_optim",
        description="DeepSpeed offload_optimizer device (none, cpu, nvme)",
    ),
    S(
        name="offload_param",
        path="config.backend.offload_param",
        header="off_param",
        description="DeepSpeed ZeRO-3 offload_param device (none, cpu, nvme)",
    ),
    S(
        name="end_units",
        path="config.backend.end_units",
        header="end_units",
        description="FSDP2 shards the embedding and the final norm with the head as units of their own",
    ),
    S(
        name="optim_in_backward",
        path="config.optim.in_backward",
        header="opt_bwd",
        description="optimizer step fused into backward (optim.in_backward)",
    ),
    S(
        name="optim_overlap_forward",
        path="config.optim.overlap_forward",
        header="opt_fwd",
        description="optimizer step on a side CUDA stream beside the next forward (optim.overlap_forward)",
    ),
    S(
        name="optim_implementation",
        path="config.optim.implementation",
        header="adamw",
        description="torch AdamW's kernel (optim.implementation: auto, fused, foreach, for_loop)",
    ),
    S(
        name="loss_chunk_tokens",
        path="config.loss.chunk_tokens",
        header="loss_chunk",
        description="tokens per chunk of the LM head fused with its loss (0: the whole logits)",
    ),
    S(name="precision", path="config.precision.name", header="prec", description="precision", show="table"),
    S(
        name="micro_batch_size",
        path="config.batch.micro_batch_size",
        header="mbs",
        description="micro batch size per rank",
        show="table",
    ),
    S(
        name="grad_accum",
        path="config.batch.grad_accum",
        header="accum",
        description="grad accumulation steps per optimizer step",
        show="table",
    ),
    S(
        name="n_params",
        path="model.n_params",
        header="params",
        description="total parameters",
        kind="int",
        show="distinct",
        identity=False,
    ),
    S(
        name="n_layer",
        path="config.model.n_layer",
        header="blocks",
        description="transformer blocks (the frontier labels a model <name>-L<blocks>)",
        kind="int",
        show="distinct",
        identity=False,
    ),
    S(
        name="n_active_params",
        path="model.n_active_params",
        header="active",
        description="parameters each token uses (model=hf; MoE: top-k experts, router, shared experts)",
        kind="int",
        show="table",
        identity=False,
    ),
    *(spec for family in MODELS.values() for spec in family.columns),  # each family's own knobs
    S(name="seq_len", path="config.model.seq_len", header="seq", description="sequence length (tokens)"),
    S(
        name="activation_checkpointing",
        path="config.activation_checkpointing.name",
        header="ckpt",
        description="activation checkpointing policy (old records' true/false read as full/none)",
    ),
    S(
        name="ckpt_every",
        path="config.activation_checkpointing.every",
        header="ckpt_every",
        description="activation_checkpointing=every_n: one block in this many is checkpointed",
    ),
    S(
        name="ckpt_budget",
        path="config.activation_checkpointing.budget",
        header="ckpt_budget",
        description="activation_checkpointing=memory_budget: the compiler's activation memory budget (0..1)",
    ),
    S(name="compile", path="config.compile", header="compile"),
    S(
        name="compile_scope",
        path="config.compile_scope",
        header="scope",
        description="what one torch.compile covers (compile_scope: block, model)",
        kind="text",
    ),
    S(
        name="compile_mode",
        path="config.compile_mode",
        header="cmode",
        description="torch.compile's mode (compile_mode: default, reduce-overhead = CUDA graphs, ...)",
        kind="text",
    ),
    S(
        name="model_search",
        path="config.search.model",
        header="search",
        description="model search: largest = the largest model that trains (search.model)",
        kind="text",
    ),
    S(
        name="search_grow",
        path="config.search.grow",
        header="grew",
        description="what search.model=largest grew: n_layer (the blocks) or seq_len (the sequence); "
        "blank without a search",
        kind="text",
        identity=False,
    ),
    S(
        name="memory_budget_gib",
        path="config.search.memory_budget_gib",
        header="budget_gib",
        description="memory per rank the searches' probes may use (GiB; blank: the device's)",
        kind="float",
    ),
    S(name="nproc_per_node", path="config.nproc_per_node", header="nproc", show="distinct", identity=False),
    S(name="nnodes", path="config.nnodes", header="nodes", show="distinct", identity=False),
    S(
        name="world_size",
        path="system.world_size",
        header="world",
        description="world size (ranks)",
        kind="int",
        show="table",
    ),
    # The parallel layout (system.parallel, the resolved degrees): its label where layouts tell rows
    # apart (a layout sweep at one world size), the degrees for filters (--filter tp=2).
    S(
        name="layout",
        path="system.parallel",
        header="layout",
        description="parallel layout: degrees above 1, pp/schedule, dp (replicate x shard), cp, tp",
        kind="text",
        show="distinct",
    ),
    *(
        S(name=n, path=f"system.parallel.{n}", header=h, kind="int", show="distinct", identity=False)
        for n, h in ((d.name, d.short) for d in DEGREE_SPECS if d.column)
    ),
    S(name="device_name", path="system.device_name", header="device", kind="text"),
    S(name="seed", path="config.seed", header="seed", identity=False),
    S(name="tag", path="config.tag", header="tag", identity=False),
    # The step-time probes (run controls, outside setup_id): they lengthen the job, not its step, and
    # tell apart the rounds repeats= pools (analysis.spread.POOL_KEYS).
    S(
        name="predict_probe",
        path="config.predict.probe",
        header="probe",
        description="the run timed its pieces before warm-up (predict.probe): a longer job, the same step",
        show="distinct",
        identity=False,
    ),
    S(
        name="layer_probe",
        path="config.predict.layer_probe",
        header="layer_probe",
        description="the run timed two shallow copies before warm-up (predict.layer_probe): a longer job, "
        "the same step",
        show="distinct",
        identity=False,
    ),
]
"""Every set-up column, in column order. One line per knob."""
del S

UNSHOWN_KEYS: tuple[str, ...] = (
    # Sizes other than the sequence: the model's name stands for them.
    "config.model.n_embd",
    "config.model.n_head",
    "config.model.vocab_size",
    *(key for family in MODELS.values() for key in family.unshown),  # each family's own knobs
    # Block-sparse layout parameters: the density column sums them up.
    "config.attention.window_blocks",
    "config.attention.global_blocks",
    "config.attention.random_blocks",
    "config.attention.stride_blocks",
    "config.attention.seed",
    # DeepSpeed settings that sweeps leave at their defaults.
    "config.backend.overlap_comm",
    "config.backend.contiguous_gradients",
    "config.backend.stage3_max_live_parameters",
    "config.backend.stage3_max_reuse_distance",
    "config.backend.sub_group_size",
    "config.backend.optimizer_impl",
    "config.backend.deepcompile",
    "config.backend.nvme_path",  # where nvme offload writes, not what it measures
    "config.precision.fp8_all_gather",
    "config.batch.name",
    "config.batch.max_micro_batch_size",
    "config.batch.global_batch_size",  # grad_accum shows what it set
    "config.search.min_n_layer",  # the model search's range: the model's name shows the blocks it found
    "config.search.max_n_layer",
    "config.search.min_seq_len",  # the sequence search's range: the seq_len column shows what it found
    "config.search.max_seq_len",
    "config.search.seq_len_multiple",
    # The parallel degrees as asked (dp_shard=-1): the layout columns show them resolved (system.parallel).
    "config.parallel",
    # The same in every run of a sweep, or run controls (what resume and setup_id ignore).
    "config.steps",
    "config.optim",
    "config.device",
    "config.timeout_s",
    "config.resume",
    "config.fail_fast",
    "config.plan",  # plan, plan_gpu*, plan_clusters, plan_format
    "config.space",  # the set-ups plan_clusters enumerates (a run control)
    "config.profile",
    "config.fault",
    "config.objective",
    "config.cost",  # prices and budgets: run controls, in the metrics they price
    "config.budget",
    "config.predict",  # the prediction's inputs (run controls); metrics.predicted names its source
    "config.repeats",  # run controls of repeats=: the analysis reads run.repeat, run.repeat_group
    "config.repeat",
)
"""Schema keys (or whole sub-configs) that stay in the record and out of the table: each key of
every schema is a :data:`SETUP_SPECS` path or here."""

LAYOUT_COLUMNS = ("layout", *COLUMN_DEGREES)
"""The columns of ``system.parallel``: the resolved layout, which follows the rank count."""
RANK_COUNT_COLUMNS = ("world_size", "nproc_per_node", "nnodes")
"""The columns that set the rank count: :func:`dependents` gives them the layout columns."""

SETUP_COLUMNS: list[str] = [spec.name for spec in SETUP_SPECS]
"""The set-up columns, in order."""
IDENTITY_COLUMNS: list[str] = [spec.name for spec in SETUP_SPECS if spec.identity]
"""The columns that tell set-ups apart (:attr:`SetupSpec.identity`)."""


def _schemas(group: str) -> list[type]:
    return [GROUP_BASES[group], *OPTION_SCHEMAS[group].values()]


def _annotation_kind(hint: object) -> str:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = args[0] if len(args) == 1 else str
    return {bool: "bool", int: "int", float: "float"}.get(hint, "text")  # type: ignore[arg-type]


def schema_field(spec: SetupSpec) -> tuple[type, str] | None:
    """``(schema class, key)`` of a ``config.*`` column: the class that declares the key (a group's
    base, an option's own schema, or a plain sub-config such as ``OptimConfig``), or None for a path
    outside the config.

    Raises:
        KeyError: for a ``config.*`` path that no schema has.
    """
    keys = spec.keys
    if keys[0] != "config":
        return None
    if len(keys) == 2:
        classes, key = [RunConfig], keys[1]
    elif len(keys) == 3 and keys[1] in GROUP_BASES:
        classes, key = _schemas(keys[1]), keys[2]
    elif len(keys) == 3 and dataclasses.is_dataclass(hint := typing.get_type_hints(RunConfig).get(keys[1])):
        classes, key = [hint], keys[2]  # a plain sub-config, no group: optim.in_backward
    else:
        raise KeyError(f"{spec.name}: path {spec.path} is not config.<key> or config.<group>.<key>")
    for cls in classes:
        if key in {f.name for f in dataclasses.fields(cls)}:
            return cls, key
    raise KeyError(f"{spec.name}: no schema has the key {spec.path}")


def kind(spec: SetupSpec) -> str:
    """The column's type (:data:`KINDS`): :attr:`SetupSpec.kind`, else the schema field's type
    (``int | None`` is ``int``; a ``str`` or anything else is ``text``)."""
    if spec.kind is not None:
        return spec.kind
    found = schema_field(spec)
    if found is None:
        raise KeyError(f"{spec.name}: a column outside the config needs its kind")
    cls, key = found
    return _annotation_kind(typing.get_type_hints(cls)[key])


def group_of(spec: SetupSpec) -> str | None:
    """The config group of a ``config.<group>.<key>`` column (``zero_stage`` -> ``backend``), else None."""
    keys = spec.keys
    return keys[1] if keys[0] == "config" and len(keys) == 3 and keys[1] in GROUP_BASES else None


def option_column(group: str) -> str:
    """The column that holds the registry key of ``group``'s option: ``arch`` for ``model``
    (``model.arch``), else the column of ``<group>.name``."""
    path = f"config.{group}.{GROUP_KEY.get(group, 'name')}"
    return next(spec.name for spec in SETUP_SPECS if spec.path == path)


def only_for(spec: SetupSpec) -> tuple[str, tuple[str, ...]] | None:
    """``(column, options)`` when the column is a knob of some options only (``zero_stage``:
    ``("backend", ("deepspeed",))``): blank in a row whose ``column`` is not one of ``options``.
    None for a key every option of its group has (``seq_len``) and for non-group columns."""
    group = group_of(spec)
    if group is None or spec.keys[2] in base_keys(group):
        return None
    return option_column(group), tuple(owners(group, spec.keys[2]))


def dependents(column: str) -> list[str]:
    """The columns that mean nothing once ``column`` is fixed to another value: the other columns
    of its config group when ``column`` names the group's option or model (``backend`` ->
    ``zero_stage``, ``reshard_after_forward``, ...; ``model`` -> ``arch``, ``seq_len``); the
    layout columns for a rank count (``world_size=1`` as a baseline: ``dp1`` against ``dp8``)."""
    if column in RANK_COUNT_COLUMNS:  # the resolved layout follows the rank count (dp_shard=-1)
        return list(LAYOUT_COLUMNS)
    spec = next((s for s in SETUP_SPECS if s.name == column), None)
    group = group_of(spec) if spec else None
    if group is None or spec.keys[2] not in ("name", GROUP_KEY.get(group, "name")):
        return []
    return [s.name for s in SETUP_SPECS if group_of(s) == group and s.name != column]

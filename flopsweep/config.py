"""The typed config schema: the base dataclass of each config group, and the root.

``run.py`` converts Hydra's ``DictConfig`` once into :class:`RunConfig` with
``OmegaConf.to_object``; code below it sees only these dataclasses. Each group
(``model``, ``attention``, ``backend``, ``precision``, ``batch``,
``activation_checkpointing``) has a base class here with the keys every option shares. An
option with knobs of its own subclasses it in :mod:`flopsweep.options` (torch-free; its
registry names it), and :func:`flopsweep.store.register_configs` stores that subclass as the
schema node ``schema/<group>/base_<option>`` (Hydra's structured-config "base_" pattern, outside
the group so that it is no option), which the option's YAML file extends. So a key belongs
to the options that declare it, a record carries only the keys of its own options, and
every default lives in one place: the dataclass.

This module imports nothing else from flopsweep (a name held to a set of names, with its "did you mean":
:mod:`flopsweep.choices`). Rules live in :mod:`flopsweep.plan` (one axis:
with its registry; across axes: :mod:`flopsweep.rules`); the largest values and the fixed name sets
the checks hold a key to, in :mod:`flopsweep.limits`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

MAX_SHOWN = 256
"""A value whose ``repr`` is longer is shown cut in a :class:`ConfigError` (its first 16 characters
and its length); a path of up to this many characters is shown whole, so the line names it."""


def cut(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` whole when it has at most ``limit`` characters, else its first 16 and its length
    (``'aaaaaaaaaaaaaaa...(100002 characters)``): how a line shows a value it did not choose."""
    return text if len(text) <= limit else f"{text[:16]}...({len(text)} characters)"


class ConfigError(ValueError):
    """An impossible or inconsistent config value.

    The message names the key, the value (``shown``: as typed, ``[null,1e30]``; else :func:`typed_form`) and
    the fix, in one paragraph, so that the sweep process can print it as is, without a stack trace.
    """

    def __init__(self, key: str, value: object, problem: str, fix: str, shown: str | None = None) -> None:
        self.key, self.value, self.problem, self.fix = key, value, problem, fix
        shown = typed_form(value) if shown is None else shown  # 400 digits: one line still, cut at MAX_SHOWN
        if len(shown) > MAX_SHOWN:  # the length said is the value's own (a string's, without its quotes)
            length = len(value) if isinstance(value, str) else len(shown)
            shown = f"{shown[:16]}...({length} characters)"
        end = "" if fix.endswith(("?", ".")) else "."  # "did you mean fault.kind=oom?"
        super().__init__(invalid_line(f"{key}={shown}", problem, fix + end))


def invalid_line(what: str, problem: str, fix: str) -> str:
    """The one line of a refusal, :class:`ConfigError`'s and those said before Hydra:
    ``Invalid config: WHAT: PROBLEM. Fix: FIX`` (``what``: ``key=value``, or an override as typed)."""
    return f"Invalid config: {what}: {problem}. Fix: {fix}"


def typed_form(value: Any) -> str:
    """``value`` as one types it on the command line, for a refusal's ``KEY=VALUE``: ``null``,
    ``true``/``false``, an int as is; a float without a trailing ``.0``, plain when that takes at most 6
    characters (``0.0001``, ``2.5``, ``1`` not ``1.0``), else the shorter of plain and exponent
    (``1e9`` not ``1000000000.0``, ``1e30`` not ``1e+30``); ``inf``, ``nan`` and text (``'llama70b'``)
    as their ``repr``, a list too (a refusal of a list passes ``shown``, as typed)."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if not isinstance(value, float) or not math.isfinite(value):
        return repr(value)
    mantissa, _, exponent = (repr(value) if "e" in repr(value) else f"{value:.15e}").partition("e")
    sci = f"{mantissa.rstrip('0').removesuffix('.') if '.' in mantissa else mantissa}e{int(exponent)}"
    plain = repr(value).removesuffix(".0") if "e" not in repr(value) else None
    if plain is not None and (len(plain) <= 6 or len(plain) <= len(sci) or float(sci) != value):
        return plain
    return sci if float(sci) == value else repr(value)


def require_positive(key: str, value: int, fix: str | None = None) -> None:
    """Raise :class:`ConfigError` unless ``value >= 1``."""
    if value < 1:
        raise ConfigError(key, value, "must be a positive integer", fix or f"set {key} to a positive integer")


@dataclass(kw_only=True)
class ModelConfig:
    """Shape keys that every model family has; a family subclasses it (``flopsweep.models``)."""

    name: str = "gpt-tiny"
    """Label used in tables, e.g. ``gpt-1.3b``: the option's own, set by its file (``model=hf``: its
    ``config.json``'s). Not a knob: a value set by hand other than the option's, or blank, is refused
    (``flopsweep.model_identity``; pick the option itself, ``model=llama3.1-8b``)."""
    arch: str = "gpt2"
    """Model family, a key of ``flopsweep.models.MODELS`` (``gpt2``, ``llama``, ``hf``); set by the
    option. Not a knob: another family than the option's is refused (``flopsweep.model_identity``)."""
    n_layer: int = 2
    """Transformer blocks ``l``."""
    n_embd: int = 128
    """Hidden size ``h``; must divide by ``n_head``."""
    n_head: int = 4
    """Attention (query) heads; head dim is ``n_embd // n_head``."""
    seq_len: int = 128
    """Tokens per sequence ``s``."""
    vocab_size: int = 512
    """Vocabulary ``V``."""


@dataclass(kw_only=True)
class AttentionConfig:
    """How attention is computed; an option with knobs subclasses it (``flopsweep.attention``)."""

    name: str = "sdpa"
    """A key of ``flopsweep.attention.KERNELS``."""
    density: float | None = None
    """Set by validation, not by hand: the fraction of (query block, key block) pairs run (1.0: dense)."""


@dataclass(kw_only=True)
class BackendConfig:
    """Distributed strategy; a backend with knobs subclasses it (``flopsweep.backends``)."""

    name: str = "single"
    """A key of ``flopsweep.backends.BACKENDS``: ``single``, ``ddp``, ``fsdp``, ``deepspeed``."""


@dataclass(kw_only=True)
class PrecisionConfig:
    """Mixed-precision policy; the backend maps it to autocast, FSDP2 or DeepSpeed."""

    name: str = "bf16"
    """A key of ``flopsweep.precision.PRECISIONS``: ``bf16``, ``fp16`` (dynamic loss scaling),
    ``fp32``, ``fp8``, ``fp8-rowwise``."""


@dataclass(kw_only=True)
class CheckpointingConfig:
    """Activation checkpointing policy; a policy with knobs subclasses it (``flopsweep.checkpointing``)."""

    name: str = "none"
    """A key of ``flopsweep.checkpointing.POLICIES``: ``none``, ``full`` (every block's forward is
    recomputed in backward). ``activation_checkpointing=true``/``false`` mean ``full``/``none``."""


@dataclass(kw_only=True)
class BatchConfig:
    """Per-rank batch: ``micro_batch_size`` sequences, ``grad_accum`` micro steps per optimizer step."""

    name: str = "fixed"
    """``fixed``: use ``micro_batch_size``; ``auto``: search the largest that fits
    (``flopsweep.options.AutoBatchConfig``)."""
    micro_batch_size: int = 4
    """Sequences per rank per forward/backward (``auto``: where the search starts)."""
    grad_accum: int = 1
    """Micro batches accumulated per optimizer step; set from ``global_batch_size`` when that is given."""
    global_batch_size: int | None = None
    """Sequences per optimizer step over all data-parallel ranks; when set, validation sets
    ``grad_accum = global_batch_size / (micro_batch_size x data-parallel degree)``
    (:func:`flopsweep.layout.grad_accum_for`). None: ``grad_accum`` as given."""


@dataclass(kw_only=True)
class ParallelConfig:
    """How the world's ranks split into kinds of parallelism (torchtitan's ``ParallelDims``);
    :class:`flopsweep.layout.Layout` is the validated form. Data parallelism (HSDP included), tensor
    parallelism, the pipeline, context parallelism and expert parallelism (MoE ``model=hf`` configs)
    are built (:data:`flopsweep.layout.DEGREE_SPECS` lists the degrees)."""

    dp_replicate: int = 1
    """Data-parallel replicas (HSDP's replicate dimension; ``backend=fsdp``)."""
    dp_shard: int = -1
    """Data-parallel ranks that shard the model; -1: the ranks the other degrees leave."""
    tp: int = 1
    """Tensor-parallel degree, with sequence parallelism (``backend=fsdp``)."""
    pp: int = 1
    """Pipeline-parallel ranks (``flopsweep.pipeline``; ``backend=fsdp`` only)."""
    pp_schedule: str = "1F1B"
    """Pipeline schedule: ``1F1B``, ``Interleaved1F1B`` or ``GPipe`` (only with ``pp > 1``)."""
    pp_microbatches: int | None = None
    """Pipeline micro batches per step, splitting each step's local batch (``micro_batch_size x
    grad_accum`` sequences); None: one per stage (``pp x pp_stages_per_rank``). Only with ``pp > 1``."""
    pp_stages_per_rank: int | None = None
    """Pipeline stages (virtual stages) per rank: ``Interleaved1F1B`` only; None: 2 for
    ``Interleaved1F1B``, 1 for ``1F1B`` and ``GPipe``. Only with ``pp > 1``."""
    cp: int = 1
    """Context-parallel degree (``backend=fsdp``): each micro batch's sequence split over ``cp`` ranks
    (chunks ``i`` and ``2 cp - 1 - i``), attention by all-to-all over heads (Ulysses;
    ``flopsweep.context_parallel``); ``model.seq_len`` a multiple of ``2 cp``, ``model.n_head`` of
    ``tp x cp``."""
    ep: int = 1
    """Expert-parallel degree (``backend=fsdp``, an MoE ``model=hf`` config): ranks of ``dp_shard x cp``
    that split each MoE layer's experts, ``E / ep`` each, tokens sent to them and back by all-to-all
    (torchtitan's ``expert_parallel_degree``; ``flopsweep.expert_parallel``); must divide the experts
    and ``dp_shard x cp``; ``tp``, ``pp`` and ``dp_replicate`` 1 beside it."""


@dataclass(kw_only=True)
class StepsConfig:
    """How many optimizer steps run: unmeasured warm-up first, then the measured ones."""

    warmup: int = 2
    """Unmeasured optimizer steps (compilation, allocator warm-up)."""
    measure: int = 5
    """Measured optimizer steps."""
    max_extra_warmup: int = 5
    """Extra warm-up steps allowed when a measured step is over 3x the median of the others
    (compilation, autotuning): the run warms up longer, then measures again."""
    gc_freq: int = 0
    """N > 0: generation 1 collected every N steps, not automatically (torchtitan's ``training.gc_freq``)."""


@dataclass(kw_only=True)
class OptimConfig:
    """AdamW settings, the same for every backend."""

    lr: float = 1e-4
    """Learning rate, constant over the run (no schedule: a few steps are measured)."""
    beta1: float = 0.9
    """AdamW's first-moment decay ``beta_1``."""
    beta2: float = 0.95
    """AdamW's second-moment decay ``beta_2``."""
    eps: float = 1e-8
    """AdamW's ``eps``, added to the root of the second moment."""
    weight_decay: float = 0.1
    """AdamW's decoupled weight decay, applied to every parameter."""
    grad_clip: float = 1.0
    """Max global gradient L2 norm; 0: no clipping."""
    implementation: str = "auto"
    """Which kernel torch's AdamW steps with (``torch.optim.AdamW``'s ``fused``/``foreach`` flags):
    ``auto`` (fused on CUDA, torch's default elsewhere: the for-loop on the CPU), ``fused`` (one
    kernel over every tensor: no workspace), ``foreach`` (multi-tensor ops: an fp32 workspace of
    4 bytes per parameter the rank steps, the ``sqrt(v)`` of every tensor at once) or ``for_loop``
    (one tensor at a time: two fp32 temporaries of the largest parameter). The memory estimate adds
    that workspace at the optimizer step (:func:`flopsweep.memory.optimizer_workspace_bytes`).
    Torch's AdamW only: the DeepSpeed backends choose theirs with ``backend.optimizer_impl``
    (:func:`flopsweep.rules.optimizer_implementation`)."""
    in_backward: bool = False
    """Step the optimizer inside the backward pass (PyTorch's "fusing the optimizer step into the
    backward pass", torchtitan's ``optimizer.early_step_in_backward``): one AdamW per parameter,
    stepped by its post-accumulate-grad hook, which then frees the gradient, so that at most about
    one parameter's fp32 gradient (4 bytes per parameter of the largest) is live instead of all
    (4 bytes per parameter). Needs ``optim.grad_clip=0`` and ``batch.grad_accum=1``; ``single`` and
    ``fsdp`` only (:func:`flopsweep.rules.optimizer_in_backward`)."""
    overlap_forward: bool = False
    """Step the optimizer on a second CUDA stream, unit by unit in the order the next forward reads them
    (the parameters outside the blocks, then each block), each block's forward waiting for its own unit
    only: the memory-bound AdamW runs beside the compute-bound forward. The same AdamW, clip and results;
    ``single`` on CUDA only (:mod:`flopsweep.optim_overlap`, :func:`flopsweep.overlap_forward.check`)."""


@dataclass(kw_only=True)
class LossConfig:
    """The LM head's cross-entropy (the last part of the forward, the first of the backward)."""

    chunk_tokens: int = 0
    """0: the head makes the whole ``(tokens, vocab_size)`` logits and the loss reads them (the
    default). N > 0: a fused linear cross-entropy over chunks of N tokens
    (:func:`flopsweep.models.layers.chunked_linear_cross_entropy`, the technique of Liger Kernel's
    ``FusedLinearCrossEntropy``): each chunk's logits are made, turned into the loss and into the
    gradients of the hidden states and of the head's weight, and freed, so the full logits never
    exist (Llama 3's 128,256-token vocabulary at 3 x 2,048 tokens: about 9 GiB in fp32 and its
    gradients). The same FLOPs, no recompute; the head's weight gradient (``vocab_size x n_embd``,
    fp32) is held from the forward to the backward instead. Needs ``parallel.tp=1`` and
    ``parallel.pp=1``, and ``model`` gpt2 or llama (:func:`flopsweep.rules.chunked_loss`)."""


@dataclass(kw_only=True)
class CostConfig:
    """What a GPU-hour costs, for ``metrics.usd_per_million_tokens`` and ``metrics.budget.usd``."""

    usd_per_gpu_hour: float | None = None
    """US dollars per GPU per hour (a cloud price, or an owned GPU's cost over its life); null: none."""


@dataclass(kw_only=True)
class BudgetConfig:
    """A training budget to price at the measured rate (``metrics.budget``)."""

    tokens: float | None = None
    """Tokens to train (``15e12``, Llama 3's pre-training); null: no ``metrics.budget``."""


@dataclass(kw_only=True)
class PredictConfig:
    """The step-time prediction (``metrics.predicted``, ``plan=true``'s predicted columns):
    where its compute time comes from and, for ``plan=true``, a cluster that need not be here
    (:mod:`flopsweep.predict`). Null keys take the run's own value."""

    calibration: str | None = None
    """A ``metrics.json`` or a folder searched for them (no link followed): the ok record of the same
    model, kernel, precision, checkpointing, compile, backend and ZeRO stage at the run's world size or
    fewer calibrates the compute time (the same micro batch first, else another scaled by tokens);
    without one, the nearest measured set-up among them that is not the run's own stands for it
    (``compute_source: nearest``, docs/prediction-nearest.md). Null: the shipped records
    (``predict.measured``), else uncalibrated (FLOPs at a stated fraction of the GEMM rate)."""
    measured: bool = True
    """With ``predict.calibration`` null, predict a CUDA run (the job, ``plan=true``, the tuner) from the
    measured set-ups flopsweep ships (``flopsweep/data/measured.json``: the committed ok one- and two-H200
    records of ``benchmarks/results`` with FLOPs counts, not at the memory edge, :mod:`flopsweep.shipped`):
    a record of the same set-up on the same GPU kind calibrates it, else the nearest set-up stands for it
    (another GPU kind scaled by the datasheet peak ratio), the source saying ``(shipped records)``. A CPU
    run never is. False: the FLOPs estimate. ``python -m analysis --predict`` never reads them."""
    gpus_per_node: int | None = None
    """GPUs per node of the predicted cluster; null: ``nproc_per_node``."""
    nnodes: int | None = None
    """Nodes of the predicted cluster; null: ``nnodes``."""
    intra_node_gbps: float | None = None
    """Bus bandwidth inside a node, GB/s (nccl-tests' busbw); null: the run's probe, else calibration's."""
    inter_node_gbps: float | None = None
    """Bus bandwidth of a collective across nodes, GB/s per GPU (400 Gb/s NICs: about 45); only a
    collective whose group crosses nodes runs at it, never one inside a node. Null:
    ``intra_node_gbps`` when given, else the run's probe (of its nodes)."""
    overlap: float | None = None
    """Share (0..1) of the data-parallel communication hidden behind compute; null: calibrated
    from profiled records of the backend (``metrics.breakdown``) among the calibration files,
    else the backend's assumed default (``flopsweep.predict.DEFAULT_OVERLAP``)."""
    compute_scale: float = 1.0
    """Speed of the predicted GPU's compute relative to the calibration's (1: the same GPU)."""
    probe: bool = False
    """Time the run's pieces before warm-up (:mod:`flopsweep.compute_probe`, every rank, about 5-10 s:
    one block's forward and backward, the embedding, head and loss's, the optimizer step) and predict
    the compute from them (``metrics.predicted.compute_source: probe``, the pieces under
    ``metrics.predicted.probe``), ahead of any calibration; a probe that cannot run falls back to the
    calibration or FLOPs estimate and says why; a GPU's probes are kept per machine and set-up
    (``FLOPSWEEP_PROBE_CACHE``). False: no probe (no time spent)."""
    layer_probe: bool = False
    """Time the run's own optimizer step on two shallow copies before warm-up (:mod:`flopsweep.layer_probe`,
    every rank: the run as configured with ``L`` and ``k L`` blocks, ``L`` the smallest depth its
    layout builds, ``k`` up to 4 below ``n_layer``, stepped until its last 3 steps agree,
    ``layer_probe_settle``, else 2 untimed and 5 to 15 timed steps, until the median is steady;
    DeepSpeed's bucket, live, reuse and sub-group sizes scaled to each copy) and predict the step as
    ``t(L) + (n_layer - L) x (t(kL) - t(L)) / ((k - 1) L)`` (``metrics.predicted.compute_source: layers``,
    the times under ``metrics.predicted.layer_probe``):
    communication, overlap, optimizer, bubble and the backend's own costs measured, not modelled;
    ahead of ``predict.probe`` and any calibration. ``model=hf`` keeps its config file's first layers
    (:func:`flopsweep.layer_probe.periodic_depths`); not under a pipeline. False: none (no time spent)."""
    cpu_probe: bool = True
    """CPU, no probe, calibration, compile, DeepSpeed: the step timed first (:mod:`flopsweep.cpu_probe`)."""
    layer_probe_max_spread: float = 1.5
    """Guards the copies that did not settle early: the most such a copy's second slowest timed step may be
    over its median (of its 5 to 15 timed steps; the largest over ranks; one slow step, which the median
    leaves out, does not count; kept as ``metrics.predicted.layer_probe.spread``). Above it the host's
    load, not the model, set the times, and the layer probe falls back as one that ran out of memory
    does, naming the copy (:func:`flopsweep.layer_probe.unsteady`). It cannot fire on a copy that settled
    (``layer_probe_settle``): that copy is timed by its 3 agreeing steps, whose second slowest is their
    median, so its spread is 1 by construction (docs/probe-cost.md, "The early stop"). At least 1."""
    layer_probe_settle: float = 0.05
    """The early stop of the layer probe's copies: after the first (untimed) step, a copy stops once its
    last 3 steps agree, the slowest at most ``1 + layer_probe_settle`` times the fastest and not each
    faster than the one before, on every rank, and their median is its time
    (:func:`flopsweep.probe_schedule.settled`); a copy that does not settle runs 2 untimed and 5 timed
    steps, and more timed, up to 15, while its median is unsteady (``probe_schedule.STEADY_ERROR``). 0: no
    early stop, every copy runs that schedule. A share in [0, 1)."""


@dataclass(kw_only=True)
class SpaceConfig:
    """The set-ups that ``plan=true plan_clusters=[...]`` enumerates on each cluster and that
    ``hydra/sweeper=tune`` enumerates on this machine when a ``space.*`` key is given, every
    combination of the lists below (:mod:`flopsweep.plan_space`, which documents each default); the
    job's other keys (model, attention, compile, ``batch.global_batch_size``...) are kept."""

    backends: list[str] = field(default_factory=lambda: ["single", "ddp", "fsdp", "zero1", "zero2", "zero3"])
    """Backend options (``backend=``): ``single``, ``ddp``, ``fsdp``, ``deepspeed`` (stage 3),
    ``zero1``, ``zero2``, ``zero3``."""
    layouts: list[str] = field(default_factory=lambda: ["dp", "hsdp", "tp2", "tp4", "tp8", "pp2"])
    """``dp`` (every rank data-parallel), ``hsdp`` (FSDP2 shards in a node, replicas across nodes),
    ``tpN`` (tensor parallel N in a node, data parallel across), ``ppN`` (N pipeline stages), ``cpN``
    (each sequence over N ranks, FSDP2 over all), ``epN`` (an MoE model's experts over N FSDP2 ranks); N is
    a number (``cp02``: ``cp2``; ``tp1``: ``dp``), at most ``nnodes`` x ``nproc_per_node`` at their bounds."""
    checkpointing: list[str] = field(default_factory=lambda: ["none", "selective", "full"])
    """Activation checkpointing policies (``activation_checkpointing=``)."""
    precisions: list[str] = field(default_factory=lambda: ["bf16"])
    """Precision options (``precision=``)."""
    micro_batches: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16])
    """Micro batch sizes (``batch.micro_batch_size``)."""
    compile: list[bool] = field(default_factory=list)
    """``compile=`` settings (``[false,true]``: each set-up eager and compiled, each predicted from records
    of its own setting; ``compile_mode``/``compile_scope`` apply to the compiled ones; ``compile=`` beside
    it is refused); empty: the job's own ``compile`` alone, not in the set-ups' overrides."""
    min_headroom: float = 0.1
    """Share of memory the estimate must leave free (0..1): a set-up estimated above ``(1 - min_headroom)
    x memory`` is dropped (the tuner: of ``hydra.sweeper.memory_gib``, the GPU's, or the host's per rank;
    :data:`flopsweep.tune.MIN_HEADROOM` where not given)."""
    top: int = 5
    """Rows per cluster in the terminal table (``plan.csv`` and ``plan_format=csv|json`` have all)."""


@dataclass(kw_only=True)
class ModelSearchConfig:
    """``search.model=largest``: before measuring, find the largest model of the family that trains
    on this set-up (``search.grow=n_layer``, ``flopsweep.modelsearch``) or the longest sequence
    (``search.grow=seq_len``, ``flopsweep.seqsearch``), by probe runs in fresh workers; then
    ``batch=auto`` (if picked) finds the micro batch at that size, and the run is measured there."""

    model: str = "none"
    """``none``: measure the model as configured; ``largest``: search the largest that trains."""
    grow: str = "n_layer"
    """What grows: ``n_layer``, the blocks at the family's width (``model.n_embd``, heads, MLP), from
    ``search.min_n_layer`` to ``search.max_n_layer``; or ``seq_len``, the tokens per sequence
    (``model.seq_len``) at the model's blocks, from ``search.min_seq_len`` to ``search.max_seq_len``
    in steps that the set-up divides by (``2 cp``, ``tp cp``, the block-sparse ``attention.block_size``)."""
    min_n_layer: int = 1
    """Where the search starts (blocks); the result is at least this or nothing fits."""
    max_n_layer: int = 256
    """The search never probes more blocks than this."""
    min_seq_len: int = 1024
    """``search.grow=seq_len``: where the search starts (tokens per sequence), rounded up to the
    set-up's step; the result is at least this or nothing fits."""
    max_seq_len: int = 131072
    """``search.grow=seq_len``: the most tokens per sequence it probes (rounded down to the step)."""
    seq_len_multiple: int = 1
    """``search.grow=seq_len``: every length probed is a multiple of this too (1024: the search settles
    on a round length in fewer probes; a GPU probe of a long sequence takes minutes)."""
    memory_budget_gib: float | None = None
    """Memory per rank (GiB, 2^30 bytes) that the probes of the search and of ``batch=auto`` treat
    as the device's capacity: on CUDA a probe whose peak allocated memory exceeds it does not fit;
    on the CPU one whose estimated peak (``flopsweep.memory.estimate``) exceeds it does not (and is
    not run). null: the GPU's memory (on the CPU, the host's available memory per rank)."""


@dataclass(kw_only=True)
class FaultConfig:
    """Test-only fault injection: make one rank fail on purpose at the start of a phase (the failure
    tests check that every outcome becomes a record). ``kind`` ``none`` (the default) injects nothing."""

    kind: str = "none"
    """``none``; ``oom`` raises ``torch.OutOfMemoryError``; ``raise`` raises ``InjectedFault``
    (a RuntimeError); ``kill`` sends SIGKILL to the rank itself; ``abort`` calls ``os.abort()``
    (SIGABRT, as a C++ ``std::terminate`` does); ``hang`` blocks forever
    (the job's ``timeout_s`` stops it); ``nan_loss`` makes every loss of the phase NaN
    (the run goes on and is recorded with ``loss_finite: false``)."""
    rank: int = 0
    """Global rank that fails, ``0 <= rank < world size``; with ``fault.kind=none`` it does nothing, and a
    command line that sets it (or ``fault.phase``) without a ``fault.kind`` that injects is refused."""
    phase: str = "measure"
    """``init`` (before the process group), ``warmup`` or ``measure`` (before the first step), or
    ``teardown`` (after the rank's figures reached rank 0: a signal there leaves the run ``ok``, with
    a ``teardown_signal`` warning)."""


@dataclass(kw_only=True)
class RunConfig:
    """One sweep point: the root of the Hydra config (``conf/config.yaml``)."""

    model: ModelConfig = field(default_factory=ModelConfig)
    """The model's family and shape (``model=gpt-1.3b``: ``conf/model/``)."""
    attention: AttentionConfig = field(default_factory=AttentionConfig)
    """How attention is computed (``attention=sdpa``: ``conf/attention/``)."""
    backend: BackendConfig = field(default_factory=BackendConfig)
    """The distributed strategy (``backend=fsdp``: ``conf/backend/``)."""
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    """The mixed-precision policy (``precision=bf16``: ``conf/precision/``)."""
    batch: BatchConfig = field(default_factory=BatchConfig)
    """The per-rank batch (``batch=fixed``: ``conf/batch/``)."""
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    """The parallel layout: how the world's ranks split into degrees."""
    steps: StepsConfig = field(default_factory=StepsConfig)
    """Warm-up and measured optimizer steps."""
    optim: OptimConfig = field(default_factory=OptimConfig)
    """The AdamW optimizer."""
    loss: LossConfig = field(default_factory=LossConfig)
    """The LM head's cross-entropy."""
    nproc_per_node: str = "auto"
    """Ranks per node: an int, or ``auto`` (the GPU count, else 1). The plan holds it as an int."""
    nnodes: int = 1
    """Nodes (Slurm)."""
    device: str = "auto"
    """``auto`` (cuda when available), ``cuda`` or ``cpu``."""
    activation_checkpointing: CheckpointingConfig = field(default_factory=CheckpointingConfig)
    """Which activations are recomputed in backward (a policy of ``flopsweep.checkpointing``)."""
    compile: bool = False
    """``torch.compile`` each transformer block (``compile_scope`` says what one compile covers)."""
    compile_scope: str = "block"
    """What one ``torch.compile`` covers when ``compile=true``: ``block`` (each transformer block and
    the loss head: regional compilation, torchtitan's) or ``model`` (the whole model module, loss
    included; ``backend=single``, ``ddp``, or ``fsdp`` over ``dp_shard``). Same FLOPs; the memory
    estimate is the same (:mod:`flopsweep.compile_levers`)."""
    compile_mode: str = "default"
    """torch.compile's ``mode=`` when ``compile=true``: ``default``, ``reduce-overhead`` (CUDA graphs),
    ``max-autotune`` (autotuned GEMMs and CUDA graphs) or ``max-autotune-no-cudagraphs``. CUDA graphs:
    CUDA, ``backend=single`` or ``ddp``, ``batch.grad_accum=1``; their private memory pool is not in the
    memory estimate (:mod:`flopsweep.compile_levers`)."""
    seed: int = 0
    """Seeds the weights and the synthetic batch."""
    timeout_s: float = 1800.0
    """Seconds a job's workers may run before they are stopped (error: timeout)."""
    tag: str = ""
    """Free-form label copied into the record; at most ``MAX_TAG_CHARS`` (256) characters."""
    resume: bool = False
    """Skip a job whose directory already holds an ``ok`` metrics.json for the same config;
    move any other old record aside (``metrics.<status>-<run id>.json``) and run again."""
    fail_fast: bool = False
    """Stop the sweep after the first job that is not ``ok`` (that job is recorded first)."""
    plan: bool = False
    """Validate every job and estimate its memory, world size, parameters and FLOPs; start no
    worker and write no record (``plan.csv`` in the sweep or run directory)."""
    plan_gpu: str | None = None
    """``plan=true`` for a GPU that is not here: a device name of the peak table
    (``flopsweep.peaks``: ``H100``, ``H100-80GB``, ``H200``, ``A100-40GB``, ``MI300X``); ``fits``
    compares the estimate with its memory as the driver reports it
    (``flopsweep.memory.GPU_MEMORY_GIB``; a size in the name picks one of a device's sizes); any case
    (``h100``: ``H100`` in rows). ``plan_gpu=''`` or ``=$UNSET_VAR`` is unset, as ``null`` is."""
    plan_gpu_memory_gib: float | None = None
    """``plan=true`` for a GPU of this much memory (GiB, >= 1: no GPU has less); wins over ``plan_gpu``'s."""
    profile: bool = False
    """After the measured steps, run one more step under torch.profiler: a trace per rank in
    ``profile/`` and ``metrics.breakdown`` (compute, optimizer, exposed communication, idle)."""
    fault: FaultConfig = field(default_factory=FaultConfig)
    """Test-only fault injection; see :class:`FaultConfig`."""
    cost: CostConfig = field(default_factory=CostConfig)
    """Prices for the cost figures (a run control: it changes nothing that is measured)."""
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    """A token budget to price at the measured rate (a run control)."""
    predict: PredictConfig = field(default_factory=PredictConfig)
    """The step-time prediction: calibration and a described cluster (a run control)."""
    repeats: int = 1
    """How many times each set-up of a sweep is measured, each time in fresh workers (1..100):
    the sweep runs ``repeats`` rounds of its jobs, every set-up once per round (A B C A B C), the
    round's index in ``repeat``. Needs ``-m`` and the basic sweeper, or ``hydra/sweeper=tune``, whose
    finalists are measured this many times (3 when left at 1)."""
    repeat: int = 0
    """Which round of ``repeats`` this job is (0-based; the sweeper sets it). Part of what
    ``resume`` compares (one record per round), not of the analysis's ``setup_id``."""
    search: ModelSearchConfig = field(default_factory=ModelSearchConfig)
    """The largest-model search (``search.model=largest``); off by default."""
    plan_clusters: list[str] = field(default_factory=list)
    """``plan=true``: the clusters to rank set-ups on (:mod:`flopsweep.clusters`:
    ``GPU:NODESxGPUS_PER_NODE[:NETWORK]``, ``H100:8x8``, ``here``); each gets every set-up of
    ``space`` that fits and is not refused, ranked by ``objective``. Empty: one row per job. At most
    16 (``clusters.MAX_PLAN_CLUSTERS``: each is planned over the whole space, about a second each);
    more in several plans, ``-m 'plan_clusters=[A,B],[C,D]'``."""
    plan_format: str = "table"
    """``plan=true``'s output: ``table`` (the terminal table), ``csv`` or ``json`` (every row); any other
    value is refused (``PLAN_FORMATS``)."""
    space: SpaceConfig = field(default_factory=SpaceConfig)
    """The set-ups ``plan_clusters`` enumerates (a run control)."""
    objective: str = "model_tflops_per_device"
    """The figure a job returns to Hydra as a float (NaN when the run is not ``ok``), for a
    sweeper to optimise: a figure of merit of ``flopsweep.record.METRIC_SPECS``
    (:mod:`flopsweep.objective`), whose ``better`` gives the direction."""

    def __post_init__(self) -> None:
        # An empty plan_gpu is no GPU name: unset, as null is (a shell's plan_gpu=$GPU with GPU unset,
        # or a sweep's blank cell). Half read as set, it placed a CPU plan on GPUs of no memory.
        if self.plan_gpu is not None and not str(self.plan_gpu).strip():
            self.plan_gpu = None


SYNONYMS = {
    **dict.fromkeys(("gpu", "nvidia"), "cuda"),
    **{
        "bfloat16": "bf16",
        "float16": "fp16",
        "half": "fp16",
        "float32": "fp32",
        "float": "fp32",
        "float8": "fp8",
    },
    "zero": "deepspeed",
    **dict.fromkeys(("off", "false", "no"), "none"),
    **dict.fromkeys(("true", "on"), "full"),
}
"""Another word for an option -> the option it means, named by a did-you-mean (:func:`near_name`) where
that option is one of the choices: ``device=gpu`` -> ``cuda`` (difflib had named ``cpu``); precision
``bfloat16``, ``float16``/``half``, ``float32``, ``float8`` (torch's dtype names, ``torch.`` aside) ->
``bf16``, ``fp16``, ``fp32``, ``fp8``; backend ``zero`` -> ``deepspeed`` (DeepSpeed ZeRO, stage 3 by
default: docs/backends.md); checkpointing ``off``/``false``/``no`` -> ``none``, ``true``/``on`` -> ``full``
(``checkpointing.LEGACY_VALUES``: ``activation_checkpointing=true`` is ``full``; difflib had named
``offload`` for ``off``). A word that could mean two options is not listed."""


def synonym(name: str, names: list[str]) -> str | None:
    """The option of ``names`` that ``name`` is another word for (:data:`SYNONYMS`, without regard to case
    or a ``torch.`` prefix: ``GPU``, ``torch.bfloat16``), else None."""
    meant = SYNONYMS.get(name.strip().lower().removeprefix("torch."))
    return meant if meant in names else None

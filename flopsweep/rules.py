"""Cross-axis rules: combinations of two or more config groups that cannot run.

The validation convention (docs/architecture.md, "Validation"): a rule is a function of the typed
config that returns nothing and raises :class:`~flopsweep.config.ConfigError` naming the key,
the value and the fix. A rule about one option's own knobs lives with its registry (the
family's ``check``, the policy's ``check``, ...); a rule that needs two axes lives here, in
:data:`RULES`, which :func:`flopsweep.plan.validate` runs in order before any worker starts.
Nothing here needs the machine: rules that do (devices, GPUs, capability) are in
:func:`flopsweep.plan.resolve`. The search's rule (:func:`~flopsweep.search_rules.model_search`) and the
sequence lengths it probes stand in :mod:`flopsweep.search_rules`. Imported by :mod:`flopsweep.checks`
(``validate``), :mod:`flopsweep.plan`, :mod:`flopsweep.memory_fix` and :mod:`flopsweep.plan_command_line`.
"""

from __future__ import annotations

from collections.abc import Callable

from flopsweep import (
    compile_levers,
    context_parallel,
    expert_parallel,
    fsdp_units,
    lazy,
    overlap_forward,
    pipeline_plan,
)
from flopsweep.backend_specs import BACKEND_SPECS
from flopsweep.checkpointing import SAC_KERNELS
from flopsweep.choices import require_choice
from flopsweep.config import ConfigError, RunConfig
from flopsweep.layout import smaller_degree, stated_world_size
from flopsweep.limits import OPTIM_IMPLEMENTATIONS
from flopsweep.models import MODELS
from flopsweep.models.hf import HF_ATTENTION, TORCH_MODULE
from flopsweep.precision import PRECISIONS
from flopsweep.search_rules import model_search


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
    and a ``transformers`` model cannot call them. A family whose class has no ``sdpa`` (or
    ``flex_attention``) is refused naming it (``hf_nn.attention_problem``: BLOOM, MPT)."""
    if cfg.model.arch == "hf" and cfg.attention.name not in HF_ATTENTION:
        raise ConfigError(
            "attention",
            cfg.attention.name,
            "is not an attn_implementation of transformers models (model=hf)",
            "pick attention=sdpa, attention=standard (eager) or attention=flex (flex_attention)",
        )
    if cfg.model.arch == "hf" and cfg.attention.name != "standard" and cfg.model.config:
        from flopsweep.models.hf_files import source  # torch-free

        why = lazy.module(TORCH_MODULE).attention_problem(source(cfg.model), HF_ATTENTION[cfg.attention.name])
        if why:
            raise ConfigError(
                "attention", cfg.attention.name, why, "pick attention=standard (eager) for this family"
            )


def tensor_parallel_shapes(cfg: RunConfig) -> None:
    """``parallel.tp > 1`` needs a family with a tensor-parallel plan (``model=hf`` has none wired),
    and ``tp`` must divide every size the plan splits (the family's ``tensor_parallel_dims``: heads,
    KV heads, MLP width, vocabulary, sequence), so that each rank holds whole heads and equal
    shards; no padding is done."""
    tp = cfg.parallel.tp
    if tp == 1:
        return
    fam = MODELS[cfg.model.arch]
    if fam.parallelize is None or fam.tensor_parallel_dims is None:
        raise ConfigError(
            "parallel.tp",
            tp,
            f"model.arch={cfg.model.arch} has no tensor-parallel plan (its base_model_tp_plan is not wired)",
            "set parallel.tp=1 (FSDP or HSDP only), or pick a gpt2 or llama model",
        )
    dims = fam.tensor_parallel_dims(cfg.model)
    for key, size in dims.items():
        if size % tp:
            world = stated_world_size(cfg.nproc_per_node, cfg.nnodes)
            fix = smaller_degree("tp", cfg.parallel, world, dims.values()) or "set parallel.tp=1"
            splits = ", ".join(f"{k}={v}" for k, v in dims.items())
            raise ConfigError(
                "parallel.tp",
                tp,
                f"does not divide {key}={size} (each tensor-parallel rank takes an equal, whole share)",
                f"{fix} (it divides every size the plan splits: {splits})",
            )


def tensor_parallel_precision(cfg: RunConfig) -> None:
    """fp8 under tensor parallelism needs torchao's ``Float8ColwiseParallel`` /
    ``Float8RowwiseParallel`` styles in the plans, which are not wired: refused rather than run
    with float8 weights that the plain styles would shard in the wrong dtype."""
    if cfg.parallel.tp > 1 and PRECISIONS[cfg.precision.name].fp8_recipe is not None:
        raise ConfigError(
            "precision",
            cfg.precision.name,
            f"torchao float8 is not wired into the tensor-parallel plans (parallel.tp={cfg.parallel.tp})",
            "set precision=bf16, or parallel.tp=1 for float8 with FSDP/HSDP",
        )


def selective_attention(cfg: RunConfig) -> None:
    """``activation_checkpointing=selective`` saves the output of SDPA's attention ops
    (``checkpointing.SAC_SAVED_ATTENTION``): only the kernels that run one of them
    (:data:`~flopsweep.checkpointing.SAC_KERNELS`) have their recompute counted in the hardware FLOPs;
    the others' attention would be recomputed uncounted. ``model=hf`` counts its FLOPs with eager
    attention on the meta device, which selective would recompute, so it is refused too."""
    if cfg.activation_checkpointing.name != "selective":
        return
    if cfg.model.arch == "hf":
        raise ConfigError(
            "activation_checkpointing",
            "selective",
            "is not counted for model=hf (its FLOPs are counted with eager attention, which selective "
            "would recompute)",
            "pick activation_checkpointing=full or every_n for model=hf",
        )
    if cfg.attention.name not in SAC_KERNELS:
        raise ConfigError(
            "activation_checkpointing",
            "selective",
            f"saves SDPA's attention output, and attention={cfg.attention.name} runs no SDPA op (its "
            "attention would be recomputed uncounted)",
            f"pick attention={' or '.join(SAC_KERNELS)}, or another activation_checkpointing",
        )


def every_n_within_the_layers(cfg: RunConfig) -> None:
    """``activation_checkpointing=every_n`` with ``every`` above ``model.n_layer`` checkpoints no block
    (:func:`flopsweep.checkpointing.checkpointed_blocks`): the run would be ``none`` recorded as
    ``every_n``. A model search probes every size from ``search.min_n_layer`` up, and may settle on
    any of them, so there ``every`` is held to the smallest (a search settling below ``every`` would
    record ``none`` as ``every_n``). ``model=hf``'s ``n_layer`` is its config.json's, read by the
    model's check before this rule (0: not read yet, not checked)."""
    ac = cfg.activation_checkpointing
    every = getattr(ac, "every", None)
    if ac.name != "every_n" or not isinstance(every, int):
        return
    if cfg.search.model == "largest":
        key, most = "search.min_n_layer", cfg.search.min_n_layer
        fix = f"set search.min_n_layer={every} or more" + (
            f", or activation_checkpointing.every between 1 and {most}" if most > 1 else ""
        )
    else:
        key, most = "model.n_layer", cfg.model.n_layer
        fix = f"set activation_checkpointing.every between 1 and {most}, or pick another policy"
    if 0 < most < every:
        what = "a size the search may settle on" if key.startswith("search") else "the model"
        raise ConfigError(
            "activation_checkpointing.every",
            every,
            f"is more than {key}={most}, so no block of {what} would be checkpointed",
            fix,
        )


def memory_budget_compiled(cfg: RunConfig) -> None:
    """``activation_checkpointing=memory_budget`` is a setting of the compiler's partitioner
    (``torch._functorch.config.activation_memory_budget``): without ``compile=true`` nothing reads it."""
    if cfg.activation_checkpointing.name == "memory_budget" and not cfg.compile:
        raise ConfigError(
            "activation_checkpointing",
            "memory_budget",
            "is the compiler's partitioner setting and compile=false runs no compiler",
            "set compile=true, or pick activation_checkpointing="
            + ("every_n or full" if cfg.model.arch == "hf" else "selective, every_n or full"),
        )


def offload_eager(cfg: RunConfig) -> None:
    """``activation_checkpointing=offload`` wraps each block's forward in ``save_on_cpu``'s saved-tensor
    hooks (torch's ``offload_wrapper``), which ``torch.compile`` of the block does not trace: eager only."""
    if cfg.activation_checkpointing.name == "offload" and cfg.compile:
        raise ConfigError(
            "activation_checkpointing",
            "offload",
            "copies saved activations to the host through autograd's saved-tensor hooks, which a compiled "
            "block does not run",
            "set compile=false, or pick activation_checkpointing=full or memory_budget",
        )


def casts_autocast_copies(cfg: RunConfig) -> None:
    """``activation_checkpointing=casts`` recomputes autocast's low-precision copies of fp32 weights: it
    needs a backend that keeps fp32 weights under autocast (``single``, ``ddp``; FSDP2 gathers its weights
    in ``param_dtype`` and DeepSpeed holds bf16 weights, so neither has copies) and a precision that
    casts through autocast (not ``fp32``; not ``fp8``/``fp8-rowwise``, whose float8 Linears cast the
    blocks' weights themselves)."""
    if cfg.activation_checkpointing.name != "casts":
        return
    if not BACKEND_SPECS[cfg.backend.name].autocast_fp32_weights:
        raise ConfigError(
            "activation_checkpointing",
            "casts",
            f"recomputes autocast's bf16 copies of fp32 weights, and backend={cfg.backend.name} keeps none "
            "(its weights are already in the compute dtype)",
            "set activation_checkpointing=none (the same activations), or backend=single or ddp",
        )
    if cfg.precision.name == "fp32":
        raise ConfigError(
            "activation_checkpointing",
            "casts",
            "recomputes autocast's low-precision weight copies, and precision=fp32 casts nothing",
            "set activation_checkpointing=none, or precision=bf16",
        )
    if PRECISIONS[cfg.precision.name].fp8_recipe is not None:
        raise ConfigError(
            "activation_checkpointing",
            "casts",
            f"recomputes autocast's bf16 weight copies, and under precision={cfg.precision.name} torchao's "
            "float8 Linears cast the blocks' weights themselves (autocast keeps no copy of them)",
            "set activation_checkpointing=none (the same activations), or precision=bf16",
        )


IN_BACKWARD_BACKENDS = ("single", "fsdp")
"""Backends whose optimizer step ``optim.in_backward`` can move into backward: ``single`` (autograd
fires each parameter's post-accumulate-grad hook) and ``fsdp`` (FSDP2's ``foreach_reduce`` fires the
hooks of each sharded parameter after its reduce-scatter, ``torch/distributed/fsdp/_fully_shard/
_fsdp_collectives.py``). DDP's buckets all-reduce after the hooks, and DeepSpeed's engine owns its
step."""


def planned_gpu_on_the_cpu(cfg: RunConfig) -> None:
    """``plan_gpu`` (or ``plan_gpu_memory_gib``) plans for GPUs, and ``device=cpu`` places the ranks
    on the host: together they made a half-GPU, half-CPU plan (the GPU's memory and datasheet, the
    CPU's estimate and refusals: a trial). ``device=auto`` (the default) or ``cuda`` plans as on the
    GPUs named. A run (``plan=false``) reads neither key and only warns
    (:func:`flopsweep.job.warn_plan_gpu`)."""
    for key in ("plan_gpu", "plan_gpu_memory_gib"):
        if (value := getattr(cfg, key)) is not None and cfg.device == "cpu" and cfg.plan:
            raise ConfigError(
                key,
                value,
                "plans for GPUs, and device=cpu places the ranks on this machine's CPU",
                f"drop device=cpu (device=auto, the default, plans as on the GPUs named), or drop {key} "
                "to plan for the CPU",
            )


def optimizer_in_backward(cfg: RunConfig) -> None:
    """``optim.in_backward`` steps each parameter as soon as its gradient is accumulated, so it needs
    no step that sees every gradient at once: no global-norm clip (``optim.grad_clip=0``), no
    ``GradScaler`` (fp16), one micro batch per step (also after ``batch.global_batch_size`` sets
    ``grad_accum``: :func:`flopsweep.plan.resolve` runs this rule again), no pipeline (torchtitan
    refuses it too), and a backend of :data:`IN_BACKWARD_BACKENDS` on the layouts tested (FSDP2 over
    ``dp_shard``; tensor parallelism, HSDP and CPU offload are untested and refused)."""
    o = cfg.optim
    if not o.in_backward:
        return
    fix = "or set optim.in_backward=false"
    if o.grad_clip > 0:
        raise ConfigError(
            "optim.grad_clip",
            o.grad_clip,
            "a global-norm clip needs every gradient at once, and optim.in_backward=true frees each "
            "gradient as soon as its parameter is stepped",
            f"set optim.grad_clip=0, {fix}",
        )
    if cfg.backend.name not in IN_BACKWARD_BACKENDS:
        raise ConfigError(
            "optim.in_backward",
            True,
            f"backend={cfg.backend.name} steps the optimizer itself after backward (DDP's buckets "
            "all-reduce after the gradient hooks; DeepSpeed's engine owns the step)",
            f"pick backend={' or backend='.join(IN_BACKWARD_BACKENDS)}, {fix}",
        )
    if cfg.precision.name == "fp16":
        raise ConfigError(
            "optim.in_backward",
            True,
            "precision=fp16's GradScaler unscales and checks every gradient for inf before one step",
            f"pick precision=bf16 or fp32, {fix}",
        )
    _in_backward_layout(cfg)


def optimizer_implementation(cfg: RunConfig) -> None:
    """``optim.implementation`` is one of :data:`flopsweep.limits.OPTIM_IMPLEMENTATIONS`, and other than
    ``auto`` only where torch's AdamW steps: the DeepSpeed backends step DeepSpeed's own optimizer,
    chosen by ``backend.optimizer_impl`` (fused Adam, or torch's AdamW with ``torch``)."""
    value = cfg.optim.implementation
    require_choice("optim.implementation", value, OPTIM_IMPLEMENTATIONS, "optim.implementation")
    spec = BACKEND_SPECS.get(cfg.backend.name)
    if value != "auto" and spec is not None and not spec.torch_adamw:
        raise ConfigError(
            "optim.implementation",
            value,
            f"backend={cfg.backend.name} steps DeepSpeed's optimizer, not torch's AdamW",
            "drop optim.implementation (auto), and choose DeepSpeed's with backend.optimizer_impl=fused or "
            "backend.optimizer_impl=torch",
        )


def layer_probe(cfg: RunConfig) -> None:
    """``predict.layer_probe`` builds the run at other depths; ``model=hf``'s copies keep the file's
    first layers (:mod:`flopsweep.layer_probe`), which a pipeline's stages would not split as the
    full model's."""
    if cfg.predict.layer_probe and cfg.model.arch == "hf" and cfg.parallel.pp > 1:
        raise ConfigError(
            "predict.layer_probe",
            True,
            f"model=hf's shallow copies keep its first layers, which parallel.pp={cfg.parallel.pp} "
            "stages would not split as the whole model's",
            "use predict.probe=true (its blocks timed one of each kind), or parallel.pp=1",
        )


def _in_backward_layout(cfg: RunConfig) -> None:
    """The batch and layout part of :func:`optimizer_in_backward`."""
    fix = "or set optim.in_backward=false"
    accum = cfg.batch.grad_accum
    if accum > 1:
        source = f" (from batch.global_batch_size={cfg.batch.global_batch_size})" * (
            cfg.batch.global_batch_size is not None
        )
        raise ConfigError(
            "batch.grad_accum",
            accum,
            f"optim.in_backward=true steps the optimizer in every micro batch's backward{source}, so it "
            "cannot accumulate gradients",
            f"set batch.grad_accum=1 (a larger batch.micro_batch_size, or a global batch of one micro "
            f"batch per data-parallel rank), {fix}",
        )
    p = cfg.parallel
    untested = {
        "parallel.pp": (p.pp, "the pipeline schedule runs one backward per pipeline micro batch"),
        "parallel.tp": (p.tp, "tensor parallelism is untested with it"),
        "parallel.cp": (p.cp, "context parallelism is untested with it"),
        "parallel.dp_replicate": (p.dp_replicate, "HSDP is untested with it"),
    }
    for key, (value, why) in untested.items():
        if value > 1:
            raise ConfigError(
                key, value, f"optim.in_backward=true is refused here: {why}", f"set {key}=1, {fix}"
            )
    if getattr(cfg.backend, "cpu_offload", False):
        raise ConfigError(
            "backend.cpu_offload",
            True,
            "optim.in_backward=true is untested with FSDP2's CPUOffloadPolicy",
            f"set backend.cpu_offload=false, {fix}",
        )


LOSS_PHASES = ("warmup", "measure")
"""The phases that run training steps: the only ones where ``fault.kind=nan_loss`` has a loss."""


def nan_loss_phase(cfg: RunConfig) -> None:
    """``fault.kind=nan_loss`` makes the losses of its phase NaN: ``init`` and ``teardown`` run no
    step, so the fault would do nothing and the run would look clean."""
    if cfg.fault.kind == "nan_loss" and cfg.fault.phase not in LOSS_PHASES:
        raise ConfigError(
            "fault.phase",
            cfg.fault.phase,
            "has no loss to make NaN (fault.kind=nan_loss acts on the steps' losses)",
            "set fault.phase=warmup or fault.phase=measure",
        )


CHUNKED_LOSS_FAMILIES = ("gpt2", "llama")
"""Families whose head :func:`flopsweep.models.layers.chunked_linear_cross_entropy` can fuse: those
built from :class:`flopsweep.models.layers.CausalLM` (``hf`` computes its loss inside ``transformers``)."""


def chunked_loss(cfg: RunConfig) -> None:
    """``loss.chunk_tokens > 0`` fuses the LM head with its loss over chunks of tokens
    (:class:`flopsweep.config.LossConfig`). It needs the whole head weight on the rank and the loss
    computed where the head is: no tensor parallelism (its head is vocabulary-sharded, its loss
    ``loss_parallel``'s), no pipeline (the schedule's ``loss_fn`` takes the last stage's logits), and a
    family built from flopsweep's own decoder parts (:data:`CHUNKED_LOSS_FAMILIES`)."""
    n = cfg.loss.chunk_tokens
    if n == 0:
        return
    fix = "or set loss.chunk_tokens=0 (the whole logits)"
    if n < 0:
        raise ConfigError("loss.chunk_tokens", n, "is negative", "set a chunk of tokens, e.g. 4096, " + fix)
    if cfg.model.arch not in CHUNKED_LOSS_FAMILIES:
        raise ConfigError(
            "loss.chunk_tokens",
            n,
            f"model={cfg.model.arch} computes its loss inside its own forward, from the whole logits",
            "pick a model of the gpt2 or llama family (model=gpt-tiny, llama-tiny, llama3.1-8b, ...), " + fix,
        )
    for degree, why in (
        ("tp", "the head is split over the vocabulary and its loss is loss_parallel's"),
        ("pp", "the pipeline schedule computes the loss from the last stage's logits"),
    ):
        if (value := getattr(cfg.parallel, degree)) > 1:
            raise ConfigError(
                "loss.chunk_tokens",
                n,
                f"needs the whole LM head on a rank, and parallel.{degree}={value}: {why}",
                f"set parallel.{degree}=1, {fix}",
            )


RULES: list[Callable[[RunConfig], None]] = [
    planned_gpu_on_the_cpu,
    fp8_all_gather,
    warmup_when_compiling,
    compile_levers.check,  # compile_scope, compile_mode with compile, the backend, the device
    fsdp_units.check,  # backend.end_units with an untied llama, no chunked loss, pipeline or tp
    hf_attention,
    tensor_parallel_shapes,
    tensor_parallel_precision,
    selective_attention,
    every_n_within_the_layers,
    memory_budget_compiled,
    pipeline_plan.check,  # parallel.pp with the backend, the model's layers, the batch keys
    context_parallel.check,  # parallel.cp with the family, the kernel, the pipeline, heads and sequence
    expert_parallel.check,  # parallel.ep with an MoE model, its experts, no tp/pp/HSDP beside it
    model_search,
    offload_eager,
    casts_autocast_copies,
    optimizer_in_backward,
    overlap_forward.check,  # optim.overlap_forward: single on CUDA, no in_backward, fp16 or CUDA graphs
    optimizer_implementation,
    layer_probe,
    chunked_loss,
    nan_loss_phase,
]
"""Every cross-axis rule, in the order :func:`check` runs them (the first broken one is reported)."""


def check(cfg: RunConfig) -> None:
    """Run every rule of :data:`RULES` on ``cfg``.

    Raises:
        ConfigError: from the first rule that ``cfg`` breaks.
    """
    for rule in RULES:
        rule(cfg)

"""One torch-free spec per ``backend=`` option: what the estimators, validation and the rank know of it.

A :class:`BackendSpec` owns its option's schema name and schema class, what the checks that depend
on the backend alone read (ranks, devices, precisions, a package:
:func:`flopsweep.backend_checks.check_support`), the degrees it builds (as the degree table of
:mod:`flopsweep.layout` names it), the import path of its torch code (``flopsweep.backends:build_fsdp``,
imported only on the rank), and its terms for the two estimators:

- **memory** (:mod:`flopsweep.memory` asks the spec, never the name): over which layout degree its
  model states are sharded (:attr:`BackendSpec.state_degree`: none for ``single``/``ddp``,
  ``dp_shard`` for FSDP2, ``dp`` for ZeRO), the bytes per parameter of its weights, AdamW moments
  and gradients (:data:`STATE_BYTES`, :data:`GRADIENT_BYTES`), DDP's gradient buckets, whether
  autocast runs over fp32 weights (its bf16 weight copies and an fp32 residual stream), what it
  holds unsharded (FSDP2's gathered groups and reduce-scatter buffers), the lowest block's
  backward, ``optim.in_backward``'s live gradients, and where offload puts the states
  (:class:`Offload`, host bytes per parameter, the measured host share :attr:`BackendSpec.host_held`).
  ZeRO's states come from DeepSpeed's estimators (:func:`flopsweep.zero_memory.deepspeed_states`,
  imported by its :meth:`~DeepSpeedSpec.model_states` when called).
- **communication per step** (:mod:`flopsweep.predict`): the data-parallel collectives of one
  optimizer step (:meth:`BackendSpec.collectives`: what it all-gathers, reduce-scatters and
  all-reduces, the bytes per call and the calls), over which group (:meth:`BackendSpec.dp_group`),
  the share hidden behind compute without a profile (:attr:`BackendSpec.default_overlap`), whether
  the optimizer's work is split over ``dp_shard``, and the optimizer family of its records.

The memory methods read their counts from ``t``, the rank's terms that :mod:`flopsweep.memory`
computes on first use (``t.held``: the rank's parameters ``P_r``; ``t.block``, ``t.root``: one
block's and the root group's parameters over ``tp``; ``t.head``: the output head's ``V h / tp``;
``t.compute``: bytes of the compute dtype; ``t.activations``: the lowest block's kept activations;
``t.accumulated``: fp32 gradients kept between micro batches; ``t.autocast_copies``; ``t.largest``:
the largest parameter; ``t.rest``: the parameters outside the blocks; ``t.layout``; ``t.offload``).
The communication methods read a :class:`flopsweep.predict.Workload` ``w``. Neither module is
imported here, so the specs import nothing of flopsweep but the option schemas and the layout.

Adding a backend: a spec here (a subclass where its terms differ) and an entry in
:data:`BACKEND_SPECS`, its torch code under the import path it names, its schema in
:mod:`flopsweep.options` and its ``conf/backend/<name>.yaml`` (docs/extending.md, "How to add").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flopsweep import fsdp_units, lazy
from flopsweep.config import BackendConfig
from flopsweep.deepspeed_config import whole_deepspeed_sizes
from flopsweep.layout import DEGREES, LAYOUT_BACKENDS
from flopsweep.options import DeepSpeedConfig, FSDPConfig

STATE_BYTES = 12
"""Bytes per parameter of the fp32 weights and AdamW's two fp32 moments."""
GRADIENT_BYTES = 4
"""Bytes per parameter of an fp32 gradient (also FSDP2's fp32 ``reduce_dtype`` and DDP's all-reduce)."""
FSDP_INFLIGHT_BLOCKS = 2
"""All-gathered blocks FSDP2 holds at once: the one computing and the one prefetched."""
REDUCE_BYTES = 4
"""Bytes per gradient element that FSDP2 reduce-scatters: ``MixedPrecisionPolicy(reduce_dtype=
torch.float32)`` (:func:`flopsweep.backends.shard_data_parallel`)."""


def knob(backend: Any, key: str, default: Any = None) -> Any:
    """A backend knob of a config (``cfg.backend``, attribute) or a record (``config.backend``, dict)."""
    return backend.get(key, default) if isinstance(backend, dict) else getattr(backend, key, default)


@dataclass(frozen=True, kw_only=True)
class Offload:
    """Where a backend's knobs put the model states (all False: every state on the GPU)."""

    states: bool = False
    """Every sharded state (fp32 weights, gradients, AdamW moments) lives on the host (FSDP2's
    ``CPUOffloadPolicy``, ``backend.cpu_offload``)."""
    optimizer: bool = False
    """The optimizer's states step off the GPU (ZeRO-Offload, ``backend.offload_optimizer`` cpu or nvme)."""
    param: bool = False
    """The 16-bit parameter partitions live off the GPU (``backend.offload_param`` cpu or nvme)."""
    host_bytes_per_param: int = 0
    """Bytes per parameter in host memory, over the spec's :attr:`BackendSpec.state_degree` (``nvme``: 0)."""

    @property
    def steps_on_host(self) -> bool:
        """The optimizer step runs off the GPU, so no GPU optimizer rate describes it."""
        return self.states or self.optimizer


@dataclass(frozen=True, kw_only=True)
class Collective:
    """One data-parallel collective of an optimizer step, per rank (:class:`flopsweep.predict.Transfer`)."""

    what: str
    collective: str
    """``all_gather``, ``reduce_scatter`` or ``all_reduce``."""
    bytes: float
    """The full buffer of one call: gathered output, scattered input."""
    count: int
    across_replicas: bool = False
    """Over ``dp_replicate`` (HSDP's all-reduce of shards), not the spec's :meth:`BackendSpec.dp_group`."""


@dataclass(frozen=True, kw_only=True)
class BackendSpec:
    """One ``backend=`` option: the replicated case (``single``); subclasses override their terms."""

    name: str
    """``backend.name``, the registry key."""
    schema: type[BackendConfig] = BackendConfig
    """The option's schema (:data:`flopsweep.options.OPTION_SCHEMAS`)."""
    torch: str
    """``module:function`` of its torch code, ``(cfg, device, layout) -> Trainer``, imported on the
    rank (nothing here imports it; ``tests/unit/test_backend_specs.py`` checks that it exists)."""
    max_ranks: int | None = None
    """The most ranks (world size) it runs on; None for any."""
    devices: tuple[str, ...] = ("cuda", "cpu")
    package: str | None = None
    """A package it imports, checked before launch."""
    precisions: tuple[str, ...] | None = None
    """Run precisions it supports (None: all)."""
    state_degree: str | None = None
    """The :class:`flopsweep.layout.Layout` degree its model states are sharded over (``dp``, or
    ``state_shards``: FSDP2's shard degrees, :data:`flopsweep.degrees.STATE_SHARD_DEGREES`); None:
    every rank holds every state."""
    autocast_fp32_weights: bool = True
    """It runs ``torch.autocast`` over fp32 weights: autocast caches bf16 weight copies, and the
    residual stream's kept norm inputs are fp32 (FSDP2 and DeepSpeed compute in the compute dtype)."""
    gradient_buckets: int = 0
    """Bytes per parameter of gradient buckets beside ``.grad`` (DDP's ``4 P``)."""
    default_overlap: float = 0.0
    """Share of the data-parallel communication hidden behind compute when no profiled record of
    the backend calibrates it (:func:`flopsweep.predict.predict`, ``overlap_source: assumed``)."""
    torch_adamw: bool = True
    """Its optimizer step is torch's AdamW (:func:`flopsweep.trainers.build_adamw`), so
    ``optim.implementation`` chooses its kernel; False for DeepSpeed's own optimizers
    (``backend.optimizer_impl``)."""
    host_held: float = 1.0
    """How much more host memory an offloading run held than :meth:`host_bytes` counts (measured;
    :func:`flopsweep.memory.offload_host_held_bytes`, a warning only)."""
    describe: str = "runs one rank"
    """What it is, for a refusal of a degree it does not build."""

    # -- validation ---------------------------------------------------------------------------
    def option_check(self, backend: Any) -> Any:
        """The option's own rules on ``backend`` (its config section); returns it, possibly normalised.

        Raises:
            ConfigError: naming the key, the value and the fix.
        """
        return backend

    def build(self) -> Any:
        """Its torch builder ``(cfg, device, layout) -> Trainer``, imported now (:attr:`torch`)."""
        return lazy.resolve(self.torch)

    @property
    def degrees(self) -> tuple[str, ...]:
        """The layout degrees it builds above 1, in :data:`flopsweep.layout.DEGREES` order: ``dp_shard``
        (the data-parallel ranks) for a backend of more than one rank, and the degrees whose row of
        the degree table names it (:data:`flopsweep.layout.LAYOUT_BACKENDS`, which owns them)."""
        return tuple(
            d
            for d in DEGREES
            if (d == "dp_shard" and self.max_ranks != 1) or self.name in LAYOUT_BACKENDS.get(d, ())
        )

    def calibration_group(self, backend: Any) -> str:
        """The name that overlap and bandwidth calibrations group its records by (``deepspeed-3``)."""
        return self.name

    # -- memory -------------------------------------------------------------------------------
    def offload(self, backend: Any) -> Offload:
        """Where ``backend``'s knobs put its states (:class:`Offload`)."""
        return Offload()

    def shards(self, layout: Any) -> int:
        """Ranks its model states are split over on ``layout`` (1: replicated)."""
        return getattr(layout, self.state_degree) if self.state_degree else 1

    def model_states(self, t: Any) -> tuple[int, int, str]:
        """``(at the start of backward, at the optimizer step, method)`` in bytes: ``12 P_r`` fp32
        weights and AdamW moments, the last micro batch's gradients with ``grad_accum`` > 1, autocast's
        bf16 copies (``casts``: the head's only) and DDP's buckets; at the step every gradient, ``16 P_r``."""
        held = t.held
        buckets = self.gradient_buckets * held
        copies = t.autocast_copies if self.autocast_fp32_weights else 0
        parts = ["12 P weights and AdamW moments", "4 P gradients at the step"]
        casts = t.cfg.activation_checkpointing.name == "casts"  # the blocks' copies recomputed
        copy = "2 V h autocast copy of the head (casts)" if casts else "2 P autocast copies"
        parts += [copy] * bool(copies) + ["4 P DDP buckets"] * bool(buckets)
        start = STATE_BYTES * held + t.accumulated + copies + buckets
        return start, (STATE_BYTES + GRADIENT_BYTES) * held + buckets, " + ".join(parts)

    def gathered_bytes(self, t: Any) -> int:
        """Unsharded weights held at the start of backward beyond the model states (0: none)."""
        return 0

    def reduce_bytes(self, t: Any) -> int:
        """Gradient reduction buffers at the end of backward, on top of the step's states (0: none)."""
        return 0

    def lowest_block_bytes(self, t: Any) -> int:
        """The lowest block's backward on top of the step's states: its activations and its gradients
        in the compute dtype, less its fp32 gradients not made yet (``c B - 4 B``)."""
        return max(0, t.activations + t.compute * t.block - GRADIENT_BYTES * t.block)

    def top_block_gradient_bytes(self, t: Any) -> int:
        """The top block's gradients made while backward runs through it, beyond the states at the start
        of backward (:func:`flopsweep.activation_memory.block_backward_bytes`): its fp32 ``.grad``,
        ``4 B`` (autocast casts each weight's gradient to the fp32 weight's dtype as it is accumulated);
        0 with ``grad_accum`` > 1 (the states count every gradient)."""
        return 0 if t.accumulated else GRADIENT_BYTES * t.block

    def head_gradient_bytes(self, t: Any) -> int:
        """The output head's gradient, from the loss's backward to the end of backward: its fp32 ``.grad``,
        ``4 V C / tp``, as :meth:`top_block_gradient_bytes` counts a block's (0 with ``grad_accum`` > 1)."""
        return 0 if t.accumulated else GRADIENT_BYTES * t.head

    def splits_compiled_blocks(self, backend: Any) -> bool:
        """Whether a compiled block's graph breaks at every submodule's call, so that its compiled regions
        are the pieces between them and each keeps its own inputs for backward (the family's
        ``residual_split_compiled``, ``other_split_compiled``); False: the block is one graph."""
        return False

    def in_backward_gradients(self, t: Any) -> tuple[int, int, str]:
        """``(every, live, what)``: fp32 gradient bytes at the step, and the most ``optim.in_backward``
        keeps live at once: the largest parameter's gradient."""
        return 4 * t.held, 4 * t.largest, "4 x largest parameter gradient"

    def floor_bytes(self, n_params: int, layout: Any) -> int:
        """A lower bound of fp32 weights, gradients and AdamW moments: ``16 P``, or ``16 P / (dp_shard
        x tp)`` for a sharding backend (:func:`flopsweep.memory.model_states_floor`)."""
        if self.state_degree is None:
            return 16 * n_params
        return 16 * n_params // (layout.dp_shard * layout.tp)

    def host_bytes(self, backend: Any, n_params: int, layout: Any) -> int:
        """One rank's bytes that offload puts in host memory (0 without offload), a lower bound."""
        per_param = self.offload(backend).host_bytes_per_param
        return per_param * n_params // self.shards(layout) if per_param else 0

    # -- communication ------------------------------------------------------------------------
    def dp_group(self, w: Any) -> int:
        """Ranks of its data-parallel collectives (``dp``)."""
        return w.dp

    def collectives(self, w: Any, *, p: float, b: int, micro: int) -> list[Collective]:
        """The data-parallel collectives of one optimizer step with ``p`` parameters per rank, ``b``
        bytes per communicated parameter and ``micro`` gathers per step (none for one rank)."""
        return []

    def optimizer_shards(self, w: Any) -> int:
        """Ranks that split the optimizer's work (its states): the state shards (``dp_shard x cp``)
        when it shards them, else 1."""
        return w.state_shards if self.state_degree else 1

    def optimizer_family(self, backend: Any) -> str | None:
        """Which optimizer its step runs (:func:`flopsweep.predict.optimizer_family`); None on the host."""
        return None if self.offload(backend).steps_on_host else "torch"


@dataclass(frozen=True, kw_only=True)
class DDPSpec(BackendSpec):
    """DDP: replicas, ``4 P`` gradient buckets, the fp32 gradients all-reduced over ``dp``."""

    def collectives(self, w: Any, *, p: float, b: int, micro: int) -> list[Collective]:
        return [
            Collective(
                what="ddp gradient all-reduce (fp32)",
                collective="all_reduce",
                bytes=GRADIENT_BYTES * p,
                count=1,
            )
        ]


@dataclass(frozen=True, kw_only=True)
class FSDPSpec(BackendSpec):
    """FSDP2 ``fully_shard`` per block, then the root: states over its shard degrees
    (``layout.state_shards``: ``dp_shard x cp``, ``W`` below), HSDP replicas."""

    def offload(self, backend: Any) -> Offload:
        on = bool(knob(backend, "cpu_offload", False))
        return Offload(states=on, host_bytes_per_param=16 if on else 0)

    def model_states(self, t: Any) -> tuple[int, int, str]:
        """``(12 P + 4 P) / dp_shard``, the root's group and :data:`FSDP_INFLIGHT_BLOCKS` blocks
        all-gathered; with ``grad_accum`` > 1 unsharded fp32 gradients (``FSDPParam.
        to_accumulated_grad_if_needed``: not over ``dp_shard``); with ``cpu_offload`` the states on
        the host."""
        shard, gathered = t.layout.state_shards, self.gathered_bytes(t)
        ends = fsdp_units.enabled(t.cfg)
        root = "the head's unit (backend.end_units)" if ends else "the root's group"
        if t.offload.states:
            return (
                gathered + t.accumulated,
                0,
                f"FSDP2 CPUOffloadPolicy: states on the host; {root}"
                f"{'' if ends else ' (embedding, head, final norm)'} "
                f"and {FSDP_INFLIGHT_BLOCKS} blocks all-gathered in the compute dtype",
            )
        return (
            STATE_BYTES * t.held // shard + t.accumulated + gathered,
            (STATE_BYTES + GRADIENT_BYTES) * t.held // shard,
            "(12 P + 4 P gradients) / dp_shard (FSDP2 shards weights, gradients, AdamW moments), "
            f"plus {root} and {FSDP_INFLIGHT_BLOCKS} blocks all-gathered, "
            "and the fp32 reduce-scatter buffers",
        )

    def gathered_bytes(self, t: Any) -> int:
        """The root's group (not resharded after forward) and :data:`FSDP_INFLIGHT_BLOCKS` blocks,
        in the compute dtype: ``c (R + 2 B)`` (:func:`flopsweep.memory.fsdp_gathered_bytes`); with
        ``backend.end_units`` the embedding's unit resharded after forward (with
        ``reshard_after_forward``): ``c (R - E + 2 B)`` (:mod:`flopsweep.fsdp_units`)."""
        freed = 0
        if fsdp_units.enabled(t.cfg) and knob(t.cfg.backend, "reshard_after_forward", True):
            freed = fsdp_units.end_groups(t.cfg, t.root)[0]
        return t.compute * (t.root - freed + FSDP_INFLIGHT_BLOCKS * t.block)

    def reduce_bytes(self, t: Any) -> int:
        """The larger of the root's and a block's reduce-scatter moment, less the output shard that
        the step's states count (none with ``cpu_offload``) (:func:`flopsweep.memory.fsdp_reduce_bytes`).
        With ``backend.end_units`` the groups reduced at the end are the embedding's unit and what
        stays in the root (the head's was reduced early in backward: ``head_reduce``)."""
        block, compute, w = t.block, t.compute, t.layout.state_shards
        counted = 0 if t.offload.states else 1  # the output shard is a model state (step_states)
        groups = [t.root]
        if fsdp_units.enabled(t.cfg):
            embedding, _, rest = fsdp_units.end_groups(t.cfg, t.root)
            groups = [embedding, rest]
        block_moment = (3 * compute + REDUCE_BYTES) * block
        moments = [fsdp_units.reduce_moment(g, compute, w) - counted * REDUCE_BYTES * g / w for g in groups]
        return int(max(*moments, block_moment - counted * REDUCE_BYTES * block / w))

    def lowest_block_bytes(self, t: Any) -> int:
        """Its gathered weights and compute-dtype gradients ``2 c B``, the block above's fp32
        reduce-scatter input ``4 B``, the root's weights and the head's gradient ``c (R + V h)``, less
        its own and the root's gradient shards not made yet ``4 (B + R) / W`` (none with ``cpu_offload``).
        With ``backend.end_units`` the head's unit was reduced and resharded early in backward: the
        embedding's weights (prefetched) and the root's rest ``c (E + rest)``, less
        ``4 (B + E + rest) / W``."""
        block, root, compute = t.block, t.root, t.compute
        ends, late = root + t.head, root
        if fsdp_units.enabled(t.cfg):
            embedding, _, rest = fsdp_units.end_groups(t.cfg, t.root)
            ends = late = embedding + rest
        unsharded = 2 * compute * block + REDUCE_BYTES * block + compute * ends
        own = 0 if t.offload.states else REDUCE_BYTES * (block + late) // t.layout.state_shards
        return max(0, t.activations + unsharded - own)

    def top_block_gradient_bytes(self, t: Any) -> int:
        """The top block's unsharded gradients in the compute dtype, ``c B``, until its post-backward
        reduce-scatters them (``foreach_reduce``)."""
        return t.compute * t.block

    def head_gradient_bytes(self, t: Any) -> int:
        """The head's unsharded gradient in the compute dtype, ``c V C / tp``, until its unit's
        post-backward reduce-scatters it (the root's, at the end of backward, unless
        ``backend.end_units``; :func:`flopsweep.fsdp_units.head_reduce_bytes` counts that moment)."""
        return t.compute * t.head

    def in_backward_gradients(self, t: Any) -> tuple[int, int, str]:
        """One FSDP2 unit's sharded gradients, ``4 max(block, rest) / dp_shard``."""
        unit = "4 x largest FSDP2 unit (a block, or the root's embedding and head) / dp_shard"
        shard, largest = t.layout.state_shards, t.rest
        if fsdp_units.enabled(
            t.cfg
        ):  # backend.end_units: the head's unit (norm and output) is the larger end
            largest = max(fsdp_units.end_groups(t.cfg, t.rest)[:2])
            unit = "4 x largest FSDP2 unit (a block, the embedding, or the final norm and head) / dp_shard"
        return 4 * t.held // shard, 4 * max(t.model_block, largest) // shard, unit

    def dp_group(self, w: Any) -> int:
        """Its shard group, ``dp_shard x cp`` (``w.state_shards``; under HSDP the replicas are the
        separate all-reduce's)."""
        return w.state_shards

    def collectives(self, w: Any, *, p: float, b: int, micro: int) -> list[Collective]:
        """``b P`` all-gathered per micro batch in forward and (``reshard_after_forward``) backward,
        ``4 P`` reduce-scattered; under HSDP the ``4 P / dp_shard`` shard all-reduced over replicas."""
        passes = 2 if w.reshard_after_forward else 1
        out = []
        if self.dp_group(w) > 1:
            out = [
                Collective(
                    what="fsdp parameter all-gather (forward, backward)",
                    collective="all_gather",
                    bytes=b * p,
                    count=passes * micro,
                ),
                Collective(
                    what="fsdp gradient reduce-scatter (fp32)",
                    collective="reduce_scatter",
                    bytes=GRADIENT_BYTES * p,
                    count=1,
                ),
            ]
        if w.replicas > 1:
            out.append(
                Collective(
                    what="hsdp gradient shard all-reduce across replicas (fp32)",
                    collective="all_reduce",
                    bytes=GRADIENT_BYTES * p / w.state_shards,
                    count=1,
                    across_replicas=True,
                )
            )
        return out


@dataclass(frozen=True, kw_only=True)
class DeepSpeedSpec(BackendSpec):
    """DeepSpeed ZeRO (stage ``backend.zero_stage``): data parallel only, states over ``dp``."""

    def option_check(self, backend: Any) -> Any:
        """DeepSpeed's sizes as whole numbers (:func:`flopsweep.deepspeed_config.whole_deepspeed_sizes`)."""
        return whole_deepspeed_sizes(backend)

    def calibration_group(self, backend: Any) -> str:
        stage = knob(backend, "zero_stage")
        return f"{self.name}-{stage}" if stage is not None else self.name

    def offload(self, backend: Any) -> Offload:
        """``offload_optimizer=cpu``: fp32 master weights, gradients and moments ``16 P / W`` on the
        host; ``offload_param=cpu``: the 16-bit weights ``2 P / W``; ``nvme``: on the drive."""
        opt, param = knob(backend, "offload_optimizer", "none"), knob(backend, "offload_param", "none")
        per_param = (16 if opt == "cpu" else 0) + (2 if param == "cpu" else 0)
        return Offload(
            optimizer=opt not in (None, "none"),
            param=param not in (None, "none"),
            host_bytes_per_param=per_param,
        )

    def model_states(self, t: Any) -> tuple[int, int, str]:
        """DeepSpeed's own estimators, ZeRO-3's buffers and the optimizer step read from DeepSpeed's code
        (:func:`flopsweep.zero_memory.deepspeed_states`, which imports DeepSpeed)."""
        from flopsweep.zero_memory import deepspeed_states

        return deepspeed_states(t.cfg, t.layout, t.offload)

    def splits_compiled_blocks(self, backend: Any) -> bool:
        """ZeRO-3: DeepSpeed 0.19.8 hooks every submodule's forward with ``@torch.compiler.disable``
        (``parameter_offload.py``, ``_register_deepspeed_module``), which breaks a compiled block's graph."""
        return knob(backend, "zero_stage") == 3

    def lowest_block_bytes(self, t: Any) -> int:
        """0: DeepSpeed's estimators count ZeRO's own buffers."""
        return 0

    def top_block_gradient_bytes(self, t: Any) -> int:
        """0: ZeRO copies each gradient into its reduce bucket, which its own terms count."""
        return 0

    head_gradient_bytes = top_block_gradient_bytes  # the head's gradient goes to a bucket as well

    def collectives(self, w: Any, *, p: float, b: int, micro: int) -> list[Collective]:
        """ZeRO-3: ``b P`` all-gathered forward and backward per micro batch and ``b P`` gradients
        reduce-scattered; ZeRO-1/2: ``b P`` gradients reduce-scattered and ``b P`` updated
        parameters all-gathered, once per step."""
        if (w.zero_stage or 3) >= 3:
            return [
                Collective(
                    what="zero-3 parameter all-gather (forward, backward)",
                    collective="all_gather",
                    bytes=b * p,
                    count=2 * micro,
                ),
                Collective(
                    what="zero-3 gradient reduce-scatter", collective="reduce_scatter", bytes=b * p, count=1
                ),
            ]
        return [
            Collective(
                what=f"zero-{w.zero_stage} gradient reduce-scatter",
                collective="reduce_scatter",
                bytes=b * p,
                count=1,
            ),
            Collective(
                what=f"zero-{w.zero_stage} updated parameter all-gather",
                collective="all_gather",
                bytes=b * p,
                count=1,
            ),
        ]

    def optimizer_family(self, backend: Any) -> str | None:
        """``deepspeed-fused`` or ``deepspeed-torch`` (``backend.optimizer_impl``; a record before the
        key ran the fused one); None when it steps on the host."""
        if self.offload(backend).steps_on_host:
            return None
        return f"deepspeed-{knob(backend, 'optimizer_impl') or 'fused'}"


BACKEND_SPECS: dict[str, BackendSpec] = {
    "single": BackendSpec(name="single", torch="flopsweep.backends:build_single", max_ranks=1),
    "ddp": DDPSpec(
        name="ddp",
        torch="flopsweep.backends:build_ddp",
        gradient_buckets=4,
        default_overlap=0.8,
        describe="is replicate-only data parallelism",
    ),
    "fsdp": FSDPSpec(
        name="fsdp",
        schema=FSDPConfig,
        torch="flopsweep.backends:build_fsdp",
        state_degree="state_shards",
        autocast_fp32_weights=False,
        default_overlap=0.8,
        host_held=1.10,
        describe="shards over the device mesh",
    ),
    "deepspeed": DeepSpeedSpec(
        name="deepspeed",
        schema=DeepSpeedConfig,
        torch="flopsweep.backends:build_deepspeed",
        package="deepspeed",
        precisions=("bf16", "fp16", "fp32"),
        state_degree="dp",
        autocast_fp32_weights=False,
        default_overlap=0.5,
        torch_adamw=False,
        host_held=1.25,
        describe="stays data-parallel (ZeRO)",
    ),
}
"""Every ``backend=`` option's spec by ``backend.name``. Default overlaps: DDP buckets and FSDP2's
prefetching hide most of the communication; DeepSpeed ZeRO's hooks less (our ZeRO-3 profiles show
host-bound gaps). Host shares (:attr:`BackendSpec.host_held`): the H200 host's offload runs
(docs/memory.md, "The memory estimate")."""


def backend_spec(name: str | None) -> BackendSpec | None:
    """The spec of ``backend.name`` (a record's may be any text); None for a name no spec has."""
    return BACKEND_SPECS.get(str(name))

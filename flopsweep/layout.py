"""The parallel layout of a run: how its ranks split into data, tensor, pipeline, context and expert parallel.

A :class:`Layout` names the degree of each kind of parallelism, as torchtitan's ``ParallelDims``
(``torchtitan/distributed/parallel_dims.py``) does: ``dp_replicate`` (replicas that all-reduce
gradients, as DDP), ``dp_shard`` (ranks that shard parameters, as FSDP/ZeRO), ``cp`` (context),
``tp`` (tensor), ``pp`` (pipeline) and ``ep`` (expert). The product of the mesh degrees
(:data:`MESH_ORDER`: all but ``ep``) is the world size; ``ep`` borrows ranks from
``dp_shard x cp x tp`` for the experts of an MoE layer (torchtitan's ``efsdp x ep``, expert tensor
parallel 1), so it is no factor of its own. It is built once, from the ``parallel.*`` keys
(:class:`flopsweep.config.ParallelConfig`) and the world size, by :func:`flopsweep.plan.resolve`,
which keeps it in the :class:`~flopsweep.plan.Plan`; the plan carries it to every rank, and the
record writes it as ``system.parallel``.

:data:`DEGREE_SPECS` (:mod:`flopsweep.degrees`, re-exported here) is the one table of the
degrees: their names (:data:`DEGREES`, the ``parallel.<name>`` and ``system.parallel`` keys), what
each is called in a message, the backends that build it above 1, whether it is built yet, its
place in the mesh, and the paths of its applier, step-time term and micro-batch hook. Everything
that lists the degrees (the checks here, the mesh, ``parallelize``, the trainers, the step-time
model, the record, the columns) derives from it.

Everything that needs "how many data-parallel ranks" (tokens per step, the DeepSpeed
``train_batch_size``, the memory estimate, ``batch.global_batch_size``) or "which batch does this
rank see" (the batch seed) asks the layout, never the world size.

The rank order is torchtitan's mesh order ``(pp, dp_replicate, dp_shard, cp, tp)``, row-major:
``tp`` varies fastest. Data parallelism (FSDP2, HSDP, DDP, ZeRO), tensor parallelism, the
pipeline and context parallelism (with FSDP2) are built; :func:`check_built` refuses the rest
(``ep``) before launch.

This module imports nothing from flopsweep but the config schema and the degree table, and no torch.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

from flopsweep.config import BatchConfig, ConfigError, ParallelConfig, RunConfig
from flopsweep.degrees import (  # noqa: F401 - the degree table, re-exported
    BUILT,
    COLUMN_DEGREES,
    DATA_DEGREES,
    DEGREE,
    DEGREE_SPECS,
    DEGREES,
    HSDP_BACKENDS,
    LAYOUT_BACKENDS,
    MESH_DEGREES,
    MESH_ORDER,
    PHASES,
    REPLICA_DEGREES,
    SAME_BATCH_DEGREES,
    SHAPE_VARYING_DEGREES,
    STATE_SHARD_DEGREES,
    WEIGHT_SPLIT_DEGREES,
    DegreeSpec,
    mesh_order,
    product,
    span,
)
from flopsweep.limits import MAX_BY_KEY
from flopsweep.text import plural

PP_SCHEDULES = ("1F1B", "Interleaved1F1B", "GPipe")
"""``parallel.pp_schedule`` values: ``torch.distributed.pipelining`` schedule names, less ``Schedule``."""


@dataclass(frozen=True, kw_only=True)
class Layout:
    """The degree of each kind of parallelism of one run; each >= 1, product = world size.

    Build it with :meth:`resolve` (from the config) or :meth:`data_parallel` (pure data
    parallel over a world size, e.g. for an old record that has no ``system.parallel``).
    """

    dp_replicate: int = 1
    """Data-parallel replicas (gradients all-reduced across them)."""
    dp_shard: int = 1
    """Data-parallel ranks that shard parameters, gradients and optimizer states (FSDP, ZeRO);
    for DDP, the data-parallel ranks."""
    tp: int = 1
    """Tensor-parallel degree (``backend=fsdp``; :mod:`flopsweep.tensor_parallel`)."""
    pp: int = 1
    """Pipeline-parallel ranks (:mod:`flopsweep.pipeline`), each holding ``pp_stages_per_rank`` stages."""
    cp: int = 1
    """Context-parallel degree (``backend=fsdp``; :mod:`flopsweep.context_parallel`): ranks that split
    one batch's sequence; FSDP2 shards the model states over ``dp_shard x cp``."""
    ep: int = 1
    """Expert-parallel degree (reserved: not built yet): the ranks of ``dp_shard x cp x tp`` that
    split an MoE layer's experts among them; not a factor of the world size."""

    def __post_init__(self) -> None:
        for name in DEGREES:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(
                    f"parallel.{name}", value, "must be a positive integer", f"set parallel.{name}=1"
                )

    @classmethod
    def data_parallel(cls, world_size: int) -> Layout:
        """Every rank a data-parallel rank: ``dp_shard = world_size``, every other degree 1."""
        return cls(dp_shard=world_size)

    @classmethod
    def resolve(cls, parallel: ParallelConfig, world_size: int) -> Layout:
        """The layout of ``parallel`` on ``world_size`` ranks; ``dp_shard=-1`` takes the ranks
        that the other mesh degrees leave (``world_size // (dp_replicate x tp x pp x cp)``).

        Raises:
            ConfigError: a degree below 1 (other than ``dp_shard=-1``), mesh degrees whose product
                is not the world size, or an ``ep`` that does not divide ``dp_shard x cp x tp``; the
                message names the key, the value and the fix.
        """
        for name in DEGREES:
            value = getattr(parallel, name)
            if name != "dp_shard" and value < 1:
                raise ConfigError(
                    f"parallel.{name}", value, "must be a positive integer", f"set parallel.{name}=1"
                )
        others = {name: getattr(parallel, name) for name in MESH_DEGREES if name != "dp_shard"}
        rest = math.prod(others.values())
        shard = parallel.dp_shard
        if shard == -1:
            if world_size % rest:
                raise ConfigError(
                    "parallel",
                    _shown(others),
                    f"the product of these degrees, {rest}, does not divide the world size {world_size} "
                    "(nproc_per_node x nnodes)",
                    f"{_fix_for_world(parallel, world_size)}, or change nproc_per_node",
                )
            shard = world_size // rest
        elif shard < 1:
            raise ConfigError(
                "parallel.dp_shard",
                shard,
                "must be a positive integer, or -1 for the ranks the other degrees leave",
                "set parallel.dp_shard=-1",
            )
        if rest * shard != world_size:
            raise ConfigError(
                "parallel",
                _shown({**others, "dp_shard": shard}),
                f"the product of the degrees is {rest * shard}, not the world size {world_size} "
                "(nproc_per_node x nnodes)",
                _fix_for_world(parallel, world_size),
            )
        mesh = {**others, "dp_shard": shard}
        for spec in DEGREE_SPECS:
            if spec.borrows and product(mesh, spec.borrows) % getattr(parallel, spec.name):
                raise ConfigError(
                    f"parallel.{spec.name}",
                    getattr(parallel, spec.name),
                    f"does not divide the {' x '.join(spec.borrows)} = {product(mesh, spec.borrows)} ranks "
                    f"that {spec.what} splits",
                    f"set parallel.{spec.name} to a divisor of them, or 1",
                )
        borrowing = {s.name: getattr(parallel, s.name) for s in DEGREE_SPECS if not s.mesh}
        return cls(**mesh, **borrowing)

    @property
    def world_size(self) -> int:
        """Ranks in the run: the product of the mesh degrees (:data:`MESH_ORDER`; ``ep`` borrows)."""
        return math.prod(getattr(self, name) for name in MESH_DEGREES)

    @property
    def dp(self) -> int:
        """The data-parallel degree ``dp_replicate x dp_shard`` (:data:`DATA_DEGREES`): how many
        different batches one optimizer step sees."""
        return product(self, DATA_DEGREES)

    @property
    def non_data_parallel_size(self) -> int:
        """Ranks that see the same batch: ``cp x tp x pp`` (:data:`SAME_BATCH_DEGREES`; torchtitan's name)."""
        return product(self, SAME_BATCH_DEGREES)

    @property
    def state_shards(self) -> int:
        """Ranks FSDP2 shards the model states over: ``dp_shard x cp`` (:data:`STATE_SHARD_DEGREES`)."""
        return product(self, STATE_SHARD_DEGREES)

    def coordinates(self, rank: int) -> dict[str, int]:
        """The index of global ``rank`` along each mesh dimension (:data:`MESH_ORDER`, row-major).

        Raises:
            ValueError: when ``rank`` is not in ``[0, world_size)``.
        """
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank {rank} is not in [0, {self.world_size})")
        coords: dict[str, int] = {}
        for name in reversed(MESH_ORDER):
            rank, coords[name] = divmod(rank, getattr(self, name))
        return coords

    def dp_rank(self, rank: int) -> int:
        """The data-parallel rank of global ``rank``, in ``[0, dp)``: which batch it sees. Ranks
        with the same data-parallel rank (its tensor, pipeline and context peers) see the same
        batch."""
        c = self.coordinates(rank)
        index = 0
        for name in (n for n in MESH_ORDER if n in DATA_DEGREES):  # row-major over the data degrees
            index = index * getattr(self, name) + c[name]
        return index

    def global_batch(self, micro_batch_size: int, grad_accum: int) -> int:
        """Sequences per optimizer step: ``micro_batch_size x grad_accum x dp``."""
        return micro_batch_size * grad_accum * self.dp

    def for_backend(self, backend: str) -> Layout:
        """The layout as ``backend`` runs it: DDP is replicate-only data parallelism, recorded as
        ``dp_replicate = dp, dp_shard = 1`` (torchtitan's convention); the others as resolved."""
        if backend == "ddp":
            return dataclasses.replace(self, dp_replicate=self.dp, dp_shard=1)
        return self

    def as_dict(self) -> dict[str, int]:
        """The integer degrees, for ``system.parallel``."""
        return asdict(self)

    def label(self, pp_schedule: str | None = None) -> str:
        """A compact name of the layout for tables, plan rows and plot legends: the degrees above 1
        in mesh order (:data:`MESH_ORDER`), the data-parallel pair as ``replicate x shard`` (HSDP)
        and the pipeline with its schedule, then ``cp``, ``tp`` and ``ep``. ``dp8`` (FSDP or ZeRO
        over 8 ranks), ``dp8x1`` (DDP over 8 ranks, recorded as 8 replicas of unsharded weights,
        :meth:`for_backend`; an FSDP2 run with ``parallel.dp_replicate=8`` alike), ``dp2x4`` (HSDP: 2
        replicas of 4-way shards), ``dp4 tp2``, ``tp8``, ``pp2/1F1B dp4``; ``dp1`` for one rank. The
        backend column says which data-parallel method the ``dp`` part is (``--baseline`` compares
        DDP's ``dpNx1`` with FSDP2's ``dpN``: :func:`flopsweep.identity.compared_layout`)."""
        parts = [f"pp{self.pp}" + (f"/{pp_schedule}" if pp_schedule else "")] if self.pp > 1 else []
        if self.dp_replicate > 1:
            parts.append(f"dp{self.dp_replicate}x{self.dp_shard}")
        elif self.dp_shard > 1 or self.world_size == 1:
            parts.append(f"dp{self.dp_shard}")
        parts += [f"{name}{getattr(self, name)}" for name in ("cp", "tp", "ep") if getattr(self, name) > 1]
        return " ".join(parts)


@dataclass(frozen=True)
class Plan:
    """A validated config placed on this machine (made by :func:`flopsweep.plan.resolve`; it lives
    here, beside its layout, so that the launchers can name it without importing validation).

    The job keeps it from validation to the record: the launchers take it, every rank gets its
    ``layout`` (:class:`flopsweep.worker.RankSpec`), and the record writes ``layout`` as
    ``system.parallel``. Nothing after :func:`flopsweep.plan.resolve` parses ``cfg.nproc_per_node`` again.

    Attributes:
        cfg: the config with ``device`` resolved, ``nproc_per_node`` as an integer string,
            ``batch.grad_accum`` set from ``batch.global_batch_size`` when that is given,
            and each option's derived values (attention density, DeepSpeed sizes) filled in.
        device: ``cuda`` or ``cpu``.
        nproc_per_node: ranks per node, settled once.
        nnodes: nodes.
        layout: the parallel degrees; their product is ``nproc_per_node * nnodes``.
        device_given: ``device`` as the config gave it (``auto``, ``cuda`` or ``cpu``): a fix says ``drop
            device=cpu`` only where it was given (:func:`flopsweep.clusters.set_plan_gpu`).
    """

    cfg: RunConfig
    device: str
    nproc_per_node: int
    nnodes: int
    layout: Layout
    device_given: str = "auto"

    @property
    def world_size(self) -> int:
        """``nproc_per_node * nnodes``, the product of the layout's degrees."""
        return self.nproc_per_node * self.nnodes


def stated_world_size(nproc_per_node: str, nnodes: int) -> int | None:
    """The world size the config states (``nproc_per_node x nnodes``); None while ``nproc_per_node``
    is ``auto`` (the machine decides, :func:`flopsweep.plan.resolve`)."""
    return int(nproc_per_node) * nnodes if str(nproc_per_node).isdigit() else None


def divisors(n: int) -> list[int]:
    """The positive divisors of ``n >= 1``, ascending, by trial division up to ``sqrt(n)`` (46,341
    steps for ``2**31 - 1``, the largest value a degree may take); ``[]`` for ``n < 1``."""
    low = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0] if n >= 1 else []
    return low + [n // d for d in reversed(low) if d * d != n]


def smaller_degree(
    name: str, parallel: ParallelConfig, world_size: int | None, sizes: Iterable[int] = (), *, least: int = 1
) -> str | None:
    """The fix ``set parallel.NAME=D`` for a refused degree: the largest ``D`` below the value that
    divides every one of ``sizes`` (the model sizes the degree splits) and whose layout resolves on
    ``world_size`` (:meth:`Layout.resolve`, with ``parallel.dp_shard=-1``, which the fix then sets
    too when ``dp_shard`` was fixed); any ``D`` when the world is not known yet. A suggestion is
    thus one that validation accepts. ``D`` is at least ``least``. None when no ``D`` does.

    Such a ``D`` divides the greatest common divisor of ``sizes`` and of the ranks the other mesh
    degrees leave, so only that number's divisors are tried (:func:`divisors`): a degree near
    ``2**31`` is answered at once, not by a walk down to 1."""
    value = getattr(parallel, name)
    free = dataclasses.replace(parallel, dp_shard=-1)
    common = 0  # gcd(0, x) = x: no constraint yet
    for size in sizes:
        common = math.gcd(common, size)
    if world_size is not None:
        others = math.prod(getattr(free, n) for n in MESH_DEGREES if n not in (name, "dp_shard"))
        if others < 1 or world_size % others:
            return None  # no D: the other degrees alone do not divide the world
        common = math.gcd(common, world_size // others)
    if not common:  # no size and no world to divide: any D, so the next smaller one
        return f"set parallel.{name}={value - 1}" if value - 1 >= least else None
    for d in reversed([d for d in divisors(common) if least <= d < value]):
        if world_size is not None:
            try:
                Layout.resolve(dataclasses.replace(free, **{name: d}), world_size)
            except ConfigError:
                continue
        shard = " and parallel.dp_shard=-1" if parallel.dp_shard != -1 and world_size is not None else ""
        return f"set parallel.{name}={d}{shard}"
    return None


def _fix_for_world(parallel: ParallelConfig, world_size: int) -> str:
    """A fix for degrees whose product is not ``world_size``: ``dp_shard=-1`` when the other degrees
    divide the world, else one degree made smaller (a divisor of its value, so the model still
    splits evenly), else every degree 1."""
    rest = math.prod(getattr(parallel, n) for n in MESH_DEGREES if n != "dp_shard")
    if parallel.dp_shard != -1 and world_size % rest == 0:
        return f"set parallel.dp_shard=-1 (the rest of the world: {world_size // rest})"
    keys = pipeline_keys(parallel)
    for name in ("tp", "pp", "dp_replicate", "cp"):
        value = getattr(parallel, name)
        least = 2 if name == "pp" and keys else 1  # pp=1 would refuse the pipeline keys set
        fix = smaller_degree(name, parallel, world_size, [value], least=least) if value > 1 else None
        if fix:
            return fix
    keys_out = f", leaving {' and '.join(keys)} out" if keys else ""
    return f"set the degrees to 1 with parallel.dp_shard=-1 (all {world_size} ranks data-parallel){keys_out}"


def pipeline_keys(parallel: ParallelConfig) -> list[str]:
    """The pipeline keys set (``parallel.pp_schedule`` other than 1F1B, ``pp_microbatches``,
    ``pp_stages_per_rank``), which ``parallel.pp=1`` refuses (:func:`flopsweep.pipeline.check`)."""
    given = {
        "pp_schedule": parallel.pp_schedule != "1F1B",
        "pp_microbatches": parallel.pp_microbatches is not None,
        "pp_stages_per_rank": parallel.pp_stages_per_rank is not None,
    }
    return [f"parallel.{key}" for key, value in given.items() if value]


def _shown(degrees: dict[str, int]) -> str:
    return " ".join(f"parallel.{k}={v}" for k, v in degrees.items() if v != 1) or "all 1"


def check_built(
    parallel: ParallelConfig,
    backend: str,
    degree_fix: Callable[[str, int, str], str | None] | None = None,
) -> None:
    """Refuse, before launch, a ``parallel.*`` setting that is not built yet, and check the
    values the config alone decides.

    ``dp_replicate`` (HSDP), ``tp``, ``pp``, ``cp`` and ``ep`` above 1 run on ``backend=fsdp`` only
    (:data:`LAYOUT_BACKENDS`); a degree above :data:`BUILT`'s is refused. With ``degree_fix``
    (``(name, value, backend) -> line``; :func:`flopsweep.checks.validate` passes
    :func:`flopsweep.key_needs.degree_line` over the job's config as a command line gives it, with
    what the degree splits of the model) the fix of a degree on another backend is the whole line
    that runs (the backend, the ranks it splits and a degree that divides what it splits); without
    it, the backend alone.

    Raises:
        ConfigError: naming the key, the value and the fix.
    """
    if parallel.pp_schedule not in PP_SCHEDULES:
        raise ConfigError(
            "parallel.pp_schedule",
            parallel.pp_schedule,
            f"must be one of {', '.join(PP_SCHEDULES)}",
            "set parallel.pp_schedule=1F1B",
        )
    if parallel.pp_microbatches is not None and parallel.pp_microbatches < 1:
        raise ConfigError(
            "parallel.pp_microbatches",
            parallel.pp_microbatches,
            "must be a positive integer or null",
            "set parallel.pp_microbatches=null",
        )
    if parallel.dp_shard != -1 and parallel.dp_shard < 1:
        raise ConfigError(
            "parallel.dp_shard",
            parallel.dp_shard,
            "must be a positive integer, or -1 for the ranks the other degrees leave",
            "set parallel.dp_shard=-1",
        )
    for spec in DEGREE_SPECS:
        name, what = spec.name, spec.what
        if spec.backends is None:  # dp_shard: its own rules above
            continue
        value = getattr(parallel, name)
        if value < 1:
            raise ConfigError(
                f"parallel.{name}", value, "must be a positive integer", f"set parallel.{name}=1"
            )
        if value > BUILT.get(name, value):
            raise ConfigError(f"parallel.{name}", value, f"{what} is not built yet", f"set parallel.{name}=1")
        if value > 1 and backend not in spec.backends:
            kind = {"single": "runs one rank", "ddp": "is replicate-only data parallelism"}.get(
                backend, "stays data-parallel (ZeRO)"
            )
            raise ConfigError(
                f"parallel.{name}",
                value,
                f"{what} runs on backend={'/'.join(spec.backends)}, and backend={backend} {kind}",
                f"set parallel.{name}=1" + _degree_fix(name, value, backend, degree_fix),
            )


def _degree_fix(
    name: str, value: int, backend: str, degree_fix: Callable[[str, int, str], str | None] | None
) -> str:
    """``, or LINE``: the line that runs degree ``name`` (``degree_fix``'s), the backend alone where the
    command line is not known; "" where no degree above 1 splits the model."""
    if degree_fix is None:
        return ", or backend=fsdp"
    line = degree_fix(name, value, backend)
    return f", or {line}" if line else ""


def tp_across_nodes(layout: Layout, nproc_per_node: int) -> str | None:
    """A one-line warning when the tensor-parallel groups span nodes (``parallel.tp`` above the
    ranks per node, or not dividing them): legal, but every block's all-gathers and
    reduce-scatters then cross the slower inter-node network. None when they stay inside a node."""
    if layout.tp == 1 or (layout.tp <= nproc_per_node and nproc_per_node % layout.tp == 0):
        return None
    return (
        f"parallel.tp={layout.tp} spans nodes of {plural(nproc_per_node, 'rank')}: tensor-parallel "
        "collectives cross the inter-node network every block (slow); pick parallel.tp that divides "
        "nproc_per_node to keep them inside a node"
    )


def grad_accum_for(batch: BatchConfig, layout: Layout) -> int:
    """``batch.grad_accum`` as ``batch.global_batch_size`` sets it:
    ``global_batch_size / (micro_batch_size x dp)``; ``batch.grad_accum`` itself when
    ``global_batch_size`` is null.

    ``batch.grad_accum`` left at its default 1 is replaced; any other value must agree. The result
    stays within ``batch.grad_accum``'s own bound (:data:`flopsweep.limits.MAX_BY_KEY`): a global batch
    of 2**31 sequences would otherwise run 536,870,912 micro batches per step until ``timeout_s``.

    Raises:
        ConfigError: when the global batch does not divide by ``micro_batch_size x dp``, needs more
            micro batches per step than ``batch.grad_accum`` may take, or an explicit
            ``batch.grad_accum`` other than 1 gives another global batch; the fix names a global
            batch that passes.
    """
    total = batch.global_batch_size
    if total is None:
        return batch.grad_accum
    per_step = batch.micro_batch_size * layout.dp
    most = int(MAX_BY_KEY["batch.grad_accum"])
    shown = (
        f"batch.micro_batch_size x data-parallel ranks = {batch.micro_batch_size} x {layout.dp} = {per_step}"
    )
    if total < 1 or total % per_step:
        raise ConfigError(
            "batch.global_batch_size",
            total,
            f"is not a positive multiple of {shown}",
            _global_batch_fix(batch, per_step, most),
        )
    accum = total // per_step
    if accum > most:
        raise ConfigError(
            "batch.global_batch_size",
            total,
            f"needs batch.grad_accum={accum} micro batches per step ({shown}), beyond that key's bound "
            f"of {most}",
            f"set batch.global_batch_size to at most {per_step * most} (a multiple of {per_step}), or "
            "raise batch.micro_batch_size",
        )
    if batch.grad_accum not in (1, accum):
        raise ConfigError(
            "batch.grad_accum",
            batch.grad_accum,
            f"contradicts batch.global_batch_size={total}, which needs grad_accum={accum} "
            f"(micro batch {batch.micro_batch_size} x {layout.dp} data-parallel ranks)",
            f"drop one of the two overrides (batch.global_batch_size sets batch.grad_accum), or set "
            f"batch.global_batch_size={per_step * batch.grad_accum} for batch.grad_accum={batch.grad_accum}",
        )
    return accum


def _global_batch_fix(batch: BatchConfig, per_step: int, most: int) -> str:
    """The fix for a global batch that ``per_step`` (micro batch x data-parallel ranks) does not
    divide: the one global batch an explicit ``batch.grad_accum`` allows, else the multiples of
    ``per_step`` on either side of the value asked for, at least one micro batch per rank and at
    most ``most`` of them, each an override to type (``e.g. batch.global_batch_size=4 or
    batch.global_batch_size=8``; it had said ``e.g. 4 or 8``, docs/reliability-10.md #602)."""
    if batch.grad_accum != 1 and batch.grad_accum <= most:
        return (
            f"set batch.global_batch_size={per_step * batch.grad_accum} (batch.grad_accum="
            f"{batch.grad_accum} x {per_step}), or drop batch.grad_accum and set a multiple of {per_step}"
        )
    below = min(max(1, batch.global_batch_size // per_step), most)
    near = sorted({below, min(below + 1, most)})
    shown = " or ".join(f"batch.global_batch_size={per_step * k}" for k in near)  # overrides, not numbers
    return f"set batch.global_batch_size to a multiple of {per_step}, e.g. {shown}"

"""The fix of a set-up over its GPU's memory, for its own config: only the levers it has not pulled yet,
each tried on the memory estimate (:func:`flopsweep.memory.estimate`) and named as the overrides that
run it, with the estimate that says it fits.

The levers, each only where the config leaves it unpulled (:func:`levers`), in the order tried, the
cheapest in step time first:

- **the loss over chunks**: ``loss.chunk_tokens=4096`` (:data:`LOSS_CHUNK_TOKENS`) where the fp32 logits a
  micro batch holds at once (the whole, or one chunk above 4096 tokens) take at least
  :data:`LOSS_LOGITS_BYTES` (Llama 3.1 8B at 65,536 tokens: 31 GiB of logits, 94 GiB with their gradients
  and copies) and the rules allow it (:func:`refused`: :func:`flopsweep.rules.chunked_loss`, no TP or PP):
  the same FLOPs, the same batch, no recompute;
- **micro batch**: ``batch.micro_batch_size`` halved, down to 1 (not at micro batch 1);
- **context parallel**: ``parallel.cp=N`` on FSDP2 only, ``N`` doubled up to the ranks of a node that it
  divides, while a rank keeps :data:`CP_MIN_TOKENS` of the sequence, each step the rules accept
  (:func:`refused`: :func:`flopsweep.context_parallel.check`, the kernel's support, ``2 cp`` equal chunks).
  Before checkpointing: it splits every activation (and the logits) over ``N`` ranks for four all-to-alls
  of each attention within the node and recomputes nothing, where ``full`` recomputes a whole forward
  (a third more FLOPs);
- **activation checkpointing**: ``activation_checkpointing=casts`` from ``none`` where autocast keeps bf16
  copies of fp32 weights (:func:`flopsweep.rules.casts_autocast_copies`: no matmul recomputed), then
  ``activation_checkpointing=full`` (not where it is ``full``);
- **sharding over more GPUs**: ``backend=fsdp`` from ``ddp`` on its own ranks, then ``backend=fsdp
  nproc_per_node=N`` from ``single`` or ``ddp``,
  ``backend.zero_stage=3`` from ZeRO-1 or -2, ``nproc_per_node=N`` where the states are sharded already
  (FSDP2, ZeRO-3), ``N`` doubled up to :data:`MAX_RANKS_PER_NODE` on each of ``nnodes`` (on a cluster of
  ``plan_clusters``, its GPUs per node: ``gpus``).

Each lever alone is walked from its mildest step and stops at the first the estimate fits; where no
lever alone fits, their combinations are tried (:func:`_combined`: each lever walked with the others at
their strongest, then each other lever left out where it still fits); where none of those fits, what is
left is said (more nodes, estimated; ``backend.cpu_offload=true``; a smaller model). On a cluster
(``gpus``: its nodes and GPUs per node) no fix names more GPUs than it has: where none fits within them,
the fix says so and names a cluster of more GPUs. The one-config fix (the plan's row, the launch's and an
``oom``'s lines) names set-ups that leave :data:`flopsweep.memory_edge.EDGE_HEADROOM` of the memory free
(``margin``), else, said at the memory edge, those that fit it; ``plan_clusters`` passes ``(1 -
space.min_headroom)`` of the GPU, its own margin. At most :data:`MAX_ESTIMATES` estimates per margin (each
a pure function of the config, a few milliseconds; DeepSpeed's imports torch once). ``oom_note`` holds the
lines that carry it; this module needs the config.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

MAX_RANKS_PER_NODE = 8
"""The most ranks per node a fix proposes (an 8-GPU node)."""

MAX_ESTIMATES = 64
"""The most memory estimates one fix makes."""

MAX_NAMED = 3
"""The most fitting set-ups one fix names."""

LOSS_CHUNK_TOKENS = 4096
"""The chunk of tokens the fix proposes for the fused head and loss (``loss.chunk_tokens``)."""

CP_MIN_TOKENS = 8192
"""The fewest tokens of a sequence a context-parallel rank keeps (``model.seq_len / parallel.cp``) in a
step the fix proposes: below, the activations that context parallel splits are a small share of the
memory and its all-to-alls' latency a large one of the step (Llama 3.1 8B at 65,536 tokens: up to
``parallel.cp=8``; at 8,192: none)."""

LOSS_LOGITS_BYTES = 2**30
"""The fp32 logits of one micro batch (``micro_batch_size x seq_len / cp x vocab_size x 4`` bytes) from
which the fix proposes the chunked loss: below, the whole logits are a small share of the memory."""

Step = tuple[str, Callable[[Any], Any]]
"""One step of a lever: its overrides (``batch.micro_batch_size=2``) and the config change that makes it."""


def _loss_steps(cfg: Any) -> list[Step]:
    loss = getattr(cfg, "loss", None)
    if loss is None:
        return []
    cp = max(1, getattr(cfg.parallel, "cp", 1))
    tokens = cfg.batch.micro_batch_size * cfg.model.seq_len // cp  # the logits' tokens of a micro batch
    if not chunk_lowers(tokens, loss.chunk_tokens, cfg.model.vocab_size):
        return []

    def change(c: Any) -> Any:
        return dataclasses.replace(c, loss=dataclasses.replace(c.loss, chunk_tokens=LOSS_CHUNK_TOKENS))

    if refused(cfg, change):  # tensor or pipeline parallel, a model computing its own loss
        return []
    return [(f"loss.chunk_tokens={LOSS_CHUNK_TOKENS}", change)]


def chunk_lowers(tokens: int, chunk_tokens: int, vocab_size: int) -> bool:
    """Whether ``loss.chunk_tokens=4096`` is a lever for a micro batch of ``tokens`` per rank under
    ``loss.chunk_tokens=chunk_tokens`` (0: the whole logits): the fp32 logits it holds at once (the whole,
    or one chunk of more than :data:`LOSS_CHUNK_TOKENS`) take at least :data:`LOSS_LOGITS_BYTES`."""
    if chunk_tokens:  # chunked already: a smaller chunk, where one chunk's logits are over the bound
        tokens = min(tokens, chunk_tokens)
        if tokens <= LOSS_CHUNK_TOKENS:
            return False
    return tokens * vocab_size * 4 >= LOSS_LOGITS_BYTES


def refused(cfg: Any, change: Callable[[Any], Any]) -> bool:
    """Whether a rule the job applies before launch refuses ``change(cfg)`` and not ``cfg`` itself: every
    rule of :data:`flopsweep.rules.RULES` (:func:`flopsweep.context_parallel.check`: the family, the
    kernel's support of context parallel, no pipeline, heads and a sequence of ``2 cp`` equal chunks;
    :func:`flopsweep.rules.chunked_loss`; ...), :func:`flopsweep.layout.check_built` (the degree's
    backend) and the layout of its world size (:meth:`flopsweep.layout.Layout.resolve`). A rule ``cfg``
    breaks already is not the step's doing; a change that raises anything else is refused."""
    from flopsweep.layout import Layout, check_built
    from flopsweep.rules import RULES

    try:
        c = change(cfg)
        check_built(c.parallel, c.backend.name)
        if (nproc := _ranks(c)) is not None:
            Layout.resolve(c.parallel, nproc * c.nnodes)
    except Exception:  # noqa: BLE001 - a step that cannot be laid out is no step
        return True
    return any(_breaks(rule, c) and not _breaks(rule, cfg) for rule in RULES)


def _breaks(rule: Callable[[Any], None], cfg: Any) -> bool:
    try:
        rule(cfg)
    except Exception:  # noqa: BLE001 - a ConfigError, or a rule the config trips over
        return True
    return False


def _mb_steps(cfg: Any) -> list[Step]:
    steps, mb = [], cfg.batch.micro_batch_size
    while mb > 1:
        mb //= 2
        steps.append((f"batch.micro_batch_size={mb}", _with_mb(mb)))
    return steps


def _with_mb(mb: int) -> Callable[[Any], Any]:
    return lambda c: dataclasses.replace(c, batch=dataclasses.replace(c.batch, micro_batch_size=mb))


def _cp_steps(cfg: Any, per_node: int = MAX_RANKS_PER_NODE) -> list[Step]:
    """``parallel.cp=N`` on FSDP2 (the one backend context parallel runs on): ``N`` doubled from the
    config's ``parallel.cp`` up to its ranks of a node (at most ``per_node``), each dividing them, while
    a rank keeps at least :data:`CP_MIN_TOKENS` of the sequence, each step kept only where the rules
    accept it (:func:`refused`)."""
    nproc = _ranks(cfg)
    if cfg.backend.name != "fsdp" or nproc is None:
        return []
    steps: list[Step] = []
    n = max(1, cfg.parallel.cp)
    while n * 2 <= min(nproc, per_node) and cfg.model.seq_len // (n * 2) >= CP_MIN_TOKENS:
        n *= 2
        if nproc % n == 0 and not refused(cfg, change := _with_cp(n)):
            steps.append((f"parallel.cp={n}", change))
    return steps


def _with_cp(n: int) -> Callable[[Any], Any]:
    return lambda c: dataclasses.replace(c, parallel=dataclasses.replace(c.parallel, cp=n))


def _ac_steps(cfg: Any) -> list[Step]:
    if cfg.activation_checkpointing.name == "full":
        return []
    from flopsweep.config import CheckpointingConfig, ConfigError
    from flopsweep.rules import casts_autocast_copies

    full, casts = CheckpointingConfig(name="full"), CheckpointingConfig(name="casts")
    steps: list[Step] = []
    if cfg.activation_checkpointing.name == "none":  # casts: none's activations, no matmul recomputed
        try:
            casts_autocast_copies(dataclasses.replace(cfg, activation_checkpointing=casts))
            steps.append(
                (
                    "activation_checkpointing=casts",
                    lambda c: dataclasses.replace(c, activation_checkpointing=casts),
                )
            )
        except ConfigError:  # no autocast copies to drop: FSDP2, DeepSpeed, fp32, fp8
            pass
    steps.append(
        ("activation_checkpointing=full", lambda c: dataclasses.replace(c, activation_checkpointing=full))
    )
    return steps


def _ranks(cfg: Any) -> int | None:
    try:
        return int(cfg.nproc_per_node)
    except (TypeError, ValueError):
        return None


def _shard_steps(cfg: Any, per_node: int = MAX_RANKS_PER_NODE) -> list[Step]:
    name, nproc = cfg.backend.name, _ranks(cfg)
    if nproc is None:
        return []
    sharded = name == "fsdp" or (name == "deepspeed" and getattr(cfg.backend, "zero_stage", 0) == 3)
    steps: list[Step] = []
    if name == "deepspeed" and not sharded:  # ZeRO-1/2: the weights replicated on each rank
        steps.append(("backend.zero_stage=3", _with_stage3))
    if name == "ddp" and nproc > 1:  # the states sharded over the ranks it has (a cluster's row: all of them)
        steps.append(("backend=fsdp", _with_fsdp(nproc)))
    n = nproc
    while n * 2 <= per_node:
        n *= 2
        if name in ("single", "ddp"):
            steps.append((f"backend=fsdp nproc_per_node={n}", _with_fsdp(n)))
        elif name == "deepspeed" and not sharded:
            steps.append((f"backend.zero_stage=3 nproc_per_node={n}", _then(_with_stage3, _with_nproc(n))))
        elif sharded:
            steps.append((f"nproc_per_node={n}", _with_nproc(n)))
    return steps


def _with_stage3(c: Any) -> Any:
    return dataclasses.replace(c, backend=dataclasses.replace(c.backend, zero_stage=3))


def _with_nproc(n: int) -> Callable[[Any], Any]:
    return lambda c: dataclasses.replace(c, nproc_per_node=str(n))


def _with_fsdp(n: int) -> Callable[[Any], Any]:
    from flopsweep.options import FSDPConfig

    return lambda c: dataclasses.replace(c, backend=FSDPConfig(), nproc_per_node=str(n))


def _then(*changes: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def change(c: Any) -> Any:
        for f in changes:
            c = f(c)
        return c

    return change


Gpus = tuple[int, int]
"""A cluster's nodes and GPUs per node (``A100-40GB:1x4``: ``(1, 4)``): the most a fix may use."""


def levers(cfg: Any, gpus: Gpus | None = None) -> dict[str, list[Step]]:
    """The levers ``cfg`` has not pulled, each its steps mildest first: ``loss``, ``micro_batch``,
    ``context_parallel``, ``checkpointing``, ``sharding`` (a lever with no step left is absent); ranks
    per node up to :data:`MAX_RANKS_PER_NODE`, or ``gpus``' GPUs per node."""
    per_node = MAX_RANKS_PER_NODE if gpus is None else gpus[1]
    found = {
        "loss": _loss_steps(cfg),
        "micro_batch": _mb_steps(cfg),
        "context_parallel": _cp_steps(cfg, per_node),
        "checkpointing": _ac_steps(cfg),
        "sharding": _shard_steps(cfg, per_node),
    }
    return {k: v for k, v in found.items() if v}


class _Estimator:
    """The peak bytes per rank of a changed config (:func:`flopsweep.memory.estimate`), at most
    :data:`MAX_ESTIMATES` times; None where the change cannot be laid out or estimated."""

    def __init__(self, cfg: Any) -> None:
        self.cfg, self.made = cfg, 0

    def __call__(self, change: Callable[[Any], Any]) -> int | None:
        if self.made >= MAX_ESTIMATES:
            return None
        self.made += 1
        from flopsweep.layout import Layout, grad_accum_for
        from flopsweep.memory import estimate

        try:
            c = change(self.cfg)
            layout = Layout.resolve(c.parallel, int(c.nproc_per_node) * c.nnodes).for_backend(c.backend.name)
            batch = dataclasses.replace(c.batch, grad_accum=grad_accum_for(c.batch, layout))
            c = dataclasses.replace(c, batch=batch)
            return estimate(c, layout).total
        except Exception:  # noqa: BLE001 - a candidate that cannot be laid out is no candidate
            return None


def fitting(
    cfg: Any, capacity_bytes: float, gpus: Gpus | None = None
) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """The set-ups the estimate fits in ``capacity_bytes`` per rank, ``[(overrides, bytes)]`` (at most
    :data:`MAX_NAMED`): each lever of :func:`levers` alone at its first fitting step, else the first
    fitting combinations; and what is left where none fits (``[(overrides, bytes)]``: the strongest
    combination and more nodes, up to ``gpus``' nodes on a cluster, or ``backend.cpu_offload=true`` where
    those fit)."""
    est, found = _Estimator(cfg), []
    steps = levers(cfg, gpus)
    for lever in steps.values():
        for text, change in lever:
            peak = est(change)
            if peak is not None and peak <= capacity_bytes:
                found.append((text, peak))
                break
    if found:
        return found[:MAX_NAMED], []
    found = _combined(steps, est, capacity_bytes)
    if found:
        return found[:MAX_NAMED], []
    return [], _left(cfg, steps, est, capacity_bytes, gpus)


def _combined(steps: dict[str, list[Step]], est: _Estimator, capacity: float) -> list[tuple[str, int]]:
    """The levers together: each walked from its mildest step with the others at their strongest, to
    the first fitting step; then each other lever left out where the estimate still fits without it, the
    costliest first (sharding, checkpointing, context parallel, micro batch: at 64K tokens, the chunked
    loss and micro batch 1 without ``parallel.cp=8``). The mildest (largest estimate that fits) first."""
    found: dict[str, int] = {}
    strongest = {k: v[-1] for k, v in steps.items()}
    for walked in steps:
        for step in steps[walked]:
            chosen = {k: step if k == walked else strongest[k] for k in steps}
            peak = est(_join(list(chosen.values()))[1])
            if peak is None or peak > capacity:
                continue
            for other in reversed([k for k in steps if k != walked]):
                fewer = {k: v for k, v in chosen.items() if k != other}
                less = est(_join(list(fewer.values()))[1])
                if less is not None and less <= capacity:
                    chosen, peak = fewer, less
            found.setdefault(_join(list(chosen.values()))[0], peak)
            break
    every = _join(list(strongest.values()))[0]
    if len(found) > 1:  # every lever at its strongest pulls more than a walk that fitted
        found.pop(every, None)
    words = {t: set(t.split()) for t in found}  # one that pulls another's levers and more: dropped
    found = {t: b for t, b in found.items() if not any(words[o] < words[t] for o in found)}
    return sorted(found.items(), key=lambda f: f[1], reverse=True)


def _join(steps: list[Step]) -> Step:
    return " ".join(t for t, _ in steps), _then(*(c for _, c in steps))


def _left(
    cfg: Any, steps: dict[str, list[Step]], est: _Estimator, capacity: float, gpus: Gpus | None = None
) -> list[tuple[str, Any]]:
    """Where no lever of the node fits: every lever at its strongest (``""`` where none is left) with its
    estimate (None where it fails), then that on the fewest of 2, 4, 8 times the nodes (sharded
    backends; at most ``gpus``' nodes) and with ``backend.cpu_offload=true`` (FSDP2) where the estimate
    fits them."""
    text, change = _join([v[-1] for v in steps.values()])
    left: list[tuple[str, int | None]] = [(text, est(change))]  # first: the strongest, its estimate or None
    sharded = "sharding" in steps or cfg.backend.name == "fsdp" or getattr(cfg.backend, "zero_stage", 0) == 3
    if sharded:
        for nodes in (k * cfg.nnodes for k in (2, 4, 8) if gpus is None or k * cfg.nnodes <= gpus[0]):
            more = _then(change, lambda c, n=nodes: dataclasses.replace(c, nnodes=n))
            peak = est(more)
            if peak is not None and peak <= capacity:
                left.append((f"{text} nnodes={nodes}".strip(), peak))
                break
    after = change(cfg)
    if after.backend.name == "fsdp" and not getattr(after.backend, "cpu_offload", False):
        off = _then(change, _offloaded)
        peak = est(off)
        if peak is not None and peak <= capacity:
            left.append((f"{text} backend.cpu_offload=true".strip(), peak))
    return left


def _offloaded(c: Any) -> Any:
    return dataclasses.replace(c, backend=dataclasses.replace(c.backend, cpu_offload=True))


def _offload_left(cfg: Any) -> str | None:
    """The offload override ``cfg`` has not set: FSDP2's ``backend.cpu_offload=true`` (from ``single`` or
    ``ddp`` with ``backend=fsdp``), DeepSpeed's ``backend.offload_optimizer=cpu``; None where it is on."""
    name = cfg.backend.name
    if name in ("single", "ddp"):
        return "backend=fsdp backend.cpu_offload=true"
    if name == "fsdp" and not getattr(cfg.backend, "cpu_offload", False):
        return "backend.cpu_offload=true"
    if name == "deepspeed" and getattr(cfg.backend, "offload_optimizer", "none") == "none":
        return "backend.offload_optimizer=cpu"
    return None


def _more(gpus: Gpus | None) -> str:
    """The "more GPUs" a fix names last: ``more nodes (nnodes)``; on a cluster of ``gpus`` (whose rows use
    all of its GPUs), a larger cluster: ``a cluster of more than 4 GPUs (1x4)``."""
    if gpus is None:
        return "more nodes (nnodes)"
    return f"a cluster of more than {gpus[0] * gpus[1]} GPUs ({gpus[0]}x{gpus[1]})"


def levers_line(cfg: Any, gpus: Gpus | None = None) -> str:
    """The levers ``cfg`` has not pulled, each at its mildest step, unestimated: the fix where the estimate
    fits the GPU and cannot choose (an ``oom`` the estimate did not foresee), e.g. ``set one of
    batch.micro_batch_size=2, activation_checkpointing=full, backend=fsdp nproc_per_node=2``; on a
    cluster (``gpus``), within its GPUs."""
    mildest = [steps[0][0] for steps in levers(cfg, gpus).values()]
    offload = _offload_left(cfg)
    rest = [*(x for x in (_more(gpus), offload) if x), "a smaller model"]
    tail = ", ".join(rest[:-1]) + " or " + rest[-1]
    if not mildest:
        return f"every lever of this node is pulled already; try {tail}"
    return f"set one of {', '.join(mildest)} (each lowers the memory per rank); else {tail}"


def gpu_memory_fix(cfg: Any, capacity_bytes: float, gpus: Gpus | None = None, margin: float = 0.0) -> str:
    """The fix of ``cfg`` (a resolved ``RunConfig``) over a GPU of ``capacity_bytes``: the fitting set-ups
    of :func:`fitting`, ``set batch.micro_batch_size=2 (estimated 70.1 GiB per rank) or
    activation_checkpointing=full (estimated 61.0 GiB per rank)``; where none fits, the strongest and
    what is left (more nodes, ``backend.cpu_offload=true``, a smaller model). Never a lever ``cfg`` has
    pulled. Where the estimate of ``cfg`` itself fits (an ``oom`` it did not foresee), it cannot choose:
    :func:`levers_line`; :data:`flopsweep.oom_note.GPU_MEMORY_FIX` where the estimate fails. ``gpus``: a
    cluster's nodes and GPUs per node (a ``plan_clusters`` row), which no set-up named exceeds; where none
    fits within them, it says so (``no lever fits within the cluster's 4 GPUs (1x4)``) and names a larger
    one. ``margin``: the share of ``capacity_bytes`` a set-up named should leave free (the one-config
    plan, launch and ``oom`` lines: :data:`flopsweep.memory_edge.EDGE_HEADROOM`, off the memory edge;
    ``plan_clusters`` passes ``(1 - space.min_headroom)`` of the GPU and none); where nothing fits within
    it, the set-ups that fit the whole memory are named, said to be at the memory edge."""
    from flopsweep.oom_note import GPU_MEMORY_FIX

    try:
        own = _Estimator(cfg)(lambda c: c)
        if own is not None and own <= capacity_bytes:  # it ran out of memory all the same
            return levers_line(cfg, gpus)
        fits, left = fitting(cfg, (1 - margin) * capacity_bytes, gpus)
        edge = bool(margin) and not fits
        if edge:  # none leaves the margin free: what fits the whole memory, said at the edge
            fits, left = fitting(cfg, capacity_bytes, gpus)
    except Exception:  # noqa: BLE001 - the fix of an odd config is the fixed text, never a crash
        return GPU_MEMORY_FIX
    on = f"{capacity_bytes / 2**30:.1f} GiB"
    if fits:
        said = " or ".join(f"{t} (estimated {b / 2**30:.1f} GiB per rank)" for t, b in fits)
        if edge:
            return (
                f"set {said}, within the {on} by the memory estimate but at the memory edge "
                f"(under {margin:.0%} of it free: allocator retries possible)"
            )
        kept = f", {margin:.0%} of it left free (the memory edge)" if margin else ""
        return f"set {said}, within the {on} by the memory estimate{kept}"
    parts = []
    if left and left[0][0] and left[0][1] is not None:
        strongest, peak = left[0]
        parts.append(f"even {strongest} is estimated at {peak / 2**30:.1f} GiB per rank, over the {on}")
    elif not left or not left[0][0]:
        parts.append(
            "every lever of this node is pulled already (sharded states, full checkpointing, micro batch 1)"
        )
    if gpus is not None and not any("nnodes=" in t for t, _ in left[1:]):  # the cluster's GPUs are all
        parts.append(f"no lever fits within the cluster's {gpus[0] * gpus[1]} GPUs ({gpus[0]}x{gpus[1]})")
    fit = [f"{t} (estimated {b / 2**30:.1f} GiB per rank)" for t, b in left[1:]]
    if fit:
        parts.append(f"set {' or '.join(fit)}, within the {on} by the memory estimate")
    more = None if any("nnodes=" in t for t, _ in left) else _more(gpus)
    offload = None if any("cpu_offload" in t for t, _ in left) else _offload_left(cfg)
    rest = [*(x for x in (more, offload) if x), "a smaller model"]
    parts.append(
        ("else " if fit else "try ") + (", ".join(rest[:-1]) + " or " if len(rest) > 1 else "") + rest[-1]
    )
    return "; ".join(parts)

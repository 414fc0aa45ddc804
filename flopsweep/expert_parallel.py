"""Expert parallelism: an MoE layer's experts split over the ``ep`` ranks, tokens sent to them by all-to-all.

Rank ``i`` of the ``ep`` group (:func:`flopsweep.mesh.build_mesh`'s ``mesh["ep"]``, made of the
``dp_shard x cp`` ranks it borrows, ``ep`` fastest) holds experts ``i E / ep .. (i + 1) E / ep - 1``
of each MoE layer's ``E`` (:func:`local_experts`). Each rank routes its own tokens with the whole
router, then (:class:`ExpertParallel`, torchtitan's ``ExpertParallel`` and DeepSpeed-MoE's order):

1. sorts its ``N x top_k`` (token, expert) pairs by expert, which groups them by the rank holding it;
2. exchanges the counts per expert (one all-to-all of ``E`` integers), then the tokens' hidden states
   (the *dispatch*: ``torch.distributed``'s functional ``all_to_all_single_autograd``, uneven splits,
   whose backward is the reverse all-to-all);
3. runs ``transformers``' own experts module (its forward, any ``model.experts`` implementation) on the
   tokens it received, with its ``E / ep`` experts and the local expert of each token, gate weight 1;
4. sends the outputs back by the reverse all-to-all (the *combine*), and sums each token's ``top_k``
   outputs times its router weights, in expert order as the one-rank module does.

The experts' parameters are the slices of the one-rank model's (built from the run's seed on every
rank), so a run's first step is the one-rank step's. FSDP2 shards them over ``mesh["ep_rest"]``,
the ranks holding the same experts (torchtitan's ``efsdp``), before their block
(:func:`flopsweep.parallelize.fsdp` shards first every module carrying :data:`MESH_ATTR`). Each
expert's gradient sums the tokens of the ``ep`` group and FSDP2's reduce-scatter over ``ep_rest``
averages over the groups, so it must be divided by ``ep`` more to be the mean over FSDP2's whole
mesh (``dp_shard x cp``), as the other parameters' are: torchtitan sets ``set_gradient_divide_factor``,
whose ``PREMUL_SUM`` gloo lacks; here the gradient entering the experts is scaled by ``1 / ep`` and the
one leaving them by ``ep`` (:func:`scale_grad`), which leaves the values, and the router's and the
hidden states' gradients, as they are, on any backend. The gradient norm sums the experts' squares over
the ``ep`` group (:func:`clip_grad_norm`, which the trainer calls).

Each :class:`ExpertParallel` counts the tokens its rank's router sends to each expert
(:attr:`ExpertParallel.routed`); :func:`routed_tokens` reads them after the measured steps and the
record's ``metrics.routing_imbalance`` is the busiest expert's share over the mean (:func:`imbalance`).

It is the ``ep`` degree's module (:data:`flopsweep.degrees.DEGREE_SPECS`): its applier :func:`apply_degree`,
its step-time term :func:`transfers`, its memory term :func:`expert_share` and its rules :func:`check`
(in :data:`flopsweep.rules.RULES`). Torch-free at import.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flopsweep.config import ConfigError, RunConfig

MESH_ATTR = "_flopsweep_fsdp_mesh"
"""An attribute on a module that FSDP2 shards on a mesh of its own, the mesh (a ``DeviceMesh``):
:func:`flopsweep.parallelize.fsdp` shards it before its block."""

EXPERT_KEYS = ("num_experts", "n_routed_experts", "num_local_experts")
"""config.json fields holding the routed experts of an MoE layer (Qwen3-MoE and OLMoE; DeepSeek-V3 and
Moonlight; Mixtral), the first one given is read."""


def n_experts(data: dict[str, Any]) -> int:
    """The routed experts of each MoE layer of a config.json's ``data`` (:data:`EXPERT_KEYS`); 0 when none."""
    for key in EXPERT_KEYS:
        value = data.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def top_k(cfg: Any) -> int:
    """Experts each token is routed to (``num_experts_per_tok``) of a ``model=hf`` config; 0 for a dense
    model or another family."""
    if getattr(cfg, "arch", None) != "hf" or not getattr(cfg, "config", None):
        return 0
    from flopsweep.models.hf_files import source

    value = source(cfg).data.get("num_experts_per_tok")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def local_experts(n: int, ep: int, rank: int) -> range:
    """The experts ``rank`` of ``ep`` holds, of ``n``: a contiguous ``n / ep``.

    Raises:
        ValueError: ``ep`` does not divide ``n``, or ``rank`` not in ``[0, ep)``.
    """
    if ep < 1 or n % ep or not 0 <= rank < ep:
        raise ValueError(f"{n} experts do not split over rank {rank} of {ep}")
    size = n // ep
    return range(rank * size, (rank + 1) * size)


def routed_experts(cfg: RunConfig) -> int:
    """The routed experts of each MoE layer of ``cfg``'s model (a ``model=hf`` config with experts per
    token, :func:`n_experts`); 0 for a dense model or another family."""
    if cfg.model.arch != "hf" or not top_k(cfg.model):
        return 0
    from flopsweep.models.hf_files import source

    return n_experts(source(cfg.model).data)


def check(cfg: RunConfig) -> None:
    """``parallel.ep > 1``: an MoE ``model=hf`` config whose routed experts ``ep`` divides; no tensor
    parallel, pipeline or HSDP beside it (``ep`` splits the ``dp_shard x cp`` ranks). The backend
    (FSDP2) and ``ep`` dividing the ranks it borrows are :mod:`flopsweep.layout`'s.

    Raises:
        ConfigError: naming the key, the value and the fix.
    """
    ep = cfg.parallel.ep
    if ep <= 1:
        return
    one = "set parallel.ep=1"
    experts = routed_experts(cfg)
    if not experts:
        raise ConfigError(
            "parallel.ep",
            ep,
            f"needs a mixture-of-experts model, and model.arch={cfg.model.arch} "
            f"({getattr(cfg.model, 'config', None) or cfg.model.name}) is dense",
            f"{one}, or pick an MoE config (model=hf model.config=olmoe-tiny, qwen3-moe-tiny, qwen3-30b-a3b)",
        )
    if experts % ep:
        from flopsweep.layout import stated_world_size

        divisors = [d for d in range(1, experts + 1) if experts % d == 0]
        world = stated_world_size(cfg.nproc_per_node, cfg.nnodes)
        fits = [d for d in divisors[1:] if world is None or world % d == 0]  # ep splits ranks it borrows
        from flopsweep.key_needs import degree_line, given_of

        fix = (
            f"set parallel.ep={fits[0]}" + (f" (or {', '.join(map(str, fits[1:]))})" if fits[1:] else "")
            if fits
            else f"{one}, or one of {divisors[1:]} on a world size it divides: "
            + str(degree_line("ep", ep, given_of(cfg), (experts, "its experts"))).partition(" (")[0]
        )
        raise ConfigError(
            "parallel.ep",
            ep,
            f"does not divide the {experts} experts of each MoE layer (each rank holds whole experts)",
            fix,
        )
    for key, why in (("tp", "tensor-parallel"), ("pp", "pipeline"), ("dp_replicate", "HSDP")):
        value = getattr(cfg.parallel, key)
        if value > 1:
            raise ConfigError(
                f"parallel.{key}",
                value,
                f"is not built beside expert parallel (parallel.ep={ep}): {why} ranks with experts",
                f"set parallel.{key}=1, or {one}",
            )


def expert_params(cfg: Any) -> int:
    """The routed experts' parameters of one MoE layer of a ``model=hf`` config: ``E x 3 x h x f``
    (gate, up and down projections of width ``f``: ``moe_intermediate_size``, else
    ``intermediate_size``); 0 for a dense model or another family."""
    if not top_k(cfg):
        return 0
    from flopsweep.models.hf_files import source

    d = source(cfg).data
    width = d.get("moe_intermediate_size") or d.get("intermediate_size") or 0
    return n_experts(d) * 3 * int(cfg.n_embd) * int(width) if isinstance(width, int) else 0


def gathered_expert_cut(cfg: Any, ep: int) -> int:
    """Parameters of one block that FSDP2 does not gather on a rank under ``ep``: the experts the rank
    does not hold, ``expert_params x (1 - 1 / ep)`` (the memory term of
    :func:`flopsweep.memory.fsdp_gathered_bytes`).
    The rank's sharded states do not change: its ``E / ep`` experts sharded over ``state_shards / ep``
    ranks are ``1 / state_shards`` of the experts, as without expert parallel."""
    return 0 if ep <= 1 else expert_params(cfg) * (ep - 1) // ep


def transfers(w: Any, *, gpus_per_node: int) -> list[Any]:
    """The ``ep`` degree's communication per optimizer step (:func:`flopsweep.steptime.transfers`), none
    at ``ep`` 1 or on a dense model (``w.top_k`` 0): per MoE layer (every layer counted) and micro batch,
    the dispatch and the combine of the rank's ``micro x s / cp`` tokens times ``top_k`` hidden states
    (``n_embd x b`` bytes each), in forward and again in backward, and again for a recomputed forward
    (:attr:`~flopsweep.steptime.Workload.recompute_share`); over the ``ep`` group, at all-to-all's bus
    factor ``(ep - 1) / ep`` (the share that leaves the rank under uniform routing), never overlapped
    (the experts wait for their tokens). The counts' exchange (``E`` integers) is not counted."""
    from flopsweep.workload import Transfer

    ep, k = w.degree("ep"), int(getattr(w, "top_k", 0) or 0)
    if ep == 1 or not k:
        return []
    per_layer = 2 * (2 + w.recompute_share)  # dispatch and combine; forward, backward, recompute
    return [
        Transfer(
            what="expert-parallel all-to-all dispatch and combine of the routed tokens",
            collective="all_to_all",
            bytes=w.micro_batch_size * w.seq_len / w.degree("cp") * k * w.n_embd * w.param_bytes,
            count=round(per_layer * w.n_layer * w.grad_accum),
            group=ep,
            across_nodes=ep > gpus_per_node,  # ep consecutive ranks: the fastest of what it borrows
            overlappable=False,
        )
    ]


def imbalance(tokens: Sequence[Sequence[Sequence[int]]]) -> float | None:
    """The routing imbalance of ``tokens[rank][layer][expert]`` (tokens each rank routed to each expert of
    each MoE layer): per layer the busiest expert's tokens over the mean per expert, summed over the
    ranks, the largest over the layers (1.0: every expert as busy). None without counts or tokens."""
    per_layer: dict[int, list[int]] = {}
    for rank in tokens:
        for layer, counts in enumerate(rank or ()):
            have = per_layer.setdefault(layer, [0] * len(counts))
            if len(have) != len(counts):
                return None
            per_layer[layer] = [a + int(b) for a, b in zip(have, counts, strict=True)]
    ratios = [max(c) * len(c) / sum(c) for c in per_layer.values() if c and sum(c) > 0]
    return max(ratios) if ratios else None


def apply_degree(model: Any, step: Any) -> Any:
    """The ``ep`` degree's applier (:class:`flopsweep.parallelize.DegreeStep` ``step``): each MoE layer's
    experts module (``hf_nn.experts_modules``) replaced by an :class:`ExpertParallel` holding this rank's
    experts, marked for FSDP2 over ``mesh["ep_rest"]`` (:data:`MESH_ATTR`); ``model`` as it is at ``ep`` 1."""
    if step.size == 1:
        return model
    from flopsweep.models.hf_nn import experts_modules

    mesh = step.mesh
    group, rank = mesh["ep"].get_group(), mesh["ep"].get_local_rank()
    found = {id(m) for m in experts_modules(model)}
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if id(child) in found:
                wrapped = ExpertParallel(child, group=group, ep=step.size, rank=rank)
                setattr(wrapped, MESH_ATTR, mesh["ep_rest"])
                setattr(parent, name, wrapped)
    return model


def routed_tokens(model: Any) -> list[list[int]] | None:
    """Tokens this rank routed to each expert of each MoE layer since :func:`reset_routed`, in module
    order; None when ``model`` has no :class:`ExpertParallel`."""
    layers = [m for m in _modules(model) if _is_expert_parallel(m)]
    return [m.routed.tolist() for m in layers] or None


def reset_routed(model: Any) -> None:
    """Zero every :class:`ExpertParallel`'s counts (at the start of the measured steps)."""
    for m in _modules(model):
        if _is_expert_parallel(m):
            m.routed.zero_()


def clip_grad_norm(model: Any, max_norm: float) -> Any:
    """``torch.nn.utils.clip_grad_norm_`` of ``model``'s parameters, whose total norm counts the experts of
    every ``ep`` rank: the norm of the :class:`ExpertParallel` parameters (DTensors on ``ep_rest``) is
    summed in squares over the ``ep`` group (an all-reduce), then with the others' (on FSDP2's mesh), as
    torchtitan's ``_clip_grad_norm_with_ep``. Returns the total norm (a tensor), before clipping."""
    import torch
    import torch.distributed as dist

    layers = [m for m in _modules(model) if _is_expert_parallel(m)]
    if not layers:
        return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm, foreach=True)
    mine = {id(p) for m in layers for p in m.parameters()}
    params = [p for p in model.parameters() if p.grad is not None]
    squares = []
    for experts in (True, False):
        grads = [p.grad for p in params if (id(p) in mine) == experts]
        norm = torch.nn.utils.get_total_norm(grads, foreach=True) if grads else torch.zeros(())
        norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm
        square = norm.float() ** 2
        if experts:
            dist.all_reduce(square, group=layers[0].group)  # every ep rank's experts
        squares.append(square)
    total = torch.sqrt(squares[0] + squares[1])
    for experts in (True, False):  # one mesh per call (DTensor refuses mixing them)
        group = [p for p in params if (id(p) in mine) == experts]
        if group:
            torch.nn.utils.clip_grads_with_norm_(group, max_norm, total, foreach=True)
    return total


def scale_grad(t: Any, factor: float) -> Any:
    """``t`` with its value unchanged and the gradient flowing back through it times ``factor``."""
    return t.detach() + (t - t.detach()) * factor


def _is_expert_parallel(module: Any) -> bool:
    """Whether ``module`` is an :class:`ExpertParallel` (FSDP2 renames its class: ``FSDPExpertParallel``)."""
    return _CLASS is not None and isinstance(module, _CLASS)


def _modules(model: Any) -> list[Any]:
    """``model``'s modules, or an engine's module's; empty for something else."""
    inner = getattr(model, "module", model)
    return list(inner.modules()) if hasattr(inner, "modules") else []


def _expert_parallel_class() -> type:
    import torch
    from torch import nn

    class ExpertParallel(nn.Module):
        """``transformers``' experts module ``experts`` on this rank's ``E / ep`` experts, tokens
        dispatched and combined by all-to-all over ``group`` (module docstring).

        ``forward(hidden (N, H), top_k_index (N, k), top_k_weights (N, k)) -> (N, H)``, the signature and
        result of the one-rank experts module.
        """

        def __init__(self, experts: nn.Module, *, group: Any, ep: int, rank: int) -> None:
            super().__init__()
            n = int(experts.num_experts)
            mine = local_experts(n, ep, rank)
            for name, param in list(experts.named_parameters(recurse=False)):
                if param.dim() and param.size(0) == n:  # every expert's tensor: keep this rank's rows
                    kept = param.detach()[mine.start : mine.stop].clone()
                    setattr(experts, name, nn.Parameter(kept, requires_grad=param.requires_grad))
            experts.num_experts = len(mine)
            self.experts, self.group, self.ep, self.n_experts = experts, group, ep, n
            self.routed = torch.zeros(n, dtype=torch.long)
            """Tokens this rank's router sent to each of the ``E`` experts (not a buffer: no state)."""

        def forward(self, hidden: Any, top_k_index: Any, top_k_weights: Any) -> Any:
            import torch.distributed as dist
            from torch.distributed._functional_collectives import all_to_all_single_autograd, wait_tensor

            k, local = top_k_index.size(1), self.n_experts // self.ep
            flat = top_k_index.reshape(-1)
            order = torch.argsort(flat, stable=True)  # (token, expert) pairs by expert, so by rank
            token = order // k
            with torch.no_grad():
                counts = torch.bincount(flat, minlength=self.n_experts)
                self.routed = self.routed.to(counts.device) + counts
                got = torch.empty_like(counts)
                dist.all_to_all_single(got, counts, group=self.group)  # got[j * local + e]: rank j's for e
                send = counts.view(self.ep, local).sum(1).tolist()
                recv = got.view(self.ep, local).sum(1).tolist()
                ids = torch.arange(local, device=flat.device).repeat(self.ep).repeat_interleave(got)
            x = hidden.index_select(0, token)
            x = wait_tensor(all_to_all_single_autograd(x, recv, send, self.group))  # dispatch
            ones = torch.ones(ids.size(0), 1, dtype=hidden.dtype, device=hidden.device)
            x = scale_grad(x, float(self.ep))  # the experts' weights see 1 / ep of the gradient
            y = scale_grad(self.experts(x, ids.unsqueeze(1), ones), 1.0 / self.ep)
            y = wait_tensor(all_to_all_single_autograd(y, send, recv, self.group))  # combine
            weights = top_k_weights.reshape(-1).index_select(0, order).unsqueeze(1)
            return torch.zeros_like(hidden).index_add(0, token, (y * weights).to(hidden.dtype))

    return ExpertParallel


def ExpertParallel(experts: Any, *, group: Any, ep: int, rank: int) -> Any:  # noqa: N802 (a class's maker)
    """An ``ExpertParallel`` module (the class is made on first use: this module imports no torch)."""
    global _CLASS
    if _CLASS is None:
        _CLASS = _expert_parallel_class()
    return _CLASS(experts, group=group, ep=ep, rank=rank)


_CLASS: type | None = None

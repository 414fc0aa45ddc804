"""The compile levers: what one ``torch.compile`` covers (``compile_scope``) and its ``mode=``
(``compile_mode``), their rules, and the step that applies them (:func:`apply`).

- ``compile_scope=block`` (default): ``torch.compile`` each transformer block (after activation
  checkpointing wrapped it) and the loss head: PyTorch's "regional compilation" recipe, torchtitan's
  ``apply_compile``; FSDP2's hooks, dynamo-disabled on the block, run at its edges (one graph a
  block), ZeRO-3's ``torch.compiler.disable`` hooks on every submodule break each block's graph at
  every submodule call (:func:`flopsweep.parallelize.apply_compile`).
- ``compile_scope=model``: ``torch.compile`` the whole model module (``nn.Module.compile``: its
  ``__call__``), embedding, blocks, final norm, head and loss in one region (``CausalLM.forward``
  computes the loss); ``backend=single``, ``ddp`` (DDP wraps the compiled module: its all-reduce hooks
  run after the compiled backward) and ``fsdp`` over ``dp_shard`` alone (``fully_shard`` comes after
  the compile; its hooks are dynamo-disabled, so the one region breaks at every unit's hooks, about
  the blocks' regions again). DeepSpeed (``backend.deepcompile`` is its whole-model compile) and FSDP2
  with ``parallel.dp_replicate``, ``tp``, ``pp``, ``cp`` or ``ep`` (untested) are refused.
  ``loss.chunk_tokens``' fused head stays eager under both scopes
  (:func:`flopsweep.models.layers.chunked_linear_cross_entropy` is excluded from tracing).
- ``compile_mode``: torch.compile's ``mode=``, as ``torch._inductor.list_mode_options()`` lists them:
  ``default``, ``reduce-overhead`` (CUDA graphs: Inductor's ``triton.cudagraphs``), ``max-autotune``
  (autotuned GEMM templates and CUDA graphs), ``max-autotune-no-cudagraphs``.

FLOPs: neither lever changes the counted work (the same matmuls, the same recompute). Memory: the
estimate keeps ``compile=true``'s per-layer activations for both scopes; CUDA graphs' private memory
pool is not modelled (docs/memory.md says why). Step time: the compute probe times blocks compiled
per block in the run's mode without CUDA graphs (:func:`probe_mode`), launched back to back, which
already hides the host launch gaps CUDA graphs remove.
"""

from __future__ import annotations

from typing import Any

from flopsweep.choices import require_choice
from flopsweep.config import ConfigError

COMPILE_SCOPES = ("block", "model")
"""``compile_scope`` values: each block (regional compilation), or the whole model module."""
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
"""``compile_mode`` values: torch.compile's ``mode=`` (``torch._inductor.list_mode_options()``)."""
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")
"""The modes whose Inductor options set ``triton.cudagraphs`` (``list_mode_options()``, torch 2.13)."""
NO_CUDAGRAPHS = {"reduce-overhead": "default", "max-autotune": "max-autotune-no-cudagraphs"}
"""Each CUDA-graph mode's counterpart without CUDA graphs (the compute probe's, :func:`probe_mode`)."""
MODEL_SCOPE_BACKENDS = ("single", "ddp", "fsdp")
"""Backends that run ``compile_scope=model`` (FSDP2 over ``dp_shard`` only)."""
MODEL_SCOPE_UNTESTED = ("dp_replicate", "tp", "pp", "cp", "ep")
"""FSDP2 degrees not tested under ``compile_scope=model`` (refused above 1)."""
CUDAGRAPH_BACKENDS = ("single", "ddp")
"""Backends that run a CUDA-graph mode: weights at fixed addresses for the whole run (FSDP2 frees and
re-gathers them every step, pytorch#127225, #164264; ZeRO-3 likewise; ZeRO-1/2 own the step)."""


def torch_mode(mode: str) -> str | None:
    """``torch.compile``'s ``mode=`` for ``compile_mode``: None for ``default`` (torch's own default)."""
    return None if mode == "default" else mode


def probe_mode(mode: str) -> str:
    """The mode the compute probe compiles its blocks in: ``mode`` without CUDA graphs
    (:data:`NO_CUDAGRAPHS`), since the probe calls a block and its backward alone, which a graph tree
    would re-record, and times the calls back to back, which hides the launch gaps graphs remove."""
    return NO_CUDAGRAPHS.get(mode, mode)


def uses_cudagraphs(cfg: Any) -> bool:
    """Whether the run's compiled regions run as CUDA graphs (``compile=true`` in a mode of
    :data:`CUDAGRAPH_MODES`)."""
    return bool(cfg.compile) and getattr(cfg, "compile_mode", "default") in CUDAGRAPH_MODES


def check(cfg: Any) -> None:
    """The compile levers' rules (:data:`flopsweep.rules.RULES`): known values; a lever other than
    its default only with ``compile=true``; ``compile_scope=model`` on :data:`MODEL_SCOPE_BACKENDS`;
    a CUDA-graph mode on :data:`CUDAGRAPH_BACKENDS`, on CUDA, with one micro batch per step (graph
    trees overwrite the first micro batch's gradients, pytorch#169545) and no ``optim.in_backward``
    (untested). :func:`check_placed` runs the device and accumulation rules again once the plan has
    placed the run (``device=auto``, ``batch.global_batch_size``).

    Raises:
        ConfigError: naming the key, the value and the fix.
    """
    scope, mode = cfg.compile_scope, cfg.compile_mode
    require_choice("compile_scope", scope, COMPILE_SCOPES)
    require_choice("compile_mode", mode, COMPILE_MODES)
    for key, value, default in (("compile_scope", scope, "block"), ("compile_mode", mode, "default")):
        if value != default and not cfg.compile:
            raise ConfigError(
                key,
                value,
                "sets how torch.compile runs and compile=false compiles nothing",
                f"set compile=true, or {key}={default}",
            )
    if scope == "model" and cfg.backend.name not in MODEL_SCOPE_BACKENDS:
        why = {
            "deepspeed": "DeepSpeed's whole-model compile is backend.deepcompile=true",
        }.get(cfg.backend.name, "its hooks would sit inside the compiled module")
        raise ConfigError(
            "compile_scope",
            "model",
            f"with backend={cfg.backend.name}: {why}",
            f"pick backend={', '.join(MODEL_SCOPE_BACKENDS)}, or set compile_scope=block",
        )
    if scope == "model":
        for degree in MODEL_SCOPE_UNTESTED:
            if (value := getattr(cfg.parallel, degree, 1)) > 1:
                raise ConfigError(
                    "compile_scope",
                    "model",
                    f"is untested with parallel.{degree}={value}",
                    f"set parallel.{degree}=1, or compile_scope=block",
                )
    if not uses_cudagraphs(cfg):
        return
    fix = f"or pick compile_mode={NO_CUDAGRAPHS[mode]} (no CUDA graphs)"
    if cfg.backend.name not in CUDAGRAPH_BACKENDS:
        raise ConfigError(
            "compile_mode",
            mode,
            f"runs CUDA graphs, which need weights at fixed addresses, and backend={cfg.backend.name} "
            "frees and re-gathers (FSDP2, ZeRO-3) or steps (ZeRO) them outside the graphs",
            f"pick backend={' or backend='.join(CUDAGRAPH_BACKENDS)}, {fix}",
        )
    if cfg.optim.in_backward:
        raise ConfigError(
            "compile_mode",
            mode,
            "runs CUDA graphs, untested with the optimizer stepped inside backward's hooks",
            f"set optim.in_backward=false, {fix}",
        )
    check_placed(cfg, cfg.device)


def check_placed(cfg: Any, device: str) -> None:
    """The CUDA-graph rules that need the placed run: ``device`` (resolved: ``auto`` is ``cuda`` or
    ``cpu``) must be ``cuda``, and ``batch.grad_accum`` (as ``batch.global_batch_size`` set it) 1.

    Raises:
        ConfigError: naming the key, the value and the fix.
    """
    if not uses_cudagraphs(cfg):
        return
    mode = cfg.compile_mode
    fix = f"or pick compile_mode={NO_CUDAGRAPHS[mode]} (no CUDA graphs)"
    if device == "cpu":
        raise ConfigError(
            "compile_mode",
            mode,
            "runs CUDA graphs, which Inductor makes on CUDA only, and the run is on the CPU",
            f"set device=cuda on a GPU, {fix}",
        )
    if cfg.batch.grad_accum > 1:
        raise ConfigError(
            "compile_mode",
            mode,
            f"runs CUDA graphs, and batch.grad_accum={cfg.batch.grad_accum}: a graph tree's next micro batch "
            "overwrites the gradients the first one left (pytorch#169545)",
            f"set batch.grad_accum=1 (a larger batch.micro_batch_size instead), {fix}",
        )

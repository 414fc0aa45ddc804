"""Known harmless log lines of the libraries a run imports, dropped at the loggers that emit them.

Torch-free and imports nothing of flopsweep. ``import torchao`` (which ``transformers`` does for a
``model=hf`` run, and :mod:`flopsweep.fp8` for ``precision=fp8``) logs, in every process and on
every rank:

- ``torchao``: ``Failed to load .../torchao/_C_mxfp8....so: Could not load this library`` for each
  optional compiled extension that does not fit the installed torch, Python or GPU (torchao 0.18's
  ``__init__``: ``logger.warning(f"Failed to load {file}: {e}")``). flopsweep uses torchao's float8
  training only (``torchao.float8``: ``torch._scaled_mm``), none of these kernels.
- ``torchao.kernel.intmm``: ``Warning: Detected no triton, ...`` on a machine without Triton (the
  CPU); its int8 matmuls are never called.
- ``torch.utils._pytree``: ``<enum 'KernelPreference'> is an Enum subclass and is now natively
  supported by torch.compile ... register_constant() on Enum subclasses is deprecated`` for torchao's
  enums (``torchao.utils.register_as_pytree_constant``; torch 2.13 deprecates the call, torchao
  has not caught up). The same warning for another package's enum still shows.

- ``torch.distributed.tensor._redistribute``: ``While redistributing from (_NormPartial(2.0),
  _NormPartial(2.0)) to (Replicate(), Replicate()), 2 sequential all_reduce operations will be
  performed. This is suboptimal: ...`` on every rank of a tensor-parallel run (torch 2.13's
  ``_warn_flatten_issue``, ``logger.warning``): the gradient norm (``clip_grad_norm_``, a scalar)
  is reduced over the 2-D ``(dp_shard, tp)`` mesh in two all-reduces instead of one on a flattened
  mesh; one scalar, so nothing to gain. The same warning for any other placement still shows.

- ``DeepSpeed``: ``Setting accelerator to CPU. If you have GPU or other accelerator, we were unable to
  detect it.`` in the job process of a DeepSpeed run or plan on a machine without a GPU (DeepSpeed
  0.19's ``real_accelerator.get_accelerator``, ``logger.warning``, on ``import deepspeed``:
  :mod:`flopsweep.memory` imports its ZeRO estimators). The ranks never pick the accelerator so
  (:mod:`flopsweep.worker` sets ``DS_ACCELERATOR`` to the run's device), and the run's device is
  already said (``launching 2 ranks on cpu``, the record's ``config.device``).

Each filter matches one logger, the WARNING level and the message's own words; every other line of
those loggers passes. These are Python ``logging`` records, not ``warnings``, so
``warnings.filterwarnings`` cannot drop them.

One ``warnings.warn`` is dropped with ``warnings.filterwarnings`` (:data:`KNOWN_WARNINGS`):

- FSDP2's ``FSDP2-wrapped module (FSDPGPT) returned a view tensor. An in-place op on this view ...``
  (torch 2.13, ``_fsdp_state.py``, ``UserWarning``), on every rank and step of a tensor-parallel
  run: the root model's output is its loss, which :func:`flopsweep.tensor_parallel.apply` turns from
  a replicated ``DTensor`` into a plain tensor (``full_tensor()``, a view), and the trainers never
  change the loss in place. Only the roots ``FSDPGPT`` and ``FSDPLlama`` match: a block that returns
  a view still warns.

One more is shown once per run (:data:`RANK_ZERO_WARNINGS`: once on rank 0, dropped on the other
ranks), for it is a real performance note:

- torch inductor's ``Torchinductor does not support code generation for complex operators.
  Performance may be worse than eager.`` (torch 2.13, ``torch/_inductor/lowering.py``
  ``_warn_complex_not_supported``, ``UserWarning``, once per process) on every rank of a compiled
  Llama run on the CPU (its rotary embedding multiplies complex tensors).
"""

from __future__ import annotations

import logging
import re
import warnings

_TORCHAO_SO = re.compile(r"Failed to load \S*torchao[/\\]_C[^/\\\s]*\.so: ")
_NO_TRITON = "Warning: Detected no triton, on systems without Triton certain kernels will not work"
_ENUM_CONSTANT = "%s is an Enum subclass and is now natively supported by torch.compile"
_CPU_ACCELERATOR = (
    "Setting accelerator to CPU. If you have GPU or other accelerator, we were unable to detect it."
)
_SEQUENTIAL_REDISTRIBUTE = (
    "While redistributing from %s to %s, %d sequential %s operations will be performed."
)


def _torchao_extension(record: logging.LogRecord) -> bool:
    return record.levelno == logging.WARNING and bool(_TORCHAO_SO.match(record.getMessage()))


def _no_triton(record: logging.LogRecord) -> bool:
    return record.levelno == logging.WARNING and record.getMessage() == _NO_TRITON


def _torchao_enum_constant(record: logging.LogRecord) -> bool:
    if record.levelno != logging.WARNING or not str(record.msg).startswith(_ENUM_CONSTANT):
        return False
    args = record.args if isinstance(record.args, tuple) else ()
    return bool(args) and str(getattr(args[0], "__module__", "")).startswith("torchao")


def _deepspeed_cpu_accelerator(record: logging.LogRecord) -> bool:
    return record.levelno == logging.WARNING and record.getMessage() == _CPU_ACCELERATOR


def _norm_partial_redistribute(record: logging.LogRecord) -> bool:
    """torch's two-all-reduce note for a gradient norm: every source placement a ``_NormPartial``."""
    if record.levelno != logging.WARNING or not str(record.msg).startswith(_SEQUENTIAL_REDISTRIBUTE):
        return False
    args = record.args if isinstance(record.args, tuple) else ()
    source = args[0] if args else ()
    return bool(source) and all(type(p).__name__ == "_NormPartial" for p in source)


KNOWN = {
    "torchao": _torchao_extension,
    "torchao.kernel.intmm": _no_triton,
    "torch.utils._pytree": _torchao_enum_constant,
    "torch.distributed.tensor._redistribute": _norm_partial_redistribute,
    "DeepSpeed": _deepspeed_cpu_accelerator,
}
"""Logger name -> the predicate of the records dropped there (see the module docstring)."""

KNOWN_WARNINGS = [
    (
        r"FSDP2-wrapped module \(FSDP(GPT|Llama)\) returned a view tensor\. An in-place op on this view ",
        UserWarning,
        r"torch\.distributed\.fsdp\._fully_shard\._fsdp_state",
    ),
]
"""``(message regex, category, module regex)`` of each ``warnings.warn`` dropped (module docstring)."""

RANK_ZERO_WARNINGS = [
    (
        r"Torchinductor does not support code generation for complex operators\. ",
        UserWarning,
        r"torch\._inductor\.lowering",
    ),
]
"""``(message regex, category, module regex)`` of each ``warnings.warn`` shown once, on rank 0 only."""


class _Drop(logging.Filter):
    """Drops the records ``known`` matches; a marker class, so that installing twice adds nothing."""

    def __init__(self, known: object) -> None:
        super().__init__()
        self.known = known

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.known(record)  # type: ignore[operator]


def silence_known_warnings(rank: int = 0) -> None:
    """Install the :data:`KNOWN` filters on their loggers, the :data:`KNOWN_WARNINGS` filters and the
    :data:`RANK_ZERO_WARNINGS` ones (idempotent): ``once`` for ``rank`` 0 (the job process, rank 0 of
    the run), ``ignore`` for any other rank (the global rank). Call it before the library is
    imported: the loggers exist from ``logging.getLogger`` on, and keep their filters when the library
    later takes them."""
    for name, known in KNOWN.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, _Drop) for f in logger.filters):
            logger.addFilter(_Drop(known))
    for message, category, module in KNOWN_WARNINGS:  # an identical filter replaces itself
        warnings.filterwarnings("ignore", message=message, category=category, module=module)
    for message, category, module in RANK_ZERO_WARNINGS:
        action = "once" if rank == 0 else "ignore"
        warnings.filterwarnings(action, message=message, category=category, module=module)

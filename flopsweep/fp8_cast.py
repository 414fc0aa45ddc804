"""The memory traffic of torchao's eager float8 casts (issue 41): a memory-bound term of an fp8 step that
runs uncompiled (``precision=fp8`` or ``fp8-rowwise``, ``compile=false``), which no FLOP count holds.

Compiled, Inductor fuses each cast into a kernel or two around the GEMM. Eager, torchao 0.18
(``torchao/float8``) runs every step of a cast as its own kernel over the whole tensor, and casts each of a
converted Linear's three operands twice a micro batch, in :class:`matmul_with_hp_or_float8_args`: the
input in forward and again (from the saved bf16 input) for the weight gradient, the weight in forward and
again for the input gradient, the output gradient once for the input gradient and once for the weight
gradient (none reuses another: ``tensor_already_casted_to_fp8`` is false for a bf16 tensor). Per element,
``b`` bytes of its own dtype (bf16 activations and gradients 2, fp32 master weights 4):

    tensor_to_amax        torch.abs(x) (b read + b written), then max/amax (b read)
    _ToFloat8ConstrFunc   x.to(float32) (b + 4; none at b = 4), * scale (4 + 4)
    to_fp8_saturated      clamp (4 + 4), .to(float8) (4 + 1)

33 bytes at ``b`` = 2 and at ``b`` = 4 alike (:data:`CAST_BYTES`). ``preprocess_addmm`` then copies three
float8 operands whose layout ``torch._scaled_mm`` refuses (1 + 1 byte, :data:`LAYOUT_BYTES`): the weight for
the input gradient, the output gradient and the input for the weight gradient. Rowwise scaling adds, in the
two backward GEMMs (``use_fast_accum`` false: ``addmm_float8_unwrapped`` runs the tensorwise kernel and
scales after), the fp32 outer product of the two scale vectors (4 written) and ``output *= it`` (2 + 4 read,
2 written): 12 bytes per element of the input gradient and of the weight gradient
(:data:`ROWWISE_SCALE_BYTES`). So per block and micro batch, ``T`` tokens a rank, ``I`` and ``O`` the summed
``in_features`` and ``out_features`` of the converted Linears, ``W`` their weights
(:data:`flopsweep.fp8.FP8_CAST_KEYS`), ``r`` 1 for rowwise:

    bytes = T I (2 x 33 + 2 + 12 r) + T O (2 x 33 + 2) + W (2 x 33 + 2 + 12 r)

over every block of a rank (``n_layer / pp``), times ``grad_accum``, over ``tp`` (an even split, an
approximation), plus a recomputed forward's input and weight casts (``33 (T I + W)`` times the recompute
share); FSDP2's float8 all-gather (``precision.fp8_all_gather``) casts the weights before it gathers them,
so theirs are left out. Time: the bytes over the GPU's datasheet memory bandwidth
(:func:`flopsweep.predict.memory_tbps`): the least the traffic takes; the kernels' launches (about ten a
cast, 70 a Linear) are not counted (the model has no launch term). Llama 3.2 1B at micro batch 8,
``fp8-rowwise``: 58 GB a block, 0.93 TB a step, 0.277 s on an H100 SXM (3.35 TB/s).

Torch-free. Bytes, seconds, TB/s (1e12 bytes/s). docs/prediction-fp8-cast.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flopsweep.record import value_at
from flopsweep.text import figure
from flopsweep.workload import Workload

if TYPE_CHECKING:
    from flopsweep.nearest_measured import Measured

CAST_BYTES = 33
"""Bytes moved per element by one eager cast of torchao 0.18 (``hp_tensor_to_float8_dynamic``), bf16 or fp32
(module docstring)."""

CASTS = 2
"""Casts of each operand (input, weight, output gradient) of a converted Linear a micro batch, eager."""

LAYOUT_BYTES = 2
"""Bytes per element of a float8 operand copied to the layout ``torch._scaled_mm`` needs (read 1, write 1)."""

ROWWISE_SCALE_BYTES = 12
"""Bytes per element of a rowwise backward GEMM's output scaled after it (fp32 scales written, read, output
read and written)."""

FP8_PRECISIONS = ("fp8", "fp8-rowwise")
"""The ``precision`` options that convert Linears with torchao (:data:`flopsweep.fp8.RECIPES`)."""

SAID = "flopsweep.fp8_cast"
"""The module a source names for the term."""


def eager_fp8(record: dict[str, Any]) -> bool:
    """Whether ``record`` (a record, or ``{"config": ...}`` of a run about to start) trains in float8
    uncompiled: a :data:`FP8_PRECISIONS` precision with ``compile`` false."""
    precision = value_at(record, ("config", "precision", "name"))
    eager = str(value_at(record, ("config", "compile"))).lower() in ("false", "0")
    return precision in FP8_PRECISIONS and eager


def linear_shapes(record: dict[str, Any]) -> tuple[int, int, int] | None:
    """``(W, I, O)`` of ``record``'s model (:data:`flopsweep.fp8.FP8_CAST_KEYS`: converted weights of a block,
    their inputs' and outputs' elements per token), from its ``config.model`` through its family's
    ``memory``; None for a family without them (``hf``) or a model section it cannot read."""
    from flopsweep.fp8 import FP8_CAST_KEYS
    from flopsweep.models import recorded_config

    read = recorded_config(value_at(record, ("config", "model")))
    if read is None:
        return None
    try:
        shape = read[0].memory(read[1])
    except (TypeError, ValueError, ZeroDivisionError):
        return None
    if not all(isinstance(shape.get(k), int) for k in FP8_CAST_KEYS):
        return None
    weights, inputs, outputs = (shape[k] for k in FP8_CAST_KEYS)
    return weights, inputs, outputs


def step_bytes(record: dict[str, Any], w: Workload) -> float:
    """Bytes a rank moves a step in torchao's eager float8 casts (module docstring); 0 for a compiled or
    non-fp8 run or a model without Linear shapes (:func:`linear_shapes`)."""
    shapes = linear_shapes(record) if eager_fp8(record) else None
    if shapes is None:
        return 0.0
    weights, inputs, outputs = shapes
    rowwise = 1 if value_at(record, ("config", "precision", "name")) == "fp8-rowwise" else 0
    gathered = bool(value_at(record, ("config", "precision", "fp8_all_gather"))) and w.backend == "fsdp"
    tokens = w.micro_batch_size * w.seq_len / w.degree("cp")
    operand = CASTS * CAST_BYTES + LAYOUT_BYTES
    block = tokens * (inputs * (operand + ROWWISE_SCALE_BYTES * rowwise) + outputs * operand)
    cast = 0 if gathered else CASTS * CAST_BYTES  # float8 all-gather: the weights come cast
    block += weights * (cast + LAYOUT_BYTES + ROWWISE_SCALE_BYTES * rowwise)
    block += w.recompute_share * CAST_BYTES * (tokens * inputs + (0 if gathered else weights))
    return block * w.n_layer / w.degree("pp") * w.grad_accum / w.degree("tp")


def cast_time(
    record: dict[str, Any], w: Workload, bandwidth: tuple[float | None, str]
) -> tuple[float, str] | None:
    """``(seconds, words)`` of ``record``'s eager float8 casts on the GPU whose datasheet memory bandwidth is
    ``bandwidth`` (:func:`flopsweep.predict.memory_tbps`: TB/s and the row's name, or None and why): the
    :func:`step_bytes` over it, said for a ``source``; 0 seconds where the bandwidth is unknown (said so).
    None where the run casts nothing eagerly (compiled, not fp8, no Linear shapes)."""
    moved = step_bytes(record, w)
    if not moved > 0:
        return None
    tbps, name = bandwidth
    if not tbps:
        return 0.0, f"eager fp8 casts ({figure(moved / 1e9, 4)} GB a step) not counted: {name} ({SAID})"
    seconds = moved / (tbps * 1e12)
    return seconds, (
        f"eager fp8 casts {figure(seconds, 4)} s: {figure(moved / 1e9, 4)} GB a step at "
        f"{figure(tbps, 4)} TB/s "
        f"({name} datasheet; {SAID})"
    )


def stand_ins(precision: str, compiled: str) -> list[tuple[str, str]]:
    """The ``(precision, compile)`` kinds (``compile`` as :attr:`flopsweep.nearest_measured.Measured.compile`
    spells it, ``"true"``/``"false"``) whose records may stand for a run of ``precision`` and ``compiled``
    that no record of its own kind stands for (:func:`flopsweep.nearest.candidates`), in order: for an fp8
    recipe its records at the other compile setting, then for an eager one bf16 eager (the same per-operator
    dispatch; the float8 GEMMs' speed-up not modelled); none for another precision. Their step carries over
    with the eager casts moved (:func:`moved`)."""
    if precision not in FP8_PRECISIONS:
        return []
    kinds = [(precision, "true" if compiled == "false" else "false")]
    return kinds + [("bf16", "false")] if compiled == "false" else kinds


def moved(target: Measured, m: Measured) -> tuple[float, float, str]:
    """Where ``m`` stands in for ``target`` (:func:`stand_ins`): the seconds of ``m``'s eager float8 casts to
    take out of its step (on its GPU), those of ``target``'s to add to its compute (on its GPU, else on
    ``m``'s), each 0 where it casts nothing eagerly (:func:`cast_time`), and the words for a ``source``."""
    from flopsweep.nearest_measured import device_of
    from flopsweep.predict import memory_tbps

    out = cast_time(m.record, m.workload, memory_tbps(device_of(m)))
    add = cast_time(target.record, target.workload, memory_tbps(device_of(target) or device_of(m)))
    words = [
        f"stand-in: no record ran {target.precision} with compile {target.compile}, so {m.precision} with "
        f"compile {m.compile} stands for it"
    ]
    words += [f"its {out[1]} taken out"] if out else []
    words += [f"this run's {add[1]} added"] if add else []
    if m.precision not in FP8_PRECISIONS:
        words.append(f"the {target.precision} GEMMs' speed-up over {m.precision} not modelled")
    return (out[0] if out else 0.0), (add[0] if add else 0.0), "; ".join(words)

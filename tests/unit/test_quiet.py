"""Issue 15, quiet by default: each message of a real (small) run or sweep is printed once, DeepSpeed's
build chatter is debug output, a ``fail_fast`` stop carries no Hydra hint, and the sweep progress
draws a bar on a terminal and stays a plain line elsewhere.

The end-to-end tests run ``python run.py`` as a user would and count lines in what it printed.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from flopsweep.callbacks import is_terminal, progress_line


def test_progress_bar_only_adds_a_bar_to_the_plain_line() -> None:
    plain = progress_line(3, 12, 151, job=2)
    drawn = progress_line(3, 12, 151, bar=True, job=2)
    assert plain == "flopsweep: 3 of 12 jobs done (job 2), 2:31 elapsed, about 7:33 left"
    assert (
        drawn == "flopsweep: 3 of 12 jobs done (job 2) |█████               | 2:31 elapsed, about 7:33 left"
    )
    assert progress_line(2, None, 65, bar=True) == "flopsweep: 2 jobs done, 1:05 elapsed"  # no total: no bar
    with_status = progress_line(3, 12, 151, status="oom", bar=True, job=2)
    assert (
        with_status
        == "flopsweep: 3 of 12 jobs done (job 2): oom |█████               | 2:31 elapsed, about 7:33 left"
    )


def test_is_terminal_is_false_for_pipes_files_and_dumb_terminals(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not is_terminal(io.StringIO())
    primary, secondary = os.openpty()
    with os.fdopen(secondary, "w") as tty:
        monkeypatch.setenv("TERM", "xterm")
        assert is_terminal(tty)
        monkeypatch.setenv("TERM", "dumb")
        assert not is_terminal(tty)
    os.close(primary)


def test_known_import_lines_are_dropped_at_their_loggers_and_nothing_else() -> None:
    """``flopsweep.quiet``: torchao's "Failed to load" of an optional extension, its "no triton" line,
    torch's pytree deprecation for torchao's enums and DeepSpeed's "Setting accelerator to CPU" are
    dropped; the same loggers' other warnings, and the pytree line for another package's enum, still
    pass."""
    import enum
    import logging

    from flopsweep.quiet import silence_known_warnings

    class Mine(enum.Enum):
        A = 1

    class KernelPreference(enum.Enum):
        AUTO = 1

    KernelPreference.__module__ = "torchao.quantization.quantize_.common.kernel_preference"
    silence_known_warnings()
    silence_known_warnings()  # idempotent: one filter per logger
    kept: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            kept.append(record.getMessage())

    so = "/x/site-packages/torchao/_C_mxfp8.cpython-310-x86_64-linux-gnu.so"
    enum_line = (
        "%s is an Enum subclass and is now natively supported by torch.compile as an opaque value type. "
        "Calling register_constant() on Enum subclasses is deprecated and will be an error in a future "
        "release."
    )
    lines = [
        ("torchao", f"Failed to load {so}: Could not load this library: {so}", ()),
        ("torchao", "Failed to load the tokenizer: it is missing", ()),  # not an extension: kept
        (
            "torchao.kernel.intmm",
            "Warning: Detected no triton, on systems without Triton certain kernels will not work",
            (),
        ),
        ("torch.utils._pytree", enum_line, (KernelPreference,)),
        ("torch.utils._pytree", enum_line, (Mine,)),  # another package's enum: kept
        (
            "DeepSpeed",
            "Setting accelerator to CPU. If you have GPU or other accelerator, we were unable to detect it.",
            (),
        ),
        ("DeepSpeed", "Setting accelerator to CPU for the offload", ()),  # other words: kept
    ]
    handler = Keep()
    for name, _, _ in lines:
        logging.getLogger(name).addHandler(handler)
        assert len([f for f in logging.getLogger(name).filters if type(f).__name__ == "_Drop"]) == 1
    try:
        for name, msg, args in lines:
            logging.getLogger(name).warning(msg, *args)
    finally:
        for name, _, _ in lines:
            logging.getLogger(name).removeHandler(handler)
    assert kept == [
        "Failed to load the tokenizer: it is missing",
        enum_line % (Mine,),
        "Setting accelerator to CPU for the offload",
    ]


def test_inductor_complex_note_is_shown_once_on_rank_0_and_on_no_other_rank() -> None:
    """torch inductor's note on complex operators (a compiled Llama on the CPU), emitted for real by
    its own function: a trial saw it once per rank. Rank 0 (and the job process) shows it once, however
    often it is emitted; any other rank drops it; another inductor warning still shows."""
    import warnings

    from torch._inductor import lowering

    from flopsweep.quiet import silence_known_warnings

    emit = lowering._warn_complex_not_supported.__wrapped__  # the real warnings.warn, uncached
    once = dict(warnings.onceregistry)
    shown = {}
    try:
        for rank in (0, 1):
            warnings.onceregistry.clear()  # a fresh process's registry
            with warnings.catch_warnings(record=True) as caught:
                silence_known_warnings(rank)
                emit()
                emit()
                warnings.warn_explicit("another note", UserWarning, lowering.__file__, 1, lowering.__name__)
            shown[rank] = [str(w.message) for w in caught]
    finally:
        warnings.onceregistry.clear()
        warnings.onceregistry.update(once)
    note = "Torchinductor does not support code generation for complex operators. Performance may be worse "
    note += "than eager."
    assert shown == {0: [note, "another note"], 1: ["another note"]}, shown


def test_tensor_parallel_noise_is_dropped_and_nothing_else(tmp_path: Path) -> None:
    """torch's own calls, for real: the two-all-reduce note for a ``_NormPartial`` gradient norm
    (logged) and FSDP2's view-tensor warning for the root ``GPT`` (one gloo rank) are dropped; the
    same note for a sharded tensor, and the view warning of a block, still show."""
    import logging
    import warnings

    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Replicate, Shard, _redistribute
    from torch.distributed.tensor._ops._math_ops import _NormPartial

    from flopsweep.quiet import silence_known_warnings

    silence_known_warnings()
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger(_redistribute.__name__)
    logger.addHandler(handler)
    try:
        for source in [(_NormPartial(2.0), _NormPartial(2.0)), (Shard(0), Shard(1))]:
            mesh = type("Mesh", (), {"mesh_dim_names": ("dp_shard", "tp")})()  # a new hash: warned anew
            _redistribute._warn_flatten_optimization_not_possible(
                mesh, (0, 1), source, (Replicate(), Replicate()), 2, "all_reduce", "no_flattened_mesh"
            )
    finally:
        logger.removeHandler(handler)
    assert len(seen) == 1 and "(Shard(dim=0), Shard(dim=1))" in seen[0], seen

    class GPT(torch.nn.Module):  # the root's name as FSDP2 reports it: FSDPGPT
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lin(x).sum().view(1)  # a view, as the tensor-parallel loss is

    class Block(GPT):
        pass

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        shown = []
        for cls in (GPT, Block):
            model = fully_shard(cls())
            with warnings.catch_warnings(record=True) as caught:
                silence_known_warnings()  # catch_warnings restores the filters on exit
                model(torch.ones(2, 4))
            shown += [str(w.message) for w in caught if "returned a view tensor" in str(w.message)]
    finally:
        dist.destroy_process_group()
    assert len(shown) == 1 and shown[0].startswith("FSDP2-wrapped module (FSDPBlock)"), shown

"""Issue 15, quiet by default: each message of a real (small) run or sweep is printed once, DeepSpeed's
build chatter is debug output, a ``fail_fast`` stop carries no Hydra hint, and the sweep progress
draws a bar on a terminal and stays a plain line elsewhere.

The end-to-end tests run ``python run.py`` as a user would and count lines in what it printed.
"""

from __future__ import annotations

import io
import os
import re
import sys
from pathlib import Path

import pytest
from helpers import RUN_PY, on_a_terminal, records, run_py

from flopsweep.callbacks import is_terminal, progress_line

ONE_RANK = ["device=cpu", "precision=fp32", "steps.warmup=1", "steps.measure=1"]
DEEPSPEED = ["backend=deepspeed", "nproc_per_node=2", *ONE_RANK]
BUILT = "built successfully"  # DeepSpeed's print() from deepspeed.comm.torch.build_shm_op
INVALID = "Invalid config: backend.zero_stage=4"
CPU_ACCELERATOR = "Setting accelerator to CPU."  # DeepSpeed's real_accelerator on a machine without GPUs


@pytest.fixture(scope="module")
def deepspeed_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Two jobs: ZeRO stage 4 (refused by validation, no worker), then ZeRO-1 on two gloo ranks."""
    sweep_dir = tmp_path_factory.mktemp("quiet")
    proc = run_py("-m", *DEEPSPEED, "backend.zero_stage=4,1", f"hydra.sweep.dir={sweep_dir}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return sweep_dir, proc.stdout + proc.stderr


@pytest.mark.slow
def test_deepspeed_build_chatter_is_not_printed(deepspeed_sweep: tuple[Path, str]) -> None:
    sweep_dir, output = deepspeed_sweep
    assert [r["status"] for r in records(sweep_dir)] == ["invalid", "ok"]
    assert output.count(BUILT) == 0, output[-3000:]
    assert output.count(CPU_ACCELERATOR) == 0, output[-3000:]  # the job process's import deepspeed


@pytest.mark.slow
def test_sweep_prints_summary_progress_and_invalid_once(deepspeed_sweep: tuple[Path, str]) -> None:
    sweep_dir, output = deepspeed_sweep
    assert output.count("flopsweep summary: ") == 1
    assert f"flopsweep summary: 1 ok, 0 oom, 0 error, 1 invalid, 0 skipped ({sweep_dir})" in output
    assert output.count(INVALID) == 1, output
    assert output.count("flopsweep: job 1/2 done: invalid, ") == 1
    assert output.count("flopsweep: job 2/2 done: ok, ") == 1
    assert "█" not in output  # captured output is not a terminal: plain lines, no bar
    # The launched job logs its warm-up step with the step time, once (rank 0 only).
    assert len(re.findall(r"\[flopsweep rank 0\] warm-up step 1/1: \d+\.\d{3} s\n", output)) == 1
    assert output.count("[flopsweep rank 1]") == 0


@pytest.mark.slow
def test_verbose_sweep_shows_deepspeed_chatter_and_one_summary(tmp_path: Path) -> None:
    """``hydra.verbose=flopsweep``: the ranks' debug lines (DeepSpeed's, once per rank), one summary."""
    proc = run_py(
        "-m", *DEEPSPEED, "backend.zero_stage=1", "hydra.verbose=flopsweep", f"hydra.sweep.dir={tmp_path}"
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    for rank in (0, 1):
        assert output.count(f"[flopsweep rank {rank}] DeepSpeed ") == 1, output[-3000:]
    assert output.count(BUILT) == 2
    assert output.count("flopsweep summary: ") == 1


@pytest.mark.slow
def test_fail_fast_prints_the_error_once_and_no_hydra_hint(tmp_path: Path) -> None:
    proc = run_py(
        "-m",
        "fault.kind=raise,none",
        "fault.phase=warmup",
        "fail_fast=true",
        *ONE_RANK,
        f"hydra.sweep.dir={tmp_path}",
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output[-3000:]
    assert output.count("injected fault: raise on rank 0 in warmup") == 1, output
    assert "HYDRA_FULL_ERROR" not in output and "Error executing job" not in output
    assert proc.stderr.count("fail_fast=true stopped the sweep") == 1
    assert (
        f"flopsweep: fail_fast=true stopped the sweep after job 0 (error, recorded in {tmp_path / '0'})"
        in (proc.stderr)
    )
    assert proc.stdout.count("flopsweep summary: ") == 1
    assert (
        "flopsweep summary: 0 ok, 0 oom, 1 error, 0 invalid, 0 skipped (stopped early by fail_fast)" in output
    )
    assert not (tmp_path / "1").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("overrides", "message", "code"),
    [
        (["backend=deepspeed", "backend.zero_stage=4", "device=cpu"], INVALID, 2),
        (
            ["fault.kind=raise", "fault.phase=measure", *ONE_RANK],
            "injected fault: raise on rank 0 in measure",
            1,
        ),
    ],
    ids=["invalid", "error"],
)
def test_single_run_failure_is_printed_once(
    tmp_path: Path, overrides: list[str], message: str, code: int
) -> None:
    proc = run_py(*overrides, f"hydra.run.dir={tmp_path}", timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == code, output[-3000:]
    assert output.count(message) == 1, output
    assert proc.stderr.strip().splitlines()[-1].startswith("flopsweep: ") and message in proc.stderr
    assert f"-> {tmp_path / 'metrics.json'}" in output  # the log still names the record


def test_progress_bar_only_adds_a_bar_to_the_plain_line() -> None:
    plain = progress_line(3, 12, 151)
    drawn = progress_line(3, 12, 151, bar=True)
    assert plain == "flopsweep: job 3/12 done, 2:31 elapsed, about 7:33 left"
    assert drawn == "flopsweep: job 3/12 done |█████               | 2:31 elapsed, about 7:33 left"
    assert progress_line(2, None, 65, bar=True) == "flopsweep: job 2 done, 1:05 elapsed"  # no total: no bar
    with_status = progress_line(3, 12, 151, status="oom", bar=True)
    assert with_status == "flopsweep: job 3/12 done: oom |█████               | 2:31 elapsed, about 7:33 left"


def test_is_terminal_is_false_for_pipes_files_and_dumb_terminals(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not is_terminal(io.StringIO())
    primary, secondary = os.openpty()
    with os.fdopen(secondary, "w") as tty:
        monkeypatch.setenv("TERM", "xterm")
        assert is_terminal(tty)
        monkeypatch.setenv("TERM", "dumb")
        assert not is_terminal(tty)
    os.close(primary)


@pytest.mark.slow
def test_sweep_on_a_terminal_draws_the_bar(tmp_path: Path) -> None:
    """A real sweep (plan=true: no worker starts) with its output on a pseudo-terminal."""
    argv = [
        sys.executable,
        RUN_PY,
        "-m",
        "seed=1,2",
        "device=cpu",
        "plan=true",
        f"hydra.sweep.dir={tmp_path}",
    ]
    code, output = on_a_terminal(argv, env={**os.environ, "TERM": "xterm"})
    assert code == 0
    assert re.search(r"flopsweep: job 1/2 done \|█{10} {10}\| \d+:\d\d elapsed, about ", output), output
    assert re.search(r"flopsweep: job 2/2 done \|█{20}\| \d+:\d\d elapsed, about 0:00 left", output), output


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

"""DeepSpeed's JIT-built ops: which ones a run will compile before its first step, and the one line
that says so (torch-free).

DeepSpeed compiles some of its C++/CUDA ops the first time a process loads them (``OpBuilder.load``:
``torch.utils.cpp_extension.load`` with ninja), into ``TORCH_EXTENSIONS_DIR/<op>/<op>.so``
(flopsweep's own folder: :func:`flopsweep.deepspeed_backend.extensions_dir`). A later run of the same
environment (the same cache: :func:`cache_scope`) loads the ``.so`` in a second. The first one waits half a
minute or more with nothing on the screen unless someone says why: :func:`build_notice`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class JitOp:
    """One op DeepSpeed builds on first use."""

    name: str
    """DeepSpeed's ``OpBuilder.NAME``: the folder and the ``.so`` under ``TORCH_EXTENSIONS_DIR``."""
    what: str
    """What it is, for the notice."""
    takes: str
    """How long its build took, measured (ninja's log of the build), for the notice."""
    builder: str
    """DeepSpeed's op builder class (``get_accelerator().create_op_builder(builder)``), whose ``load()``
    builds the op or loads it from the cache, once a process (``OpBuilder._loaded_ops``)."""


SHM_COMM = JitOp(
    "deepspeed_shm_comm",
    "its shared-memory communication op for CPU ranks",
    # OpBuilder.load into an empty TORCH_EXTENSIONS_DIR on the project's 2-core machine (deepspeed 0.19.8,
    # torch 2.13 CPU): 25 s at load 2.3 (session 40); 91 s and 83 s at load 6.2-6.4, other jobs on both
    # cores (session 41). The 2 to 4 minutes said before were ninja's log under older builds and heavier load.
    "25 to 90 s on a 2-core CPU, the longer with other jobs on its cores",
    "ShareMemCommBuilder",
)
CPU_ADAM = JitOp(
    "cpu_adam",
    "its CPU Adam for optimizer offload",
    "about 17 minutes on a 2-core CPU under load (ninja's log: 1,024 s)",
    "CPUAdamBuilder",
)
FUSED_ADAM = JitOp(
    "fused_adam",
    "its fused CUDA Adam",
    "about 50 s on an H100 host (a ZeRO-1 layer probe's first copy, session 41), minutes on a small one",
    "FusedAdamBuilder",
)


def ops_needed(*, device_type: str, offload_optimizer: str, optimizer_impl: str) -> list[JitOp]:
    """The JIT ops a ``backend=deepspeed`` run loads: the shared-memory communication op on CPU ranks
    (``deepspeed.comm``'s ``build_shm_op``), DeepSpeed's CPU Adam when the optimizer is offloaded
    (``backend.offload_optimizer`` ``cpu`` or ``nvme``), its fused Adam on CUDA with
    ``backend.optimizer_impl=fused`` (flopsweep's DeepSpeed config sets ``torch_adam`` otherwise)."""
    ops = [SHM_COMM] if device_type == "cpu" else []
    if offload_optimizer in ("cpu", "nvme"):
        ops.append(CPU_ADAM)
    elif device_type == "cuda" and optimizer_impl == "fused":
        ops.append(FUSED_ADAM)
    return ops


def ops_to_build(ops: list[JitOp], extensions_dir: str | Path, available: Mapping[str, bool]) -> list[JitOp]:
    """The ops of ``ops`` that the run will compile: those DeepSpeed did not install prebuilt and can
    build here (``available``: op name -> True when DeepSpeed loads it from its installed ops, False
    when it cannot build it on this machine, absent when it will JIT-build it), whose
    ``extensions_dir/<name>/<name>.so`` is not there yet."""
    root = Path(extensions_dir)
    return [op for op in ops if op.name not in available and not (root / op.name / f"{op.name}.so").is_file()]


OWN_DIR_MARK = "FLOPSWEEP_OWN_EXTENSIONS_DIR"
"""The variable :func:`flopsweep.deepspeed_backend.prepare` sets beside ``TORCH_EXTENSIONS_DIR`` when the
folder is flopsweep's own (DeepSpeed reads only the latter): :func:`cache_scope` then says so. Was: the
rank's line said ``once for the TORCH_EXTENSIONS_DIR set here (shared ...)`` of flopsweep's own folder,
which ``prepare`` had put in ``TORCH_EXTENSIONS_DIR`` before the line was made."""


def cache_scope(environ: Mapping[str, str]) -> str:
    """Whose builds share the cache an op is built into, as the notice says it: the user's
    ``TORCH_EXTENSIONS_DIR`` where ``environ`` sets it (every environment that sets the same folder), else
    flopsweep's own folder of this Python environment (:func:`flopsweep.deepspeed_backend.extensions_dir`:
    keyed on the environment's prefix and its Python, torch and DeepSpeed versions). Was (session 41):
    ``once per machine``, untrue for a second environment or a torch upgrade, which build their own."""
    given = environ.get("TORCH_EXTENSIONS_DIR")
    if given and given != environ.get(OWN_DIR_MARK):  # flopsweep's own, set by prepare, is not the user's
        return "once for the TORCH_EXTENSIONS_DIR set here (shared by every environment that sets it)"
    versions = "its Python, torch and DeepSpeed versions"
    return f"once for this Python environment and {versions} (another builds its own)"


def build_notice(
    ops: list[JitOp], extensions_dir: str | Path, environ: Mapping[str, str] | None = None
) -> str | None:
    """One line before the first build: what DeepSpeed is building, roughly how long it takes, and whose
    later runs load it from ``extensions_dir`` (:func:`cache_scope` of ``environ``, None: this process's);
    None when nothing is to be built."""
    import os

    if not ops:
        return None
    parts = "; ".join(f"{op.name} ({op.what}): {op.takes}" for op in ops)
    scope = cache_scope(os.environ if environ is None else environ)
    return (
        f"DeepSpeed is building its extension before the first step, {scope}: {parts}. "
        f"Later runs load it from the cache, {extensions_dir}."
    )

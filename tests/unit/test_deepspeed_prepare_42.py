"""DeepSpeed's JIT ops, named by the builders that load them (``jit_ops.JitOp.builder``), so that the run and
the layer probe load them before the probe's clock (``deepspeed_backend.prepare``, ``load_ops``)."""

from __future__ import annotations

import pytest

from flopsweep import jit_ops

deepspeed = pytest.importorskip("deepspeed")


@pytest.mark.parametrize(
    "op", [jit_ops.SHM_COMM, jit_ops.CPU_ADAM, jit_ops.FUSED_ADAM], ids=lambda op: op.name
)
def test_each_jit_op_names_a_builder_deepspeed_has_for_it(op: jit_ops.JitOp) -> None:
    """Each op's builder is a class of DeepSpeed's ``op_builder`` whose ``NAME`` is the op's: the folder the
    cache check (``ops_to_build``) looks in is the one that builder's ``load()`` fills."""
    import deepspeed.ops.op_builder as builders

    assert getattr(builders, op.builder)().NAME == op.name

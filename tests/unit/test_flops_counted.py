"""Model and hardware FLOPs of the GPT-2 family against torch's FlopCounterMode over one real step.

FlopCounterMode counts every matmul that runs (mm, addmm, bmm, SDPA's kernels), forward and
backward, recompute included; it does not count norms, activations, softmax or the optimizer,
and neither do flopsweep's figures. The big shapes run on the meta device (shapes only, no
arithmetic); block-sparse gather plans its layout on the CPU and runs on meta too. Every model
is built the way a run builds it (``flopsweep.backends.build_model``: the family's module, then the
checkpointing policy's wrap of its blocks), and the recompute mode comes from the policy.
"""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch
from helpers import cpu_sdpa_flops
from torch.utils.checkpoint import set_checkpoint_early_stop
from torch.utils.flop_counter import FlopCounterMode

from flopsweep.attention import BlockSparseConfig, check_support, executed_density
from flopsweep.backends import build_model
from flopsweep.checkpointing import recompute_mode
from flopsweep.config import AttentionConfig, CheckpointingConfig, RunConfig
from flopsweep.metrics import hardware_flops as run_hardware_flops
from flopsweep.models.gpt2 import GPT2Config, hardware_flops, model_flops
from flopsweep.options import EveryNConfig

SHAPES = {
    "gpt-tiny": GPT2Config(),
    "gpt-125m@512": GPT2Config(n_layer=12, n_embd=768, n_head=12, seq_len=512, vocab_size=50304),
    "gpt-1.3b": GPT2Config(n_layer=4, n_embd=2048, n_head=16, seq_len=2048, vocab_size=50304),
}
"""gpt-1.3b at 4 of its 24 layers: its width, heads, sequence and vocabulary, whose terms the formulas
scale; every figure is linear in the layer count (a block's FLOPs times ``n_layer``, plus the LM head),
and on meta each block costs the counter's dispatch (about 40 ms), not arithmetic."""
BATCH = 2


def _attention(kind: str, seq_len: int) -> AttentionConfig:
    if kind in ("standard", "sdpa"):
        return check_support(
            AttentionConfig(name=kind), device="cpu", precision="fp32", run_seed=0, seq_len=seq_len
        )
    window = {"blocksparse-diagonal": 1, "blocksparse-local": 2}[kind]
    cfg = BlockSparseConfig(layout="local", window_blocks=window, block_size=32 if seq_len <= 128 else 128)
    return check_support(cfg, device="cpu", precision="fp32", run_seed=0, seq_len=seq_len)


def _run(cfg: GPT2Config, attention: AttentionConfig, checkpointing: str) -> RunConfig:
    return RunConfig(
        model=cfg, attention=attention, activation_checkpointing=CheckpointingConfig(name=checkpointing)
    )


@functools.cache
def _counted(shape: str, kind: str, checkpointing: str, early_stop: bool = True) -> int:
    """FLOPs of one forward and backward of the model a run builds (on meta), under the policy; each
    count is made once per session (the tests below ask for several twice)."""
    cfg = SHAPES[shape]
    attention = _attention(kind, cfg.seq_len)
    model = build_model(_run(cfg, attention, checkpointing), torch.device("meta"))
    with torch.device("meta"):
        tokens = torch.randint(0, cfg.vocab_size, (BATCH, cfg.seq_len + 1))
    with FlopCounterMode(display=False) as counter, set_checkpoint_early_stop(early_stop):
        model(tokens).backward()
    return counter.get_total_flops()


KINDS = ["standard", "sdpa", "blocksparse-diagonal", "blocksparse-local"]


@pytest.mark.parametrize("checkpointing", ["none", "full"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_hardware_flops_match_the_counter(shape: str, kind: str, checkpointing: str) -> None:
    cfg = SHAPES[shape]
    attention = _attention(kind, cfg.seq_len)
    tokens = BATCH * cfg.seq_len
    counted = _counted(shape, kind, checkpointing)
    mode = recompute_mode(_run(cfg, attention, checkpointing))  # eager blocks: none or early_stop
    assert mode == {"none": "none", "full": "early_stop"}[checkpointing]
    hw = hardware_flops(cfg, tokens, executed_density(attention, cfg.seq_len), mode)
    assert hw == pytest.approx(counted, rel=0.005)
    model = model_flops(cfg, tokens, attention.density)
    if (
        kind != "blocksparse-local"
    ):  # gather pads each block row to the longest: more runs than the layout needs
        no_recompute = _counted(shape, kind, "none")
        assert model == pytest.approx(no_recompute, rel=0.005)
    assert model <= counted * 1.005  # model FLOPs never credit more than ran


@pytest.mark.parametrize("shape", ["gpt-tiny", "gpt-1.3b"])
def test_full_recompute_when_early_stop_is_off(shape: str) -> None:
    """The "full" mode (a whole forward again, the count records before session 30 made of a compiled
    block, :mod:`flopsweep.recompute_read`) is what runs with early stop off; a run names ``early_stop``
    compiled or not."""
    cfg = SHAPES[shape]
    attention = _attention("sdpa", cfg.seq_len)
    counted = _counted(shape, "sdpa", "full", early_stop=False)
    compiled = dataclasses.replace(_run(cfg, attention, "full"), compile=True)
    assert recompute_mode(compiled) == "early_stop"
    assert hardware_flops(cfg, BATCH * cfg.seq_len, 1.0, "full") == pytest.approx(counted, rel=0.005)


@pytest.mark.parametrize("arch", ["gpt-tiny", "llama-tiny"])
def test_a_compiled_checkpointed_block_re_runs_all_but_its_last_projection(arch: str) -> None:
    """The compiler's partitioner (``min_cut_rematerialization_partition``, inductor's) keeps in a compiled
    checkpointed block's backward graph only the forward matmuls backward reads: every one but the
    block's last projection (the MLP's out-projection, whose output only the residual add takes), as eager
    early stop, so a compiled block counts ``early_stop`` (:mod:`flopsweep.recompute_read`). Traced through
    torch.compile with the aot_autograd backend and that partitioner; the graphs' matmuls counted."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    from flopsweep.backends import wrap_blocks
    from flopsweep.models import MODELS

    torch._dynamo.reset()
    family = MODELS["llama" if arch.startswith("llama") else "gpt2"]
    cfg = family.config()
    model = family.build(cfg, AttentionConfig(name="sdpa"))
    run = RunConfig(model=cfg, activation_checkpointing=CheckpointingConfig(name="full"))
    block = family.blocks(wrap_blocks(model, run))[0]
    graphs: dict[str, torch.fx.GraphModule] = {}

    def keep(kind: str):
        def compiler(gm: torch.fx.GraphModule, inputs: list) -> object:
            graphs[kind] = gm
            return gm.forward

        return compiler

    backend = aot_autograd(
        fw_compiler=keep("fw"), bw_compiler=keep("bw"), partition_fn=min_cut_rematerialization_partition
    )
    x = torch.randn(2, cfg.seq_len, cfg.n_embd, requires_grad=True)
    args = model.block_args(torch.arange(cfg.seq_len)) if hasattr(model, "block_args") else ()
    torch.compile(block, backend=backend, fullgraph=True)(x, *args).sum().backward()
    torch._dynamo.reset()

    def matmuls(kind: str) -> int:
        names = ("aten.mm", "aten.addmm", "aten.bmm")
        nodes = graphs[kind].graph.nodes
        return sum(n.op == "call_function" and str(n.target).startswith(names) for n in nodes)

    forward = matmuls("fw")
    assert forward >= 4  # q/k/v/o or c_attn/c_proj, and the MLP's
    assert matmuls("bw") == 2 * forward + (forward - 1)  # each matmul's two gradients, all but one again
    assert recompute_mode(dataclasses.replace(run, compile=True)) == "early_stop"


def test_gpt_tiny_default_run_model_flops() -> None:
    """The default run (gpt-tiny, micro batch 4, one rank): exactly 1,610,612,736 FLOPs per step."""
    assert model_flops(GPT2Config(), 4 * 128, 1.0) == 1_610_612_736


def test_early_stop_skips_the_mlp_out_projection() -> None:
    """What non-reentrant checkpoint's early stop leaves out: 2 x 4h^2 per token and layer."""
    cfg = SHAPES["gpt-1.3b"]
    full = _counted("gpt-1.3b", "sdpa", "full", early_stop=False)
    early = _counted("gpt-1.3b", "sdpa", "full", early_stop=True)
    assert full - early == 2 * 4 * cfg.n_embd**2 * BATCH * cfg.seq_len * cfg.n_layer


@pytest.mark.parametrize(
    "policy",
    [CheckpointingConfig(name="selective"), EveryNConfig(every=2), EveryNConfig(every=4)],
    ids=lambda p: f"{p.name}{getattr(p, 'every', '')}",
)
def test_policy_hardware_flops_match_the_counter_on_cpu(policy: CheckpointingConfig) -> None:
    """The run's figure (``metrics.hardware_flops``) against one real step on the CPU of the model
    ``build_model`` makes, SDPA's CPU kernel counted (``helpers.cpu_sdpa_flops``): ``selective``
    saves attention and the 1st and 3rd addmm of a block, ``every_n`` wraps ``l // every`` blocks."""
    cfg = GPT2Config(n_layer=4)
    attention = _attention("sdpa", cfg.seq_len)
    run = dataclasses.replace(_run(cfg, attention, "none"), activation_checkpointing=policy)
    torch.manual_seed(0)
    model = build_model(run, torch.device("cpu"))
    tokens = torch.randint(
        0, cfg.vocab_size, (BATCH, cfg.seq_len + 1), generator=torch.Generator().manual_seed(0)
    )
    with FlopCounterMode(display=False, custom_mapping=cpu_sdpa_flops()) as counter:
        model(tokens).backward()
    expected = run_hardware_flops(run, BATCH * cfg.seq_len, 1.0)
    assert counter.get_total_flops() == pytest.approx(expected, rel=0.005)
    assert expected > model_flops(cfg, BATCH * cfg.seq_len, 1.0)

"""The eager MoE experts' whole-parameter gradients (``hf.EAGER_EXPERT_GRADIENTS``,
``memory.eager_expert_bytes``): what autograd makes in one ``transformers`` experts module's backward,
counted on the CPU (every tensor an op makes, until torch frees its storage), against the term; the term
by hand for OLMoE-1B-7B, in the moments it joins, and none for ``grouped_mm`` or a dense model."""

from __future__ import annotations

import dataclasses
import weakref

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.weak import WeakIdKeyDictionary

from flopsweep.backends import FSDPConfig
from flopsweep.config import BackendConfig, RunConfig
from flopsweep.layout import Layout
from flopsweep.memory import eager_expert_bytes, estimate
from flopsweep.models import hf
from flopsweep.models.hf import EAGER_EXPERT_GRADIENTS, HFConfig

transformers = pytest.importorskip("transformers")


class _MadeBytes(TorchDispatchMode):
    """Bytes of the storages the ops under it made (not ``skip``'s, the parameters'), the most at once."""

    def __init__(self, skip: set[int]) -> None:
        super().__init__()
        self.skip, self.seen, self.now, self.peak = skip, WeakIdKeyDictionary(), 0, 0

    def _free(self, n: int) -> None:
        self.now -= n

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in torch.utils._pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor):
                st = t.untyped_storage()
                if st not in self.seen and st.data_ptr() not in self.skip:
                    self.seen[st] = st.nbytes()
                    self.now += st.nbytes()
                    weakref.finalize(st, self._free, st.nbytes())
        self.peak = max(self.peak, self.now)
        return out


@pytest.mark.parametrize("experts, top_k", [(16, 2), (32, 4)])
def test_the_eager_experts_backward_holds_whole_parameter_gradients(experts: int, top_k: int) -> None:
    """OLMoE's eager experts module in bf16, 16 tokens (activations under 3% of the weights): its backward's
    peak is the gradients ``G + D`` plus ``EAGER_EXPERT_GRADIENTS`` whole ``gate_up_proj`` gradients."""
    from transformers.models.olmoe.modeling_olmoe import OlmoeExperts

    conf = transformers.OlmoeConfig(
        hidden_size=64, intermediate_size=128, num_experts=experts, num_experts_per_tok=top_k
    )
    torch.manual_seed(0)
    module = OlmoeExperts(conf)
    for p in module.parameters():
        torch.nn.init.normal_(p)
    module = module.to(torch.bfloat16)
    tokens = 16
    x = torch.randn(tokens, 64, dtype=torch.bfloat16, requires_grad=True)
    index = torch.stack([torch.randperm(experts)[:top_k] for _ in range(tokens)])
    weights = torch.rand(tokens, top_k, dtype=torch.bfloat16, requires_grad=True)
    loss = module(x, index, weights).float().sum()
    with _MadeBytes({p.untyped_storage().data_ptr() for p in module.parameters()}) as made:
        loss.backward()
    g, d = (2 * p.numel() for p in (module.gate_up_proj, module.down_proj))
    assert g > d
    counted = g + d + EAGER_EXPERT_GRADIENTS * g
    assert counted <= made.peak < 1.03 * counted, (made.peak / g, counted / g)
    assert made.peak > 1.5 * (g + d)  # the parameter's own gradients alone fall far short


def _olmoe(experts: str = "eager", backend: str = "fsdp") -> RunConfig:
    model = HFConfig(config="olmoe-1b-7b", experts=experts)
    hf.check(model)
    backends = {"fsdp": FSDPConfig(name="fsdp")}
    cfg = dataclasses.replace(
        RunConfig(), model=model, backend=backends.get(backend) or BackendConfig(name=backend)
    )
    cfg.batch.micro_batch_size = 4
    return cfg


def test_the_term_by_hand_for_olmoe() -> None:
    """OLMoE-1B-7B: ``gate_up_proj`` is 64 x 2048 x 2048 elements; FSDP2's unsharded bf16 weights make
    2 x 2 bytes of it (1 GiB), ``single``'s autocast over fp32 weights 2 x 4; both moments count it once."""
    g = 64 * 2 * 1024 * 2048
    eager = _olmoe()
    assert eager_expert_bytes(eager, Layout()) == 2 * 2 * g == 2**30
    assert eager_expert_bytes(_olmoe(backend="single"), Layout()) == 2 * 4 * g
    grouped = _olmoe("grouped_mm")
    assert eager_expert_bytes(grouped, Layout()) == 0
    with_term, without = estimate(eager, Layout()), estimate(grouped, Layout())
    assert with_term.lowest_block - without.lowest_block == 2**30
    assert with_term.block_backward - without.block_backward == 2**30


def test_no_term_for_a_dense_model() -> None:
    model = HFConfig(config="qwen3-tiny")
    hf.check(model)
    cfg = dataclasses.replace(RunConfig(), model=model, backend=FSDPConfig(name="fsdp"))
    assert eager_expert_bytes(cfg, Layout()) == 0

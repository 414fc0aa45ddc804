"""``activation_checkpointing=casts``, counted on the CPU: a Llama built as ``backend=single`` builds it
(``parallelize.build_model``, bf16 autocast over fp32 weights), eager and ``compile=true``, saves for
backward exactly what ``none`` saves less the blocks' bf16 weight copies (2 bytes a Linear weight's
parameter), and its first step's loss and gradient norm equal ``none``'s. Saved storages are counted as
tests/integration/test_saved_tensors.py counts them (``torch.autograd.graph.saved_tensors_hooks``, once
per storage, parameters left out)."""

from __future__ import annotations

import dataclasses

import pytest

from flopsweep.config import CheckpointingConfig, RunConfig
from flopsweep.models.llama import LlamaConfig

COUNT = LlamaConfig(
    name="llama-count", n_layer=2, n_embd=96, n_head=4, n_kv_head=2, ffn_dim=320, seq_len=64, vocab_size=256
)
"""Widths that differ (``h`` 96, ``kv`` 48, ``ffn`` 320) from each other and from the sequence (64)."""
BLOCK_LINEAR = 96 * 96 + 2 * 96 * 48 + 96 * 96 + 3 * 96 * 320
"""One block's Linear weights (``wq``, ``wk``, ``wv``, ``wo``, ``w1``, ``w3``, ``w2``): 119,808."""
MICRO = 2


def _step(policy: str, compile_: bool) -> tuple[dict[str, int], float, float]:
    """Build the model under ``policy``, run one step (bf16 autocast) whose forward's saved storages are
    summed by dtype (bytes), and return them, the loss and the total gradient norm."""
    import torch
    import torch._dynamo

    from flopsweep.parallelize import build_model

    torch._dynamo.reset()  # each build compiles afresh (no recompile limit reached across builds)
    torch.set_num_threads(1)
    cfg = dataclasses.replace(
        RunConfig(),
        model=COUNT,
        device="cpu",
        compile=compile_,
        activation_checkpointing=CheckpointingConfig(name=policy),
    )
    torch.manual_seed(0)
    model = build_model(cfg, torch.device("cpu"))
    tokens = torch.randint(
        0, COUNT.vocab_size, (MICRO, COUNT.seq_len + 1), generator=torch.Generator().manual_seed(1)
    )
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, tuple[str, int]] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        if st.data_ptr() and st.data_ptr() not in params:
            seen.setdefault(st.data_ptr(), (str(t.dtype).removeprefix("torch."), st.nbytes()))
        return t

    with torch.autocast("cpu", dtype=torch.bfloat16):
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = model(tokens)
    loss.backward()
    norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()]))
    by_dtype: dict[str, int] = {}
    for dtype, nbytes in seen.values():
        by_dtype[dtype] = by_dtype.get(dtype, 0) + nbytes
    return by_dtype, float(loss.detach()), float(norm)


@pytest.mark.parametrize(
    "compile_", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["eager", "compiled"]
)
def test_casts_saves_what_none_saves_less_the_weight_copies(compile_: bool) -> None:
    """``casts`` keeps ``2 x 119,808`` bytes a block fewer than ``none``, all of them bf16 (the weight
    copies); its fp32 saved bytes equal ``none``'s; loss and gradient norm match within 1e-5."""
    none, loss_none, norm_none = _step("none", compile_)
    casts, loss_casts, norm_casts = _step("casts", compile_)
    assert none["bfloat16"] - casts["bfloat16"] == 2 * BLOCK_LINEAR * COUNT.n_layer, (none, casts)
    assert {d: n for d, n in casts.items() if d != "bfloat16"} == {
        d: n for d, n in none.items() if d != "bfloat16"
    }
    assert loss_casts == pytest.approx(loss_none, abs=1e-5)
    assert norm_casts == pytest.approx(norm_none, abs=1e-5)


@pytest.mark.slow
def test_a_casts_run_trains_as_none_does(tmp_path) -> None:
    """Real runs (``run.py``, one CPU rank, bf16 autocast, the same seed), eager and compiled: ``casts``'s
    first and last losses equal ``none``'s within 1e-5; its record counts no recompute, and its hardware
    FLOPs equal its model FLOPs (HFU = MFU)."""
    from helpers import records, run_py

    proc = run_py(
        "-m",
        "device=cpu",
        "precision=bf16",
        "backend=single",
        "model=llama-tiny",
        "steps.warmup=1",
        "steps.measure=2",
        "compile=false,true",
        "activation_checkpointing=none,casts",
        f"hydra.sweep.dir={tmp_path}",
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    recs = records(tmp_path)
    assert len(recs) == 4 and all(r["status"] == "ok" for r in recs), [r["error"] for r in recs]
    by = {
        (r["config"]["compile"], r["config"]["activation_checkpointing"]["name"]): r["metrics"] for r in recs
    }
    for compiled in (False, True):
        casts, none = by[(compiled, "casts")], by[(compiled, "none")]
        for key in ("loss_first", "loss_last"):
            assert casts[key] == pytest.approx(none[key], abs=1e-5), (compiled, key)
        assert casts["recompute"] == "none"
        assert casts["hardware_flops_per_iteration"] == casts["model_flops_per_iteration"]


@pytest.mark.parametrize("policy, alive", [("none", 2 * 7 + 1), ("casts", 1)])
def test_eager_casts_leaves_only_the_heads_weight_copy_alive_when_forward_ends(
    policy: str, alive: int
) -> None:
    """Eager, inside autocast when forward ends (the estimate's ``forward_end``): ``none``'s autocast cache
    (and backward) hold every weight's bf16 copy, two blocks' seven and the head's; ``casts`` runs its
    blocks with the cache off and saves none of theirs, so only the head's is alive
    (``memory_terms.forward_autocast_cached``)."""
    import weakref

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from flopsweep.parallelize import build_model

    cfg = dataclasses.replace(
        RunConfig(), model=COUNT, device="cpu", activation_checkpointing=CheckpointingConfig(name=policy)
    )
    model = build_model(cfg, torch.device("cpu"))
    casts: list[weakref.ref] = []

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if (
                func is torch.ops.aten._to_copy.default
                and args[0].dim() == 2
                and args[0].dtype == torch.float32
            ):
                casts.append(weakref.ref(out))
            return out

    tokens = torch.randint(0, COUNT.vocab_size, (MICRO, COUNT.seq_len + 1))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with Watch():
            loss = model(tokens)
        assert len(casts) == 2 * 7 + 1 and sum(r() is not None for r in casts) == alive
    loss.backward()

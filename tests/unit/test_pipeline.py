"""Pipeline parallelism (``parallel.pp > 1``, :mod:`flopsweep.pipeline`): the split into stages, the
refusals before launch, and, on four gloo ranks (PP 2 x FSDP 2 and TP 2 x PP 2, fp32), the first step of
each schedule against the same model on one rank: loss, gradient norm and the tied weight.

What is comparable with the one-rank model: the pipeline keeps GPT-2's (and llama-tiny's) LM head tied
to the token embedding by summing the two copies' gradients (first and last stage) after the backward,
so its model *is* the one-rank model. The one-rank reference runs that model on the union of the
data-parallel ranks' batches (``make_batches`` of data-parallel ranks 0 and 1, whose mean loss is the
global one): the first-step loss is the mean the step returns, the gradient norm is the tied model's
(the tied weight's gradient is the sum of its two uses, counted once), and after the step both copies
hold the same values.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from flopsweep.config import BackendConfig, ConfigError, ParallelConfig, RunConfig
from flopsweep.models.gpt2 import GPT2Config
from flopsweep.models.llama import LlamaConfig
from flopsweep.options import DeepSpeedConfig, FSDPConfig
from flopsweep.pipeline import loss_fn, split_stage, stage_ids, stage_layers


def test_stages_split_the_layers_evenly_and_loop_over_the_ranks() -> None:
    assert [list(stage_layers(8, 4, s)) for s in range(4)] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert stage_ids(0, 2, 2) == [0, 2] and stage_ids(1, 2, 2) == [1, 3]  # Interleaved1F1B, pp 2
    assert stage_ids(1, 4, 1) == [1]
    with pytest.raises(ValueError, match="3 stages do not divide 4 layers"):
        stage_layers(4, 3, 0)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_the_stages_together_compute_the_models_loss(arch: str) -> None:
    """Two stages, each split from its own fresh build (the same seed), chained: the loss of the
    whole model, and each stage holds exactly its own parameters (the tied head on both ends)."""
    cfg = GPT2Config(n_layer=4) if arch == "gpt2" else LlamaConfig(n_layer=4)
    from flopsweep.models import family

    fam = family(cfg)

    def fresh() -> torch.nn.Module:
        torch.manual_seed(0)
        return fam.build(cfg, "standard")

    whole = fresh()
    tokens = torch.randint(
        0, cfg.vocab_size, (2, cfg.seq_len + 1), generator=torch.Generator().manual_seed(1)
    )
    stages = []
    for s in range(2):
        model = fresh()
        stages.append(split_stage(model, fam.blocks(model), s, 2))
    logits = stages[1](stages[0](tokens[:, :-1]))
    torch.testing.assert_close(loss_fn(logits, tokens[:, 1:]), whole(tokens), rtol=0, atol=1e-6)
    names = [{n for n, _ in st.named_parameters()} for st in stages]
    embed = "model.wte.weight" if arch == "gpt2" else "model.tok_embeddings.weight"
    assert embed in names[0] and embed in names[1]  # tied head: a copy on the last stage
    assert {n.split(".")[1] for n in names[0] if n.startswith("layers.")} == {"0", "1"}
    assert {n.split(".")[1] for n in names[1] if n.startswith("layers.")} == {"2", "3"}
    blocks = "h" if arch == "gpt2" else "layers"
    assert not any(n.startswith(f"model.{blocks}.") for group in names for n in group)  # blocks moved
    head = "model.ln_f.weight" if arch == "gpt2" else "model.norm.weight"
    assert head in names[1] and head not in names[0]
    whole_names = {n for n, _ in whole.named_parameters()}
    assert len(whole_names) + 1 == len(names[0]) + len(names[1])  # every parameter, the tied one twice


def test_the_pipeline_rules_on_the_config_alone() -> None:
    from flopsweep.pipeline import check

    check(RunConfig())  # pp=1 with every pipeline key at its default
    cfg = RunConfig(backend=FSDPConfig(), parallel=ParallelConfig(pp=2))
    check(cfg)
    check(dataclasses.replace(cfg, parallel=ParallelConfig(pp=2, tp=2)))  # tensor-parallel stages
    with pytest.raises(ConfigError, match="parallel.pp_stages_per_rank=0"):
        check(dataclasses.replace(cfg, parallel=ParallelConfig(pp=2, pp_stages_per_rank=0)))


@pytest.mark.parametrize(
    "backend", [DeepSpeedConfig(), BackendConfig(name="ddp"), BackendConfig(name="single")]
)
def test_one_place_refuses_a_pipeline_on_another_backend(backend: BackendConfig) -> None:
    """``layout.check_built`` (which ``validate`` runs before the cross-axis rules) is the one place
    that refuses ``parallel.pp > 1`` off ``backend=fsdp``; ``pipeline.check`` keeps only the
    pipeline's own rules."""
    from flopsweep.layout import check_built
    from flopsweep.pipeline import check

    cfg = RunConfig(backend=backend, parallel=ParallelConfig(pp=2))
    check(cfg)  # no second copy of the backend rule
    with pytest.raises(ConfigError, match=f"parallel.pp=2: .*backend={backend.name} "):
        check_built(cfg.parallel, backend.name)

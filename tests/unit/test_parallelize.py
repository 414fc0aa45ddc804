"""``flopsweep.parallelize.parallelize``: the steps run in their fixed order on a real model, the
degrees not built yet stop on the rank, and every backend builds through it (the loss equality of
the backends and layouts is in test_llama_backends.py, test_tensor_parallel.py, test_pipeline.py)."""

from __future__ import annotations

import pytest
import torch
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper

from flopsweep.config import CheckpointingConfig, RunConfig
from flopsweep.layout import Layout
from flopsweep.models import family
from flopsweep.parallelize import make_model, parallelize

CPU = torch.device("cpu")


def test_checkpointing_and_compile_come_before_the_split_and_data_parallel_last() -> None:
    """The pipeline step sees the blocks already wrapped by the checkpointing policy, and the
    data-parallel step gets what the split returned."""
    cfg = RunConfig(activation_checkpointing=CheckpointingConfig(name="full"))
    seen: list[tuple[str, bool]] = []

    def wrapped(model: torch.nn.Module) -> bool:
        return all(isinstance(b, CheckpointWrapper) for b in family(cfg.model).blocks(model))

    def split(model: torch.nn.Module) -> torch.nn.Module:
        seen.append(("split", wrapped(model)))
        return model

    def data_parallel(model: torch.nn.Module) -> torch.nn.Module:
        seen.append(("data_parallel", wrapped(model)))
        return torch.nn.Sequential(model)

    out = parallelize(make_model(cfg, CPU), cfg, Layout(), split=split, data_parallel=data_parallel)
    assert seen == [("split", True), ("data_parallel", True)]
    assert isinstance(out, torch.nn.Sequential)


def test_without_steps_the_model_is_the_one_rank_model() -> None:
    """At every degree 1 and no data-parallel step, ``parallelize`` leaves the weights as built."""
    cfg = RunConfig()
    bare = make_model(cfg, CPU)
    made = parallelize(make_model(cfg, CPU), cfg, Layout())
    for (name, a), (_, b) in zip(bare.named_parameters(), made.named_parameters(), strict=True):
        assert torch.equal(a, b), name


@pytest.mark.parametrize(("degree", "words"), [("ep", "expert parallelism")])
def test_a_degree_not_built_stops_on_the_rank(monkeypatch, degree: str, words: str) -> None:
    """Validation refuses it first (test_layout.py); a layout that reaches a rank anyway raises. Every
    degree is built now: the spec is marked ``built=False`` here (test_degrees.py does it for a toy)."""
    import dataclasses

    from flopsweep import degrees

    specs = tuple(
        dataclasses.replace(s, built=False) if s.name == degree else s for s in degrees.DEGREE_SPECS
    )
    monkeypatch.setattr(degrees, "DEGREE_SPECS", specs)
    cfg = RunConfig()
    layout = Layout(dp_shard=2, **{degree: 2})
    with pytest.raises(NotImplementedError, match=words):
        parallelize(make_model(cfg, CPU), cfg, layout)

"""steps.gc_freq on a real trainer: no automatic collection inside the steps, generation 1 every N.

The collector's threshold is set to 1 allocation, so that with Python's automatic collection on, a
collection starts in every step (the counter-check below); under ``GarbageCollection(3)`` the only
collections are the policy's own, after steps 3 and 6 of 7 (warm-up and measured counted together).
"""

from __future__ import annotations

import gc

import torch

from flopsweep.gc_policy import GarbageCollection
from flopsweep.layout import Layout

BASE = ["model=llama-tiny", "device=cpu", "precision=fp32", "backend=single"]


def _steps(cfg, every: int, folder) -> list[int]:
    """The generations of every collection that started during 3 warm-up and 4 measured steps."""
    from flopsweep.backends import build_trainer
    from flopsweep.rank_faults import Phase
    from flopsweep.window import MeasuredWindow
    from flopsweep.worker import measure, warm_up

    trainer = build_trainer(cfg, torch.device("cpu"), Layout())
    gen = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, cfg.model.vocab_size, (2, cfg.model.seq_len + 1), generator=gen)]
    started: list[int] = []
    phase = Phase(folder / "rank0_phase.txt", fault=cfg.fault, rank=0)

    def seen(phase: str, info: dict) -> None:
        if phase == "start":
            started.append(info["generation"])

    threshold, was = gc.get_threshold(), gc.isenabled()
    gc.enable()
    try:
        with GarbageCollection(every) as collector:
            gc.set_threshold(1, 1, 1)
            gc.callbacks.append(seen)
            try:
                warm_up(trainer, batches, 3, torch.device("cpu"), lambda _: None, phase, collector.step_done)
                measure(
                    trainer,
                    batches,
                    4,
                    MeasuredWindow(torch.device("cpu")),
                    lambda _: None,
                    None,
                    collector.step_done,
                )
            finally:
                gc.callbacks.remove(seen)
                gc.set_threshold(*threshold)
    finally:
        (gc.enable if was else gc.disable)()
    return started


def test_only_the_policys_collections_fall_in_the_steps(hydra_compose, tmp_path) -> None:
    from helpers import validate

    cfg = validate(hydra_compose(BASE))
    assert cfg.steps.gc_freq == 0  # Python's automatic collection, as before the key
    assert _steps(cfg, 3, tmp_path) == [1, 1]
    automatic = _steps(cfg, 0, tmp_path)
    assert len(automatic) > 7, automatic  # Python's own: many per step at a threshold of 1

"""A CPU run's step probe says so before it runs, and its fix is accepted (docs/reliability-14.md #1069)."""

from __future__ import annotations

from flopsweep.cpu_probe import runs
from flopsweep.worker import cpu_probe_line


def test_the_cpu_probe_is_said_before_it_runs_and_its_fix_skips_it(hydra_compose) -> None:
    """``model.seq_len=100000 device=cpu`` was silent 2.5 min after ``launching 1 rank``: the probe's
    flash attention over 100,000 tokens a step, in the ``init`` phase."""
    typed = ["model.seq_len=100000", "device=cpu", "steps.warmup=1", "steps.measure=1"]
    cfg = hydra_compose(typed)
    assert runs(cfg, "cpu")
    line = cpu_probe_line(cfg)
    micro = cfg.batch.micro_batch_size
    assert line == (
        f"timing the step before warm-up (the CPU step probe: a few steps of {100000 * micro:,} tokens each; "
        "predict.cpu_probe=false skips it)"
    )
    fix = line.rsplit("; ", 1)[1].removesuffix(" skips it)")
    assert not runs(hydra_compose([*typed, fix]), "cpu")  # typed back: composed, and no probe runs

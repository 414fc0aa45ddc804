"""End to end, as a user runs it: ``python run.py`` in a subprocess, real ranks, real backends."""

from __future__ import annotations

import pytest


def test_a_cpu_run_over_the_free_host_memory_is_refused_by_the_plans_estimate() -> None:
    """On the CPU the launch refuses a run whose ranks need more than the host memory free now, by
    the figure plan=true shows (memory.peak_bytes) with the CPU's margin, in one line naming the need,
    the free memory and the fix; a tiny model goes ahead. gpt-tiny at micro batch 65536 and 8192
    tokens keeps about 3.8 TiB of activations per rank: over any machine's free memory, while its
    weights (16 MiB) pass validation's check against the machine's memory."""
    import dataclasses

    from flopsweep import hostmem
    from flopsweep.config import ConfigError, RunConfig
    from flopsweep.job import check_free_host_memory, plan_estimate
    from flopsweep.memory import peak_bytes
    from flopsweep.options import FSDPConfig
    from flopsweep.plan import Environment, plan
    from flopsweep.text import significant

    host = Environment(cpu_count=8, host_memory_bytes=hostmem.total_bytes())
    tiny = plan(RunConfig(device="cpu", nproc_per_node="2", backend=FSDPConfig()), host)
    assert check_free_host_memory(tiny) is None
    base = RunConfig(device="cpu", nproc_per_node="2", backend=FSDPConfig())
    cfg = dataclasses.replace(
        base,
        model=dataclasses.replace(base.model, seq_len=8192),
        batch=dataclasses.replace(base.batch, micro_batch_size=65536),
    )
    big = plan(cfg, host)  # validation passes: the states are tiny
    per_rank = peak_bytes(big.cfg, big.layout)
    assert per_rank > 2**40  # about 3.8 TiB
    assert plan_estimate(big, host, placed=False)["est_peak_gib_per_rank"] == significant(per_rank / 2**30)
    with pytest.raises(ConfigError) as err:  # a GPU visible: device=cuda is a fix (none: device_fix_40)
        check_free_host_memory(big, env=dataclasses.replace(host, cuda_available=True, gpu_count=1))
    message = str(err.value)
    assert err.value.key == "model" and "\n" not in message
    need = hostmem.cpu_need_bytes(per_rank, 2)  # the estimate with the CPU's margin (session 40)
    assert f"2 ranks need about {need / 2**30:.1f} GiB of host memory" in message
    assert "GiB is free now" in message and "batch.micro_batch_size" in message
    # one rank needs more than is free: fewer ranks is no fix (a fresh-user trial took it and grew)
    assert "nproc_per_node=1" not in message and "device=cuda" in message

"""``resume=true`` takes over the probes of the searches of the record it runs again
(:mod:`flopsweep.reuse`): on the same set-up and kind of machine a size probed already is not run
again; on another machine nothing is reused."""

from __future__ import annotations

import dataclasses
import logging
import socket
from pathlib import Path

import pytest
from helpers import make_plan

from flopsweep.autobatch import find_micro_batch
from flopsweep.memory import estimate
from flopsweep.modelsearch import find_largest_model
from flopsweep.reuse import Machine, Resumed, reusable_probes
from flopsweep.sizesearch import GIB, NothingFits

TINY = ["model=llama-tiny", "device=cpu", "nproc_per_node=1", "batch.micro_batch_size=1"]


CPU = Machine(device_name="cpu", gpu_memory_bytes=None, world_size=1, hostname=socket.gethostname())


def estimates(plan, sizes) -> dict[int, int]:
    """``memory.estimate``'s peak per rank (bytes) of ``plan`` at each ``n_layer`` of ``sizes``."""
    model = plan.cfg.model
    return {
        n: estimate(
            dataclasses.replace(plan.cfg, model=dataclasses.replace(model, n_layer=n)), plan.layout
        ).total
        for n in sizes
    }


def entry(n: int, status: str, est: int | None = None) -> dict:
    """A ``run.model_search`` probe as the search records it (``tokens_per_s`` made up: carried only)."""
    return {
        "n_layer": n,
        "n_params": 1000 * n,
        "status": status,
        "peak_cuda_allocated_bytes": None,
        "estimated_peak_bytes": est,
        "tokens_per_s": 123.0 if status == "ok" else None,
        **({"reason": "estimated peak over the budget"} if status != "ok" else {}),
    }


def old_record(probes: list[dict], *, device_name: str = "cpu", world_size: int = 1, **search) -> dict:
    system = {"device_name": device_name, "world_size": world_size, "hostname": socket.gethostname()}
    model_search = {"grow": "n_layer", "micro_batch_size": 1, "gpu_memory_bytes": None, "probes": probes}
    return {
        "status": "error",
        "run": {"id": "abc123", "model_search": model_search | search},
        "system": system,
    }


def test_reusable_probes_are_those_of_the_same_machine_and_set_up_that_ran(caplog) -> None:
    """Fits and "too large" probes are taken over by size; an ``error`` and a ``refused`` one run
    again. Another GPU, another world size or another micro batch: none, one line saying why."""
    probes = [entry(1, "ok", 10), entry(2, "error"), entry(4, "over_budget", 40), entry(3, "refused")]
    same = {"grow": "n_layer", "micro_batch_size": 1}
    resumed = Resumed(record=old_record(probes), name="metrics.error-abc123.json")
    with caplog.at_level(logging.INFO, logger="flopsweep"):
        taken = reusable_probes(
            resumed, "model_search", "n_layer", here=CPU, same=same, what="search.model=largest"
        )
    assert sorted(taken) == [1, 4] and taken[4] == probes[2]
    assert caplog.messages == [
        "search.model=largest: resume=true: 2 probes of run abc123 (metrics.error-abc123.json; "
        "n_layer 1, 4) can stand in for the sizes this search reaches",
        "search.model=largest: resume=true: not reused from run abc123: n_layer 2 (status error: runs again "
        "if the search reaches it); n_layer 3 (status refused: runs again if the search reaches it)",
    ]
    h100 = Resumed(
        record=old_record(probes, device_name="NVIDIA H100 80GB HBM3"), name="metrics.error-abc123.json"
    )
    two = Resumed(record=old_record(probes, world_size=2), name="metrics.error-abc123.json")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="flopsweep"):
        for other in (h100, two):
            assert reusable_probes(other, "model_search", "n_layer", here=CPU, same=same, what="s") == {}
        assert (
            reusable_probes(
                resumed, "model_search", "n_layer", here=CPU, same=same | {"micro_batch_size": 2}, what="s"
            )
            == {}
        )
        assert reusable_probes(None, "model_search", "n_layer", here=None, same=same, what="s") == {}
    assert caplog.messages == [
        "s: resume=true: the probes of run abc123 (metrics.error-abc123.json) are not reused: another "
        "machine (device_name NVIDIA H100 80GB HBM3, this run's cpu)",
        "s: resume=true: the probes of run abc123 (metrics.error-abc123.json) are not reused: another "
        "machine (world_size 2, this run's 1)",
        "s: resume=true: the probes of run abc123 (metrics.error-abc123.json) are not reused: another "
        "set-up (micro_batch_size 1, this run's 2)",
    ]
    gpu = dataclasses.replace(CPU, device_name="NVIDIA H200", gpu_memory_bytes=150 * GIB, hostname=None)
    h200 = old_record(probes, device_name="NVIDIA H200", gpu_memory_bytes=150 * GIB)
    assert sorted(
        reusable_probes(
            Resumed(record=h200, name="x"), "model_search", "n_layer", here=gpu, same=same, what="s"
        )
    ) == [1, 4]
    smaller = Machine(
        device_name="NVIDIA H200", gpu_memory_bytes=140 * GIB, world_size=1, hostname=None
    )  # a MIG slice, say
    unknown = old_record(probes, device_name="NVIDIA H200")  # a record from before gpu_memory_bytes
    for here, record in ((smaller, h200), (gpu, unknown)):
        assert (
            reusable_probes(
                Resumed(record=record, name="x"), "model_search", "n_layer", here=here, same=same, what="s"
            )
            == {}
        )


def test_a_search_whose_every_size_was_probed_runs_nothing_and_finds_the_same_size(
    hydra_compose, tmp_path: Path, caplog
) -> None:
    """The probes of a finished search, handed back: no probe runs (no ``model_search/`` folder), the
    size found is the one those probes bound (3 of 4 under a budget between 3 and 4 blocks), each
    probe is listed as reused with its figures, and the estimate of the fits guides the search."""
    base = make_plan(hydra_compose(TINY))
    est = estimates(base, range(1, 5))
    budget = (est[3] + est[4]) / 2 / GIB
    plan = make_plan(
        hydra_compose(
            [*TINY, "search.model=largest", "search.max_n_layer=4", f"search.memory_budget_gib={budget:.9f}"]
        )
    )
    reuse = {n: entry(n, "ok", est[n]) for n in (1, 2, 3)} | {4: entry(4, "over_budget", est[4])}
    with caplog.at_level(logging.INFO, logger="flopsweep"):
        found, record = find_largest_model(plan, tmp_path, reuse=reuse)
    assert found.cfg.model.n_layer == record["result"] == 3 and found.cfg.model.name == "llama-tiny-L3"
    assert [p["n_layer"] for p in record["probes"]] == [1, 2, 3, 4]  # 3 predicted from 1 and 2's estimates
    assert all(p.pop("reused") is True for p in record["probes"]) and record["probes"] == [
        reuse[n] for n in (1, 2, 3, 4)
    ]
    assert not (tmp_path / "model_search").exists()
    assert sum("(reused: resume=true)" in m for m in caplog.messages) == 4
    # the smallest size reused as too large: nothing fits, with that probe's reason
    with pytest.raises(NothingFits) as err:
        find_largest_model(plan, tmp_path, reuse={1: entry(1, "over_budget", est[1])})
    assert err.value.outcome.status == "oom" and err.value.outcome.error["type"] == "OverMemoryBudget"
    assert "reused, not run again" in err.value.outcome.error["message"]
    assert err.value.record["probes"][0]["reused"] is True and not (tmp_path / "model_search").exists()


def test_a_micro_batch_search_takes_over_its_probes_too(hydra_compose, tmp_path: Path, caplog) -> None:
    """``batch=auto``'s probes, handed back for every size (a budget between the estimates of micro
    batch 2 and 3): nothing runs (no ``batch_search/``), it chooses 2, as the probes bound it, and
    lists them as reused; the record names the model size it searched at (``n_layer``), which a
    resumed search compares."""
    plan = make_plan(hydra_compose([*TINY, "batch=auto", "batch.max_micro_batch_size=4"]))
    est = {
        n: estimate(
            dataclasses.replace(plan.cfg, batch=dataclasses.replace(plan.cfg.batch, micro_batch_size=n)),
            plan.layout,
        ).total
        for n in range(1, 5)
    }
    budget = (est[2] + est[3]) / 2 / GIB
    plan = make_plan(
        hydra_compose(
            [*TINY, "batch=auto", "batch.max_micro_batch_size=4", f"search.memory_budget_gib={budget:.9f}"]
        )
    )
    reuse = {
        n: {
            "micro_batch_size": n,
            "status": "ok" if n <= 2 else "over_budget",
            "peak_cuda_allocated_bytes": None,
            "cuda_alloc_retries": None,
        }
        for n in range(1, 5)
    }
    with caplog.at_level(logging.INFO, logger="flopsweep"):
        size, record = find_micro_batch(plan, tmp_path, reuse=reuse)
    assert size == record["result"] == record["largest_fitting"] == 2
    assert record["n_layer"] == plan.cfg.model.n_layer and record["gpu_memory_bytes"] is None
    assert all(p.pop("reused") is True for p in record["probes"])
    assert record["probes"] == [reuse[n] for n in [p["micro_batch_size"] for p in record["probes"]]]
    assert {p["micro_batch_size"] for p in record["probes"]} >= {2, 3}  # the fit and the bound
    assert not (tmp_path / "batch_search").exists()
    assert sum("(reused: resume=true)" in m for m in caplog.messages) == len(record["probes"])


def test_the_probes_of_a_run_that_injected_a_fault_are_not_reused(caplog) -> None:
    """A trial resumed, without the fault, a search whose every probe ``fault.kind=kill`` had killed:
    the killed probe was reused as "too large", and the directory could never find a size. A run
    that injected a fault now hands over no probe, and one line says why."""
    probes = [entry(1, "killed"), entry(2, "ok", 10)]
    record = old_record(probes) | {"config": {"fault": {"kind": "kill", "rank": 0, "phase": "warmup"}}}
    same = {"grow": "n_layer", "micro_batch_size": 1}
    with caplog.at_level(logging.INFO, logger="flopsweep"):
        taken = reusable_probes(
            Resumed(record=record, name="metrics.error-abc123.json"),
            "model_search",
            "n_layer",
            here=CPU,
            same=same,
            what="search.model=largest",
        )
    assert taken == {}
    assert caplog.messages == [
        "search.model=largest: resume=true: the probes of run abc123 (metrics.error-abc123.json) are not "
        "reused: it injected fault.kind=kill"
    ]
    clean = old_record(probes) | {"config": {"fault": {"kind": "none"}}}
    assert sorted(
        reusable_probes(
            Resumed(record=clean, name="x"), "model_search", "n_layer", here=CPU, same=same, what="s"
        )
    ) == [1, 2]

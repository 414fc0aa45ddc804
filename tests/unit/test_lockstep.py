"""The node agents' lockstep (:mod:`flopsweep.lockstep`): a step's plan travels as JSON and is rebuilt
on the follower's own plan; a step's folder stays inside the job folder. No process starts here; the
two-node searches themselves run in tests/integration/test_slurm_search.py (``-m slurm``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from flopsweep import config as fconfig
from flopsweep.autobatch import MICRO_BATCH
from flopsweep.lockstep import plan_from_json, plan_json, run_folder
from flopsweep.modelsearch import at_n_layer_unchecked
from flopsweep.plan import Environment, resolve

AGENT = Environment(cpu_count=2, in_submitit=True, under_slurm=True, slurm_job=True)


def _plan(**overrides):
    cfg = fconfig.RunConfig(
        backend=fconfig.BackendConfig(name="fsdp"), device="cpu", nproc_per_node="2", nnodes=2, **overrides
    )
    return resolve(cfg, AGENT)


def test_a_probes_plan_is_rebuilt_on_the_followers_own_plan() -> None:
    """Node 0's probe (micro batch 8, one warm-up and one measured step, another model depth) comes
    back on the follower's plan as the same plan: equal configs, layout and shape."""
    own = _plan()
    probe_cfg = MICRO_BATCH.at(own.cfg, 8)
    probe_cfg = dataclasses.replace(
        probe_cfg, steps=dataclasses.replace(probe_cfg.steps, warmup=1, measure=1)
    )
    probe = at_n_layer_unchecked(dataclasses.replace(own, cfg=probe_cfg), 5, "gpt-tiny")
    rebuilt = plan_from_json(own, plan_json(probe))
    assert rebuilt == probe and rebuilt != own
    assert (rebuilt.cfg.batch.micro_batch_size, rebuilt.cfg.model.n_layer) == (8, 5)
    assert (rebuilt.cfg.steps.warmup, rebuilt.cfg.steps.measure) == (1, 1)
    assert rebuilt.cfg.model.name == "gpt-tiny-L5" and rebuilt.layout == own.layout
    assert plan_from_json(own, plan_json(own)) == own


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"nnodes": 3}, "another shape"),
        ({"nproc_per_node": 4}, "another shape"),
        ({"layout": None}, "is not a plan"),
        ({"cfg": [1, 2]}, "gives list for a RunConfig"),
        ({"cfg": {"batch": "eight"}}, "gives str for a BatchConfig"),
    ],
)
def test_a_step_that_is_no_plan_of_this_job_is_refused(change: dict, words: str) -> None:
    own = _plan()
    data = {**json.loads(plan_json(own)), **change}
    with pytest.raises(ValueError, match=words):
        plan_from_json(own, json.dumps(data))


def test_a_field_the_follower_cannot_hold_is_refused_not_dropped() -> None:
    """A key the follower's config has no field for does not come back: refused, not run without it."""
    own = _plan()
    data = json.loads(plan_json(own))
    data["cfg"]["batch"]["not_a_field"] = 3
    with pytest.raises(ValueError, match="does not rebuild"):
        plan_from_json(own, json.dumps(data))


@pytest.mark.parametrize("relative", ["/etc", "../other", "batch_search/../../x", "", None, 3])
def test_a_steps_folder_outside_the_job_folder_is_refused(tmp_path: Path, relative: object) -> None:
    with pytest.raises(ValueError):
        run_folder(tmp_path, relative)


def test_a_steps_folder_inside_the_job_folder(tmp_path: Path) -> None:
    assert run_folder(tmp_path, ".") == tmp_path
    assert run_folder(tmp_path, "batch_search/mbs2") == tmp_path / "batch_search" / "mbs2"


def _pair(tmp_path: Path):
    """Node 0's and node 1's :class:`NodeGroup` over one real ``TCPStore`` of this process."""
    import datetime

    from torch.distributed import TCPStore

    from flopsweep.lockstep import NodeGroup

    wait = datetime.timedelta(seconds=30)
    master = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=wait)
    client = TCPStore("127.0.0.1", master.port, is_master=False, timeout=wait)
    shape = {
        "nnodes": 2,
        "master_addr": "127.0.0.1",
        "port": master.port,
        "job_dir": tmp_path,
        "timeout_s": 60,
    }
    return NodeGroup(node=0, store=master, **shape), NodeGroup(node=1, store=client, **shape)


@pytest.mark.parametrize(
    ("lead_says", "follower_says", "lead_hears", "follower_hears"),
    [
        ("", "", "", ""),
        ("", "Invalid config: x", "node 1's agent: Invalid config: x", ""),
        ("Invalid config: y", "", "", "node 0's agent: Invalid config: y"),
    ],
)
def test_the_agents_agree_before_any_rank_starts(
    tmp_path: Path, lead_says: str, follower_says: str, lead_hears: str, follower_hears: str
) -> None:
    """Each agent says whether its own validation took the job; node 0's hears every agent, the
    others node 0's, so a refusal on either side ends the job on both before any step."""
    from concurrent.futures import ThreadPoolExecutor

    lead, follower = _pair(tmp_path)
    with ThreadPoolExecutor(1) as pool:
        heard = pool.submit(follower.agree, follower_says)
        assert lead.agree(lead_says) == lead_hears
        assert heard.result(timeout=30) == follower_hears


def test_a_step_published_by_node_zero_is_taken_in_order(tmp_path: Path) -> None:
    lead, follower = _pair(tmp_path)
    lead._publish({"kind": "run", "dir": "batch_search/mbs1", "port": 1, "plan": "{}"})
    lead._publish({"kind": "end"})
    assert follower._take()["dir"] == "batch_search/mbs1"
    assert follower._take() == {"kind": "end"} and follower.steps == lead.steps == 2

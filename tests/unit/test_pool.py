"""hydra/launcher=pool without processes: the pool's devices, a job's need, the refusals and the
packing (``flopsweep.pool``). The launcher itself runs in tests/integration/test_pool.py."""

from __future__ import annotations

import itertools
import re

import pytest
from omegaconf import OmegaConf

from flopsweep import pool
from flopsweep.config import ConfigError

REPO_POOL_YAML = "conf/hydra/launcher/pool.yaml"


def test_the_pool_is_the_given_list_a_count_or_the_detected_gpus() -> None:
    assert pool.pool_devices([0, 1, 2, 3], device="cpu") == ["0", "1", "2", "3"]
    assert pool.pool_devices("0,2", device="cuda") == ["0", "2"]
    assert pool.pool_devices(None, device="cpu", devices=[5, 6]) == ["5", "6"]
    assert pool.pool_devices(3, device="cpu") == ["0", "1", "2"]  # no GPU to count: slots 0..2
    assert pool.pool_devices(None, device="cuda", detected=4) == ["0", "1", "2", "3"]
    assert pool.pool_devices(2, device="auto", detected=8) == ["0", "1"]
    assert pool.pool_devices(["GPU-ab12", "GPU-cd34"], device="cuda") == ["GPU-ab12", "GPU-cd34"]


def test_the_sweeps_own_cuda_visible_devices_bounds_the_pool() -> None:
    assert pool.pool_devices(None, device="cuda", visible="4,5,6", detected=3) == ["4", "5", "6"]
    assert pool.pool_devices(2, device="cuda", visible="4,5,6") == ["4", "5"]
    assert pool.pool_devices([5], device="cuda", visible="4,5,6") == ["5"]
    with pytest.raises(
        ConfigError, match=r"hydra\.launcher\.slots.*names 0, outside .*CUDA_VISIBLE_DEVICES=4,5"
    ):
        pool.pool_devices([0, 5], device="cuda", visible="4,5")


@pytest.mark.parametrize(
    ("slots", "kw", "says"),
    [
        (
            None,
            {"device": "cpu"},
            r"slots=null: no GPU was found to pool \(device=cpu\).*Fix: .*slots=\[0,1\]",
        ),
        (None, {"device": "cuda", "detected": 0}, r"no GPU was found"),
        ([0, 0], {"device": "cpu"}, r"names a device twice"),
        ([], {"device": "cpu"}, r"is not a list of device ids"),
        (0, {"device": "cpu"}, r"is not a positive count"),
        (True, {"device": "cpu"}, r"is not a count or a list"),
        (4, {"device": "cuda", "detected": 2}, r"slots=4: 2 devices are visible here.*slots=2 or fewer"),
        ([0], {"device": "cpu", "devices": [1]}, r"hydra\.launcher\.devices=.*set only one"),
    ],
)
def test_a_bad_pool_is_one_line_naming_the_key_the_value_and_the_fix(slots, kw, says) -> None:
    with pytest.raises(ConfigError, match=says) as err:
        pool.pool_devices(slots, **kw)
    assert "\n" not in str(err.value) and "Fix:" in str(err.value)


def test_a_job_needs_one_device_per_rank() -> None:
    need = lambda nproc, device="cuda", backend="fsdp", nnodes=1: pool.job_need(  # noqa: E731
        nproc, device=device, backend=backend, nnodes=nnodes, pool_size=8
    )
    assert need(1) == 1 and need("2") == 2 and need(4, device="cpu") == 4
    assert need("auto") == 8  # every GPU the job would see: the whole pool
    assert need("auto", device="cpu") == 1 and need("auto", backend="single") == 1
    assert need("two") == 1  # the job's own validation refuses it, as a record
    with pytest.raises(ConfigError, match=r"nnodes=2: hydra/launcher=pool runs jobs on this machine only"):
        need(1, nnodes=2)


def test_a_job_bigger_than_the_pool_is_refused_in_one_line_naming_it() -> None:
    assert pool.too_big_problem([(0, 1), (1, 2)], ["0", "1"]) is None
    line = pool.too_big_problem([(0, 1), (1, 4), (2, 3)], ["0", "1"])
    assert line is not None and "\n" not in line
    assert "job 1 (and 1 more) needs 4 devices" in line and "the pool has 2 (0,1)" in line
    assert "Fix:" in line and "nproc_per_node=2 or fewer" in line


def test_first_fit_lets_a_smaller_job_past_one_that_does_not_fit_yet() -> None:
    assert pool.next_fit([2, 1, 1], 3) == 0
    assert pool.next_fit([2, 1], 1) == 1
    assert pool.next_fit([2, 3], 1) is None
    assert pool.next_fit([], 4) is None


def test_the_packer_never_gives_a_device_twice() -> None:
    packer = pool.Packer(["0", "1", "2"])
    assert packer.take(2) == ["0", "1"] and packer.free == 1
    assert packer.take(2) is None and packer.free == 1
    assert packer.take(1) == ["2"] and packer.free == 0
    packer.give(["0", "1"])
    assert packer.take(1) == ["0"]
    with pytest.raises(ValueError, match="device 1 was not taken"):
        packer.give(["1"])


def _overlaps(needs, got, ends):
    """Replay :func:`pool.simulate`'s schedule as events and return the most devices ever in use,
    checking that no device is held by two jobs at once."""
    packer, waiting, running, peak = pool.Packer(["0", "1", "2", "3"]), list(range(len(needs))), [], 0
    order = list(ends)
    while waiting or running:
        while (i := pool.next_fit([needs[j] for j in waiting], packer.free)) is not None:
            job = waiting.pop(i)
            assert packer.take(needs[job]) == got[job]
            running.append(job)
        held = [d for j in running for d in got[j]]
        assert len(held) == len(set(held))  # a device is never shared
        peak = max(peak, len(held))
        done = next(j for j in order if j in running)
        order.remove(done)
        running.remove(done)
        packer.give(got[done])
    return peak


@pytest.mark.parametrize("ends", list(itertools.permutations(range(5)))[::7])
def test_any_end_order_keeps_jobs_on_distinct_devices_within_the_pool(ends) -> None:
    needs = [1, 2, 1, 2, 1]
    got = pool.simulate(needs, ["0", "1", "2", "3"], ends)
    assert [len(g) for g in got] == needs
    assert _overlaps(needs, got, ends) <= 4


def test_four_one_device_jobs_on_two_devices_run_two_at_a_time_on_both() -> None:
    got = pool.simulate([1, 1, 1, 1], ["0", "1"], [0, 1, 2, 3])
    assert got == [["0"], ["1"], ["0"], ["1"]]  # the next starts on the device that came free
    got = pool.simulate([1, 1, 1, 1], ["0", "1"], [1, 0, 2, 3])
    assert got == [["0"], ["1"], ["1"], ["0"]]  # not in waves: job 2 takes device 1 as soon as job 1 ends
    assert pool.simulate([2, 2, 2], ["0", "1", "2"], [0, 1, 2]) == [["0", "1"]] * 3  # one at a time


def test_the_record_names_the_jobs_devices() -> None:
    assert pool.visible_devices({"CUDA_VISIBLE_DEVICES": "2,3"}) == ["2", "3"]
    assert pool.visible_devices({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert pool.visible_devices({}) is None


def test_the_progress_lines_say_which_devices_and_how_many_are_left() -> None:
    assert pool.start_line(3, ["0"], running=2, waiting=5) == (
        "flopsweep: pool: job 3 started on device 0 (2 running, 5 waiting)"
    )
    assert pool.end_line(3, ["0", "1"], "exit 0", running=1, waiting=5) == (
        "flopsweep: pool: job 3 ended (exit 0), devices 0,1 free (1 running, 5 waiting)"
    )


def test_the_launcher_config_names_the_plugin_and_the_design_key() -> None:
    from helpers import ROOT

    conf = OmegaConf.load(ROOT / REPO_POOL_YAML)
    assert conf._target_ == "hydra_plugins.flopsweep_pool.PoolLauncher"
    assert {"slots", "devices", "timeout_min", "grace_s"} <= set(conf)  # slots: shared/DESIGN.md


@pytest.mark.parametrize(
    ("slots", "kw", "says"),
    [
        (1.5, {"device": "cpu"}, r"slots=1\.5: is not a count or a list of device ids"),
        ({"a": 1}, {"device": "cpu"}, r"is not a count or a list of device ids"),
        ("abc", {"device": "cuda"}, r"slots='abc': names 'abc', not a device index or a GPU-/MIG- UUID"),
        ([0, -1], {"device": "cpu"}, r"names '-1', not a device index"),
        (["0", "1.5"], {"device": "cpu"}, r"names '1\.5', not a device index"),
        (["GPU-ab12", "0;rm"], {"device": "cuda"}, r"names '0;rm'"),
        ([True], {"device": "cpu"}, r"names 'True'"),
        (99999999999, {"device": "cpu"}, r"slots=99999999999: is more than 1024 slots on device=cpu"),
        (None, {"device": "cuda", "visible": "-1"}, r"CUDA_VISIBLE_DEVICES='-1': names '-1'.*Fix: unset"),
    ],
)
def test_a_slot_value_of_another_type_or_a_malformed_id_or_a_huge_count_is_one_line(slots, kw, says) -> None:
    """Trial (session 18): ``slots=1.5`` was a traceback, ``slots=abc`` pinned a job to no GPU, and
    ``slots=99999999999`` on the CPU built a list of that many slots (the sweep hung)."""
    with pytest.raises(ConfigError, match=says) as err:
        pool.pool_devices(slots, **kw)
    assert "\n" not in str(err.value) and "Fix:" in str(err.value)
    assert pool.pool_devices(["MIG-GPU-ab12/1/0", "GPU-0f3a-77"], device="cuda") == [
        "MIG-GPU-ab12/1/0",
        "GPU-0f3a-77",
    ]
    assert pool.pool_devices(1024, device="cpu")[-1] == "1023"


@pytest.mark.parametrize(
    ("timeout_min", "grace_s", "says"),
    [
        (
            "abc",
            30,
            r"hydra\.launcher\.timeout_min='abc': is one text, not a number of minutes .*\. Fix: set .*=60",
        ),
        (0, 30, r"timeout_min=0: each job's deadline must be positive"),
        (float("nan"), 30, r"timeout_min=nan"),
        (True, 30, r"timeout_min=true"),
        (
            60,
            -5,
            r"launcher\.grace_s=-5: must be zero or more seconds\. Fix: set hydra\.launcher\.grace_s=30",
        ),
        (60, "soon", r"grace_s='soon'"),
        (60, float("inf"), r"grace_s=inf"),
        (60, float("nan"), r"grace_s=nan"),
    ],
)
def test_a_bad_deadline_or_grace_is_one_line_naming_its_key(timeout_min, grace_s, says) -> None:
    """Trial (session 18): ``timeout_min=abc`` was Hydra's instantiation error, ``grace_s=-5`` ran."""
    problem = pool.settings_problem(timeout_min, grace_s)
    assert problem is not None and "\n" not in str(problem)
    assert re.search(says, str(problem)), str(problem)
    assert pool.settings_problem(60, 30) is None and pool.settings_problem(0.2, 0) is None


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("hydra.launcher.slots=0", "hydra.launcher.slots=0: is not a positive count."),
        ("hydra.launcher.slots=abc", "names 'abc', not a device index"),
        ("hydra.launcher.slots=[]", "hydra.launcher.slots=[]: is not a list of device ids."),
        ("hydra.launcher.slots=[0,0]", "names a device twice"),
        ("hydra.launcher.slots=1.5", "is not a count or a list of device ids"),
        (
            "hydra.launcher.timeout_min=-5",
            "hydra.launcher.timeout_min=-5: each job's deadline must be positive.",
        ),
        ("hydra.launcher.grace_s=abc", "hydra.launcher.grace_s='abc': is one text, not a number of seconds"),
    ],
)
def test_the_pools_values_on_the_command_line_are_refused_before_hydra(value, words) -> None:
    """A re-trial (session 35, docs/reliability-5.md #329): these were the launcher's lines, exit 1 after
    Hydra started; now the command line's, exit 2, before it. A good value passes."""
    from flopsweep.pool import cpu_pool_problem

    for device in ("cpu", "auto"):
        line = cpu_pool_problem(
            ["-m", "hydra/launcher=pool", value, "seed=0,1", f"device={device}"], environ={}
        )
        assert line is not None and words in line, (device, line)
    ok = [
        "-m",
        "hydra/launcher=pool",
        "hydra.launcher.slots=[0,1]",
        "hydra.launcher.timeout_min=5",
        "device=cpu",
    ]
    assert cpu_pool_problem(ok, environ={}) is None

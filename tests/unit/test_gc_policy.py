"""steps.gc_freq: Python's collector off in a run, generation 1 every N steps (torchtitan's convention)."""

import gc

import pytest

from flopsweep.gc_policy import GarbageCollection


def _restore(was: bool) -> None:
    (gc.enable if was else gc.disable)()


def test_collects_every_n_steps_and_restores() -> None:
    was = gc.isenabled()
    gc.enable()
    seen: list[int] = []

    def callback(phase: str, info: dict) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(callback)
    try:
        with GarbageCollection(3) as collector:
            assert not gc.isenabled()
            seen.clear()  # the collection on entering is not a step's
            for _ in range(7):
                collector.step_done()
            assert collector.steps == 7
            assert collector.collections == 2  # after steps 3 and 6
            assert seen == [1, 1]
        assert gc.isenabled()
    finally:
        gc.callbacks.remove(callback)
        _restore(was)


def test_zero_leaves_python_collector_alone() -> None:
    was = gc.isenabled()
    try:
        for state in (True, False):
            (gc.enable if state else gc.disable)()
            with GarbageCollection(0) as collector:
                assert gc.isenabled() is state
                for _ in range(100):
                    collector.step_done()
                assert collector.collections == 0
            assert gc.isenabled() is state
    finally:
        _restore(was)


def test_off_before_stays_off_after() -> None:
    was = gc.isenabled()
    gc.disable()
    try:
        with GarbageCollection(2):
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        _restore(was)


def test_enabled_again_after_an_error() -> None:
    was = gc.isenabled()
    gc.enable()
    try:
        with pytest.raises(RuntimeError), GarbageCollection(5):
            raise RuntimeError("a step failed")
        assert gc.isenabled()
    finally:
        _restore(was)


def test_negative_refused() -> None:
    with pytest.raises(ValueError, match=r"steps.gc_freq=-1: must be >= 0. Fix: set steps.gc_freq=50"):
        GarbageCollection(-1)

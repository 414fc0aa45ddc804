"""The environment ranks are started in (``flopsweep.launch.isolated_start``): ``PYTHONSAFEPATH`` for
every rank, OpenMP's passive wait for CPU ranks unless the user chose a policy, all restored after."""

from __future__ import annotations

import os
import sys

import pytest

from flopsweep.launch import CPU_WAIT_POLICY, SAFE_PATH_ENV, isolated_start

KEY, PASSIVE = CPU_WAIT_POLICY


@pytest.mark.parametrize("cpu", [True, False])
def test_ranks_start_with_a_safe_path_and_cpu_ranks_with_a_passive_wait(
    monkeypatch: pytest.MonkeyPatch, cpu: bool
) -> None:
    monkeypatch.delenv(KEY, raising=False)
    monkeypatch.delenv(SAFE_PATH_ENV, raising=False)
    here, path = os.getcwd(), list(sys.path)
    with isolated_start(cpu=cpu) as private:
        assert os.environ[SAFE_PATH_ENV] == "1"
        assert os.environ.get(KEY) == (PASSIVE if cpu else None)
        assert os.path.samefile(os.getcwd(), private) and "" not in sys.path
    assert KEY not in os.environ and SAFE_PATH_ENV not in os.environ
    assert os.getcwd() == here and sys.path == path
    os.rmdir(private)


def test_a_users_wait_policy_wins_and_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY, "ACTIVE")
    monkeypatch.setenv(SAFE_PATH_ENV, "0")
    with isolated_start(cpu=True) as private:
        assert os.environ[KEY] == "ACTIVE" and os.environ[SAFE_PATH_ENV] == "1"
    assert os.environ[KEY] == "ACTIVE" and os.environ[SAFE_PATH_ENV] == "0"
    os.rmdir(private)


def test_ranks_are_not_given_the_main_module_to_run_again() -> None:
    """Spawn's preparation data names no main module while ranks start (a rank would import
    ``run.py`` again as ``__mp_main__``: Hydra and the checks); ``__main__`` is as before after."""
    from multiprocessing.spawn import get_preparation_data

    main = vars(sys.modules["__main__"])
    before = {key: main.get(key, "absent") for key in ("__file__", "__spec__")}
    with isolated_start() as private:
        data = get_preparation_data("rank")
        assert "init_main_from_path" not in data and "init_main_from_name" not in data, sorted(data)
    assert {key: main.get(key, "absent") for key in ("__file__", "__spec__")} == before
    os.rmdir(private)

"""A cache folder under an unusable home is refused before launch (docs/reliability-13.md row 1000)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flopsweep.cache_home import cache_problem, unmakeable
from flopsweep.config import ConfigError
from flopsweep.plan import Environment, plan


def _fix_env(error: ConfigError) -> dict[str, str]:
    """The variable the fix sets, as typed back: ``set NAME=VALUE (...)``."""
    name, _, value = error.fix.removeprefix("set ").split(" ")[0].partition("=")
    return {name: value}


def test_a_home_that_takes_no_folder_refuses_deepspeed_and_its_fix_passes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = {"HOME": "/proc/nohome"}
    error = cache_problem(backend="deepspeed", device="cpu", compile_blocks=False, environ=env)
    assert error is not None and error.key == "HOME" and error.value == "/proc/nohome"
    assert str(error).startswith(
        "Invalid config: HOME='/proc/nohome': DeepSpeed's extension cache "
        "/proc/nohome/.cache/flopsweep/torch_extensions cannot be made: its nearest folder that exists, "
        "/proc,"
    )
    assert _fix_env(error) == {"XDG_CACHE_HOME": str(tmp_path / ".cache")}
    fixed = {**env, **_fix_env(error)}
    assert cache_problem(backend="deepspeed", device="cpu", compile_blocks=False, environ=fixed) is None
    assert not (tmp_path / ".cache").exists()  # the check leaves nothing behind


def test_a_torch_extensions_dir_that_cannot_be_made_is_named_and_its_fix_passes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file").write_text("")
    env = {"HOME": str(tmp_path), "TORCH_EXTENSIONS_DIR": str(tmp_path / "file" / "ext")}
    error = cache_problem(backend="deepspeed", device="cpu", compile_blocks=False, environ=env)
    assert error is not None and error.key == "TORCH_EXTENSIONS_DIR"
    assert f"{tmp_path / 'file'}, on its path, is not a folder" in error.problem
    fixed = {**env, **_fix_env(error)}
    assert cache_problem(backend="deepspeed", device="cpu", compile_blocks=False, environ=fixed) is None


def test_only_the_folders_a_run_makes_are_checked(tmp_path):
    env = {"HOME": "/proc/nohome"}
    assert cache_problem(backend="fsdp", device="cpu", compile_blocks=False, environ=env) is None
    assert (
        cache_problem(backend="fsdp", device="cpu", compile_blocks=True, environ=env) is None
    )  # inductor: /tmp
    triton = cache_problem(backend="fsdp", device="cuda", compile_blocks=True, environ=env)
    assert triton is not None and "Triton's kernel cache /proc/nohome/.triton/cache" in triton.problem
    fixed = {**env, **_fix_env(triton)}
    assert cache_problem(backend="fsdp", device="cuda", compile_blocks=True, environ=fixed) is None


def test_an_existing_writable_folder_passes_and_proc_does_not(tmp_path):
    assert unmakeable(tmp_path) is None
    assert unmakeable(tmp_path / "a" / "b") is None
    assert os.listdir(tmp_path) == []
    assert "takes no new folder" in (unmakeable(Path("/proc/nohome/x")) or "")


def test_the_plan_refuses_the_run_before_launch_and_accepts_the_fix(hydra_compose, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", "/proc/nohome")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    cfg = hydra_compose(["model=llama-tiny", "device=cpu", "nproc_per_node=2", "backend=zero1"])
    env = Environment(cpu_count=2, host_memory_bytes=1024 * 2**30)
    with pytest.raises(ConfigError) as refused:
        plan(cfg, env)
    assert refused.value.key == "HOME"
    for name, value in _fix_env(refused.value).items():
        monkeypatch.setenv(name, value)
    assert plan(cfg, env).nproc_per_node == 2  # typed back: accepted
    planned = hydra_compose(
        ["model=llama-tiny", "device=cpu", "nproc_per_node=2", "backend=zero1", "plan=true"]
    )
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert plan(planned, env).nproc_per_node == 2  # plan=true builds nothing

"""flopsweep.deepspeed_backend's build notice, against real DeepSpeed: its op builders decide what is
installed or buildable, and their compatibility check compiles a test program (a process)."""

from __future__ import annotations

import pytest

pytest.importorskip("deepspeed")


def test_a_first_deepspeed_job_says_it_builds_its_extension(hydra_compose, tmp_path) -> None:
    """Issue 46, item 6: before DeepSpeed compiles its CPU comm op (minutes, silent), rank 0 prints one
    line: what it builds, roughly how long, for which environment, where it is cached; nothing once it is
    cached. Real DeepSpeed decides what is installed or buildable; nothing is compiled here."""
    import io

    from flopsweep.deepspeed_backend import announce_builds

    cfg = hydra_compose(["backend=zero2", "device=cpu", "nproc_per_node=2"])
    out = io.StringIO()
    line = announce_builds(cfg, "cpu", str(tmp_path), stream=out)
    assert line is not None and out.getvalue() == f"[flopsweep rank 0] {line}\n"
    import os

    from flopsweep.jit_ops import cache_scope

    assert "building its extension" in line and cache_scope(os.environ) in line
    assert "deepspeed_shm_comm" in line and "25 to 90 s on a 2-core CPU" in line
    assert str(tmp_path) in line
    (tmp_path / "deepspeed_shm_comm").mkdir()
    (tmp_path / "deepspeed_shm_comm" / "deepspeed_shm_comm.so").write_bytes(b"\x7fELF")
    out = io.StringIO()
    assert announce_builds(cfg, "cpu", str(tmp_path), stream=out) is None and out.getvalue() == ""

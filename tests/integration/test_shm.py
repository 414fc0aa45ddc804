"""A DeepSpeed run on the CPU leaves nothing in /dev/shm (flopsweep.launch.remove_deepspeed_shm)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import psutil
import pytest
from helpers import run_py

from flopsweep.launch import SHM_DIR, deepspeed_shm_names, remove_deepspeed_shm

PREFIX = f"deepspeed_allreduce_buffer_{os.getuid()}_"


def segments() -> set[str]:
    return {p.name for p in SHM_DIR.iterdir() if p.name.startswith(PREFIX)}


def listening_ports() -> set[int]:
    return {c.laddr.port for c in psutil.net_connections("tcp") if c.status == psutil.CONN_LISTEN}


@pytest.mark.slow
@pytest.mark.skipif(not SHM_DIR.is_dir(), reason="no /dev/shm (not Linux)")
def test_a_deepspeed_cpu_run_leaves_no_shared_memory_segment(tmp_path: Path) -> None:
    before = segments()
    proc = run_py(
        "model=gpt-tiny",
        "backend=zero2",
        "nproc_per_node=2",
        "device=cpu",
        "precision=fp32",
        "steps.warmup=1",
        "steps.measure=1",
        f"hydra.run.dir={tmp_path}",
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((tmp_path / "metrics.json").read_text())["status"] == "ok"
    # Another test's launch may be running beside this one: its segments sit on a port its store still
    # listens on, or, when it ended between the two looks, they are gone by the third (removed before its
    # store closed). A leaked segment stays, on a port nothing listens on.
    new = segments() - before
    listening = listening_ports()
    left = [n for n in new if int(n[len(PREFIX) :].split("_")[1]) not in listening and (SHM_DIR / n).exists()]
    assert not left, left


def test_only_this_launchs_regular_segments_are_removed(tmp_path: Path) -> None:
    """The names of deepspeed/ops/csrc/cpu/comm/shm.cpp's shm_initialize (prefix, uid, address, port,
    rank), of this launch's ranks only; a link of such a name, and every other name, is left."""
    ours = deepspeed_shm_names("127.0.0.1", 40123, range(2, 4))
    assert ours == [f"{PREFIX}127.0.0.1_40123_2", f"{PREFIX}127.0.0.1_40123_3"]
    for name in [*ours, f"{PREFIX}127.0.0.1_40123_4", f"{PREFIX}127.0.0.1_40124_2", "other"]:
        (tmp_path / name).write_bytes(b"x")
    target = tmp_path / "target"
    target.write_bytes(b"x")
    (tmp_path / ours[1]).unlink()
    (tmp_path / ours[1]).symlink_to(target)
    assert remove_deepspeed_shm("127.0.0.1", 40123, range(2, 4), shm_dir=tmp_path) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [ours[1], f"{PREFIX}127.0.0.1_40123_4", f"{PREFIX}127.0.0.1_40124_2", "other", "target"]
    )

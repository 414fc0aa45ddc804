"""The GPU tests' construction code, exercised on the CPU: CI has no GPU, so a refactor that breaks
how a GPU test builds its configs and models would otherwise rot unseen until a GPU run
(issue 30, class 13: ``AttentionConfig(impl=...)`` after ``impl`` moved to ``BlockSparseConfig``)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import ROOT


@pytest.mark.slow
def test_every_gpu_test_is_collected_without_cuda() -> None:
    """``pytest -m gpu --collect-only`` imports every GPU test module and builds every parameter set
    here, without a GPU: an import or parametrization error fails here rather than on the GPU. Only the
    files that name the marker are collected (a third of the whole suite's collection time)."""
    files = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("test_*.py")
        if "mark.gpu" in path.read_text(encoding="utf-8")
    )
    assert len(files) >= 5, files
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "gpu", "--collect-only", "-q", "-p", "no:cacheprovider"]
        + files,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    collected = [line for line in proc.stdout.splitlines() if "::" in line]
    assert any("test_model_trains_under_autocast[flex]" in line for line in collected)
    assert "error" not in proc.stdout.splitlines()[-1].lower(), proc.stdout[-2000:]

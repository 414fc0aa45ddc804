"""Session 36: flopsweep's start as a user meets it (docs/reliability-5.md #340-#348), each command line run
as typed: its exit status, its one line (or warning), no traceback. The damaged ``conf/`` files are planted
in a copy of the checkout's ``run.py``, ``conf/`` and packages (``run.py`` reads the ``conf/`` beside it),
run from an empty folder; never in the checkout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import ROOT, RUN_PY, checkout_copy, run_copy, run_py
from unit.test_start_36 import UNPICKED_WARNINGS

RUN = ["device=cpu", "model=gpt-tiny", "steps.warmup=1", "steps.measure=1"]
STOPPED = "flopsweep: stopped by SIGINT before any job started; nothing was recorded"


def _lines(proc: subprocess.CompletedProcess) -> list[str]:
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.stderr.splitlines()


# 1. OMP_NUM_THREADS


def test_an_empty_omp_num_threads_is_flopsweeps_one_warning_not_libgomps(tmp_path: Path) -> None:
    run = run_py(*RUN, "plan=true", f"hydra.run.dir={tmp_path / 'x'}", env={"OMP_NUM_THREADS": ""})
    assert run.returncode == 0, run.stderr[-3000:]
    assert _lines(run) == [
        "flopsweep: warning: OMP_NUM_THREADS is set but empty; read as unset (each CPU rank takes its "
        "share of the cores). Fix: unset OMP_NUM_THREADS, or set it to a positive integer such as "
        "OMP_NUM_THREADS=1."
    ]  # was: libgomp: Invalid value for environment variable OMP_NUM_THREADS
    assert "| gpt-tiny |" in run.stdout


def test_help_prints_whatever_omp_num_threads_holds_and_a_run_is_refused(tmp_path: Path) -> None:
    helped = run_py("--help", cwd=tmp_path, timeout=120, env={"OMP_NUM_THREADS": "abc"})
    assert helped.returncode == 0 and _lines(helped) == [], helped.stderr[-3000:]
    assert helped.stdout.startswith("flopsweep: measure training throughput")
    run = run_py(*RUN, cwd=tmp_path, timeout=120, env={"OMP_NUM_THREADS": "abc"})
    assert run.returncode == 2 and len(_lines(run)) == 1
    assert run.stderr.startswith("flopsweep: OMP_NUM_THREADS='abc': is no positive whole number of threads")
    assert list(tmp_path.iterdir()) == []


# 2. Ctrl-C while run.py starts


def _mapped(pid: int, library: str) -> bool:
    try:
        return library in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def _interrupted(args: list[str], moment: str, env: dict[str, str]) -> tuple[int, list[str], str]:
    """``python run.py ARGS`` sent SIGINT at ``moment`` (never a guess of the time): ``imports``, once its
    imports load PyYAML's C extension (``yaml/_yaml``, after run.py's first statement: not the
    interpreter's own start-up); ``first-line``, once it writes its first line on stderr; ``torch``, once
    the job loads libtorch. Returns the exit status, the stderr lines and what the process wrote after the
    signal."""
    proc = subprocess.Popen(
        [sys.executable, RUN_PY, *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    guard = threading.Timer(300, proc.kill)
    guard.start()
    before: list[str] = []
    try:
        if moment == "first-line":
            before.append(proc.stderr.readline())  # type: ignore[union-attr]
        else:
            library = {"imports": "yaml/_yaml", "torch": "libtorch_cpu"}[moment]
            while proc.poll() is None and not _mapped(proc.pid, library):
                time.sleep(0.002)  # polling the process's state, not a timing
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate()
    finally:
        guard.cancel()
    assert proc.returncode != -signal.SIGKILL, "hung"
    return proc.returncode, [line.rstrip("\n") for line in before] + err.splitlines(), err


@pytest.mark.parametrize("moment", ["imports", "first-line", "torch"])
def test_ctrl_c_as_run_py_starts_is_one_line_and_130(tmp_path: Path, moment: str) -> None:
    """A Ctrl-C during run.py's imports (~0.8 s) printed a KeyboardInterrupt traceback (exit 1, or killed by
    the signal); now the one line of a signal before any job, 130. At ``torch`` the job may have started:
    then the job's own line ("interrupted ..."), 130."""
    args = [*RUN, f"hydra.run.dir={tmp_path / 'x'}"] + (["plan=true"] if moment != "torch" else [])
    code, lines, after = _interrupted(args, moment, {"OMP_NUM_THREADS": ""} if moment == "first-line" else {})
    assert code == 130, lines
    assert "Traceback" not in after, after[-3000:]
    if moment == "imports":
        assert lines == [STOPPED]
    elif moment == "first-line":
        assert lines[0].startswith("flopsweep: warning: OMP_NUM_THREADS is set but empty") and len(lines) == 2
        assert lines[1] == STOPPED or lines[1].startswith("flopsweep: interrupted (KeyboardInterrupt)"), lines
    else:  # the job's own lines (its launch, a rank's) may come after its stop line
        assert any(
            line == STOPPED or line.startswith("flopsweep: interrupted (KeyboardInterrupt)") for line in lines
        ), lines


# 3. A damaged conf/config.yaml


def test_a_typod_default_of_the_root_config_is_one_line(tmp_path: Path) -> None:
    src, work = checkout_copy(tmp_path)
    root = src / "conf" / "config.yaml"
    root.write_text(root.read_text().replace("- model: gpt-tiny ", "- model: gpt-tinyy"))
    run = run_copy(src, work, "device=cpu", "steps.warmup=1", "steps.measure=1")
    assert run.returncode == 2, run.stderr[-3000:]
    assert _lines(run) == [
        "flopsweep: Invalid config: conf/config.yaml: its defaults list picks model: gpt-tinyy, and there is "
        "no conf/model/gpt-tinyy.yaml: the checkout's root config is damaged. Fix: write model: gpt-tiny "
        "there, or restore it from the checkout: git checkout conf/config.yaml."
    ]  # was: Hydra's 26 lines, "In 'config': Could not find 'model/gpt-tinyy'", exit 1
    assert list(work.iterdir()) == []


def test_a_hydra_key_twice_in_the_root_config_is_one_line(tmp_path: Path) -> None:
    src, work = checkout_copy(tmp_path)
    root = src / "conf" / "config.yaml"
    text = root.read_text()
    root.write_text(text + "hydra:\n  job:\n    chdir: false\n")
    run = run_copy(src, work, *RUN)
    assert run.returncode == 2, run.stderr[-3000:]
    assert _lines(run) == [
        f"flopsweep: Invalid config: conf/config.yaml: found duplicate key hydra at line "
        f"{len(text.splitlines()) + 1}: the checkout's root config is damaged. Fix: give each key once, or "
        "restore it from the checkout: git checkout conf/config.yaml."
    ]  # was: Hydra's ConstructorError traceback, exit 1


# 4. A copied model file without its family


@pytest.mark.parametrize(
    ("source", "said"),
    [
        (
            "llama-tiny",
            "ModelConfig (n_kv_head, ffn_dim, tie_embeddings are LlamaConfig's). Fix: add \"defaults: "
            '[/schema/model/base_llama@_here_, _self_]" at its top (as conf/model/llama-tiny.yaml).',
        ),
        (
            "gpt-tiny",
            'ModelConfig. Fix: add "defaults: [/schema/model/base_gpt2@_here_, _self_]" at its top (as '
            "conf/model/gpt-tiny.yaml).",
        ),
    ],
)
def test_a_copied_model_file_without_its_defaults_list_says_what_to_add(
    tmp_path: Path, source: str, said: str
) -> None:
    src, work = checkout_copy(tmp_path)
    text = (src / "conf" / "model" / f"{source}.yaml").read_text()
    kept = [line for line in text.splitlines(keepends=True) if not line.startswith(("defaults:", "  - "))]
    (src / "conf" / "model" / "mine.yaml").write_text("".join(kept))
    run = run_copy(src, work, "device=cpu", "model=mine", "steps.warmup=1", "steps.measure=1")
    assert run.returncode == 2, run.stderr[-3000:]
    assert _lines(run) == [
        "flopsweep: Invalid config: conf/model/mine.yaml: names no model family in a defaults list, so Hydra "
        f"reads it as {said}"
    ]  # was: did you mean n_head? (llama's keys); a model.arch override never given (gpt's)


# 5. plan_clusters written with the multiplication sign


@pytest.mark.parametrize(
    ("value", "line"),
    [
        (
            "plan_clusters=[H100:8×8]",
            "flopsweep: Invalid config: plan_clusters=[H100:8×8]: Hydra's override grammar cannot read it "
            "('×' (U+00D7 MULTIPLICATION SIGN) looks like ASCII 'x'). Fix: did you mean "
            "plan_clusters=[H100:8x8]?",
        ),
        (
            'plan_clusters=["H100:8×8"]',
            "flopsweep: Invalid config: plan_clusters='H100:8×8': its size is written with '×' (U+00D7 "
            "MULTIPLICATION SIGN), not the letter x. Fix: write x: plan_clusters=[H100:8x8].",
        ),
    ],
)
def test_a_cluster_written_with_a_times_sign_says_write_x(tmp_path: Path, value: str, line: str) -> None:
    run = run_py(*RUN, "plan=true", value, cwd=tmp_path, timeout=120)
    assert run.returncode == 2, run.stderr[-3000:]
    assert _lines(run) == [line] and list(tmp_path.iterdir()) == []


# 6. Unpicked option files a pick would refuse


def test_unpicked_broken_option_files_warn_once_each_and_the_run_goes_on(tmp_path: Path) -> None:
    src, work = checkout_copy(tmp_path)
    model = src / "conf" / "model"
    (model / "empty.yaml").write_text("")
    (model / "twice.yaml").write_text("name: twice\nn_layer: 2\nn_layer: 3\n")
    os.symlink("gpt-tiny.yaml", model / "linked.yaml")
    run = run_copy(src, work, *RUN, "plan=true")
    assert run.returncode == 0, run.stderr[-3000:]
    assert _lines(run) == UNPICKED_WARNINGS  # was: nothing
    assert "| gpt-tiny |" in run.stdout
    picked = run_copy(src, work, "device=cpu", "model=twice", "plan=true")
    assert picked.returncode == 2 and _lines(picked) == [
        "flopsweep: Invalid config: conf/model/twice.yaml: found duplicate key n_layer at line 3. Fix: give "
        "each key once."
    ]

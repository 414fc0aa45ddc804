"""Shared by the end-to-end tests: run ``run.py`` as a user would, read its records."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RUN_PY = str(ROOT / "run.py")
RECORDS = ROOT / "tests" / "fixtures" / "records"
"""The committed records (``v2-ok``, ``v2-oom``, ...): the hand-built records of the analysis tests start
from them (:func:`fixture_record`)."""


def run_py(
    *args: str, cwd: Path = ROOT, timeout: float = 900, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``python run.py ARGS`` in a subprocess (text output captured, never raises on exit status)."""
    return subprocess.run(
        [sys.executable, RUN_PY, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )


def run_py_signalled(
    *args: str, when: str, sig: int = signal.SIGTERM, timeout: float = 900
) -> tuple[int, str]:
    """``python run.py ARGS`` in a subprocess, sent ``sig`` as soon as a line of its output (stdout
    and stderr together) contains ``when`` (a log line, never a guess of the time): ``(exit code,
    its whole output)``. ``timeout`` (s) guards against a hung child: it is killed and the test
    fails with what it wrote; a child that ends before printing ``when`` fails the test too."""
    proc = subprocess.Popen(
        [sys.executable, RUN_PY, *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    guard = threading.Timer(timeout, proc.kill)
    guard.start()
    lines: list[str] = []
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append(line)
            if when in line:
                proc.send_signal(sig)
                break
        lines.extend(proc.stdout)  # type: ignore[arg-type]
        code = proc.wait()
    finally:
        guard.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = "".join(lines)
    assert any(when in line for line in lines), f"never printed {when!r}:\n{output[-3000:]}"
    assert code != -signal.SIGKILL, f"killed after {timeout} s:\n{output[-3000:]}"
    return code, output


SWEEP_HEAD = "# @package _global_\n"
"""The first line of a sweep file (``conf/sweep/<name>.yaml``)."""
SWEEP_ARGV = ["-m", "+sweep=mine", "device=cpu", "steps.warmup=1", "steps.measure=1"]
"""The command line that picks :func:`sweep_conf`'s ``sweep/mine.yaml``."""
SWEEP_SHOWN = "Invalid config: conf/sweep/mine.yaml"
"""How a refusal of :func:`sweep_conf`'s ``sweep/mine.yaml`` names it."""


def wait_for_signal_mask(proc: subprocess.Popen, field: str, signum: int, deadline_s: float = 120.0) -> None:
    """Return once ``proc``'s ``/proc/PID/status`` line ``field`` (``SigCgt``: caught, ``SigIgn``: ignored)
    has ``signum``'s bit (read bounded, every 0.5 ms); fails if the process ends or ``deadline_s`` passes
    first. A signal sent then lands in the state asked for, however slowly a loaded machine runs the child."""
    bit = 1 << (signum - 1)
    end = time.monotonic() + deadline_s
    while True:
        try:
            with open(f"/proc/{proc.pid}/status", encoding="ascii", errors="replace") as f:
                text = f.read(8192)
        except OSError:
            text = ""
        line = next((x for x in text.splitlines() if x.startswith(f"{field}:")), f"{field}: 0")
        if int(line.split()[1], 16) & bit:
            return
        ended = f"the process ended (exit {proc.returncode}) before {field} had signal {signum}"
        assert proc.poll() is None, ended
        assert time.monotonic() < end, f"{field} without signal {signum} within {deadline_s} s"
        time.sleep(0.0005)


def conf_copy(dest: Path) -> Path:
    """A copy of the checkout's ``conf/`` at ``dest`` (its ``sweep`` link copied as a folder, so that a file
    planted in the copy's ``sweep/`` never lands in the checkout's ``sweep/``): ``dest``."""
    import shutil

    shutil.copytree(ROOT / "conf", dest, symlinks=False)
    return dest


def sweep_conf(tmp_path: Path, text: str, groups: dict[str, tuple[str, ...]]) -> str:
    """A small ``conf/`` under ``tmp_path``: an option file ``name: OPTION`` for each option of each group of
    ``groups`` (``"auto/max16"`` a nested option), a primary ``config.yaml`` that picks each group's first
    option after ``base_config``, ``sweep/smoke.yaml`` (``seed: 1``) and ``sweep/mine.yaml``: ``text`` under
    :data:`SWEEP_HEAD`. Returns the folder's path, as the sweep-file checks take it."""
    conf = tmp_path / "conf"
    for group, options in groups.items():
        for option in options:
            (conf / group / option).parent.mkdir(parents=True, exist_ok=True)
            (conf / group / f"{option}.yaml").write_text(f"name: {option}\n")
    (conf / "sweep").mkdir()
    (conf / "sweep" / "smoke.yaml").write_text(SWEEP_HEAD + "seed: 1\n")
    picks = "".join(f"  - {group}: {options[0]}\n" for group, options in groups.items())
    (conf / "config.yaml").write_text(f"defaults:\n  - base_config\n{picks}  - _self_\n")
    (conf / "sweep" / "mine.yaml").write_text(SWEEP_HEAD + text)
    return str(conf)


def defaults_text(*entries: str) -> str:
    """A ``defaults:`` list of ``entries`` in YAML, one ``  - ENTRY`` line each."""
    return "defaults:\n" + "".join(f"  - {e}\n" for e in entries)


def checkout_copy(tmp_path: Path) -> tuple[Path, Path]:
    """``(src, work)``: a copy of the checkout's ``run.py``, ``conf/`` (its sweep link copied as a folder) and
    packages under ``tmp_path/src``, and an empty ``tmp_path/work`` to run it from: a file is planted in the
    copy's ``conf/``, never in the checkout's (the checks read the package's own ``conf/``)."""
    import shutil

    src, work = tmp_path / "src", tmp_path / "work"
    work.mkdir()
    conf_copy(src / "conf")
    for name in ("flopsweep", "hydra_plugins"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(RUN_PY, src / "run.py")
    return src, work


def run_copy(src: Path, work: Path, *args: str) -> subprocess.CompletedProcess:
    """``python SRC/run.py ARGS`` from ``work`` (:func:`checkout_copy`), the copy's packages; 300 s."""
    return subprocess.run(
        [sys.executable, str(src / "run.py"), *args],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": str(src)},
    )


def on_a_terminal(
    argv: list[str], *, env: dict[str, str], columns: int | None = None, timeout: float = 300
) -> tuple[int, str]:
    """Run ``argv`` (from the checkout) with its stdout and stderr on a pseudo-terminal (``columns``
    wide when given): ``(exit code, what it wrote there)``, read until it closes the terminal, each
    wait for output at most ``timeout`` s (a guard against a hung child, not a timing)."""
    import fcntl
    import select
    import struct
    import termios

    primary, secondary = os.openpty()
    if columns is not None:
        fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=secondary, stderr=secondary, env=env)
    os.close(secondary)
    chunks = []
    try:
        while select.select([primary], [], [], timeout)[0]:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(primary)
        if proc.poll() is None:  # still running: it hung
            proc.kill()
    code = proc.wait(timeout=60)
    return code, b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


def run_py_together(*argvs: Sequence[str], timeout: float = 1800) -> list[subprocess.CompletedProcess]:
    """``python run.py ARGS`` for each ``ARGS`` of ``argvs``, all started at once, then each waited
    for: independent sweeps of one-rank jobs share a 2-core machine's cores, one each (CI time;
    sweeps of two- or four-rank jobs already fill both, and gained nothing measurable under load).
    Returns what :func:`run_py` returns, one per ``ARGS``, in their order; ``timeout`` (s) is for all
    of them together (a guard against a hung child: every child still running is killed, and
    ``subprocess.TimeoutExpired`` raised)."""
    with contextlib.ExitStack() as stack:
        files = [[stack.enter_context(tempfile.TemporaryFile("w+")) for _ in range(2)] for _ in argvs]
        procs = [
            subprocess.Popen([sys.executable, RUN_PY, *argv], cwd=ROOT, stdout=out, stderr=err, text=True)
            for argv, (out, err) in zip(argvs, files, strict=True)
        ]
        deadline = time.monotonic() + timeout
        try:
            codes = [p.wait(timeout=max(deadline - time.monotonic(), 0.1)) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        done = []
        for proc, code, (out, err) in zip(procs, codes, files, strict=True):
            out.seek(0)
            err.seek(0)
            done.append(subprocess.CompletedProcess(proc.args, code, out.read(), err.read()))
        return done


def run_sweep(sweep_dir: Path, *args: str) -> subprocess.CompletedProcess:
    """``python run.py -m ARGS`` into ``sweep_dir``."""
    return run_py("-m", *args, f"hydra.sweep.dir={sweep_dir}")


def read_record(path: Path) -> dict:
    """The record at ``path`` (a ``metrics.json``), its contract checked (DESIGN.md): a record that is
    not ok has every ``metrics`` value null (what was known before the run is ``run.before_run``), an
    ok one has no ``run.before_run``."""
    record = json.loads(Path(path).read_text())
    if record["status"] != "ok":
        assert all(v is None for v in record["metrics"].values()), (path, record["metrics"])
    else:
        assert "before_run" not in record["run"], path
    return record


def records(sweep_dir: Path) -> list[dict]:
    """Every ``metrics.json`` under ``sweep_dir``, in path order."""
    return [json.loads(p.read_text()) for p in sorted(Path(sweep_dir).rglob("metrics.json"))]


LLAMA_TINY_TWO_RANKS = (
    "model=llama-tiny",
    "device=cpu",
    "precision=fp32",
    "nproc_per_node=2",
    "steps.warmup=1",
    "steps.measure=2",
)
"""llama-tiny on two gloo ranks, fp32, one warm-up and two measured steps: the backend tests' sweep."""


def ok_sweep(sweep_dir: Path, *args: str) -> list[dict]:
    """``python run.py -m ARGS`` into ``sweep_dir`` that must exit 0 with every record ``ok``; the
    records, in path order."""
    proc = run_sweep(sweep_dir, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    recs = records(sweep_dir)
    assert recs and all(r["status"] == "ok" for r in recs), [r["error"] for r in recs]
    return recs


def analysis_cli(capsys, *args: object) -> tuple[int, str, str]:
    """``python -m analysis ARGS`` in this process (:func:`analysis.__main__.main`): ``(exit status, stdout,
    stderr)``, an argparse refusal's ``SystemExit`` read as its status (2)."""
    from analysis.__main__ import main

    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:  # argparse's one-line refusal
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def make_plan(cfg, env=None):
    """The plan a job would launch: ``flopsweep.plan.plan`` on ``env`` (this machine when None)."""
    from flopsweep.plan import Environment, plan

    return plan(cfg, env or Environment.detect())


def validate(cfg, env=None):
    """The config a job would run: ``flopsweep.plan.plan`` (validate, then resolve on ``env``,
    this machine when None), as the job calls it."""
    from flopsweep.plan import Environment, plan

    return plan(cfg, env or Environment.detect()).cfg


def fit_clock(record: dict) -> dict:
    """``record`` with ``run.finished_at`` moved, when its measured steps would not fit between
    ``run.started_at`` and it, to 10 s after they end: the analysis flags a run whose steps take
    longer than the run (:mod:`flopsweep.plausible`)."""
    import datetime

    run, values = record["run"], record["metrics"]["iteration_time_s"].get("values") or []
    start = datetime.datetime.fromisoformat(run["started_at"])
    end = datetime.datetime.fromisoformat(run["finished_at"])
    if (end - start).total_seconds() < sum(values) + 10:
        run["finished_at"] = (start + datetime.timedelta(seconds=sum(values) + 10)).isoformat()
    return record


def rescaled(record: dict, *, world: int, tokens_per_device: float) -> dict:
    """``record`` (an ok v2 record) as if it ran on ``world`` data-parallel ranks at
    ``tokens_per_device`` tokens/s per device, with every derived figure recomputed from its raw
    fields, so that the analysis' plausibility checks (``analysis/checks.py``) pass it: the global
    batch and FLOPs grow with the ranks, the measured steps all take the mean step time (and the
    run's clock as long as they need, :func:`fit_clock`)."""
    import copy

    r = copy.deepcopy(record)
    r["system"]["world_size"] = world
    r["system"]["parallel"] = {"dp_replicate": 1, "dp_shard": world, "tp": 1, "pp": 1, "cp": 1}
    m, batch = r["metrics"], r["config"]["batch"]
    old_tokens = m["tokens_per_step"]
    m["global_batch_size"] = batch["micro_batch_size"] * batch["grad_accum"] * world
    m["tokens_per_step"] = m["global_batch_size"] * r["config"]["model"]["seq_len"]
    for key in ("model_flops_per_iteration", "hardware_flops_per_iteration"):
        m[key] = m[key] * m["tokens_per_step"] / old_tokens
    m["tokens_per_s_per_device"] = tokens_per_device
    m["tokens_per_s"] = tokens_per_device * world
    mean = m["tokens_per_step"] / m["tokens_per_s"]
    n = len(m["iteration_time_s"]["values"])
    m["iteration_time_s"] = {
        "mean": mean,
        "median": mean,
        "min": mean,
        "max": mean,
        "std": 0.0,
        "cv": 0.0,
        "values": [mean] * n,
    }
    m["model_tflops_per_device"] = m["model_flops_per_iteration"] / mean / world / 1e12
    m["hardware_tflops_per_device"] = m["hardware_flops_per_iteration"] / mean / world / 1e12
    m["mfu"] = m["model_tflops_per_device"] / m["peak_tflops"]
    m["hfu"] = m["hardware_tflops_per_device"] / m["peak_tflops"]
    m["matmul_fraction"] = m["model_tflops_per_device"] / m["measured_matmul_tflops"]
    return fit_clock(r)


def calibration_record(
    world: int,
    *,
    backend: str | dict = "fsdp",
    mbs: int = 4,
    step: float = 1.0,
    status: str = "ok",
    config: dict | None = None,
    **metrics,
) -> dict:
    """A hand-built record for the step-time prediction's calibration (``predict.calibration``, the nearest
    set-up): a 1e9-parameter model ``m`` of 24 blocks (``n_embd`` 2048, 2048 tokens), sdpa, bf16, eager,
    no checkpointing, ``mbs`` sequences a rank and no accumulation, on ``world`` data-parallel ranks
    (``dp_shard``), stepping ``step`` s at ``6 P`` FLOPs a token. ``backend``: its name, or its whole
    section; ``config``: more config keys (``device``, ``optim``); ``metrics``: more metrics."""
    return {
        "status": status,
        "config": {
            "model": {"name": "m", "n_layer": 24},
            "attention": {"name": "sdpa"},
            "precision": {"name": "bf16"},
            "activation_checkpointing": {"name": "none"},
            "compile": False,
            "batch": {"micro_batch_size": mbs, "grad_accum": 1},
            "backend": {"name": backend} if isinstance(backend, str) else backend,
            **(config or {}),
        },
        "model": {"n_params": 10**9, "n_layer": 24, "n_embd": 2048, "seq_len": 2048},
        "system": {"world_size": world, "nproc_per_node": world, "parallel": {"dp_shard": world}},
        "metrics": {
            "iteration_time_s": {"mean": step},
            "model_flops_per_iteration": world * 6.0 * 10**9 * mbs * 2048,
            **metrics,
        },
    }


def fixture_record(name: str = "v2-ok") -> dict:
    """A fresh copy of the committed record ``tests/fixtures/records/NAME/metrics.json`` (an ok GPU run by
    default), to edit by hand."""
    return json.loads((RECORDS / name / "metrics.json").read_text())


def edit(record: dict, path: tuple[str, ...], value: object) -> dict:
    """``record`` with the value at ``path`` (``("config", "backend")``) set to ``value``, in place."""
    tree = record
    for key in path[:-1]:
        tree = tree[key]
    tree[path[-1]] = value
    return record


def put(directory: Path, rec: dict | str, name: str = "metrics.json") -> Path:
    """Write ``rec`` (a dict as JSON, text as it is) to ``directory/name``, making the folder: that file."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(rec if isinstance(rec, str) else json.dumps(rec))
    return path


def round_records(
    rates: list[float], *, world: int = 1, group: str = "g1", base: dict | None = None
) -> list[dict]:
    """The records of one set-up's ``repeats=len(rates)`` rounds, round ``n`` at ``rates[n]`` tokens/s per
    device (:func:`rescaled` of ``base``, default :func:`fixture_record`): run id ``round-n``, ``repeat`` n,
    ``repeats`` and ``repeat_group`` ``group`` set, every derived figure consistent."""
    base = base or fixture_record()
    out = []
    for n, rate in enumerate(rates):
        rec = rescaled(base, world=world, tokens_per_device=rate)
        rec["run"].update(id=f"round-{n}", repeat=n, repeats=len(rates), repeat_group=group)
        out.append(rec)
    return out


def write_rounds(folder: Path, recs: list[dict]) -> list[Path]:
    """Write ``recs`` (e.g. :func:`round_records`) as the job folders ``folder/0``, ``folder/1``, ... of a
    sweep: those folders."""
    return [put(folder / str(n), rec).parent for n, rec in enumerate(recs)]


def _cpu_sdpa_forward(q, k, v, *args, out_shape=None, **kwargs) -> int:
    """FLOPs of SDPA's CPU kernel forward, as FlopCounterMode counts the CUDA kernels: ``Q K^T`` and
    ``P V`` over the full square, ``2 x 2 b h s_q s_k d`` (the arguments are shapes)."""
    b, h, s_q, d = q
    return 4 * b * h * s_q * k[2] * d


def _cpu_sdpa_backward(grad, q, k, v, *args, out_shape=None, **kwargs) -> int:
    """FLOPs of SDPA's CPU kernel backward: twice its forward (four matmuls of the square)."""
    b, h, s_q, d = q
    return 8 * b * h * s_q * k[2] * d


def cpu_sdpa_flops() -> dict:
    """A ``FlopCounterMode(custom_mapping=...)`` for SDPA's CPU kernel
    (``aten._scaled_dot_product_flash_attention_for_cpu`` and its backward), which torch's counter
    does not register; on the meta device SDPA runs its math decomposition (bmm) instead, which
    ``activation_checkpointing=selective`` does not save, so selective is counted on the CPU."""
    import torch

    aten = torch.ops.aten
    return {
        aten._scaled_dot_product_flash_attention_for_cpu: _cpu_sdpa_forward,
        aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_sdpa_backward,
    }


@contextlib.contextmanager
def deadline(seconds: int):
    """Fail (TimeoutError) instead of hanging when the block blocks for ``seconds`` (an opened FIFO); the
    main thread only (SIGALRM)."""

    def expire(signum, frame):
        raise TimeoutError(f"blocked for {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def config_loader(conf: Path | None = None) -> Iterator[Any]:
    """Hydra's config loader over ``conf`` (default the checkout's ``conf/``), with flopsweep's schema and
    its two resolvers registered as ``run.py`` registers them: a module fixture's body
    (``loader = pytest.fixture(scope="module")(config_loader)``)."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    from flopsweep.store import register_configs

    register_configs()
    OmegaConf.register_new_resolver("flopsweep_uid", lambda: "test", replace=True)
    OmegaConf.register_new_resolver("flopsweep_batch", lambda fail_fast: None, replace=True)
    with initialize_config_dir(config_dir=str(conf or ROOT / "conf"), version_base="1.3"):
        yield GlobalHydra.instance().config_loader()


def left_record(hydra_compose, folder: Path, overrides: list[str], error: dict, status: str) -> Path:
    """The record a job of ``overrides`` left in ``folder`` (its config as the job validated it, schema 2,
    ``status`` and ``error``), written as a sweep wrote it: the resume tests' earlier job."""
    import dataclasses

    from flopsweep.plan import Environment, plan

    ran = plan(hydra_compose(overrides), Environment.detect()).cfg
    folder.mkdir(parents=True)
    path = folder / "metrics.json"
    config = json.loads(json.dumps(dataclasses.asdict(ran)))
    path.write_text(json.dumps({"schema_version": 2, "status": status, "config": config, "error": error}))
    return path


def resumed_job(hydra_compose, folder: Path, overrides: list[str], sweep: Path):
    """:func:`flopsweep.job.lifecycle.planned` of the job of ``overrides`` with ``resume=true`` in ``folder``
    of the sweep ``sweep``: its return and the job."""
    from flopsweep.job.lifecycle import planned
    from flopsweep.job.result import JobInfo, JobResult

    overrides = [*overrides, "resume=true"]
    job = JobResult(path=folder / "metrics.json", cfg=hydra_compose(overrides), run={})
    info = JobInfo(job_dir=folder, overrides=overrides, sweep_dir=str(sweep))
    return planned(job, info), job

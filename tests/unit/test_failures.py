"""Issue 4, sweeps that lose nothing: failures become records, jobs are isolated,
writes are atomic, sweeps resume, and bad input gets a clear error.

The end-to-end tests run ``python run.py`` in a subprocess with real gloo ranks on
the CPU and faults injected with the test-only ``fault`` config.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import pickle
import re
import signal
import sys
from pathlib import Path

import pytest
import yaml
from helpers import ROOT, validate
from integration.test_failures import BAD_INPUTS, _cpu_device, _has_gpu  # shared with the integration tier

from flopsweep.config import ConfigError, FaultConfig, RunConfig
from flopsweep.files import RecordExistsError, atomic_write_json
from flopsweep.job import ok_record, set_aside
from flopsweep.outcome import collect


def _scratch(tmp_path: Path, phases: dict[int, str], errors: dict[int, dict]) -> Path:
    for rank, phase in phases.items():
        (tmp_path / f"rank{rank}_phase.txt").write_text(phase)
    for rank, fields in errors.items():
        error = {
            "type": "RuntimeError",
            "message": "x",
            "phase": phases[rank],
            "rank": rank,
            "traceback": None,
            "oom": False,
            "time": 1.0,
            **fields,
        }
        (tmp_path / f"rank{rank}_error.json").write_text(json.dumps(error))
    return tmp_path


def test_oom_on_rank_1_wins_over_the_collective_error_it_caused_on_rank_0(tmp_path: Path) -> None:
    scratch = _scratch(
        tmp_path,
        {0: "measure", 1: "measure"},
        {
            0: {"type": "DistBackendError", "time": 1.0},
            1: {"type": "OutOfMemoryError", "oom": True, "time": 1.5},
        },
    )
    outcome = collect(scratch, {0: 1, 1: 1}, 2)
    assert outcome.status == "oom" and outcome.error["rank"] == 1 and outcome.error["phase"] == "measure"
    assert "oom" not in outcome.error and "time" not in outcome.error


def test_earliest_error_is_the_cause(tmp_path: Path) -> None:
    scratch = _scratch(
        tmp_path,
        {0: "warmup", 1: "warmup"},
        {0: {"type": "DistBackendError", "time": 2.0}, 1: {"type": "ValueError", "time": 1.0}},
    )
    outcome = collect(scratch, {0: 1, 1: 1}, 2)
    assert outcome.status == "error" and outcome.error["type"] == "ValueError" and outcome.error["rank"] == 1


def test_a_signal_names_the_killed_rank_not_the_peer_that_failed_after(tmp_path: Path) -> None:
    scratch = _scratch(tmp_path, {0: "measure", 1: "warmup"}, {0: {"type": "DistBackendError"}})
    outcome = collect(scratch, {0: 1, 1: -signal.SIGKILL}, 2)
    assert outcome.status == "error" and outcome.error["type"] == "WorkerKilled"
    assert outcome.error["rank"] == 1 and outcome.error["phase"] == "warmup"
    assert "SIGKILL" in outcome.error["message"]


def test_an_injected_kill_is_named_and_a_real_one_points_at_the_oom_killer(tmp_path: Path) -> None:
    """A rank killed by fault.kind=kill was reported as "often the kernel's OOM killer": the rank now
    leaves a note of its injection in the scratch folder, which the record's message names."""
    from flopsweep.files import atomic_write_json
    from flopsweep.rank_faults import injected_file

    scratch = _scratch(tmp_path, {0: "measure", 1: "warmup"}, {})
    real = collect(scratch, {0: 1, 1: -signal.SIGKILL}, 2)
    assert real.error["message"].startswith("rank 1 was killed by SIGKILL (often the kernel's OOM killer")
    atomic_write_json(scratch / injected_file(1), {"message": "injected fault: kill on rank 1 in warmup"})
    injected = collect(scratch, {0: 1, 1: -signal.SIGKILL}, 2)
    assert (
        injected.error["message"] == "rank 1 was killed by SIGKILL (injected fault: kill on rank 1 in warmup)"
    )
    (scratch / injected_file(1)).unlink()
    (scratch / injected_file(1)).symlink_to(tmp_path / "elsewhere")  # never followed
    assert "OOM killer" in collect(scratch, {0: 1, 1: -signal.SIGKILL}, 2).error["message"]


def test_timeout_and_silent_exits(tmp_path: Path) -> None:
    scratch = _scratch(tmp_path, {0: "measure", 1: "warmup"}, {})
    timeout = collect(scratch, {}, 2, timeout_s=7.0)
    assert timeout.error["type"] == "Timeout" and "timeout_s=7" in timeout.error["message"]
    assert (timeout.error["phase"], timeout.error["rank"]) == ("warmup", 1)  # the rank that is behind
    (tmp_path / "init").mkdir()  # both ranks hung in init (one hangs, the other waits in its rendezvous)
    hung_in_init = collect(_scratch(tmp_path / "init", {0: "init", 1: "init"}, {}), {}, 2, timeout_s=45.0)
    assert (hung_in_init.error["type"], hung_in_init.error["phase"]) == ("Timeout", "init")
    assert "all 2 workers were stopped" in hung_in_init.error["message"]
    died = collect(scratch, {0: 0, 1: 3}, 2)
    assert died.error["rank"] == 1 and "exited with code 3" in died.error["message"]
    no_result = collect(scratch, {0: 0, 1: 0}, 2)
    assert no_result.status == "error" and "without a result" in no_result.error["message"]


def test_refuses_to_overwrite_and_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    atomic_write_json(path, {"status": "ok"}, overwrite=False)
    with pytest.raises(RecordExistsError, match=str(path)):
        atomic_write_json(path, {"status": "error"}, overwrite=False)
    assert json.loads(path.read_text()) == {"status": "ok"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]  # no temporary file left


def test_set_aside_keeps_the_old_record_and_its_tracebacks(tmp_path: Path) -> None:
    old = {"status": "oom", "run": {"id": "abc"}, "config": {}}
    (tmp_path / "metrics.json").write_text(json.dumps(old))
    (tmp_path / "traceback_rank1.txt").write_text("tb")
    (tmp_path / "batch_search" / "mbs1").mkdir(parents=True)
    (tmp_path / "batch_search" / "mbs1" / "traceback_rank0.txt").write_text("probe tb")
    aside = set_aside(tmp_path / "metrics.json")
    assert aside == tmp_path / "metrics.oom-abc.json" and json.loads(aside.read_text()) == old
    assert (tmp_path / "traceback_rank1.oom-abc.txt").read_text() == "tb"
    # batch=auto's probes go aside with the record they belong to.
    assert (tmp_path / "batch_search.oom-abc" / "mbs1" / "traceback_rank0.txt").read_text() == "probe tb"
    assert not (tmp_path / "batch_search").exists()
    assert not (tmp_path / "metrics.json").exists() and set_aside(tmp_path / "metrics.json") is None


def test_ok_record_matches_config_but_not_run_control_keys(tmp_path: Path) -> None:
    cfg = validate(RunConfig(device="cpu"))
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({"status": "ok", "run": {"id": "a"}, "config": dataclasses.asdict(cfg)}))
    again = dataclasses.replace(cfg, resume=True, timeout_s=5.0, fault=FaultConfig(kind="none", rank=3))
    assert ok_record(path, again) is not None
    assert ok_record(path, dataclasses.replace(cfg, seed=1)) is None
    path.write_text("{not json")
    assert ok_record(path, cfg) is None


def test_loading_results_never_unpickles(tmp_path: Path) -> None:
    from analysis import load

    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.json").write_bytes(pickle.dumps(Evil()))
    df = load(tmp_path)
    assert df.empty and list(df.attrs["unreadable"]) == [str(tmp_path / "run" / "metrics.json")]
    assert not marker.exists()


FORBIDDEN_CALLS = {
    "eval",
    "exec",
    "compile",
    "instantiate",
    "get_class",
    "get_method",
    "import_module",
    "__import__",
    "Unpickler",
}


FORBIDDEN_MODULES = {"pickle", "marshal", "dill", "shelve", "hydra.utils"}


OP_BUILDER_LOADS = {"deepspeed_backend.py: builder.load()"}
"""``load`` calls that deserialise nothing: DeepSpeed's ``OpBuilder.load`` (``deepspeed_backend.load_ops``)
builds or imports one of DeepSpeed's own C++ extensions by its builder's name."""


@pytest.mark.parametrize("package", ["flopsweep", "analysis"])
def test_no_code_path_evaluates_or_instantiates_config(package: str) -> None:
    """No eval/exec, no hydra.utils.instantiate, no pickle; the only ``load``/``loads`` is JSON's, or
    PyYAML's with its safe loader (``SAFE_LOADER``: plain values, no objects); the only import by name
    is :mod:`flopsweep.lazy`'s, which loads modules of flopsweep alone."""
    lazy = ROOT / "flopsweep" / "lazy.py"
    for path in sorted((ROOT / package).rglob("*.py")):
        forbidden = FORBIDDEN_CALLS - {"import_module"} if path == lazy else FORBIDDEN_CALLS
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = {a.name for a in node.names} | {getattr(node, "module", None) or ""}
                assert not names & FORBIDDEN_MODULES, (path, names)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in forbidden, (path, ast.unparse(node))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                where = f"{path.name}: {ast.unparse(node)}"
                assert node.func.attr not in forbidden - {"compile"}, where  # model.compile() is fine
                if node.func.attr in ("load", "loads") and ast.unparse(node.func.value) == "yaml":
                    loaders = [ast.unparse(k.value) for k in node.keywords if k.arg == "Loader"]
                    assert loaders == ["SAFE_LOADER"], where  # PyYAML's safe constructor, checked below
                elif node.func.attr in ("load", "loads") and where not in OP_BUILDER_LOADS:
                    assert ast.unparse(node.func.value) == "json", where
    from flopsweep.override_schema import SAFE_LOADER

    assert issubclass(SAFE_LOADER, yaml.constructor.SafeConstructor)
    assert not issubclass(SAFE_LOADER, yaml.constructor.FullConstructor)


@pytest.mark.parametrize(
    "path",
    ["os", "json", "tests.conftest", "multiprocessing.spawn", "flopsweep_evil", "flopsweep.x;y", ".models"],
)
def test_lazy_loads_only_modules_of_flopsweep(path: str) -> None:
    """A spec's torch path outside the package (or not a dotted name) is refused before any import."""
    from flopsweep import lazy, text

    before = set(sys.modules)
    with pytest.raises(ValueError, match="only modules of the flopsweep package"):
        lazy.resolve(path + ":x")
    assert set(sys.modules) - before == set()
    assert lazy.resolve("flopsweep.text:printable") is text.printable


# Every row but device=cuda runs on the CPU; that row needs a machine without a GPU.
BAD_IDS = [" ".join(overrides) for overrides, _, _ in BAD_INPUTS]


def test_there_are_enough_bad_inputs() -> None:
    assert len(BAD_INPUTS) >= 30
    assert len(set(BAD_IDS)) == len(BAD_IDS)


@pytest.mark.parametrize(("overrides", "key", "where"), BAD_INPUTS, ids=BAD_IDS)
def test_bad_input_in_process(hydra_compose, overrides: list[str], key: str, where: str) -> None:
    """The fast check: Hydra's compose API refuses it, or validate() names the key."""
    if "device=cuda" in overrides and _has_gpu():
        pytest.skip("needs a machine without a GPU")
    if where == "refused":  # before Hydra starts: the line run.py prints
        from run import refusal

        message = refusal(overrides)
        assert message.startswith(f"Invalid config: {key}=") and "Fix:" in message and "\n" not in message
        return
    try:
        cfg = hydra_compose(_cpu_device(overrides))
    except Exception as exc:  # noqa: BLE001 - Hydra raises several types
        assert where in ("compose", "option"), exc
        assert key.split(".")[-1] in str(exc) or key in str(exc.__cause__), exc
        if where == "option":  # run.py's pre-check refuses it first, naming the option
            from run import foreign_option_keys

            assert "belongs to" in foreign_option_keys(overrides)
        return
    assert where == "invalid", f"{overrides} composed"
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    assert info.value.key == key and "Fix:" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("overrides", "refused"),
    [
        (["-m", "backend=ddp,fsdp", "backend.cpu_offload=true"], "backend=ddp (a command-line"),
        (["-m", "backend=fsdp,zero3", "backend.cpu_offload=true"], "backend=zero3 (a command-line"),
        (["-m", "backend=zero2,zero3", "backend.offload_optimizer=cpu"], None),  # both DeepSpeed
        (["-m", "backend=fsdp", "backend.cpu_offload=true"], None),
    ],
)
def test_a_sweep_over_options_refuses_a_key_that_one_of_them_lacks(
    overrides: list[str], refused: str | None
) -> None:
    """Before, ``backend=ddp,fsdp backend.cpu_offload=true`` passed the check (fsdp has the key) and
    Hydra stopped the sweep at the ddp job with a multi-line error; now one line before any job."""
    from run import foreign_option_keys

    message = foreign_option_keys(overrides)
    if refused is None:
        assert message is None
        return
    assert message.startswith("Invalid config: backend.") and "belongs to backend=" in message
    assert f"not to {refused}" in message and "Fix: drop the override" in message and "\n" not in message


def test_deepspeed_sizes_resolve_to_int_before_launch(hydra_compose) -> None:
    """``5e8`` is a whole number: validate() hands DeepSpeed an int, not a float it would reject."""
    cfg = hydra_compose(
        [
            "backend=deepspeed",
            "backend.reduce_bucket_size=5e8",
            "device=cpu",
            "backend.stage3_param_persistence_threshold=1000",
        ]
    )
    backend = validate(cfg).backend
    assert backend.reduce_bucket_size == 500_000_000 and type(backend.reduce_bucket_size) is int
    assert type(backend.stage3_param_persistence_threshold) is int
    assert backend.stage3_prefetch_bucket_size is None


@pytest.mark.parametrize("where", ["/proc/flopsweep-nope", "/dev/null", "FILE/sub"])
def test_unmakeable_run_directory_is_one_line(tmp_path: Path, where: str) -> None:
    from flopsweep.command_line_checks import output_dir_problem

    (tmp_path / "FILE").write_text("")
    where = where.replace("FILE", str(tmp_path / "FILE"))
    message = output_dir_problem([f"hydra.run.dir={where}"])
    if where == "/dev/null":  # something is there: named, never "cannot make the directory (File exists)"
        assert message.startswith(
            f"Invalid config: hydra.run.dir={where}: is a character device, not a folder"
        )
    else:
        assert message.startswith(f"Invalid config: hydra.run.dir={where}: cannot make the directory")


def test_the_docs_name_every_fault_kind_and_phase_the_config_takes_each_tested() -> None:
    """The README listed ``oom|raise|kill|hang`` while the refusal of ``fault.kind`` names
    ``abort`` and ``nan_loss`` too (a trial): the statuses page lists what the config takes, and each kind
    is injected by some test."""
    from helpers import ROOT

    from flopsweep.limits import FAULT_KINDS, FAULT_PHASES

    readme = (ROOT / "docs" / "usage-statuses.md").read_text()
    assert re.search(r"`fault\.kind=([a-z_|]+)`", readme).group(1).split("|") == list(FAULT_KINDS)
    assert re.search(r"`fault\.phase=([a-z_|]+)`", readme).group(1).split("|") == list(FAULT_PHASES)
    tests = "\n".join(path.read_text() for path in sorted((ROOT / "tests").glob("*/test_*.py")))
    for kind in FAULT_KINDS[1:]:
        assert re.search(rf"kind:{kind}\b|fault\.kind={kind}\b|kind=\"{kind}\"", tests), kind


@pytest.mark.parametrize("phase", ["init", "teardown"])
def test_a_nan_loss_fault_in_a_phase_without_a_loss_is_refused(phase: str) -> None:
    """fault.kind=nan_loss at init or teardown did nothing (no step runs there) and the run was ok with
    finite losses: it is refused in one line naming the phases that have a loss."""
    cfg = dataclasses.replace(RunConfig(), device="cpu", fault=FaultConfig(kind="nan_loss", phase=phase))
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    assert err.value.key == "fault.phase" and "fault.phase=warmup or fault.phase=measure" in str(err.value)
    assert "\n" not in str(err.value)
    assert validate(dataclasses.replace(cfg, fault=FaultConfig(kind="nan_loss", phase="measure")))

"""flopsweep.identity: one "same set-up" for resume, the analysis and its baselines.

The two faults it mends: a record from before ``optim.in_backward`` was re-run by ``resume=true``
although the analysis pooled it with today's records; and ``--baseline backend=fsdp`` never gave a
DDP run a speedup (DDP's layout is recorded ``dp2x1``, FSDP2's ``dp2``).
"""

from __future__ import annotations

import copy
import dataclasses
import glob
import hashlib
import json
import shutil
from pathlib import Path

import pytest

import analysis
from analysis.__main__ import main as analysis_main
from flopsweep import identity, job
from flopsweep.config import ModelSearchConfig, ParallelConfig
from flopsweep.identity import RUN_CONTROL_KEYS
from flopsweep.layout import Layout
from flopsweep.metrics import build_record

ROOT = Path(__file__).resolve().parents[2]


FIXTURES = ROOT / "tests" / "fixtures"


COMMITTED = sorted(
    [*glob.glob(str(FIXTURES / "**" / "metrics.json"), recursive=True)]
    + glob.glob(str(ROOT / "benchmarks" / "results" / "**" / "metrics.json"), recursive=True)
)


def _without_keys(record: dict) -> dict:
    """``record`` as written before the keys: no ``run.setup_key``, ``job_key``, ``identity_version``."""
    out = copy.deepcopy(record)
    for key in ("setup_key", "job_key", "identity_version"):
        out["run"].pop(key, None)
    return out


def _before_in_backward(record: dict) -> dict:
    """``record`` as a flopsweep from before ``optim.in_backward`` wrote it."""
    out = _without_keys(record)
    del out["config"]["optim"]["in_backward"]
    return out


def _record(cfg, status: str = "ok") -> dict:
    """A record of ``cfg`` from the real builder (no metrics: the keys do not read them)."""
    run = {"id": "r1", "overrides": [], "job_num": 0, "repeat": 0, "repeats": 1, "repeat_group": None}
    system = {"device_name": "cpu", "world_size": 1, "parallel": Layout().as_dict()}
    return build_record(cfg=cfg, status=status, error=None, run=run, system=system, metrics=None)


def _sweep_with_layouts(tmp_path: Path) -> Path:
    """The fixture sweep (2 models x fsdp, ddp, deepspeed ZeRO-3 x micro batch 1..16 on 2 ranks), each
    record given the ``system.parallel`` the job writes for its backend
    (``Layout.resolve(...).for_backend``: DDP ``dp_replicate=2, dp_shard=1``, the others ``dp_shard=2``)."""
    out = tmp_path / "sweep"
    shutil.copytree(FIXTURES / "sweep", out)
    for path in out.rglob("metrics.json"):
        record = json.loads(path.read_text())
        world = record["system"]["world_size"]
        layout = Layout.resolve(ParallelConfig(), world).for_backend(record["config"]["backend"]["name"])
        record["system"]["parallel"] = layout.as_dict()
        path.write_text(json.dumps(record))
    return out


def test_baseline_gives_ddp_and_zero3_a_speedup_against_fsdp(tmp_path):
    df = analysis.load(_sweep_with_layouts(tmp_path))
    ddp = df[df["backend"].eq("ddp")]
    assert set(ddp["layout"]) == {"dp2x1"} and set(df.loc[df["backend"].eq("fsdp"), "layout"]) == {"dp2"}
    out = analysis.compare(df, baseline={"backend": "fsdp"})
    ok = out[out["status"].eq("ok")]
    assert set(ok["backend"]) == {"ddp", "fsdp", "deepspeed"}
    assert ok["speedup"].notna().all(), ok.loc[ok["speedup"].isna(), ["backend", "model", "micro_batch_size"]]
    # each DDP row is compared with the FSDP run of its model and micro batch, not another one
    for _, row in ok[ok["backend"].ne("fsdp")].iterrows():
        fsdp = ok[
            ok["backend"].eq("fsdp")
            & ok["model"].eq(row["model"])
            & ok["micro_batch_size"].eq(row["micro_batch_size"])
            & ok["seq_len"].eq(row["seq_len"])
        ]
        expected = row["model_tflops_per_device"] / fsdp["model_tflops_per_device"].mean()
        assert row["speedup"] == pytest.approx(expected)
    assert out.loc[out["status"].ne("ok"), "speedup"].isna().all()
    assert (out["layout"] == df["layout"]).all()  # the table still shows DDP's layout as recorded


def test_cli_baseline_has_no_blank_speedup(tmp_path, capsys):
    sweep = _sweep_with_layouts(tmp_path)
    assert (
        analysis_main([str(sweep), "--baseline", "backend=fsdp", "--columns", "backend,layout,speedup"]) == 0
    )
    out, err = capsys.readouterr()
    assert "speedup" in out and "dp2x1" in out
    assert "speedup is blank" not in out + err
    assert "add the backend=fsdp run" not in out + err


def test_compared_layout():
    ddp = {"backend": "ddp", "dp_replicate": 4, "dp_shard": 1, "layout": "dp4x1"}
    assert identity.compared_layout(ddp) == {"dp_replicate": 1, "dp_shard": 4, "layout": "dp4"}
    hsdp = {"backend": "fsdp", "dp_replicate": 2, "dp_shard": 1, "layout": "dp2x1"}  # FSDP2 replicating
    assert identity.compared_layout(hsdp) == {"dp_replicate": 2, "dp_shard": 1, "layout": "dp2x1"}
    one = {"backend": "ddp", "dp_replicate": 1, "dp_shard": 1, "layout": "dp1"}
    assert identity.compared_layout(one) == {"dp_replicate": 1, "dp_shard": 1, "layout": "dp1"}
    blank = {"backend": "ddp", "dp_replicate": None, "dp_shard": float("nan"), "layout": None}
    assert identity.compared_layout(blank) == {
        "dp_replicate": None,
        "dp_shard": blank["dp_shard"],
        "layout": None,
    }
    # what the job records for DDP and FSDP2 over 8 ranks compares alike
    for backend in ("ddp", "fsdp", "deepspeed"):
        layout = Layout.resolve(ParallelConfig(), 8).for_backend(backend)
        row = {"backend": backend, **layout.as_dict(), "layout": layout.label()}
        assert identity.compared_layout(row) == {"dp_replicate": 1, "dp_shard": 8, "layout": "dp8"}


def test_record_before_in_backward_is_the_same_job_to_resume(hydra_compose, tmp_path):
    cfg = hydra_compose(["model=gpt-tiny", "device=cpu"])
    old = _before_in_backward(_record(cfg))
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(old))
    assert job.ok_record(path, cfg) == old  # skipped by resume=true, not re-run
    failed = {**old, "status": "error"}
    path.write_text(json.dumps(failed))
    assert job.resumed_record(path, cfg) == failed  # its probes are taken over
    # the step fused into backward is another job
    fused = hydra_compose(["model=gpt-tiny", "device=cpu", "optim.in_backward=true", "optim.grad_clip=0"])
    path.write_text(json.dumps(old))
    assert job.ok_record(path, fused) is None


def test_record_before_in_backward_pools_with_a_new_one(hydra_compose, tmp_path):
    cfg = hydra_compose(["model=gpt-tiny", "device=cpu"])
    new = _record(cfg)
    old = _before_in_backward(new)
    assert identity.setup_key(old) == identity.setup_key(new) == new["run"]["setup_key"]
    assert identity.job_key(old) == identity.job_key(new) == new["run"]["job_key"]
    for name, record in (("old", old), ("new", new)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.json").write_text(json.dumps(record))
    df = analysis.load(tmp_path)
    assert df["setup_id"].nunique() == 1 and df["base_setup_id"].nunique() == 1


def test_stored_keys_are_the_computed_ones(hydra_compose):
    for overrides in (["model=gpt-tiny"], ["backend=zero3", "batch=auto", "parallel.dp_shard=2"]):
        record = _record(hydra_compose([*overrides, "device=cpu"]))
        assert record["run"]["identity_version"] == identity.IDENTITY_VERSION
        bare = _without_keys(record)
        assert record["run"]["setup_key"] == identity.setup_key(bare)
        assert record["run"]["job_key"] == identity.job_key(bare)
        # a stored key of another identity version is computed again
        stale = copy.deepcopy(record)
        stale["run"].update(
            setup_key="0" * 10, job_key="0" * 16, identity_version=identity.IDENTITY_VERSION + 1
        )
        assert identity.setup_key(stale) == record["run"]["setup_key"]
        assert identity.job_key(stale) == record["run"]["job_key"]


def test_job_key_ignores_run_controls_and_found_sizes(hydra_compose):
    cfg = hydra_compose(["model=gpt-tiny", "device=cpu", "batch=auto"])
    config = json.loads(json.dumps(dataclasses.asdict(cfg)))
    record = _record(cfg)
    found = copy.deepcopy(record)
    found["config"]["batch"]["micro_batch_size"] = 7  # what the search found
    found["config"]["timeout_s"] = 5
    assert identity.same_job(_without_keys(found), config)
    other_round = copy.deepcopy(_without_keys(record))
    other_round["config"]["repeat"] = 1
    assert not identity.same_job(other_round, config)
    assert set(RUN_CONTROL_KEYS).isdisjoint(identity.comparable_config(config))


def test_setup_key_ignores_rank_count_and_tag_not_backend(hydra_compose):
    base = _without_keys(_record(hydra_compose(["model=gpt-tiny", "device=cpu"])))
    same = copy.deepcopy(base)
    same["config"].update(nproc_per_node="4", tag="x", repeat=2, timeout_s=9)
    assert identity.setup_key(same) == identity.setup_key(base)
    other = _without_keys(_record(hydra_compose(["model=gpt-tiny", "device=cpu", "backend=ddp"])))
    assert identity.setup_key(other) != identity.setup_key(base)


def _old_setup_id(record: dict, layout: bool = True) -> str | None:
    """``analysis.load.setup_id`` as it was before :mod:`flopsweep.identity` (at 657cf0d), and the one
    changes since: a ``model=hf`` set-up includes its config.json's hash (identity version 2), and
    ``parallel.ep`` at 1, ``loss.chunk_tokens`` at 0, ``optim.implementation`` at ``auto``,
    ``compile_scope`` at ``block``, ``compile_mode`` at ``default``, ``backend.end_units`` false and
    ``steps.gc_freq`` at 0 and ``optim.overlap_forward`` false are left out as keys added later."""
    config = record.get("config")
    if not isinstance(config, dict):
        return None
    skip = ("nproc_per_node", "nnodes", "tag", "repeat", *RUN_CONTROL_KEYS)
    kept = {k: v for k, v in config.items() if k not in skip}
    parallel = kept.get("parallel")
    if isinstance(parallel, dict) and all(parallel.get(k) == v for k, v in identity.PARALLEL_DEFAULT.items()):
        kept.pop("parallel")
    search = kept.get("search")
    if isinstance(search, dict):  # search.grow=seq_len's keys, added later (session 18), at their defaults
        seq = {k: getattr(ModelSearchConfig(), k) for k in identity.SEQ_SEARCH_KEYS}  # each at its default
        kept["search"] = search = {k: v for k, v in search.items() if k not in seq or v != seq[k]}
    if search == identity.SEARCH_DEFAULT:
        kept.pop("search")
    optim = kept.get("optim")
    if isinstance(optim, dict) and optim.get("in_backward") is False:
        kept["optim"] = optim = {k: v for k, v in optim.items() if k != "in_backward"}
    if isinstance(optim, dict) and optim.get("implementation") == "auto":  # added later (session 18)
        kept["optim"] = optim = {k: v for k, v in optim.items() if k != "implementation"}
    if isinstance(optim, dict) and optim.get("overlap_forward") is False:  # added later (session 35)
        kept["optim"] = {k: v for k, v in optim.items() if k != "overlap_forward"}
    if isinstance(parallel, dict) and parallel.get("ep") == 1 and "parallel" in kept:  # added later
        kept["parallel"] = {k: v for k, v in parallel.items() if k != "ep"}
    batch = kept.get("batch")
    if isinstance(batch, dict) and "global_batch_size" in batch and batch["global_batch_size"] is None:
        kept["batch"] = {k: v for k, v in batch.items() if k != "global_batch_size"}
    ckpt = kept.get("activation_checkpointing")
    if isinstance(ckpt, dict) and set(ckpt) == {"name"} and ckpt["name"] in ("full", "none"):
        kept["activation_checkpointing"] = ckpt["name"] == "full"
    if kept.get("loss") == {"chunk_tokens": 0}:  # added later (session 15): the whole logits, as before
        kept.pop("loss")
    for key, before in (("compile_scope", "block"), ("compile_mode", "default")):  # added later (session 20)
        if kept.get(key) == before:
            kept.pop(key)
    backend = kept.get("backend")
    if isinstance(backend, dict) and backend.get("end_units") is False:  # added later (session 20)
        kept["backend"] = {k: v for k, v in backend.items() if k != "end_units"}
    steps = kept.get("steps")
    if isinstance(steps, dict) and steps.get("gc_freq") == 0:  # added later (session 26)
        kept["steps"] = {k: v for k, v in steps.items() if k != "gc_freq"}
    model, sha = kept.get("model"), (record.get("model") or {}).get("config_sha256")
    if isinstance(model, dict) and model.get("arch") == "hf" and sha:  # identity version 2: its file's hash
        kept["model"] = {**model, "config_sha256": sha}
    if not layout:
        kept.pop("parallel", None)
    system = record.get("system") if isinstance(record.get("system"), dict) else {}
    text = json.dumps([kept, system.get("device_name")], sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def test_committed_records_keep_their_setup_id():
    from analysis.schema import read_record
    from flopsweep.safe_read import RecordError

    assert len(COMMITTED) > 200
    read = 0
    for path in COMMITTED:
        try:
            record, _ = read_record(Path(path))
        except RecordError:
            continue  # the broken fixtures
        read += 1
        for layout in (True, False):
            assert identity.setup_key(record, layout=layout) == _old_setup_id(record, layout), path
    assert read > 200


def _drop(config: dict, path: tuple[str, ...]) -> dict:
    """``config`` (a copy) without the key at ``path``."""
    out = copy.deepcopy(config)
    node = out
    for part in path[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(path[-1], None)
    return out


def test_committed_records_keep_their_job_key_when_a_key_is_added_later():
    """The job key (what ``resume=true`` matches) hashes the config less the run controls, with every
    key of :data:`identity.ADDED_LATER` at its old value left out: the same key whether a record
    lacks such a key (written before it) or holds it at its default (written after), so adding a key
    does not make ``resume=true`` run a committed sweep's ``ok`` jobs again (identity version 3).
    Every other key is compared as the record holds it."""
    from flopsweep.safe_read import RecordError, read_json

    checked = 0
    for path in COMMITTED:
        try:
            record = read_json(Path(path))
        except RecordError:
            continue  # the broken fixtures
        config = record.get("config")
        if not isinstance(config, dict) or record.get("schema_version") != 2:
            continue
        checked += 1
        comparable = identity.comparable_config(config)
        assert set(RUN_CONTROL_KEYS).isdisjoint(comparable)
        filled = identity.current_config(config)  # as a config written today holds them
        assert identity.comparable_config(filled) == comparable, path
        for added, before in identity.ADDED_LATER:  # and as a config written before each key
            at_old = _drop(filled, added)
            node = filled
            for part in added:
                node = node.get(part) if isinstance(node, dict) else None
            if node == before:
                assert identity.comparable_config(at_old) == comparable, (path, added)
        if isinstance(config.get("optim"), dict) and config["optim"].get("in_backward") is True:
            assert comparable["optim"]["in_backward"] is True
        without = {k: v for k, v in config.items() if k not in RUN_CONTROL_KEYS}
        added_top = {p[0] for p, _ in identity.ADDED_LATER}
        for key, value in without.items():  # nothing but the searched sizes and the added keys differ
            if key not in added_top and key not in (
                "batch",
                "model",
                "optim",
                "activation_checkpointing",
                "backend",
            ):
                assert comparable[key] == value, (path, key)
    assert checked > 200


def test_analysis_schema_re_exports_the_chain():
    from analysis import schema
    from flopsweep.identity import versions as chain

    for name in (
        "upgrade",
        "upgrade_v0_to_v1",
        "upgrade_v1_to_v2",
        "UPGRADES",
        "checkpointing_name",
        "finite",
    ):
        assert getattr(schema, name) is getattr(chain, name)
    record, _ = schema.read_record(FIXTURES / "records" / "v1-ok" / "metrics.json")
    v1 = json.loads((FIXTURES / "records" / "v1-ok" / "metrics.json").read_text())
    assert identity.setup_key(v1) == identity.setup_key(record)  # the job's keys upgrade first
    assert identity.job_key(v1) == identity.job_key(record)


def test_calibration_key_reads_an_old_checkpointing_bool():
    new = {"config": {"model": {"name": "m"}, "activation_checkpointing": {"name": "full"}}}
    old = {"config": {"model": {"name": "m"}, "activation_checkpointing": True}}
    assert identity.calibration_key(old) == identity.calibration_key(new)
    from flopsweep import predict

    assert predict.calibration_key(old) == identity.calibration_key(new)
    assert predict.CALIBRATION_KEYS is identity.CALIBRATION_KEYS


def test_machine_difference():
    record = {"system": {"device_name": "cpu", "world_size": 2, "hostname": "a"}}
    here = {"device_name": "cpu", "gpu_memory_bytes": None, "world_size": 2, "hostname": "a"}
    assert identity.machine_difference(record, {}, here) == ""
    assert identity.machine_difference(record, {}, {**here, "hostname": "b"}) == "hostname a, this run's b"
    cuda = {**here, "hostname": None, "device_name": "H200", "gpu_memory_bytes": 1}
    assert "device_name cpu, this run's H200" in identity.machine_difference(record, {}, cuda)
    assert "hostname" not in identity.machine_difference(record, {}, cuda)


def test_parsed_overrides_is_the_hashable_form_same_overrides_compares() -> None:
    """``identity.parsed_overrides``: one value for one parsed value (``0.0350`` and ``3.5e-2``, any order),
    the key's prefix and the value's type kept apart, hashable (a set of sweeps in ``folders``), None for
    what Hydra's grammar refuses."""
    one = identity.parsed_overrides(["optim.lr=0.0350", "backend=fsdp"])
    assert one == identity.parsed_overrides(["backend=fsdp", "optim.lr=3.5e-2"])
    assert one == (("backend", ("str", "fsdp")), ("optim.lr", ("float", "0.035")))
    assert len({one, identity.parsed_overrides(["optim.lr=0.035", "backend=fsdp"])}) == 1
    assert identity.parsed_overrides(["+seed=1"]) != identity.parsed_overrides(["seed=1"])
    assert identity.parsed_overrides(["seed=1"]) != identity.parsed_overrides(["seed=1.0"])
    assert identity.parsed_overrides(["optim.lr=[1,"]) is None
    assert not identity.same_overrides(["seed=1"], ["seed=1.0"]) and identity.same_overrides(
        ["seed=1"], ["seed=1"]
    )

"""The step-time model (``flopsweep.predict``), the interconnect probe, ``metrics.predicted``,
``plan=true``'s predicted columns and ``python -m analysis --predict``."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from helpers import calibration_record

from flopsweep import predict as pr
from flopsweep.predict_record import predict_record

P = 1_000_000_000


def workload(**kw) -> pr.Workload:
    base = dict(
        backend="fsdp",
        precision="bf16",
        n_params=P,
        n_layer=24,
        n_embd=2048,
        seq_len=2048,
        micro_batch_size=4,
        grad_accum=1,
        degrees={"dp_replicate": 1, "dp_shard": 8, "tp": 1, "pp": 1, "cp": 1},
        model_flops=8 * 6 * P * 4 * 2048,
        hardware_flops=8 * 8 * P * 4 * 2048,
    )
    return pr.Workload(**{**base, **kw})


LINK = pr.Link(intra=dict.fromkeys(pr.COLLECTIVES, 100.0), inter=dict.fromkeys(pr.COLLECTIVES, 10.0))


def test_bus_bandwidth_factors_are_nccl_tests() -> None:
    assert pr.busbw_factor("all_gather", 8) == pytest.approx(7 / 8)
    assert pr.busbw_factor("reduce_scatter", 4) == pytest.approx(3 / 4)
    assert pr.busbw_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert pr.busbw_factor("all_reduce", 1) == 0
    with pytest.raises(ValueError):
        pr.busbw_factor("broadcast", 2)


def test_communication_volume_per_backend() -> None:
    """FSDP2: bf16 parameters gathered forward and backward per micro batch, fp32 gradients
    reduce-scattered once; DDP: fp32 all-reduce once; ZeRO-3 like FSDP2 with bf16 gradients;
    ZeRO-1/2: one reduce-scatter and one all-gather of bf16."""
    fsdp = pr.transfers(workload(grad_accum=3), gpus_per_node=8)
    assert [(t.collective, t.bytes, t.count, t.group) for t in fsdp] == [
        ("all_gather", 2 * P, 6, 8),
        ("reduce_scatter", 4 * P, 1, 8),
    ]
    once = pr.transfers(workload(reshard_after_forward=False), gpus_per_node=8)
    assert once[0].count == 1
    ddp = pr.transfers(workload(backend="ddp"), gpus_per_node=8)
    assert [(t.collective, t.bytes, t.count) for t in ddp] == [("all_reduce", 4 * P, 1)]
    z3 = pr.transfers(workload(backend="deepspeed", zero_stage=3, grad_accum=2), gpus_per_node=8)
    assert [(t.collective, t.bytes, t.count) for t in z3] == [
        ("all_gather", 2 * P, 4),
        ("reduce_scatter", 2 * P, 1),
    ]
    z2 = pr.transfers(workload(backend="deepspeed", zero_stage=2), gpus_per_node=8)
    assert [(t.collective, t.count) for t in z2] == [("reduce_scatter", 1), ("all_gather", 1)]
    assert pr.transfers(workload(degrees={"dp_shard": 1}), gpus_per_node=8) == []


def test_tensor_and_pipeline_parallel_traffic_is_on_the_critical_path() -> None:
    w = workload(degrees={"dp_shard": 2, "tp": 4, "pp": 2}, grad_accum=4)
    by = {}
    for t in pr.transfers(w, gpus_per_node=8):
        by.setdefault(t.what.split()[0], t)  # the first of each kind
    assert by["fsdp"].bytes == 2 * P / 8  # each rank's share of the model: 1/(tp x pp)
    assert by["fsdp"].count == 2  # the pipeline stage gathers once per step, forward and backward
    # full recompute (hardware FLOPs 8/6 of the model's): 2 forward, 2 backward, 2 recomputed, per layer
    assert by["tensor-parallel"].count == 6 * 12 * 4 and not by["tensor-parallel"].overlappable
    assert by["tensor-parallel"].bytes == 4 * 2048 * 2048 * 2
    assert by["pipeline"].count == 8 and not by["pipeline"].overlappable
    assert by["pipeline"].bytes == 2 * (4 * 4 / 4) * 2048 * 2048 * 2 / 4  # one pipeline micro batch / tp
    assert not by["fsdp"].across_nodes  # dp strided by tp: 2 x 4 ranks fit in a node of 8
    assert pr.transfers(w, gpus_per_node=4)[0].across_nodes


def test_tensor_parallel_count_follows_the_recompute() -> None:
    """Without checkpointing (hardware FLOPs = model FLOPs) four per layer; with full, six."""
    plain = workload(degrees={"dp_shard": 1, "tp": 8}, hardware_flops=8 * 6 * P * 4 * 2048)
    assert plain.recompute_share == 0
    (tp,) = pr.transfers(plain, gpus_per_node=8)
    assert (tp.count, tp.group, tp.collective) == (4 * 24, 8, "all_reduce")
    assert workload().recompute_share == pytest.approx(1.0)


def test_hsdp_shards_inside_and_all_reduces_the_shard_across_replicas() -> None:
    w = workload(degrees={"dp_replicate": 2, "dp_shard": 4})
    got = [(t.collective, t.bytes, t.group, t.across_nodes) for t in pr.transfers(w, gpus_per_node=4)]
    assert got == [
        ("all_gather", 2 * P, 4, False),
        ("reduce_scatter", 4 * P, 4, False),
        ("all_reduce", 4 * P / 4, 2, True),  # the replicas sit on different nodes of 4
    ]
    # DDP and ZeRO take dp_replicate x dp_shard as one group
    ddp = pr.transfers(workload(backend="ddp", degrees={"dp_replicate": 2, "dp_shard": 4}), gpus_per_node=8)
    assert [(t.collective, t.group) for t in ddp] == [("all_reduce", 8)]


def test_tp8_is_slower_than_fsdp8_at_the_same_compute() -> None:
    """The same compute per rank (the model's split of one calibration): TP 8's activations
    travel on the critical path, FSDP 8's parameters mostly hide behind compute."""
    compute = pr.Compute(compute_s=1.0, optimizer_s=0.0, source="t")
    fsdp_w = workload(grad_accum=2, micro_batch_size=2)
    tp_w = workload(degrees={"dp_shard": 1, "tp": 8}, grad_accum=16, micro_batch_size=2)
    assert tp_w.tokens_per_step == fsdp_w.tokens_per_step  # one global batch
    fsdp = pr.predict(fsdp_w, compute, LINK, gpus_per_node=8)
    tp = pr.predict(tp_w, compute, LINK, gpus_per_node=8)
    assert tp.iteration_time_s > fsdp.iteration_time_s and tp.exposed_comm_s == pytest.approx(tp.comm_s)


def test_step_time_is_compute_plus_exposed_communication() -> None:
    w = workload()
    compute = pr.Compute(compute_s=1.0, optimizer_s=0.1, source="test")
    out = pr.predict(w, compute, LINK, gpus_per_node=8, overlap=(0.75, "given"), peak_tflops=1000.0)
    comm = (2 * 2 * P * 7 / 8 + 4 * P * 7 / 8) / 100e9
    assert out.comm_s == pytest.approx(comm)
    assert out.exposed_comm_s == pytest.approx(comm * 0.25)
    assert out.iteration_time_s == pytest.approx(1.1 + comm * 0.25)
    assert out.tokens_per_s == pytest.approx(8 * 4 * 2048 / out.iteration_time_s)
    assert out.tokens_per_s_per_device == pytest.approx(out.tokens_per_s / 8)
    assert out.mfu == pytest.approx(w.model_flops / out.iteration_time_s / 8 / 1e15)
    assert (out.overlap_source, out.source) == ("given", "test")
    # communication longer than compute: at least comm - compute stays exposed
    slow = pr.predict(w, compute, pr.Link(intra=dict.fromkeys(pr.COLLECTIVES, 1.0)), gpus_per_node=8)
    assert slow.exposed_comm_s == pytest.approx(slow.comm_s - 1.0)
    # a cluster of 2 nodes of 4: the data-parallel group crosses nodes, at the inter-node busbw
    across = pr.predict(w, compute, LINK, gpus_per_node=4, overlap=(0.0, "none"))
    assert across.comm_s == pytest.approx(comm * 10)


def test_pipeline_bubble_and_budget() -> None:
    w = workload(degrees={"dp_shard": 1, "pp": 4}, grad_accum=8, pp_microbatches=8)
    out = pr.predict(
        w, pr.Compute(compute_s=2.0, optimizer_s=0.0, source="t"), LINK, gpus_per_node=8, budget_tokens=1e9
    )
    assert out.bubble_s == pytest.approx(2.0 * 3 / 8)  # (p-1)/(m+p-1) of the step
    assert out.budget_gpu_hours == pytest.approx(1e9 / out.tokens_per_s * 4 / 3600)
    interleaved = pr.predict(
        workload(degrees={"dp_shard": 1, "pp": 4}, grad_accum=8, pp_microbatches=8, pp_stages_per_rank=2),
        pr.Compute(compute_s=2.0, optimizer_s=0.0, source="t"),
        LINK,
        gpus_per_node=8,
    )
    assert interleaved.bubble_s == pytest.approx(2.0 * 3 / 16)  # (p-1)/(vm+p-1), v = 2


def test_without_a_calibration_the_datasheet_and_nvlink_are_stated() -> None:
    """``plan_gpu=H100`` on a laptop: the datasheet peak at :data:`DATASHEET_GEMM_FRACTION` and
    an assumed share of NVLink, each saying so; nothing assumed across nodes."""
    unc = pr.compute_uncalibrated(workload(), gemm_tflops=989.4, what="H100 datasheet")
    assert unc.compute_s == pytest.approx(
        workload().hardware_flops / 8 / (pr.DATASHEET_GEMM_FRACTION * 989.4e12)
    )
    assert "0.45 x the H100 datasheet GEMM rate" in unc.source
    link = pr.assumed_link("H100")
    assert link is not None and link.busbw_gbps("all_gather", across_nodes=False) == pytest.approx(
        pr.ASSUMED_NVLINK_SHARE * 450
    )
    assert link.source.startswith("assumed: ") and "H100 SXM NVLink" in link.source
    assert "PCIe Gen4 x16 32 GB/s" in pr.assumed_link("NVIDIA A10").source  # a PCIe card: its slot
    assert pr.assumed_link("NVIDIA RTX A1000") is None and pr.assumed_link(None) is None  # not in the table
    with pytest.raises(pr.PredictionError, match=r"across nodes\)\. Fix: set predict\.inter_node_gbps=GBPS"):
        pr.predict(workload(), unc, link, gpus_per_node=4)
    with pytest.raises(pr.PredictionError) as cpu:  # the house form: key=value: why. Fix: what
        pr.compute_uncalibrated(workload(), gemm_tflops=None)
    assert str(cpu.value) == (
        "predict.calibration=null: uncalibrated, and no GEMM rate is known (no GPU probe, no datasheet). "
        "Fix: give predict.calibration=PATH (a one-GPU record of the same set-up), or set plan_gpu=NAME for "
        "its datasheet peak (e.g. set plan_gpu=H100)"
    )
    with pytest.raises(
        pr.PredictionError, match=r"^predict\.calibration=a\.json: .*\(e\.g\. set plan_gpu=H200\)$"
    ):
        pr.compute_uncalibrated(workload(), gemm_tflops=None, calibration="a.json", gpu="H200")
    with pytest.raises(pr.PredictionError) as named:  # plan_gpu given: do not ask for it again
        pr.compute_uncalibrated(workload(), gemm_tflops=None, what="V100  SXM2 datasheet")
    assert str(named.value) == (
        "precision=bf16: uncalibrated, and the V100 SXM2 datasheet gives no peak for it. Fix: give "
        "predict.calibration=PATH (a one-GPU record of the same set-up)"
    )


def test_no_bandwidth_is_an_error_that_names_the_fix() -> None:
    with pytest.raises(pr.PredictionError, match="predict.intra_node_gbps"):
        pr.predict(workload(), pr.Compute(compute_s=1, optimizer_s=0, source="t"), pr.Link(), gpus_per_node=8)


def test_compute_from_a_one_rank_calibration() -> None:
    """The calibration's step less its optimizer, per micro batch; the target's micro batches over
    its model share; the optimizer over the sharding."""
    cal = workload(degrees={"dp_shard": 1}, grad_accum=2)
    target = workload(degrees={"dp_shard": 8, "tp": 2}, grad_accum=4)
    c = pr.compute_from_calibration(
        target, calibration=cal, iteration_time_s=2.2, source="r", optimizer_s=0.2
    )
    assert c.compute_s == pytest.approx(2.0 / 2 * 4 / 2)
    assert c.optimizer_s == pytest.approx(0.2 / 8 / 2)
    assert c.source == "calibrated: r"
    plain = pr.compute_from_calibration(target, calibration=cal, iteration_time_s=2.2, source="r")
    assert "optimizer not separated" in plain.source and plain.optimizer_s == 0
    with pytest.raises(pr.PredictionError):
        pr.compute_from_calibration(
            target, calibration=cal, iteration_time_s=0.1, source="r", optimizer_s=0.2
        )
    unc = pr.compute_uncalibrated(workload(), gemm_tflops=500.0)
    assert unc.compute_s == pytest.approx(
        workload().hardware_flops / 8 / (pr.UNCALIBRATED_GEMM_FRACTION * 500e12)
    )
    assert "uncalibrated" in unc.source and f"{pr.UNCALIBRATED_GEMM_FRACTION:g}" in unc.source


def test_overlap_is_calibrated_from_profiles() -> None:
    b = lambda comm, exposed: {"comm_s": comm, "exposed_comm_s": exposed}  # noqa: E731
    share, source = pr.calibrated_overlap([("a", b(1.0, 0.1)), ("b", b(1.0, 0.3)), ("c", b(0.0, 0.0))])
    assert share == pytest.approx(0.8) and source.startswith("profiled: median of 2 (a, b")
    assert pr.calibrated_overlap([("x", None)]) is None


def test_the_calibration_is_the_same_setup_at_a_smaller_world() -> None:
    target = calibration_record(8)
    key = pr.calibration_key(target)
    pool = [
        ("mbs8", calibration_record(1, mbs=8)),
        ("failed", calibration_record(1, status="oom")),
        ("same-size", calibration_record(8)),
        ("ddp1", calibration_record(1, backend="ddp")),
        ("fsdp1", calibration_record(1)),
        ("fsdp2", calibration_record(2)),
    ]
    assert pr.pick_calibration(key, 8, "fsdp", pool)[0] == "fsdp2"
    assert pr.pick_calibration(key, 8, "ddp", pool[:4])[0] == "ddp1"
    assert pr.pick_calibration(key, 1, "fsdp", pool) is None
    # a checkpointing bool (older records) reads as the policy
    old = calibration_record(1)
    old["config"]["activation_checkpointing"] = False
    assert pr.calibration_key(old) == key


def test_a_record_at_the_same_world_calibrates_only_when_asked() -> None:
    """The job and plan=true (``same_world``) take a record of the set-up at their own world size, first
    as the largest; the analysis does not, so that its predictions test the model rather than repeat a
    measurement of the same world size."""
    target = calibration_record(8)
    key = pr.calibration_key(target)
    pool = [
        ("fsdp2", calibration_record(2)),
        ("same-size", calibration_record(8)),
        ("larger", calibration_record(16)),
    ]
    assert pr.pick_calibration(key, 8, "fsdp", pool)[0] == "fsdp2"
    assert pr.pick_calibration(key, 8, "fsdp", pool, same_world=True)[0] == "same-size"
    assert pr.pick_calibration(key, 1, "fsdp", [("one", calibration_record(1))]) is None
    assert pr.pick_calibration(key, 1, "fsdp", [("one", calibration_record(1))], same_world=True)[0] == "one"
    assert pr.pick_calibration(key, 8, "fsdp", pool[2:], same_world=True) is None
    assert [pr.calibrates_world(w, 2, same_world=True) for w in (1, 2, 3, None)] == [True, True, False, True]


def test_the_probe_link_takes_each_collective_at_its_largest_size() -> None:
    entries = [
        {"collective": "all_gather", "bytes": 1024, "busbw_gbps": 1.0},
        {"collective": "all_gather", "bytes": 4096, "busbw_gbps": 3.0},
        {"collective": "all_reduce", "bytes": 4096, "busbw_gbps": 2.0},
        {"collective": "all_reduce", "bytes": 8192, "busbw_gbps": None},
    ]
    link = pr.link_from_probe(entries, source="p")
    assert link.intra == {"all_gather": 3.0, "all_reduce": 2.0}
    assert link.busbw_gbps("reduce_scatter", across_nodes=False) == pytest.approx(2.5)


def test_predict_record_from_its_one_rank_calibration() -> None:
    probe = [{"collective": c, "bytes": 1 << 20, "busbw_gbps": 50.0} for c in pr.COLLECTIVES]
    one = calibration_record(1, step=1.0)
    two = calibration_record(2, step=1.3)
    two["system"]["interconnect"] = probe
    out = predict_record("two", two, [("one", one), ("two", two)])
    comm = (2 * 2 * P + 4 * P) * 0.5 / 50e9
    assert out["source"] == "calibrated: one; optimizer not separated (no profile): kept in compute"
    assert out["iteration_time_s"] == pytest.approx(1.0 + max(comm * 0.2, comm - 1.0))
    assert out["bandwidth_source"] == "the run's probe"
    alone = predict_record("two", two, [("two", two)])
    assert alone["iteration_time_s"] is None and alone["source"].startswith(
        "no prediction: predict.calibration=null: uncalibrated"
    )


def _write(path: Path, record: dict) -> None:
    path.mkdir(parents=True)
    (path / "metrics.json").write_text(json.dumps(record))


def test_analysis_predict_fills_columns_and_draws_the_plot(tmp_path: Path) -> None:
    """``load(predict=True)`` on committed-style records: the two-rank record gets a prediction from
    the one-rank one, ``prediction_error`` is (predicted - measured) / measured, and the plot draws."""
    from helpers import rescaled

    from analysis.blanks import blank_notes
    from analysis.load import load
    from analysis.plots import PlotSkipped, plot_predicted_vs_measured

    base = json.loads(Path("benchmarks/results/h200/energy/llama3.1-8b/0/metrics.json").read_text())
    one = copy.deepcopy(base)
    two = rescaled(base, world=2, tokens_per_device=base["metrics"]["tokens_per_s_per_device"] * 0.9)
    two["run"]["id"] = "other"
    two["system"]["interconnect"] = [
        {"collective": c, "bytes": 1 << 28, "busbw_gbps": 300.0} for c in pr.COLLECTIVES
    ]
    _write(tmp_path / "one", one)
    _write(tmp_path / "two", two)
    plain = load([tmp_path])
    assert plain["predicted_iteration_time_s"].isna().all()
    with pytest.raises(PlotSkipped, match="--predict"):
        plot_predicted_vs_measured(plain)
    (line,) = blank_notes(plain, ["prediction_error"], loaded=plain, where=str(tmp_path), baseline="")
    assert "run python -m analysis --predict" in line
    df = load([tmp_path], predict=True).set_index("world_size")
    assert "calibrated: " in df.loc[2, "predicted_source"] and "one" in df.loc[2, "predicted_source"]
    pred, meas = df.loc[2, "predicted_iteration_time_s"], df.loc[2, "iteration_time_s_mean"]
    assert df.loc[2, "prediction_error"] == pytest.approx((pred - meas) / meas)
    assert pred > one["metrics"]["iteration_time_s"]["mean"] * 0.9  # compute plus some communication
    fig = plot_predicted_vs_measured(df.reset_index())
    errors = df["prediction_error"].abs()  # the one-rank run: uncalibrated, at its GEMM rate
    assert df.loc[1, "predicted_source"].startswith("analysis --predict: uncalibrated")
    title = fig._suptitle.get_text().replace("\n", " ")
    assert f"median |error| {errors.median():.1%}, worst {errors.max():.1%}" in title
    (ax,) = fig.axes
    assert len(ax.lines[0].get_xdata()) == 2  # a point per run with a prediction


def test_load_names_records_from_its_start_folder(tmp_path: Path) -> None:
    """``load(paths, start=folder)`` (the notebook's load): relative paths and globs start at
    ``folder``, and ``run_dir``, the unreadable records and the records a ``--predict`` source names are
    spelled from it, never as the absolute paths they led to; an absolute path given stays absolute."""
    from helpers import rescaled

    from analysis.load import load

    base = json.loads(Path("benchmarks/results/h200/energy/llama3.1-8b/0/metrics.json").read_text())
    two = rescaled(base, world=2, tokens_per_device=base["metrics"]["tokens_per_s_per_device"] * 0.9)
    two["run"]["id"] = "other"
    _write(tmp_path / "results" / "one", base)
    _write(tmp_path / "results" / "two", two)
    (tmp_path / "results" / "bad").mkdir()
    (tmp_path / "results" / "bad" / "metrics.json").write_text("{")
    _write(tmp_path / "elsewhere", {**copy.deepcopy(base), "run": {**base["run"], "id": "third"}})
    (tmp_path / "nb").mkdir()  # the notebook's folder: nb/.. is looked up through it
    df = load(["../results/*", str(tmp_path / "elsewhere")], predict=True, start=tmp_path / "nb")
    by_id = df.set_index("run_id")
    assert by_id.loc["other", "run_dir"] == "../results/two"
    assert by_id.loc["third", "run_dir"] == str(tmp_path / "elsewhere")  # as given: absolute
    assert list(df.attrs["unreadable"]) == ["../results/bad/metrics.json"]
    source = by_id.loc["other", "predicted_source"]
    assert source.startswith("analysis --predict: calibrated: ../results/one/metrics.json"), source
    assert str(tmp_path / "results") not in " ".join(df["predicted_source"].dropna()), df["predicted_source"]


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("predict.overlap=1.5", "predict.overlap"),
        ("predict.gpus_per_node=0", "predict.gpus_per_node"),
        ("predict.intra_node_gbps=-1", "predict.intra_node_gbps"),
        ("predict.compute_scale=0", "predict.compute_scale"),
    ],
)
def test_predict_keys_are_checked_before_launch(hydra_compose, override: str, key: str) -> None:
    from flopsweep.config import ConfigError
    from flopsweep.plan import validate

    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        validate(hydra_compose([override]))


def test_a_missing_calibration_path_is_a_config_error(tmp_path: Path) -> None:
    from flopsweep.config import ConfigError
    from flopsweep.forecast import calibration_records

    with pytest.raises(ConfigError, match="predict.calibration"):
        calibration_records(str(tmp_path / "nowhere"))
    _write(tmp_path / "a" / "0", calibration_record(1))
    (tmp_path / "a" / "1").mkdir()
    (tmp_path / "a" / "1" / "metrics.json").write_text("{broken")
    found = calibration_records(str(tmp_path / "a"))
    assert [Path(n).parent.name for n, _ in found] == ["0"]  # the unreadable one skipped


def test_the_probe_sizes_are_a_layer_of_parameters_and_an_eighth() -> None:
    from flopsweep.collectives import MAX_BYTES, MIN_BYTES, message_sizes

    block = 8_030_261_248 // 32 * 2  # Llama 3.1 8B, bf16: one layer's share
    small, large = message_sizes(n_params=8_030_261_248, n_layer=32, param_bytes=2, device_type="cuda")
    assert large == block // 1024 * 1024 and small == block // 8 // 1024 * 1024
    assert (
        message_sizes(n_params=8_030_261_248, n_layer=32, param_bytes=2, device_type="cpu")[-1]
        == MAX_BYTES["cpu"]
    )
    assert message_sizes(n_params=100, n_layer=2, param_bytes=2, device_type="cpu") == [MIN_BYTES]


def test_a_calibration_of_another_micro_batch_scales_by_tokens_and_says_so() -> None:
    cal = workload(degrees={"dp_shard": 1}, micro_batch_size=2)
    target = workload(micro_batch_size=4, grad_accum=2)
    c = pr.compute_from_calibration(
        target, calibration=cal, iteration_time_s=1.0, source="r", optimizer_s=0.0
    )
    assert c.compute_s == pytest.approx(1.0 * 4 / 2 * 2)
    assert "micro batch 2 -> 4: compute scaled by tokens" in c.source
    record = {"config": {"model": {"name": "m"}, "batch": {"micro_batch_size": 2}}}
    other = {"config": {"model": {"name": "m"}, "batch": {"micro_batch_size": 4}}}
    assert pr.calibration_key(record) != pr.calibration_key(other)
    assert pr.calibration_key(record, micro_batch=False) == pr.calibration_key(other, micro_batch=False)


def test_a_calibration_of_other_backend_knobs_is_borrowed() -> None:
    """ZeRO knobs are part of the set-up: the strict pick refuses a record of other buckets, and
    the differences name each knob; a knob a record predates reads as the schema's default."""
    target = calibration_record(2, backend="deepspeed")
    target["config"]["backend"] |= {"zero_stage": 3, "reduce_bucket_size": 1e9, "optimizer_impl": "torch"}
    default = calibration_record(1, backend="deepspeed")
    default["config"]["backend"]["zero_stage"] = 3  # predates optimizer_impl: ran the fused one
    same = copy.deepcopy(target)
    same["system"] |= {"world_size": 1, "parallel": {"dp_shard": 1}}
    key, own = pr.calibration_key(target), target["config"]["backend"]
    assert pr.pick_calibration(key, 2, "deepspeed", [("d", default)], backend_config=own)[0] == "d"
    strict = dict(backend_config=own, same_backend=True)
    assert pr.pick_calibration(key, 2, "deepspeed", [("d", default)], **strict) is None
    assert pr.pick_calibration(key, 2, "deepspeed", [("d", default), ("s", same)], **strict)[0] == "s"
    assert pr.calibration_differences(target, default) == [
        "backend.optimizer_impl torch vs fused",
        "backend.reduce_bucket_size 1000000000.0 vs None",
    ]
    assert pr.calibration_differences(target, same) == []
    dense = copy.deepcopy(same)
    dense["config"]["attention"]["density"] = 1.0  # the same kernel name: the whole setting shown
    assert pr.calibration_differences(target, dense) == [
        'attention {"name": "sdpa"} vs {"density": 1.0, "name": "sdpa"}'
    ]
    other = calibration_record(1, mbs=8)
    other["config"]["compile"] = True
    assert pr.calibration_differences(target, other) == [
        "compile False vs True",
        "batch.micro_batch_size 4 vs 8",
        "backend.name deepspeed vs fsdp",
    ]


def test_an_unprofiled_calibration_separates_its_optimizer_at_the_measured_rate() -> None:
    """The one-rank step holds the whole optimizer; two FSDP2 ranks each update half the
    parameters: the step drops by half the optimizer, at the rate (seconds per parameter a rank
    updates) of the records whose profile separates it; older CUDA profiles give a lower bound."""
    whole = {"step_s": 2.0, "optimizer_s": 0.02, "view": "cuda", "optimizer_from": "launch"}
    profiled = calibration_record(1, step=1.0, breakdown=whole)  # 0.01 s of the 1 s mean, P parameters
    rate = pr.optimizer_rate([("p", profiled)], "torch")
    assert rate[0] == pytest.approx(0.01 / P) and rate[1] == "median of 1 (p)"
    before = {k: v for k, v in whole.items() if k != "optimizer_from"}  # recorded before the key
    old = calibration_record(2, step=1.0, breakdown=before)
    low = pr.optimizer_rate([("o", old)], "torch")
    assert low[0] == pytest.approx(0.01 / (P / 2)) and low[1].startswith("lower bound")
    assert pr.optimizer_rate([("p", profiled)], "deepspeed-fused") is None
    target = pr.workload_from_record(calibration_record(2))
    c = pr.calibration_compute(target, "one", calibration_record(1, step=0.5), rate=(1e-11, "r"))
    assert c.compute_s == pytest.approx(0.5 - 1e-11 * P)
    assert c.optimizer_s == pytest.approx(1e-11 * P / 2)
    assert "optimizer 10 ps per parameter a rank updates: r" in c.source
    ddp = pr.workload_from_record(calibration_record(2, backend="ddp"))
    assert pr.calibration_compute(
        ddp, "one", calibration_record(1, backend="ddp", step=0.5), rate=(1e-11, "r")
    ).optimizer_s == (pytest.approx(1e-11 * P))  # DDP does not shard the optimizer
    offload = calibration_record(1)
    offload["config"]["backend"]["cpu_offload"] = True
    assert pr.optimizer_family(offload) is None


def _bad_calibrations(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """A missing path, a file that is not a record and an empty folder, each with its message."""
    text = tmp_path / "notes.txt"
    text.write_text("not json")
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    return {
        "missing": (tmp_path / "nowhere", "does not exist"),
        "not a record": (text, "is not a record"),
        "empty": (empty, "holds no metrics.json"),
    }


def test_each_bad_calibration_path_is_one_config_error(tmp_path: Path) -> None:
    from flopsweep.calibration_files import CALIBRATION_FIX, calibration_records
    from flopsweep.config import ConfigError

    not_a_run = tmp_path / "other.json"
    not_a_run.write_text('{"hello": 1}')
    cases = {**_bad_calibrations(tmp_path), "json, no run": (not_a_run, "is not a record")}
    for path, what in cases.values():
        with pytest.raises(ConfigError) as err:
            calibration_records(str(path))
        line = str(err.value)
        assert "\n" not in line and "predict.calibration" in line and str(path) in line, line
        assert what in line and CALIBRATION_FIX in line, line


def test_a_calibration_that_matches_no_job_is_a_warning_naming_what_differs(
    hydra_compose, caplog: pytest.LogCaptureFixture
) -> None:
    """The job and ``plan=true`` share :func:`flopsweep.forecast.prediction`: a warning line naming
    the nearest record and what it does not share, the prediction uncalibrated and saying so."""
    from flopsweep import forecast
    from flopsweep.forecast import prediction
    from flopsweep.layout import Layout
    from flopsweep.plan import validate

    forecast._WARNED.clear()  # said once a process: this test's own first time
    cfg = validate(hydra_compose(["device=cpu", "backend=fsdp", "nproc_per_node=2", "predict.calibration=x"]))
    other = calibration_record(1, mbs=8)  # model m, another micro batch, compiled
    other["config"]["compile"] = True
    layout = Layout.resolve(cfg.parallel, 2)
    with caplog.at_level("WARNING", logger="flopsweep.forecast"):
        made = prediction(cfg, layout, [("cal/metrics.json", other)], gpus_per_node=2, device_name=None)
    (line,) = [r.getMessage() for r in caplog.records if "matches nothing" in r.getMessage()]
    assert line.startswith(
        "predict.calibration=x matches nothing: the nearest, cal/metrics.json, differs in "
    )
    assert "model " in line and "compile False vs True" in line and line.endswith("predicted uncalibrated")
    assert "micro_batch" not in line  # another micro batch alone would have been scaled
    assert "matches nothing" in made["source"]
    # a plan or a tuner predicts many set-ups from the same records: the line is said once, each
    # prediction's source still says why (the tuner said predict.calibration=None ... three times)
    caplog.clear()
    with caplog.at_level("WARNING", logger="flopsweep.forecast"):
        again = [
            prediction(cfg, layout, [("cal/metrics.json", other)], gpus_per_node=2, device_name=None)
            for _ in range(3)
        ]
    assert [r for r in caplog.records if "matches nothing" in r.getMessage()] == []
    assert all("predict.calibration=x matches nothing" in m["source"] for m in again)
    # the tuner's own records, without predict.calibration: a set-up not measured yet is its normal
    # course, no warning (it said "[HYDRA] the 4 measured record(s) match nothing"); the source says why
    tuned = validate(hydra_compose(["device=cpu", "backend=fsdp", "nproc_per_node=2"]))
    with caplog.at_level("WARNING", logger="flopsweep.forecast"):
        for _ in range(3):
            made = prediction(
                tuned, layout, [("sweep/0/metrics.json", other)], gpus_per_node=2, device_name=None
            )
    assert [r for r in caplog.records if "nothing" in r.getMessage() or "own" in r.getMessage()] == []
    own = "none of the 1 measured record(s) is this set-up's own to calibrate it (the nearest, "
    assert own in made["source"]
    assert "predict.calibration=None" not in made["source"] and "match nothing" not in made["source"]


def test_every_n_predicts_its_share_of_the_recompute_and_memory_budget_says_why_not(hydra_compose) -> None:
    """Llama 3.2 1B on one planned H100: every_n (every second block) runs the hardware FLOPs the record
    would give (metrics.hardware_flops: half of full's recompute), so its predicted step lies between
    none's and full's (it was full's). memory_budget has no formula: without a calibration the source
    says why in one plain phrase (it was 'ValueError: unknown recompute'); a calibration of the same
    policy and budget predicts."""
    from flopsweep import forecast, metrics
    from flopsweep.layout import Layout

    layout = Layout.data_parallel(1)
    common = ["model=llama3.2-1b", "device=cuda", "precision=bf16", "batch.micro_batch_size=1"]
    cfgs = {
        name: hydra_compose([*common, *extra])
        for name, extra in {
            "none": ["activation_checkpointing=none"],
            "every_n": ["activation_checkpointing=every_n", "activation_checkpointing.every=2"],
            "full": ["activation_checkpointing=full"],
            "budget": ["activation_checkpointing=memory_budget", "compile=true"],
        }.items()
    }
    work = {name: forecast.workload(cfg, layout) for name, cfg in cfgs.items()}
    tokens = cfgs["every_n"].model.seq_len
    assert work["every_n"].hardware_flops == pytest.approx(
        metrics.hardware_flops(cfgs["every_n"], tokens, 1.0)
    )
    assert work["none"].hardware_flops < work["every_n"].hardware_flops < work["full"].hardware_flops
    time = {
        name: forecast.prediction(cfg, layout, [], gpus_per_node=8, device_name="H100")["iteration_time_s"]
        for name, cfg in cfgs.items()
    }
    assert time["none"] < time["every_n"] < time["full"], time
    budget = forecast.prediction(cfgs["budget"], layout, [], gpus_per_node=8, device_name="H100")
    assert budget["iteration_time_s"] is None
    assert budget["source"] == (
        "no prediction: activation_checkpointing=memory_budget: the compiler decides the recompute, which "
        "no FLOP count knows. Fix: give predict.calibration=PATH (a record of the same policy and budget)"
    )
    record = {
        "status": "ok",
        "config": forecast._config_dict(cfgs["budget"]),
        "model": {"n_params": work["budget"].n_params, "n_layer": 16, "n_embd": 2048, "seq_len": tokens},
        "system": {"world_size": 1, "parallel": {"dp_shard": 1}, "device_name": "H100"},
        "metrics": {
            "iteration_time_s": {"mean": 0.5},
            "model_flops_per_iteration": work["budget"].model_flops,
        },
    }
    two = Layout.data_parallel(2)
    made = forecast.prediction(cfgs["budget"], two, [("cal", record)], gpus_per_node=8, device_name="H100")
    assert made["iteration_time_s"] and made["source"].startswith("calibrated: cal"), made


def test_the_predict_table_keeps_its_prediction_columns_at_120_characters(tmp_path: Path, capsys) -> None:
    """--predict hid pred_s and pred_err "to fit 120 columns": they are what it was asked for, so other
    columns are dropped first."""
    from helpers import rescaled

    from analysis.__main__ import main

    base = json.loads(Path("benchmarks/results/h200/energy/llama3.1-8b/0/metrics.json").read_text())
    two = rescaled(base, world=2, tokens_per_device=base["metrics"]["tokens_per_s_per_device"] * 0.9)
    two["run"]["id"] = "other"
    _write(tmp_path / "one", base)
    _write(tmp_path / "two", two)
    assert main([str(tmp_path), "--predict"]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0].split()
    assert "pred_s" in header and "pred_err" in header, out
    assert max(len(line) for line in out.splitlines()[:3]) <= 120, out


def test_a_plan_takes_the_bandwidth_from_a_probed_record_of_its_calibration(hydra_compose) -> None:
    """A trial planned 2 ranks from a folder with a 1-rank and a probed 2-rank record: the 1-rank
    record calibrates the compute (it has no probe), and the 2-rank record's probe gives the bus
    bandwidth (it said "no bus bandwidth ... the probe measures it")."""
    from flopsweep.forecast_link import link
    from flopsweep.plan import validate

    cfg = validate(hydra_compose(["device=cpu", "backend=fsdp", "nproc_per_node=2"]))
    one, two = calibration_record(1), calibration_record(2)
    two["system"]["interconnect"] = [
        {"collective": c, "bytes": 1 << 20, "busbw_gbps": 2.5} for c in pr.COLLECTIVES
    ]
    made = link(cfg, None, one, [("cal/1/metrics.json", one), ("cal/2/metrics.json", two)])
    assert made.source == "the probe of cal/2/metrics.json"
    assert set(made.intra) == set(pr.COLLECTIVES) and all(v == 2.5 for v in made.intra.values())
    assert not made.inter
    assert link(cfg, None, one, [("cal/1/metrics.json", one)]).source != made.source  # nothing probed


def test_a_host_bound_calibration_says_so_in_its_source() -> None:
    """A calibration whose profile has the GPU idle for more than pr.HOST_BOUND of its step (DeepSpeed on
    one H200: 27-50%) names the share in the prediction's source; a busy one (DDP, FSDP2: 2-4%) does not."""
    busy = {"step_s": 1.0, "compute_s": 0.97, "optimizer_s": 0.02, "exposed_comm_s": 0.0, "idle_s": 0.03}
    idle = {**busy, "compute_s": 0.6, "idle_s": 0.38}
    target = pr.workload_from_record(calibration_record(2))
    for breakdown, said in ((busy, False), (idle, True)):
        cal = calibration_record(1, breakdown={**breakdown, "view": "cuda", "optimizer_from": "launch"})
        compute = pr.calibration_compute(target, "cal/metrics.json", cal)
        assert ("host-bound: the GPU idles 38% of its profiled step" in compute.source) is said, (
            compute.source
        )


def test_inter_node_bandwidth_alone_leaves_the_node_bandwidth_alone(hydra_compose) -> None:
    """Issue 41, item 3: ``predict.inter_node_gbps`` alone set the in-node bandwidth too, so a one-node
    prediction of 8 H200s changed (0.583 s -> 1.405 s a step) with no warning. Inter-node bandwidth
    applies only to collectives that cross nodes: the one-node prediction is the same with it or
    without, and a two-node one reads it for the groups that cross."""
    from flopsweep.forecast import prediction
    from flopsweep.forecast_link import link
    from flopsweep.layout import Layout
    from flopsweep.plan import validate

    base = ["device=cpu", "backend=fsdp", "model=gpt-1.3b", "nproc_per_node=8"]
    plain = validate(hydra_compose(base))
    inter = validate(hydra_compose([*base, "predict.inter_node_gbps=40"]))
    h200 = "NVIDIA H200"
    assumed = link(plain, None, None, [], h200)
    made = link(inter, None, None, [], h200)
    assert made.intra == assumed.intra  # the NVLink share, not 40
    assert made.busbw_gbps("all_gather", across_nodes=True) == 40
    assert "predict.inter_node_gbps" in made.source and "NVLink" in made.source
    one_node = {"gpus_per_node": 8, "device_name": h200, "gemm_tflops": 670.0}
    a = prediction(plain, Layout(dp_shard=8), [], **one_node)
    b = prediction(inter, Layout(dp_shard=8), [], **one_node)
    assert a["iteration_time_s"] is not None and a["iteration_time_s"] == b["iteration_time_s"]
    two_nodes = prediction(inter, Layout(dp_shard=16), [], **one_node)  # 2 nodes of 8: across at 40
    assert two_nodes["comm_s"] > a["comm_s"] * 2
    # predict.intra_node_gbps alone still serves both (its documented default across nodes)
    intra = link(validate(hydra_compose([*base, "predict.intra_node_gbps=300"])), None, None, [], h200)
    assert intra.busbw_gbps("all_gather", across_nodes=False) == 300
    assert intra.busbw_gbps("all_gather", across_nodes=True) == 300


@pytest.mark.parametrize(("kernel", "halved"), [("sdpa", True), ("standard", False), ("sdpa-math", False)])
def test_the_uncalibrated_step_counts_the_causal_half_fused_kernels_run(kernel: str, halved: bool) -> None:
    """A kernel that skips the masked tiles runs half the attention square, which the FLOPs convention
    counts whole: at long sequences the whole square doubled the uncalibrated step (Llama 3.1 8B at
    87,040 tokens on an H200: 48.8 s predicted, 25.9 measured). Kernels that mask a whole square keep
    it; the model and hardware FLOPs (the record's convention) do not change."""
    import dataclasses

    from flopsweep import forecast
    from flopsweep.config import AttentionConfig, RunConfig
    from flopsweep.layout import Layout
    from flopsweep.models.gpt2 import GPT2Config

    seq, n_layer, n_embd = 16384, 4, 256
    model = GPT2Config(name="long", n_layer=n_layer, n_embd=n_embd, n_head=4, seq_len=seq, vocab_size=1024)
    cfg = dataclasses.replace(RunConfig(), model=model, attention=AttentionConfig(name=kernel))
    w = forecast.workload(cfg, Layout())
    tokens = cfg.batch.micro_batch_size * seq
    square = 12 * n_layer * n_embd * seq * tokens  # the convention's attention FLOPs, fwd + bwd
    executed = w.executed_flops or w.hardware_flops
    assert executed == pytest.approx(w.hardware_flops - (square / 2 if halved else 0), rel=1e-9)
    compute = pr.compute_uncalibrated(w, gemm_tflops=100.0)
    assert compute.compute_s == pytest.approx(executed / (pr.UNCALIBRATED_GEMM_FRACTION * 100e12))
    assert compute.source.startswith("uncalibrated: executed FLOPs at 0.6 x the measured GEMM rate")

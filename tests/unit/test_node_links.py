"""The defaults a plan of a cluster not at hand takes per GPU kind: the link between a node's GPUs
(:attr:`flopsweep.peak_row.PeakRow.links`, from the datasheets), the network across nodes
(:func:`flopsweep.clusters.default_network`) and the peaks; and the closing line of a plan that ranks
nothing, whose fix is its commonest cause's (:mod:`flopsweep.dropped`).

Issue 42: ``plan=true 'plan_clusters=[A100-80GB:8]'`` predicted nothing (the A100 row had no NVLink
figure, as it covers the PCIe card too) and ended ``Fix: widen space.*``."""

from __future__ import annotations

import pytest

from flopsweep import comm_time
from flopsweep import plan_space as ps
from flopsweep.clusters import NETWORKS, default_network, hint_gpu, parse_cluster
from flopsweep.dropped import CAUSE_FIXES, NO_PREDICTION_FIX, cause, nothing_line
from flopsweep.peaks import PEAK_TABLE, node_link

DATASHEET_GBPS = {  # per GPU and direction: half the vendor's bidirectional figure
    "H100 SXM": 450.0,  # NVLink 900 GB/s
    "H100 PCIe": 64.0,  # PCIe Gen5 128 GB/s (its NVLink bridge joins 2 cards)
    "H100 NVL": 64.0,
    "H200 SXM": 450.0,
    "H200 NVL": 64.0,
    "GH200": 450.0,
    "H800 SXM": 200.0,  # NVLink 400 GB/s
    "B200": 900.0,  # NVLink 1.8 TB/s
    "GB200": 900.0,
    "A100": 300.0,  # SXM4 NVLink 600 GB/s, assumed where the name says neither form
    "A800": 200.0,
    "A10": 32.0,  # PCIe Gen4 64 GB/s
    "A10G": 32.0,
    "L4": 32.0,
    "L40": 32.0,
    "L40S": 32.0,
    "RTX 6000 Ada": 32.0,
    "V100 SXM2": 150.0,  # NVLink 300 GB/s
    "V100 PCIe": 16.0,  # PCIe Gen3 32 GB/s
    "V100S PCIe": 16.0,
    "MI300X": 448.0,  # 7 Infinity Fabric links x 128 GB/s
    "MI325X": 448.0,
}


def test_every_gpu_kind_has_a_link_in_a_node_a_network_and_a_peak() -> None:
    """Each row of the peak table: an in-node link from its datasheet (the figure above), a default
    network across nodes, and a dense peak per precision it has tensor cores for."""
    assert {row.name for row in PEAK_TABLE} == set(DATASHEET_GBPS)
    for row in PEAK_TABLE:
        found = node_link(min(row.aliases, key=len))
        assert found is not None and found.row is row
        assert found.gbps == DATASHEET_GBPS[row.name], row.name
        assert found.link.datasheet and found.link.link in found.said
        assert default_network(row) in NETWORKS.values()
        assert row.peaks.get("bf16" if row.bf16 else "fp16", 0) > 0 and row.peaks["fp32"] > 0
        if row.nvlink_gbps is not None:  # the row's NVLink figure is its node link's
            assert found.link.link == "NVLink" and found.gbps == row.nvlink_gbps


@pytest.mark.parametrize(
    ("name", "gbps", "said", "assumed"),
    [
        ("A100-80GB", 300.0, "A100 SXM4 NVLink", True),  # the name says neither: SXM4, said so
        ("A100", 300.0, "A100 SXM4 NVLink", True),
        ("NVIDIA A100-SXM4-80GB", 300.0, "A100 SXM4 NVLink", False),  # torch's names say the form
        ("NVIDIA A100-PCIE-40GB", 32.0, "A100 PCIe Gen4 x16", False),
        ("NVIDIA A100 80GB PCIe", 32.0, "A100 PCIe Gen4 x16", False),
        ("A800-40GB", 200.0, "A800 SXM4 NVLink", True),
        ("A800-PCIe-80GB", 32.0, "A800 PCIe Gen4 x16", False),
        ("NVIDIA H100 80GB HBM3", 450.0, "H100 SXM NVLink", False),  # its row is one form
        ("NVIDIA H100 PCIe", 64.0, "H100 PCIe Gen5 x16", False),
        ("AMD Instinct MI300X", 448.0, "MI300X Infinity Fabric", False),
    ],
)
def test_a_name_picks_its_form_and_an_ambiguous_one_is_assumed_sxm_and_said(name, gbps, said, assumed):
    found = node_link(name)
    assert found is not None and (found.gbps, found.said) == (gbps, said)
    if assumed:
        assert found.assumed == (
            f"SXM4 assumed: {name} says neither SXM4 nor PCIe; set predict.intra_node_gbps"
        )
    else:
        assert found.assumed == ""
    link = comm_time.assumed_link(name)
    assert link.busbw_gbps("all_gather", across_nodes=False) == pytest.approx(
        comm_time.ASSUMED_NVLINK_SHARE * gbps
    )
    assert (found.assumed in link.source) and f"{said} {gbps:g} GB/s per direction" in link.source


def test_a_name_the_table_does_not_know_has_no_link() -> None:
    assert node_link("NVIDIA RTX A1000") is None and node_link(None) is None and node_link("") is None
    assert comm_time.assumed_link("cpu") is None


def _name(row) -> str:
    """The row as ``plan_clusters`` takes it: its shortest alias, with a size where it comes in several."""
    sizes = sorted(row.memory_gib)
    return hint_gpu(min(row.aliases, key=len).upper().replace(" ", "-") + f"-{sizes[-1]:g}GB", default=None)


def test_every_gpu_kind_plans_llama_8b_with_predictions(hydra_compose) -> None:
    """Every GPU kind of the peak table on one node of 8 and on two: FSDP2 data parallel (selective
    checkpointing, micro batch 1) of Llama 3.1 8B; no set-up goes unpredicted, and each row names the
    defaults it took (the link in a node, the network across nodes)."""
    cfg = hydra_compose(["model=llama3.1-8b"])
    names = [_name(row) for row in PEAK_TABLE]
    assert all(names), names
    for row, name in zip(PEAK_TABLE, names, strict=True):
        precision = "bf16" if row.bf16 else "fp16"
        space = ps.Space(
            backends=("fsdp",),
            layouts=("dp",),
            checkpointing=("selective",),
            micro_batches=(1,),
            precisions=(precision,),
        )
        result = ps.candidates(cfg, space, [parse_cluster(f"{name}:1x8"), parse_cluster(f"{name}:2x8")])
        assert len(result.rows) == 2, name
        assert {r.status for r in result.rows} <= {"ok", "over memory"}, [
            (r.status, r.reason) for r in result.rows
        ]
        for r in result.rows:
            if r.status == "ok":
                assert r.predicted_tokens_per_s_per_gpu > 0
                assert (
                    f"{node_link(name).said} {DATASHEET_GBPS[row.name]:g} GB/s per direction"
                    in r.prediction_source
                )
        two = result.rows[1]
        if two.status == "ok":
            net = default_network(row)
            assert (
                f"{net.name} across nodes: {net.inter_node_gbps:g} GB/s busbw per GPU, the default network"
                in (two.prediction_source)
            )
        assert any(r.status == "ok" for r in result.rows), (name, [r.reason for r in result.rows])


INFERENCE_CARDS = ("A10", "A10G", "L4", "L40", "L40S", "RTX 6000 Ada")
"""The PCIe inference cards of the peak table: their servers have Ethernet, not a NIC per GPU."""


def test_each_gpu_kind_names_its_default_network_and_why() -> None:
    """The default network across nodes is one entry per peak-table row (no capability rule: a PCIe
    inference card of capability 8.9 once got the 200 Gb/s InfiniBand NIC per GPU of an A100 node):
    the inference cards ``eth100``, the training platforms a NIC per GPU of their generation; a row
    missing from the table stops the import."""
    from flopsweep import clusters

    assert set(clusters.DEFAULT_NETWORKS) == {row.name for row in PEAK_TABLE}
    for row in PEAK_TABLE:
        net = default_network(row)
        if row.name in INFERENCE_CARDS:
            assert net is NETWORKS["eth100"] and net.inter_node_gbps == 1.25, row.name
            assert clusters.default_network_why(row).startswith("a PCIe inference card: ")
        else:
            assert net.name.startswith("ib") and net.inter_node_gbps >= 20.0, row.name
    assert default_network(node_link("H100").row) is NETWORKS["ib400"]
    assert default_network(node_link("B200").row) is NETWORKS["ib800"]
    assert default_network(node_link("A100-80GB").row) is NETWORKS["ib200"]
    assert (
        parse_cluster("L4:2x8").label == "L4:2x8:eth100" and parse_cluster("L40S:16").network.name == "eth100"
    )
    assert parse_cluster("L4:2x8:ib200").network.name == "ib200"  # a named network wins
    kept = dict(clusters.DEFAULT_NETWORKS)
    try:
        del clusters.DEFAULT_NETWORKS["L4"]
        with pytest.raises(AssertionError, match=r"one network of NETWORKS per peak-table row: \['L4'\]"):
            clusters._check_defaults()
        clusters.DEFAULT_NETWORKS["L4"] = ("eth400", "no such network")
        with pytest.raises(AssertionError, match="per peak-table row"):
            clusters._check_defaults()
    finally:
        clusters.DEFAULT_NETWORKS.clear()
        clusters.DEFAULT_NETWORKS.update(kept)


def test_an_inference_cards_row_names_its_ethernet_default_and_why(hydra_compose) -> None:
    """An L4 cluster of two nodes predicts its collectives across nodes at ``eth100``'s 1.25 GB/s per GPU,
    and its row names that default and why; a named network replaces it, and the step is faster."""
    cfg = hydra_compose(["model=llama3.2-1b"])
    setup = ps.Setup(backend="fsdp", layout="dp", checkpointing="full", precision="bf16", micro_batch=1)
    default = ps.evaluate(cfg, setup, parse_cluster("L4:2x8"))
    named = ps.evaluate(cfg, setup, parse_cluster("L4:2x8:ib200"))
    assert default.status == named.status == "ok", (default.reason, named.reason)
    assert (
        "eth100 across nodes: 1.25 GB/s busbw per GPU, the default network of L4 nodes (a PCIe inference "
        "card: its servers have Ethernet" in default.prediction_source
    )
    assert "ib200 across nodes: 20 GB/s busbw per GPU, named in the cluster" in named.prediction_source
    assert default.predicted_iteration_time_s > named.predicted_iteration_time_s


@pytest.mark.parametrize(
    ("name", "taken"),
    [
        ("H100", "H100 taken as H100-SXM (the name says no form; name H100-PCIe or H100-NVL for those)"),
        (
            "h100-80GB",
            "h100-80GB taken as H100-SXM (the name says no form; name H100-PCIe or H100-NVL for those)",
        ),
        ("H200", "H200 taken as H200-SXM (the name says no form; name H200-NVL for that)"),
        ("H800", "H800 taken as H800-SXM (the name says no form; its only form listed)"),
        ("H100-SXM", ""),
        ("H100-SXM5", ""),
        ("H100-PCIe", ""),
        ("H200-NVL", ""),
        ("A100-80GB", ""),  # one row of two forms: its link says SXM4 assumed (node_links.resolve)
        ("L4", ""),
        ("B300", ""),
    ],
)
def test_a_bare_hopper_name_is_said_taken_as_its_sxm_row(name: str, taken: str) -> None:
    from flopsweep.peaks import form_taken

    assert form_taken(name) == taken


def test_the_sxm_taken_for_a_bare_name_is_said_once(hydra_compose, tmp_path) -> None:
    """``plan_clusters=[H100:8,H100:2x8]``: one defaults line says H100 was taken as H100-SXM, not each
    cluster or row; ``plan=true plan_gpu=H100``'s row note says it once, ``plan_gpu=H100-SXM``'s not."""
    import csv

    from flopsweep.job import JobInfo
    from flopsweep.job.placement import plan_environment
    from flopsweep.job.plandecide import decide_job
    from flopsweep.plan import Environment

    args = ["model=llama3.2-1b", "plan=true", "plan_clusters=[H100:8,H100:2x8,H200-SXM:8]"]
    args += [
        "space.backends=[fsdp]",
        "space.layouts=[dp]",
        "space.checkpointing=[full]",
        "space.micro_batches=[1]",
    ]
    out = decide_job(hydra_compose(args), JobInfo(job_dir=tmp_path, overrides=args))
    said = [line for line in out["plan_text"].splitlines() if "taken as" in line]
    assert said == ["  H100 taken as H100-SXM (the name says no form; name H100-PCIe or H100-NVL for those)"]
    rows = list(csv.DictReader(open(out["plan_file"])))
    assert len(rows) == 3 and not any("taken as" in r["prediction_source"] for r in rows)
    for gpu, notes in (("H100", 1), ("H100-SXM", 0)):
        cfg = hydra_compose(["model=gpt-tiny", "plan=true", f"plan_gpu={gpu}"])
        _, _, placed = plan_environment(cfg, Environment(cpu_count=2))
        assert sum("H100 taken as H100-SXM" in n for n in placed) == notes, placed


# --- the closing line: each cause its fix ---------------------------------------------------------


def _line(reasons: list[str]) -> str:
    return nothing_line(reasons, who="plan", headline="nothing", fix="CALLER'S FIX")


def test_the_causes_count_a_collective_with_no_bandwidth_as_one() -> None:
    """The A100 plan's 117 unpredicted set-ups were three reasons by collective (72, 30, 15), beside
    refusals of 45 each; as one cause they are the commonest, and its fix is the key that gives it."""
    gather = (
        "no prediction: no bus bandwidth for all_gather (in a node). Fix: set predict.intra_node_gbps=GBPS"
    )
    scatter = gather.replace("all_gather", "reduce_scatter")
    refused = "refused: parallel.tp=2: tp runs on fsdp. Fix: set parallel.tp=1, or backend=fsdp"
    assert cause(gather) == cause(scatter) == "no bus bandwidth in a node"
    assert cause(gather.replace("in a node", "across nodes")) == "no bus bandwidth across nodes"
    line = _line([gather] * 3 + [scatter] * 2 + [refused] * 4)
    assert line == (
        "plan: nothing: all 9 dropped, 4 refused by the rules; among the 5 they accept, the commonest "
        f"reason (5 of 5): {gather}"
    )
    assert "widen" not in line and "CALLER" not in line


@pytest.mark.parametrize(
    ("reason", "fix"),
    [
        (  # a reason of an older record, without its own fix: the cause's
            "no prediction: no bus bandwidth for all_gather (in a node)",
            comm_time.NO_INTRA_NODE_FIX,
        ),
        ("no prediction: no bus bandwidth for all_reduce (across nodes)", comm_time.NO_INTER_NODE_FIX),
        ("over memory: estimated 90 GiB per rank", CAUSE_FIXES["over memory"]),
        ("no prediction: ValueError: the model failed", NO_PREDICTION_FIX),
        ("refused: model.n_layer=3: odd", "CALLER'S FIX"),
    ],
    ids=["in-a-node", "across-nodes", "over-memory", "no-prediction", "other"],
)
def test_each_cause_names_its_own_fix(reason: str, fix: str) -> None:
    line = _line([reason])
    assert line.endswith(f". Fix: {fix}") and line.count("Fix:") == 1, line


def test_a_reason_with_its_own_fix_gets_no_second(hydra_compose) -> None:
    """Every reason that names what to give says it after ``Fix:`` (the step model's own, as
    :func:`flopsweep.forecast.prediction` makes it for a compiler-chosen recompute), so it keeps that
    fix alone; a ``no prediction`` without one gets :data:`NO_PREDICTION_FIX`."""
    from flopsweep import forecast
    from flopsweep.layout import Layout

    raised = (
        "no prediction: no bus bandwidth for all_gather (in a node). Fix: set predict.intra_node_gbps=GBPS"
    )
    assert _line([raised]).endswith(raised) and _line([raised]).count("Fix:") == 1
    cfg = hydra_compose(["model=llama3.2-1b", "activation_checkpointing=memory_budget", "compile=true"])
    gives = forecast.prediction(cfg, Layout.data_parallel(1), [], gpus_per_node=8, device_name="H100")[
        "source"
    ]
    assert (
        gives.startswith("no prediction: activation_checkpointing=memory_budget: ")
        and "Fix: give predict." in gives
    )
    assert _line([gives]).endswith(gives.rstrip(". ")) and _line([gives]).count("Fix:") == 1
    without = gives.split(". Fix: ")[0]  # the same reason had it named no fix: the generic one
    assert _line([without]).endswith(f"{without}. Fix: {NO_PREDICTION_FIX}")


def test_comm_seconds_names_the_key_of_its_side() -> None:
    """The error a collective with no bandwidth raises names the one key that gives it."""
    from flopsweep.workload import Link, PredictionError, Transfer

    inside = Transfer(what="w", collective="all_gather", bytes=1e6, count=1, group=8, across_nodes=False)
    with pytest.raises(PredictionError) as err:
        comm_time.comm_seconds([inside], Link())
    said = "predict.intra_node_gbps=null: no bus bandwidth for all_gather (in a node)"
    assert str(err.value) == f"{said}. Fix: {comm_time.NO_INTRA_NODE_FIX}"
    across = Transfer(what="w", collective="all_reduce", bytes=1e6, count=1, group=16, across_nodes=True)
    with pytest.raises(
        PredictionError,
        match=r"^predict\.inter_node_gbps=null: .* \(across nodes\)\. Fix: set predict\.inter_node_gbps=GBPS",
    ):
        comm_time.comm_seconds([across], Link(intra={"all_reduce": 100.0}, inter={"all_reduce": 0.0}))


def test_a_cpu_machines_plan_gpu_example_is_the_gpu_plan_clusters_names(hydra_compose) -> None:
    """A CPU plan that cannot predict names ``plan_gpu=NAME`` with an example: the first GPU that
    ``plan_clusters`` names (``here`` names none), else the peak table's first row (the H100 SXM)."""
    import dataclasses

    from flopsweep import forecast
    from flopsweep.clusters import HINT_GPU, example_gpu
    from flopsweep.layout import Layout
    from flopsweep.peaks import PEAK_TABLE, lookup

    assert lookup(HINT_GPU) is PEAK_TABLE[0] and HINT_GPU == "H100"
    assert example_gpu([]) == example_gpu(["here"]) == example_gpu(["NOPE:1x8"]) == HINT_GPU
    assert example_gpu(["here", "H200:2x8", "MI300X:1x8"]) == "H200"
    assert example_gpu(["A100-80GB:1x8:ib400"]) == "A100-80GB"
    cfg = hydra_compose(["model=gpt-tiny", "device=cpu", "backend=ddp", "nproc_per_node=2"])
    layout = Layout.resolve(cfg.parallel, 2)
    for clusters, gpu in (([], "H100"), (["here", "H200:2x8"], "H200")):
        made = forecast.prediction(
            dataclasses.replace(cfg, plan_clusters=clusters), layout, [], gpus_per_node=2, device_name=None
        )
        assert made["iteration_time_s"] is None
        assert made["source"] == (
            "no prediction: predict.calibration=null: uncalibrated, and no GEMM rate is known (no GPU probe, "
            "no datasheet). Fix: give predict.calibration=PATH (a one-GPU record of the same set-up), or "
            f"drop device=cpu and set plan_gpu=NAME for its datasheet peak (e.g. drop device=cpu and set "
            f"plan_gpu={gpu})"
        ), made["source"]

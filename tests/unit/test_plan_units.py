"""A fresh user's trial of ``plan=true plan_clusters=[...]`` (session 22): a bus bandwidth's unit in a
cluster name, the expected error of a prediction carried across GPU kinds, the cluster list's checks
(a bound at parse time, one cluster under two names, an empty list, keys the clusters replace) and a
nothing-left line whose fix is itself checked. No process starts."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from flopsweep.clusters import MAX_BY_KEY, parse_cluster
from flopsweep.config import ConfigError
from flopsweep.plan_command_line import command_line_problem

SMALL = [
    "space.backends=[fsdp]",
    "space.layouts=[dp]",
    "space.checkpointing=[none]",
    "space.micro_batches=[2]",
]


def _decide(hydra_compose, tmp_path: Path, *args: str) -> dict:
    from flopsweep.job import JobInfo
    from flopsweep.job.plandecide import decide_job

    given = ["model=llama3.1-8b", "plan=true", *args]
    return decide_job(hydra_compose(given), JobInfo(job_dir=tmp_path, overrides=given))


@pytest.mark.parametrize(
    ("network", "gbps"),
    [("100GBps", 100.0), ("100GB/s", 100.0), ("800Gbps", 100.0), ("100Gbps", 12.5), ("eth100", 1.25)],
)
def test_a_bandwidth_says_its_unit_and_reads_in_gb_per_s(network: str, gbps: float) -> None:
    """``GBps`` is gigabytes, ``Gbps`` gigabits: 800Gbps and 100GBps are one bandwidth."""
    assert parse_cluster(f"H100:8x8:{network}").network.inter_node_gbps == gbps


@pytest.mark.parametrize("unit", ["gbps", "GBPS", "gBps", "gb/s"])
def test_a_unit_that_says_neither_bits_nor_bytes_is_refused_naming_both(unit: str) -> None:
    """``H100:8x8:100gbps`` was read as 100 GB/s: a user describing 100 Gb Ethernet got a plan ~80x
    too fast (6,462 vs 81 tokens/s per GPU beside eth100). The line names the entry and both units."""
    with pytest.raises(ConfigError) as err:
        parse_cluster(f"H100:8x8:100{unit}")
    assert str(err.value) == (
        f"Invalid config: plan_clusters='H100:8x8:100{unit}': 100{unit} says neither gigabytes nor gigabits "
        "per second. Fix: write 100GBps for 100 GB/s (gigabytes) of bus bandwidth per GPU, or 100Gbps for "
        "100 Gb/s (gigabits: 12.5 GB/s); a 100 Gb Ethernet port per node of 8 GPUs is eth100."
    )
    for fix in ("100GBps", "100Gbps", "eth100"):  # each spelling the fix names parses
        parse_cluster(f"H100:8x8:{fix}")


@pytest.mark.parametrize(
    ("network", "said"),
    [
        ("99999999GBps", "99999999GBps is 99999999 GB/s per GPU, outside (0, 1e6] GB/s"),
        ("0GBps", "0GBps is 0 GB/s per GPU, outside (0, 1e6]"),
        ("-5Gbps", "-5Gbps is -0.625 GB/s per GPU, outside"),
        ("1.2.3GBps", "1.2.3 is not a number"),
    ],
)
def test_a_bandwidth_out_of_bounds_is_refused_at_parse_time_naming_the_entry(network: str, said: str) -> None:
    """``[H100:8x8:99999999gbps]`` passed the name check, then every set-up was refused with
    ``predict.inter_node_gbps=99999999.0: is beyond the bound``, a key the user never set, exit 1."""
    with pytest.raises(ConfigError) as err:
        parse_cluster(f"H100:8x8:{network}")
    line = str(err.value)
    assert line.startswith(f"Invalid config: plan_clusters='H100:8x8:{network}': {said}"), line
    assert "Fix: name a bus bandwidth in it, e.g. 40GBps or 400Gbps" in line and "\n" not in line
    assert MAX_BY_KEY["predict.inter_node_gbps"] == 1e6  # the bound is the key's own
    parse_cluster("H100:8x8:1000000GBps")  # at the bound


def test_the_plan_prints_each_named_network_in_gb_and_gbit_per_s(hydra_compose, tmp_path: Path) -> None:
    """Under the table: each network a multi-node cluster names, its GB/s and Gb/s and what it is; a
    one-node cluster's network is not used, and not said."""
    out = _decide(
        hydra_compose, tmp_path, "plan_clusters=[H100:2x8:100GBps,H100:2x8:100Gbps,H100:1x8:eth100]", *SMALL
    )
    text = out["plan_text"]
    assert (
        "network 100GBps: 100 GB/s = 800 Gb/s bus bandwidth per GPU across nodes (nccl-tests' busbw; "
        "GB = gigabytes), as named: 100 GB/s (gigabytes)"
    ) in text
    assert "network 100Gbps: 12.5 GB/s = 100 Gb/s bus bandwidth per GPU across nodes" in text
    assert "network eth100" not in text
    rows = {r["cluster"]: r for r in csv.DictReader(open(out["plan_file"])) if r["rank"]}
    fast, slow = (float(rows[f"H100:2x8:100{u}"]["predicted_tokens_per_s_per_gpu"]) for u in ("GBps", "Gbps"))
    assert fast > slow  # 8x the bandwidth across nodes


def test_the_old_keys_spell_their_bandwidth_in_gbps(hydra_compose) -> None:
    from flopsweep.clusters import cluster_from_keys

    cfg = hydra_compose(["plan_gpu=H100", "nnodes=2", "nproc_per_node=8", "predict.inter_node_gbps=25"])
    c = cluster_from_keys(cfg)
    assert c.label == "H100:2x8:25GBps" and c.network.inter_node_gbps == 25.0


def test_a_prediction_scaled_from_another_gpu_kind_claims_no_expected_error(
    hydra_compose, tmp_path: Path
) -> None:
    """``B200:1x8`` is H200 records scaled by the datasheet ratio (2.27; A100 0.315): it showed ±5% as
    the H200's own rows do. The cross-GPU error has never been measured: ``?``, said under the table
    and in its source; the same-kind rows keep ±5%."""
    out = _decide(hydra_compose, tmp_path, "plan_clusters=[B200:1x8,H200:1x8,A100-80GB:1x8]", *SMALL)
    rows = {r["cluster"]: r for r in csv.DictReader(open(out["plan_file"])) if r["rank"]}
    h200, b200, a100 = rows["H200:1x8:ib400"], rows["B200:1x8:ib800"], rows["A100-80GB:1x8:ib200"]
    assert (
        h200["expected_error"] == "0.05" and "scaled by the datasheet bf16" not in h200["prediction_source"]
    )
    for row, ratio in ((b200, "2.27"), (a100, "0.315")):
        assert row["compute_source"] == "nearest" and row["expected_error"] == ""
        assert (
            f"measured on H200 SXM, scaled by the datasheet bf16 peak ratio {ratio}"
            in row["prediction_source"]
        )
        assert "expected error unmeasured: the compute was measured on H200 SXM" in row["prediction_source"]
    lines = out["plan_text"].splitlines()
    table = {line.split()[2]: line for line in lines[1:4]}  # #, all, cluster
    assert table["H200:1x8:ib400"].endswith("±5%  nearest")
    assert table["B200:1x8:ib800"].endswith("?  nearest, scaled")
    assert any(line.startswith("err ?, nearest, scaled: measured on H200 SXM") for line in lines)


def test_expected_error_by_source() -> None:
    from flopsweep.plan_assess import expected_error

    scaled = "nearest: h200/x; measured on H200 SXM, scaled by the datasheet bf16 peak ratio 2.27"
    assert expected_error({"compute_source": "nearest", "source": scaled}, "zero3", 2) is None
    assert expected_error({"compute_source": "nearest", "source": "nearest: h200/x"}, "fsdp", 1) == 0.05
    assert expected_error({"compute_source": "flops", "source": scaled}, "fsdp", 1) == 0.15


def test_an_error_measured_across_gpu_kinds_is_the_pairs_own() -> None:
    """H200 records carried to an H100 were measured (43 one-H100 runs, median 7.1%): 8%, DeepSpeed's
    40% still over it; to a B200 or from an A100 no run has checked: None; the same kind keeps 5%."""
    from flopsweep.plan_assess import ACROSS_KINDS_ERROR, across_kinds, expected_error

    h200 = {
        "compute_source": "nearest",
        "source": "nearest: h200/x; measured on H200 SXM, scaled by the datasheet bf16 peak ratio 1",
    }
    a100 = {**h200, "source": h200["source"].replace("H200 SXM", "A100")}
    assert ACROSS_KINDS_ERROR[("H200 SXM", "H100 SXM")] == 0.08
    assert expected_error(h200, "fsdp", 1, "NVIDIA H100 80GB HBM3") == 0.08
    assert expected_error(h200, "zero3", 1, "H100") == 0.4
    assert expected_error(h200, "fsdp", 1, "B200") is None
    assert expected_error(a100, "fsdp", 1, "H100") is None
    assert expected_error(h200, "fsdp", 1) is None  # no GPU named: unmeasured
    assert across_kinds(h200, "H100 SXM") == ("H200 SXM", 0.08)
    assert across_kinds({"compute_source": "nearest", "source": "nearest: h200/x"}, "H100") == (None, None)


def test_a_layout_degree_no_nearest_record_ran_has_no_expected_error() -> None:
    """A cp8 set-up predicted from a one-GPU record (cp 1; no shipped record ran tp, pp, cp or ep above 1)
    showed ±5%: that 5% was measured on records of none. Its error is unmeasured (None), whatever the GPU
    pair; a degree the record ran too, or one the target runs at 1, keeps the source's error."""
    from flopsweep.nearest import unmeasured_degrees
    from flopsweep.plan_assess import expected_error, unmeasured_layout

    source = "nearest: h200/x (differs in world size 8 vs 1; parallel.cp 8 vs 1; parallel.tp 2 vs 1)"
    made = {"compute_source": "nearest", "source": source}
    assert unmeasured_degrees(source) == ["parallel.cp", "parallel.tp"]
    assert unmeasured_layout(made) == ["parallel.cp", "parallel.tp"]
    assert expected_error(made, "fsdp", 1, "H200") is None
    scaled = {**made, "source": f"{source}; measured on H200 SXM, scaled by the datasheet bf16 peak ratio 1"}
    assert expected_error(scaled, "fsdp", 1, "H100") is None  # the pair's 8% measured no cp either
    for measured in ("parallel.cp 8 vs 2", "parallel.cp 1 vs 2", "parallel.tp 16 vs 4", "world size 8 vs 1"):
        kept = {
            "compute_source": "nearest",
            "source": f"nearest: h200/x (1 of its set-up; differs in {measured})",
        }
        assert unmeasured_layout(kept) == [] and expected_error(kept, "fsdp", 1, "H200") == 0.05
    assert unmeasured_layout({"compute_source": "calibration", "source": source}) == []


def test_a_context_parallel_plan_over_the_shipped_records_says_its_error_unmeasured(
    hydra_compose, tmp_path: Path
) -> None:
    """The trial's plan: Llama 3.1 8B at 65,536 tokens, ``cp8`` on 8 H200s and 8 H100s, its top row at 85%
    MFU ±5% from a one-GPU Llama 3.2 3B record. Each ``cpN`` row now shows ``?`` with why in its source and
    under the table; the ``dp`` rows keep their error."""
    from flopsweep.plan_assess import UNMEASURED_DEGREE

    args = ("model.seq_len=65536", "space.layouts=[dp,cp8]", "space.backends=[fsdp]")
    out = _decide(
        hydra_compose, tmp_path, "plan_clusters=[H100:1x8,H200:1x8]", *args, "space.checkpointing=[full]"
    )
    rows = [r for r in csv.DictReader(open(out["plan_file"])) if r["rank"]]
    cp = [r for r in rows if "cp8" in r["layout"]]
    assert cp and all(r["compute_source"] == "nearest" for r in cp)
    for r in cp:
        assert r["expected_error"] == "" and "parallel.cp 8 vs 1" in r["prediction_source"]
        assert UNMEASURED_DEGREE.format(degrees="parallel.cp") in r["prediction_source"]
    assert all(r["expected_error"] for r in rows if "cp" not in r["layout"])
    lines = out["plan_text"].splitlines()
    assert any(
        line.startswith("err ?, no record of parallel.cp > 1: the nearest record ran it at 1")
        for line in lines
    )
    assert not any(line.startswith("err ?, nearest, scaled") for line in lines)  # H200 -> H100 was measured


def test_ties_put_an_unmeasured_error_last() -> None:
    from flopsweep import plan_space as ps

    def row(cluster: str, err: float | None) -> ps.Row:
        return ps.Row(cluster=cluster, setup=None, predicted_tflops_per_gpu=100.0, expected_error=err)

    ranked = ps.rank([row("B200", None), row("H200", 0.05)], "model_tflops_per_device")
    assert [r.cluster for r in ranked] == ["H200", "B200"]


@pytest.mark.parametrize(
    ("clusters", "said"),
    [
        (
            "[H100-80GB:8,H100-SXM:8]",
            "names one cluster twice: H100-80GB:1x8:ib400 and H100-SXM:1x8:ib400 are both H100 SXM of the "
            "same memory, link in a node, shape and network (one node: no network used)",
        ),
        ("[H100:8,H100:1x8]", "names H100:1x8:ib400 twice"),
        (
            "[H100:2x8:40GBps,H100:2x8]",
            "names one cluster twice: H100:2x8:40GBps and H100:2x8:ib400 are both H100 SXM",
        ),
    ],
)
def test_one_cluster_under_two_names_is_refused(
    hydra_compose, tmp_path: Path, clusters: str, said: str
) -> None:
    out = _decide(hydra_compose, tmp_path, f"plan_clusters={clusters}", *SMALL)
    line = out["error"]["message"]
    assert out["status"] == "invalid" and said in line and line.endswith("Fix: name each cluster once.")


def test_clusters_that_plan_differently_are_not_duplicates(hydra_compose, tmp_path: Path) -> None:
    """Another memory size or form (``A100-80GB`` SXM4 beside ``A100-PCIe-80GB``), another network on
    several nodes, another shape: each its own cluster."""
    for clusters in (
        "[A100-80GB:8,A100-PCIe-80GB:8]",
        "[H100:2x8:40GBps,H100:2x8:eth100]",
        "[H100:1x8,H100:2x4]",
    ):
        assert _decide(hydra_compose, tmp_path, f"plan_clusters={clusters}", *SMALL)["status"] == "plan"


def test_an_empty_cluster_list_is_refused_before_hydra() -> None:
    """``plan_clusters=[]`` fell back to the one-row plan, silently."""
    assert command_line_problem(["plan=true", "plan_clusters=[]"]) == (
        "Invalid config: plan_clusters='[]': names no cluster (an empty list would plan the one job "
        "instead). Fix: name one, e.g. plan_clusters=[H100:8x8], or drop plan_clusters for the one-row plan."
    )
    assert command_line_problem(["plan=true", "plan_clusters=[ ]"]) is not None
    assert command_line_problem(["plan=true", "plan_clusters=null"]) is None


def test_keys_the_clusters_replace_are_said_not_used() -> None:
    """``nnodes=4`` beside ``plan_clusters=[H100:1x8:eth100]`` was silently ignored."""
    from flopsweep.job.plandecide import ignored_line

    clusters = [parse_cluster("H100:1x8:eth100")]
    assert ignored_line(["plan=true", "nnodes=4", "plan_clusters=[H100:1x8:eth100]"], clusters) == (
        "plan: nnodes=4 is not used: each cluster's name gives its GPU, nodes and GPUs per node "
        "(H100:1x8:eth100); to plan that shape, name it there: plan_clusters=[H100:4x8:eth100]"
    )
    two = ignored_line(["plan_gpu=A100-80GB", "nproc_per_node=4"], clusters)
    assert two.startswith("plan: plan_gpu=A100-80GB, nproc_per_node=4 are not used") and two.endswith(
        "plan_clusters=[A100-80GB:1x4:eth100]"
    )
    parse_cluster("A100-80GB:1x4:eth100")  # the example parses
    assert ignored_line(["plan=true", "model=llama3.1-8b"], clusters) is None


def test_a_rules_fix_that_leads_to_set_ups_that_failed_is_not_the_line(hydra_compose, tmp_path: Path) -> None:
    """``model=llama3.1-70b plan_clusters=[L40S:1x2] space.backends=[single,ddp]`` said "pick
    backend=ddp", whose set-ups were all over memory. The line names the cause among the set-ups the
    rules accept, and its fix is checked: the set-up of least memory on a cluster where it fits."""
    out = _decide(
        hydra_compose,
        tmp_path,
        "model=llama3.1-70b",
        "plan_clusters=[L40S:1x2]",
        "space.backends=[single,ddp]",
    )
    line = out["nothing"]
    assert line.startswith(
        "plan: no set-up fits and is predicted: all 90 dropped (refused: parallel.tp 30, refused: "
        "parallel.pp 30, refused: backend 15, ...), 75 refused by the rules; among the 15 they accept, "
        "the commonest reason (15 of 15): over memory (the least: estimated 1,310 GiB per rank"
    ), line
    assert "pick backend=ddp" not in line
    fix = line.split("Fix: ")[1]
    assert fix.startswith(
        "name more GPUs in plan_clusters: fsdp dp, full checkpointing, micro batch 1 needs "
    )
    bigger = fix.split("plan_clusters=[")[1].split("]")[0]
    # the fix passes: the set-up it names fits on the cluster it names
    again = _decide(
        hydra_compose,
        tmp_path,
        "model=llama3.1-70b",
        f"plan_clusters=[{bigger}]",
        "space.backends=[fsdp]",
        "space.layouts=[dp]",
        "space.checkpointing=[full]",
        "space.micro_batches=[1]",
    )
    assert "nothing" not in again and again["best"][0]["status"] == "ok"


def test_a_memory_fix_on_a_named_cluster_is_checked_too(hydra_compose, tmp_path: Path) -> None:
    out = _decide(hydra_compose, tmp_path, "plan_clusters=[H100:1x8]", "space.backends=[ddp]")
    assert out["nothing"].endswith(
        "Fix: list the set-up of least memory, fsdp dp, full checkpointing, micro batch 1, which fits on "
        "H100:1x8:ib400 (20.3 GiB per rank): space.backends=[ddp,fsdp]"
    ), out["nothing"]


LONG = ["model.seq_len=65536", "space.layouts=[dp]", "space.backends=[fsdp]", "space.checkpointing=[full]"]
"""Session 29's trial: Llama 3.1 8B at 64K tokens, a space of the least memory but for micro batch 4."""


@pytest.mark.parametrize("gpu", ["H100", "H200"])
def test_the_plans_memory_fix_tries_the_chunked_loss_and_context_parallel_before_more_gpus(
    hydra_compose, tmp_path: Path, gpu: str
) -> None:
    """Session 29: at 64K tokens every set-up is over memory by its 31 GiB of fp32 logits; the plan said
    ``none found ... name GPUs with more memory`` (H100) or ``on H200:4x8 it fits`` while each row's own
    ``memory_fix`` named ``loss.chunk_tokens=4096``. The fix now names the chunked loss (a job key beside the
    space) and a ``cpN`` layout, each with its estimate, and each passes: planned again, it ranks."""
    out = _decide(hydra_compose, tmp_path, *LONG, f"plan_clusters=[{gpu}:1x8]", "space.micro_batches=[1,4]")
    fix = out["nothing"].split("Fix: ", 1)[1]
    assert fix.startswith(
        "set loss.chunk_tokens=4096 (a job key, beside the space: the loss over chunks) and list fsdp dp, "
        f"full checkpointing, micro batch 1, which then fits on {gpu}:1x8:ib400 (45.2 GiB per rank): "
        "loss.chunk_tokens=4096 space.layouts=[dp] space.backends=[fsdp] space.checkpointing=[full] "
        "space.micro_batches=[1,4]"
    ), fix
    assert "none found" not in fix and "more GPUs" not in fix and f"{gpu}:4x8" not in fix
    (cp,) = [w.split(",")[1].rstrip("]") for w in fix.split() if w.startswith("space.layouts=[dp,")]
    assert cp in ("cp2", "cp4", "cp8"), fix
    for i, given in enumerate((["loss.chunk_tokens=4096", "space.layouts=[dp]"], [f"space.layouts=[{cp}]"])):
        (tmp_path / str(i)).mkdir()
        again = _decide(hydra_compose, tmp_path / str(i), *LONG, f"plan_clusters=[{gpu}:1x8]", *given)
        assert "nothing" not in again and again["best"][0]["status"] == "ok", given


def test_where_only_both_fit_the_plan_names_the_chunked_loss_with_context_parallel(
    hydra_compose, tmp_path: Path
) -> None:
    """At 262,144 tokens on 8 H100s neither the chunked loss (137 GiB) nor context parallel alone fits;
    both together do, on the GPUs named (no more GPUs)."""
    long = [a for a in LONG if not a.startswith("model.seq_len")]
    out = _decide(hydra_compose, tmp_path, "model.seq_len=262144", *long, "plan_clusters=[H100:1x8]")
    fix = out["nothing"].split("Fix: ", 1)[1]
    assert fix.startswith(
        "set loss.chunk_tokens=4096 (a job key, beside the space: the loss over chunks) and list fsdp cp"
    ), fix
    assert "; or " not in fix and "space.layouts=[dp,cp" in fix and "H100:1x8:ib400 (" in fix

"""``plan=true plan_clusters=[...]`` (issue 42, items 1 and 3): cluster names, the enumeration, the
pruning by memory and rules, the ranking by each objective, the dollars and days, the output formats."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
from pathlib import Path

import pytest

from flopsweep import plan_space as ps
from flopsweep import space as sp
from flopsweep.clusters import NETWORKS, cluster_from_keys, parse_cluster
from flopsweep.config import ConfigError

LLAMA8B = ["model=llama3.1-8b", "cost.usd_per_gpu_hour=2.5", "budget.tokens=15e12"]


@pytest.mark.parametrize(
    ("name", "label", "world", "gbps"),
    [
        ("H100:8x8", "H100:8x8:ib400", 64, 40.0),
        ("h100:64", "H100:8x8:ib400", 64, 40.0),
        ("H200:512", "H200:64x8:ib400", 512, 40.0),
        ("H100:4", "H100:1x4:ib400", 4, 40.0),
        ("A100-80GB:2x8", "A100-80GB:2x8:ib200", 16, 20.0),
        ("H100:2x8:25GBps", "H100:2x8:25GBps", 16, 25.0),
        ("H100:2x8:200Gbps", "H100:2x8:200Gbps", 16, 25.0),
        ("H100:2x8:25GB/s", "H100:2x8:25GBps", 16, 25.0),
        ("B200:1x8", "B200:1x8:ib800", 8, 80.0),
    ],
)
def test_cluster_names(name: str, label: str, world: int, gbps: float) -> None:
    """``GPU:NODESxGPUS[:NETWORK]`` and ``GPU:N`` (nodes of 8) name one cluster; its label is canonical."""
    c = parse_cluster(name)
    assert (c.label, c.world_size, c.network.inter_node_gbps) == (label, world, gbps)
    assert parse_cluster(c.label).label == c.label


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("H100", "gives no size"),
        ("B300:8", "'B300' is no device of the peak table"),
        ("A100:1x8", "comes in more than one memory size"),
        ("H100:8x8:ib999", "names no network"),
        ("H100:12", "12 GPUs do not fill nodes of 8"),
        ("H100:0x8", "needs at least one node of one GPU"),
        ("H100 8x8", "is not a cluster name"),
        ("H100:8x-1", "its size '8x-1' is not a GPU count or NODESxGPUS_PER_NODE of positive whole numbers"),
        ("H100:1.5x8", "its size '1.5x8' is not a GPU count or NODESxGPUS_PER_NODE"),
        ("H100:99999999999x99999999999", "nodes of 99999999999 GPUs is beyond the bounds (1024 nodes"),
        ("H100:1x129", "1 nodes of 129 GPUs is beyond the bounds"),
        ("H100:99999999992", "12499999999 nodes of 8 GPUs is beyond the bounds"),
    ],
)
def test_bad_cluster_names_are_one_line(name: str, said: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_cluster(name)
    line = str(err.value)
    assert "\n" not in line and line.startswith("Invalid config: plan_clusters=") and said in line
    assert "Fix: " in line


@pytest.mark.parametrize("name", ["H100:12", "H100:1030", "H100:8188", "H100:8196", "H100:99999999999"])
def test_the_fix_of_a_bad_size_names_a_cluster_within_the_bounds(name: str) -> None:
    """A GPU count that does not fill nodes of 8, or is beyond the bounds: the fix's example parses (a
    split whose nodes stay within 1,024 and GPUs per node within 128), never one refused in its turn."""
    with pytest.raises(ConfigError) as err:
        parse_cluster(name)
    example = re.search(r"e\.g\. (\S+?)\.?$", str(err.value))
    assert example, str(err.value)
    assert parse_cluster(example[1]).world_size >= 1


@pytest.mark.parametrize(
    ("key", "values", "said"),
    [
        (
            "backends",
            ("fsdp", "", "ddp"),
            "space.backends=[fsdp,'',ddp]: holds an empty value. Fix: drop it: space.backends=[fsdp,ddp].",
        ),
        (
            "layouts",
            ("dp", " "),
            "space.layouts=[dp,' ']: holds an empty value. Fix: drop it: space.layouts=[dp].",
        ),
        (
            "checkpointing",
            ("",),
            "space.checkpointing=['']: '' is not one of none, selective, full, casts. "
            "Fix: list some of those, e.g. space.checkpointing=[none,selective,full].",
        ),
        ("precisions", ("bf16", "fp9"), "space.precisions=[bf16,fp9]: fp9 is not one of"),
    ],
)
def test_an_empty_or_unknown_value_of_a_space_list_is_one_line_naming_it(
    key: str, values: tuple, said: str
) -> None:
    """An empty value of a ``space.*`` list (``[fsdp,'',ddp]``) is named as such, with the list to give;
    it was ``space.backends=[...]:  is not one of ...``, the value it named invisible (issue 42)."""
    with pytest.raises(ConfigError) as err:
        dataclasses.replace(sp.Space(), **{key: values}).check()
    assert str(err.value).startswith(f"Invalid config: {said}"), str(err.value)


@pytest.mark.parametrize(
    ("name", "fix"),
    [
        ("A100-80GB:12", "Fix: give nodes and GPUs per node, e.g. A100-80GB:2x6."),
        ("H200:14", "Fix: give nodes and GPUs per node, e.g. H200:2x7."),
        ("MI300X:1x129", "Fix: name a cluster within them, e.g. MI300X:1x8."),
        ("H200:99999999999x99999999999", "Fix: name a cluster within them, e.g. H200:1024x8."),
    ],
)
def test_a_cluster_refusal_names_a_cluster_of_the_gpu_given(name: str, fix: str) -> None:
    """The fix of a bad cluster size names the GPU the user gave, in a size that parses (it named
    ``H100:3x4`` and ``H100:1024x8`` whatever the GPU)."""
    with pytest.raises(ConfigError) as err:
        parse_cluster(name)
    assert str(err.value).endswith(fix), str(err.value)
    parse_cluster(fix.split("e.g. ")[1].rstrip("."))


def test_the_old_keys_name_the_same_cluster_and_agree(hydra_compose, tmp_path: Path) -> None:
    """``plan_gpu=H100 nnodes=8 nproc_per_node=8``, ``plan_gpu=H100 predict.nnodes=8
    predict.gpus_per_node=8`` and ``plan_clusters=[H100:8x8]`` name one cluster, and the one-row plan
    of either old form gives the world size, memory and prediction of the new one's row."""
    from flopsweep import forecast
    from flopsweep.job import JobInfo, plan_job

    base = [*LLAMA8B, "plan=true", "plan_gpu=H100", "backend=fsdp", "batch.micro_batch_size=4"]
    forms = [["nnodes=8", "nproc_per_node=8"], ["predict.nnodes=8", "predict.gpus_per_node=8"]]
    new = parse_cluster("H100:8x8")
    cfgs = [hydra_compose([*base, *form]) for form in forms]
    assert [cluster_from_keys(c).label for c in cfgs] == [new.label, new.label]
    setup = sp.Setup(backend="fsdp", layout="dp", checkpointing="none", precision="bf16", micro_batch=4)
    shipped = forecast.prediction_records(cfgs[0])  # plan_clusters= and plan_gpu= both read them
    assert shipped and all(r["shipped"] for _, r in shipped)
    row = ps.evaluate(hydra_compose(LLAMA8B), setup, new, shipped)
    assert row.status == "ok" and row.world_size == 64
    for cfg in cfgs:
        old = plan_job(cfg, JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
        assert (old["status"], old["world_size"], old["layout"]) == ("ok", 64, row.layout)
        assert float(old["est_peak_gib_per_rank"]) == pytest.approx(row.est_peak_gib_per_rank, rel=5e-3)
        assert float(old["predicted_tokens_per_s_per_device"]) == pytest.approx(
            row.predicted_tokens_per_s_per_gpu, rel=1e-4
        )  # the network's 40 GB/s across nodes: never blank for want of a bandwidth
        assert "ib400" in old["prediction_source"] and old["predicted_budget_days"] and old["rank"] == 1


SMALL = sp.Space(
    backends=("fsdp", "ddp"),
    layouts=("dp", "hsdp", "tp2"),
    checkpointing=("none", "full"),
    micro_batches=(1, 2),
)


def test_enumeration_and_pruning_by_memory_and_rules(hydra_compose) -> None:
    """Every combination is tried; DDP's unsharded 8B does not fit an H100 (dropped and counted as
    over memory), DDP with tensor parallelism is refused by the rules (counted by key), ``hsdp`` on
    one node is no set-up of its own; the FSDP2 rows are predicted."""
    assert len(sp.setups(SMALL)) == 2 * 3 * 2 * 1 * 2
    result = ps.candidates(hydra_compose(LLAMA8B), SMALL, [parse_cluster("H100:1x8")])
    by = {(r.setup.backend, r.setup.layout): r.status for r in result.rows}
    assert len(result.rows) == 16  # hsdp on one node: none
    assert result.dropped == {"over memory": 4, "refused: parallel.tp": 4}
    assert by[("ddp", "dp")] == "over memory" and by[("ddp", "tp2")] == "refused"
    assert {r.status for r in result.rows if r.setup.backend == "fsdp"} == {"ok"}
    over = next(r for r in result.rows if r.status == "over memory")
    assert over.est_peak_gib_per_rank > 0.9 * over.gpu_memory_gib and "space.min_headroom" in over.reason
    refused = next(r for r in result.rows if r.status == "refused")
    assert refused.reason.startswith("parallel.tp=2") and "\n" not in refused.reason


def test_the_headroom_decides_what_fits(hydra_compose) -> None:
    setup = sp.Setup(backend="fsdp", layout="dp", checkpointing="none", precision="bf16", micro_batch=4)
    cfg, h100 = hydra_compose(LLAMA8B), parse_cluster("H100:1x8")
    loose = ps.evaluate(cfg, setup, h100, min_headroom=0.0)
    share = 1 - loose.est_peak_gib_per_rank / loose.gpu_memory_gib  # what it leaves free
    assert ps.evaluate(cfg, setup, h100, min_headroom=share * 0.9).status == "ok"
    assert ps.evaluate(cfg, setup, h100, min_headroom=share * 1.1).status == "over memory"


def test_dollars_days_and_joules_from_the_published_formula(hydra_compose) -> None:
    """``days = tokens / tokens_per_s / 86400``; ``gpu_hours = days x 24 x world``; ``usd =
    gpu_hours x price``; ``usd per M tokens = price x world / 3600 / tokens_per_s x 1e6``;
    ``J/token = board power x world / tokens_per_s`` (flopsweep.cost, flopsweep.clusters)."""
    setup = sp.Setup(
        backend="fsdp", layout="hsdp", checkpointing="selective", precision="bf16", micro_batch=2
    )
    row = ps.evaluate(hydra_compose(LLAMA8B), setup, parse_cluster("H200:8x8"))
    tps, world = row.predicted_tokens_per_s, 64
    assert row.predicted_tokens_per_s_per_gpu == pytest.approx(tps / world)
    assert row.budget_days == pytest.approx(15e12 / tps / 86400)
    assert row.budget_gpu_hours == pytest.approx(row.budget_days * 24 * world)
    assert row.budget_usd == pytest.approx(row.budget_gpu_hours * 2.5)
    assert row.predicted_usd_per_million_tokens == pytest.approx(2.5 * world / 3600 / tps * 1e6)
    assert row.predicted_joules_per_token == pytest.approx(700 * world / tps)
    assert row.budget_energy_kwh == pytest.approx(15e12 * row.predicted_joules_per_token / 3.6e6)
    assert row.layout == "dp8x8" and row.expected_error == pytest.approx(0.25)  # datasheet + assumed network


def _row(cluster: str, tps: float, usd: float, mfu: float, days: float, gib: float = 50.0) -> ps.Row:
    setup = sp.Setup(backend="fsdp", layout="dp", checkpointing="none", precision="bf16", micro_batch=1)
    return ps.Row(
        cluster=cluster,
        setup=setup,
        predicted_tokens_per_s_per_gpu=tps,
        predicted_tokens_per_s=tps * 8,
        predicted_usd_per_million_tokens=usd,
        predicted_joules_per_token=usd * 10,
        predicted_mfu=mfu,
        budget_days=days,
        est_peak_gib_per_rank=gib,
        expected_error=0.15,
    )


@pytest.mark.parametrize(
    ("objective", "order"),
    [
        ("tokens_per_s_per_device", ["b", "c", "a"]),
        ("tokens_per_s", ["b", "c", "a"]),
        ("usd_per_million_tokens", ["a", "c", "b"]),
        ("joules_per_token", ["a", "c", "b"]),
        ("mfu", ["c", "a", "b"]),
        ("budget_days", ["c", "b", "a"]),
        ("peak_cuda_allocated_gib", ["b", "a", "c"]),
    ],
)
def test_ranking_by_each_objective(objective: str, order: list[str]) -> None:
    rows = {
        "a": _row("X:1x8", tps=100, usd=1.0, mfu=0.4, days=9, gib=40),
        "b": _row("Y:1x8", tps=300, usd=3.0, mfu=0.3, days=5, gib=30),
        "c": _row("X:1x8", tps=200, usd=2.0, mfu=0.5, days=1, gib=60),
    }
    failed = _row("X:1x8", tps=999, usd=0.1, mfu=0.9, days=0.1)
    failed.status = "over memory"
    ranked = ps.rank([*rows.values(), failed], objective)
    names = {id(r): k for k, r in rows.items()}
    assert [names[id(r)] for r in ranked] == order and [r.rank for r in ranked] == [1, 2, 3]
    # each cluster's rows are 1, 2 ... whatever the other cluster's rows between them (a and c are X:1x8)
    assert [r.cluster_rank for r in ranked if r.cluster == "X:1x8"] == [1, 2]
    assert [r.cluster_rank for r in ranked if r.cluster == "Y:1x8"] == [1]
    assert failed.cluster_rank is None
    assert failed.rank is None and {names[id(r)] for r in ranked if r.best} == {
        order[0],
        next(k for k in order if rows[k].cluster != rows[order[0]].cluster),
    }


def test_an_objective_no_plan_predicts_is_one_line() -> None:
    with pytest.raises(ConfigError) as err:
        ps.rank([], "hfu")
    assert "\n" not in str(err.value) and "objective='hfu'" in str(err.value)


def _decide(hydra_compose, tmp_path: Path, *extra: str) -> dict:
    from flopsweep.job import JobInfo
    from flopsweep.job.plandecide import decide_job

    args = [
        *LLAMA8B,
        "plan=true",
        "plan_clusters=[H100:1x8,H200:2x8]",
        "space.backends=[fsdp,ddp]",
        "space.layouts=[dp,hsdp]",
        "space.checkpointing=[none,full]",
        "space.micro_batches=[2,4]",
        *extra,
    ]
    return decide_job(hydra_compose(args), JobInfo(job_dir=tmp_path, overrides=args))


def test_the_table_csv_and_json(hydra_compose, tmp_path: Path) -> None:
    """The table fits 160 columns and names its defaults and the best's command; ``plan.csv`` and
    ``plan_format=csv`` and ``json`` parse, with ``rank``, ``best``, dollars and days on every ranked row."""
    table = _decide(hydra_compose, tmp_path, "objective=usd_per_million_tokens")
    lines = table["plan_text"].splitlines()
    head = lines[: lines.index("")]
    assert max(len(line) for line in head) <= 160 and head[0].split()[:4] == ["#", "all", "cluster", "set-up"]
    shown = {}  # each cluster's rows in the table: "#" numbers them 1, 2, 3 ..., "all" across clusters
    for line in head[1:]:
        mine, everyone, cluster = line.split()[:3]
        shown.setdefault(cluster, []).append((mine, int(everyone)))
    assert set(shown) == {"H100:1x8:ib400", "H200:2x8:ib400"}
    for cluster, cells in shown.items():
        assert [m.rstrip("*") for m, _ in cells] == list(map(str, range(1, len(cells) + 1))), (cluster, cells)
        assert sum(m.endswith("*") for m, _ in cells) == 1, (cluster, cells)  # its best: one row
        assert [a for _, a in cells] == sorted(a for _, a in cells)
    assert any(
        a > n + 1 for cells in shown.values() for n, (_, a) in enumerate(cells)
    )  # "all" has gaps, "#" none
    assert "space.top=5" in table["plan_text"] and "network of H200 SXM nodes: ib400" in table["plan_text"]
    assert "H200:2x8:ib400: flopsweep -m model=llama3.1-8b" in table["plan_text"]
    assert "nnodes=2 hydra/launcher=slurm" in table["plan_text"]
    rows = list(csv.DictReader(open(table["plan_file"])))
    ranked = [r for r in rows if r["rank"]]
    assert [int(r["rank"]) for r in ranked] == list(range(1, len(ranked) + 1)) and len(ranked) == 12
    assert {r["cluster"] for r in ranked if r["best"] == "True"} == {"H100:1x8:ib400", "H200:2x8:ib400"}
    for cluster in ("H100:1x8:ib400", "H200:2x8:ib400"):  # cluster_rank: 1..n within each, in rank order
        own = [int(r["cluster_rank"]) for r in ranked if r["cluster"] == cluster]
        assert own == list(range(1, len(own) + 1)), (cluster, own)
    assert all(r["cluster_rank"] == "" for r in rows if not r["rank"])
    for r in ranked:  # the best: the first, unless it is at the memory edge and one off it is within 5%
        first = next(f for f in ranked if f["cluster"] == r["cluster"] and f["cluster_rank"] == "1")
        if r["best"] == "True" and r is not first:
            assert (first["memory_edge"], r["memory_edge"]) == ("True", "False"), (first, r)
        elif r is first and r["best"] == "False":
            assert r["memory_edge"] == "True", r
    assert all(float(r["budget_usd"]) > 0 and float(r["budget_days"]) > 0 for r in ranked)
    assert {r["status"] for r in rows if not r["rank"]} == {"over memory", "refused"}  # ddp
    as_csv = _decide(hydra_compose, tmp_path, "plan_format=csv")["plan_text"]
    assert list(csv.DictReader(io.StringIO(as_csv)))[0]["rank"] == "1"
    assert not as_csv.endswith("\n")  # run.py's print ends it: a blank last line was one more CSV row
    as_json = json.loads(_decide(hydra_compose, tmp_path, "plan_format=json")["plan_text"])
    assert as_json["objective"] == "model_tflops_per_device" and as_json["better"] == "higher"
    assert as_json["rows"][0]["rank"] == 1 and as_json["dropped"] == {
        "over memory": 8,
        "refused: parallel.dp_replicate": 4,
    }
    assert [b["command"].startswith("flopsweep ") for b in as_json["best"]] == [True, True]


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        (["cost.usd_per_gpu_hour=-1"], "cost.usd_per_gpu_hour"),
        (["plan_clusters=[H100:1x8,B300:8]"], "plan_clusters"),
        (["plan_clusters=[H100:8,H100:1x8]"], "plan_clusters"),
        (["plan_format=xml"], "plan_format"),
        (["space.backends=[fsdp,megatron]"], "space.backends"),
        (["space.layouts=[dp,tp0]"], "space.layouts"),
        (["objective=hfu"], "objective"),
    ],
)
def test_bad_keys_are_one_line(hydra_compose, tmp_path: Path, extra: list[str], key: str) -> None:
    out = _decide(hydra_compose, tmp_path, *extra)
    line = out["error"]["message"]
    assert out["status"] == "invalid" and "\n" not in line and line.startswith(f"Invalid config: {key}=")


def test_an_empty_cluster_name_in_the_list_is_one_line(hydra_compose, tmp_path: Path) -> None:
    """``plan_clusters=[H100:8,'',H200:8]`` named the empty one alone, ``plan_clusters='': is not a
    cluster name``, with no word of the list it sat in: it says so and gives the list to write."""
    out = _decide(hydra_compose, tmp_path, "plan_clusters=[H100:8,'',H200:8]")
    assert out["status"] == "invalid" and out["error"]["message"] == (
        "Invalid config: plan_clusters=['H100:8', '', 'H200:8']: holds an empty name. "
        "Fix: drop it: plan_clusters=[H100:8,H200:8]."
    )


def test_networks_named() -> None:
    assert set(NETWORKS) >= {"ib400", "ib200"} and all(n.source for n in NETWORKS.values())


@pytest.mark.parametrize(
    ("override", "said"),
    [
        ("cost.usd_per_gpu_hour=abc", "Invalid config: cost.usd_per_gpu_hour='abc': is not a number."),
        ("budget.tokens=lots", "Invalid config: budget.tokens='lots': is not a number."),
        ("plan_clusters=H100:8", "Fix: write a list: plan_clusters=[H100:8]."),
    ],
)
def test_run_py_refuses_a_bad_price_or_cluster_list_in_one_line(override: str, said: str) -> None:
    """What Hydra would refuse in several lines, ``run.py`` refuses first in one
    (:func:`flopsweep.plan_command_line.command_line_problem`, in ``run.refusal``)."""
    from flopsweep.plan_command_line import command_line_problem

    line = command_line_problem(["plan=true", override])
    assert line is not None and said in line and "\n" not in line
    ok = [
        "cost.usd_per_gpu_hour=2.5",
        "budget.tokens=15e12",
        "plan_clusters=[H100:8]",
        "cost.usd_per_gpu_hour=null",
    ]
    assert command_line_problem(ok) is None


def test_here_is_this_machine_named_like_any_cluster() -> None:
    """``here`` is this machine's GPU (the name torch reports) and GPU count, one node; ``here:NxG``
    more nodes like it; a machine without a GPU is one line."""
    one = parse_cluster("here", here=("NVIDIA H200", 1))
    assert (one.label, one.row.name, one.world_size) == ("H200:1x1:ib400", "H200 SXM", 1)
    more = parse_cluster("here:2x8", here=("NVIDIA A100-SXM4-80GB", 8))
    assert (more.label, more.world_size, more.network.name) == ("A100-SXM4-80GB:2x8:ib200", 16, "ib200")
    with pytest.raises(ConfigError, match="this machine has no GPU"):
        parse_cluster("here", here=("", 0))


def test_a_sweeps_plan_csv_is_ranked_by_the_objective(tmp_path: Path) -> None:
    """One row per job (``plan=true -m``): the callback numbers the ok rows that fit by ``objective=``
    in its direction (:func:`flopsweep.job.plantable.rank_plan_file`); the others get no rank."""
    from flopsweep.job.plantable import PLAN_COLUMNS, rank_plan_file, replace_plan_file

    def job(n: int, status: str, fits: str, tps: str, usd: str) -> dict:
        row = dict.fromkeys(PLAN_COLUMNS, "")
        row.update(job=n, status=status, fits=fits, predicted_tokens_per_s_per_device=tps)
        row.update(predicted_usd_per_million_tokens=usd)
        return row

    path = tmp_path / "plan.csv"
    rows = [
        job(0, "ok", "True", "100", "3"),
        job(1, "ok", "True", "300", "1"),
        job(2, "ok", "False", "900", "0.1"),
    ]
    rows += [job(3, "invalid", "", "", ""), job(4, "ok", "True", "200", "2")]
    for objective, ranks in (
        ("tokens_per_s_per_device", ["3", "1", "", "", "2"]),
        ("usd_per_million_tokens", ["3", "1", "", "", "2"]),
        ("model_tflops_per_device", ["3", "1", "", "", "2"]),  # no column of its own: tokens/s per GPU
    ):
        replace_plan_file(path, rows)
        rank_plan_file(str(path), objective)
        assert [r["rank"] for r in csv.DictReader(path.open())] == ranks


def test_a_plan_that_ranks_nothing_says_the_commonest_reason() -> None:
    from flopsweep.job.plandecide import nothing_line
    from flopsweep.plan_space import Row

    rows = [
        Row(
            cluster="H100-SXM:1x8",
            setup=None,
            status="refused",
            reason="parallel.tp=2: tp needs fsdp. Fix: set tp=1.",
        )
    ] * 3
    rows += [
        Row(cluster="H100-SXM:1x8", setup=None, status="over memory", reason="estimated 90 GiB per rank")
    ]
    line = nothing_line(rows[:3])
    assert line.startswith(
        "plan: no set-up fits and is predicted: all 3 dropped; the commonest reason (3 of 3)"
    )
    assert line.endswith(
        "refused: parallel.tp=2: tp needs fsdp. Fix: set tp=1 "
        "(with space.*, parallel.tp comes from space.layouts: change that list instead)"
    )
    assert line.count("Fix:") == 1
    # beside a set-up the rules accept, the rule's fix (tp=1: that set-up) would not pass: its cause
    assert nothing_line(rows).startswith(
        "plan: no set-up fits and is predicted: all 4 dropped, 3 refused by the rules; among the 1 they "
        "accept, the commonest reason (1 of 1): over memory (the least: estimated 90 GiB per rank)"
    )
    assert nothing_line(rows[3:]).endswith(  # over memory's own fix, not "widen space.*"
        "Fix: list set-ups that need less memory per rank (smaller space.micro_batches, full in "
        "space.checkpointing, fsdp or zero3 in space.backends, tp, pp or cp in space.layouts), or lower "
        "space.min_headroom; or name GPUs with more memory, or more of them, in plan_clusters"
    )
    assert "no set-up to rank" in nothing_line([])
    away = nothing_line([], ["space.layouts: tp3 needs its degree 3. Fix: list dp"] * 2)
    assert away == (
        "plan: no set-up fits and is predicted: all 2 dropped; the commonest reason (2 of 2): "
        "space.layouts: tp3 needs its degree 3. Fix: list dp"
    )


def test_a_cluster_row_over_memory_names_its_own_memory_fix(hydra_compose, tmp_path: Path) -> None:
    """Session 26: ``plan.csv``'s ``memory_fix`` was filled for the single-machine plan's rows that do not
    fit, never for ``plan_clusters``' rows over memory. Each now names the levers its config has not
    pulled, estimated within ``(1 - space.min_headroom)`` of its GPU (the figure that dropped it)."""
    out = _decide(hydra_compose, tmp_path)
    rows = list(csv.DictReader(open(out["plan_file"])))
    over = [r for r in rows if r["status"] == "over memory"]
    assert over and all(r["memory_fix"] for r in over)
    assert all(r["memory_fix"] == "" for r in rows if r["status"] != "over memory")
    row = next(r for r in over if r["cluster"].startswith("H100") and r["checkpointing"] == "none")
    assert row["backend"] == "ddp" and row["memory_fix"].startswith("set backend=fsdp (estimated ")
    limit = (1 - hydra_compose(LLAMA8B).space.min_headroom) * float(row["gpu_memory_gib"])
    fitting = [r for r in over if r["memory_fix"].startswith("set ")]  # a lever fits: each estimate within
    assert row in fitting and f"within the {limit:.1f} GiB" in row["memory_fix"]
    same = ("cluster", "space_layout", "checkpointing", "precision", "micro_batch")
    [fsdp] = [r for r in rows if r["backend"] == "fsdp" and all(r[k] == row[k] for k in same)]
    assert fsdp["status"] == "ok"  # the set-up the fix names fits on the cluster the row was dropped on
    for r in fitting:
        said = r["memory_fix"].partition(", within the ")[2].split(" GiB")[0]
        estimates = [float(x) for x in re.findall(r"estimated ([\d.]+) GiB per rank", r["memory_fix"])]
        assert estimates and all(e <= float(said) for e in estimates), r["memory_fix"]


def test_a_plan_whose_rows_are_ok_but_have_no_objective_value_names_why(
    hydra_compose, tmp_path: Path
) -> None:
    """Session 26: ``objective=joules_per_token`` on an A10G (no board power listed) left every row ``ok``
    with a blank J/token, and the line said "the commonest reason (90 of 90): ok" with the fix "widen
    space.*". It names the blank figure, why, and a figure the plan predicts."""
    from flopsweep.job import JobInfo
    from flopsweep.job.plandecide import decide_job, nothing_line
    from flopsweep.plan_space import Row

    args = ["model=gpt-tiny", "plan=true", "plan_clusters=[A10G:1x1]", "objective=joules_per_token"]
    out = decide_job(hydra_compose(args), JobInfo(job_dir=tmp_path, overrides=args))
    rows = list(csv.DictReader(open(out["plan_file"])))
    assert out["ranked"] == 0 and rows and {r["status"] for r in rows} == {"ok"}
    assert {r["predicted_joules_per_token"] for r in rows} == {""} and all(
        r["predicted_tokens_per_s"] for r in rows
    )
    n = len(rows)
    assert out["nothing"] == (
        f"plan: no set-up fits and is predicted: all {n} dropped; the commonest reason ({n} of {n}): "
        "no prediction: objective=joules_per_token: plan.csv's predicted_joules_per_token is blank "
        "(no board power listed for A10G). Fix: rank by a figure the plan predicts for every set-up, e.g. "
        "objective=tokens_per_s_per_device, or name GPUs with a listed board power in plan_clusters "
        "(e.g. H100:1x8)"
    )
    assert "reason (1 of 1): ok" not in nothing_line([Row(cluster="A10G:1x1", setup=None)])  # no blank given
    fixed = [*args[:-1], "objective=tokens_per_s_per_device"]  # the fix ranks them
    assert (
        decide_job(hydra_compose(fixed), JobInfo(job_dir=tmp_path / "fixed", overrides=fixed))["ranked"] > 0
    )


def test_a_plan_whose_set_ups_are_all_over_memory_says_so() -> None:
    """Every set-up over memory, each with its own figures, and more set-ups that one node does not
    place (``hsdp``): the line counted them all (90) and named ``hsdp`` the commonest reason, beside a
    table of 15 set-ups all over memory. It counts the set-ups and says over memory, the least first."""
    from flopsweep.job.plandecide import nothing_line
    from flopsweep.plan_space import Row

    rows = [
        Row(
            cluster="H100:1x1:ib400",
            setup=None,
            status="over memory",
            reason=f"estimated {gib:.3g} GiB per rank, over 90% of 79.6 GiB (H100; space.min_headroom)",
            est_peak_gib_per_rank=gib,
        )
        for gib in (1400.0, 1050.0, 1200.0)
    ]
    away = ["space.layouts: hsdp needs several nodes (nnodes=1; on one node it is dp). Fix: list dp"] * 5
    assert nothing_line(rows, away) == (
        "plan: no set-up fits and is predicted: all 3 dropped; the commonest reason (3 of 3): over memory "
        "(the least: estimated 1.05e+03 GiB per rank, over 90% of 79.6 GiB (H100; space.min_headroom)). "
        "Fix: list set-ups that need less memory per rank (smaller space.micro_batches, full in "
        "space.checkpointing, fsdp or zero3 in space.backends, tp, pp or cp in space.layouts), or lower "
        "space.min_headroom; or name GPUs with more memory, or more of them, in plan_clusters"
    )
    unpredicted = Row(cluster="A100-80GB:1x8:ib200", setup=None, status="no prediction")
    unpredicted.reason = "no prediction: no bus bandwidth for all_gather (in a node)"
    assert "(1 of 1): no prediction: no bus bandwidth for all_gather" in nothing_line([unpredicted])  # once
    tuned = [f"over memory: {r.reason}" for r in rows] + ["refused: parallel.tp=2: no. Fix: set tp=1"] * 2
    line = ps.nothing_line(tuned, who="tune", headline="no set-up to measure", fix="widen it")
    assert line.startswith(  # the tuner's pruning, the same judge
        "tune: no set-up to measure: all 5 dropped, 2 refused by the rules; among the 3 they accept, the "
        "commonest reason (3 of 3): over memory (the least: estimated 1.05e+03 GiB"
    ), line


def test_a_layout_that_is_no_set_up_on_the_ranks_says_why_and_what_they_take() -> None:
    from flopsweep.plan_space import nothing_line
    from flopsweep.space import Setup, Space, placed, unplaced

    def setup(layout: str) -> Setup:
        return Setup(backend="fsdp", layout=layout, checkpointing="none", precision="bf16", micro_batch=1)

    assert setup("tp2").placement_problem(1, 2) == "" and setup("dp").placement_problem(1, 1) == ""
    assert setup("tp3").placement_problem(1, 2) == (
        "space.layouts: tp3 needs its degree 3 to divide the 2 ranks (nnodes=1 x 2 per node). "
        "Fix: list a layout these ranks take (dp, tp2), or run on a multiple of 3 ranks"
    )
    assert (
        setup("pp4").placement_problem(1, 6).endswith("(dp, pp2, pp3, pp6), or run on a multiple of 4 ranks")
    )
    assert (
        setup("hsdp").placement_problem(1, 8).startswith("space.layouts: hsdp needs several nodes (nnodes=1;")
    )
    assert setup("hsdp").placement_problem(2, 8) == ""
    space = Space(
        backends=("ddp", "fsdp"), layouts=("dp", "tp3"), checkpointing=("none",), micro_batches=(1, 2)
    )
    assert len(placed(space, 1, 2)) == 4
    why = unplaced(space, 1, 2)
    assert len(why) == 4 and set(why) == {setup("tp3").placement_problem(1, 2)}
    line = nothing_line(why + ["refused: x"], who="tune", headline="no set-up to measure", fix="widen it")
    assert line.startswith(
        "tune: no set-up to measure: all 5 dropped; the commonest reason (4 of 5): space.layouts: tp3"
    )
    assert line.count("Fix:") == 1 and line.endswith("or run on a multiple of 3 ranks")
    assert nothing_line(["refused: x"], who="tune", headline="h", fix="widen it").endswith(
        "refused: x. Fix: widen it"
    )


def test_a_value_listed_twice_is_one_set_up_and_each_column_is_once(hydra_compose) -> None:
    """``space.layouts=[dp,dp] space.micro_batches=[1,1]`` gave 4 equal rows (and the tuner 4 equal
    jobs); ``plan.csv`` had ``layout`` twice in its header."""
    from flopsweep.plan_assess import COLUMNS

    cfg = hydra_compose(["space.layouts=[dp,dp]", "space.micro_batches=[1,1]", "space.backends=[fsdp,fsdp]"])
    space = sp.Space.from_config(cfg.space)
    assert (space.layouts, space.micro_batches, space.backends) == (("dp",), (1,), ("fsdp",))
    assert len(COLUMNS) == len(set(COLUMNS)) and "layout" in COLUMNS


def test_a_rules_fix_of_a_key_the_space_sets_points_at_its_list() -> None:
    """``hydra/sweeper=tune 'space.layouts=[ep2]'`` (a dense model) ended "Fix: set parallel.ep=1",
    which the tuner refuses beside space.*; the line now names the list that sets it."""
    ep = "refused: parallel.ep=2: needs a mixture-of-experts model. Fix: set parallel.ep=1, or pick an MoE"
    line = ps.nothing_line([ep], who="flopsweep: tune", headline="no set-up to measure", fix="unused")
    assert line.endswith("(with space.*, parallel.ep comes from space.layouts: change that list instead)")
    pp = "refused: batch.micro_batch_size=1: odd. Fix: set batch.micro_batch_size=2"
    assert "comes from space.micro_batches" in ps.nothing_line([pp], who="w", headline="h", fix="unused")
    other = ps.nothing_line(
        ["refused: model.n_layer=3: no. Fix: set model.n_layer=4"], who="w", headline="h", fix="f"
    )
    assert "space." not in other and other.endswith("Fix: set model.n_layer=4")


def test_a_cluster_rows_memory_fix_stays_within_the_clusters_gpus(hydra_compose) -> None:
    """Session 26: an ``over memory`` row of ``A100-40GB:1x4`` named ``nproc_per_node=8``, more GPUs than the
    cluster has. Its fix now stays within its 4 GPUs (the same set-up off a cluster still names 8)."""
    setup = sp.Setup(backend="fsdp", layout="dp", checkpointing="none", precision="bf16", micro_batch=4)
    row = ps.evaluate(hydra_compose(LLAMA8B), setup, parse_cluster("A100-40GB:1x4"))
    assert row.status == "over memory" and row.world_size == 4
    assert row.memory_fix and not re.search(r"nproc_per_node=(?:[5-9]|\d\d)|nnodes=", row.memory_fix), (
        row.memory_fix
    )
    assert row.memory_fix.startswith("set ") or "within the cluster's 4 GPUs (1x4)" in row.memory_fix

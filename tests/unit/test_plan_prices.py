"""A price per cluster (``plan_clusters=[H100:8x8:ib400@2.49,H200:64@3.5]``): parsed from the name by
Hydra's grammar and :func:`flopsweep.clusters.parse_cluster`, each bad price one line (before Hydra and in
the job), each cluster's rows priced at its own (dollars, ranking, the ``usd_per_gpu_hour`` column, the
lines under the table), ``objective=usd_per_million_tokens`` needing no ``cost.usd_per_gpu_hour`` where every
cluster names its price."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from flopsweep import objective
from flopsweep.clusters import parse_cluster
from flopsweep.config import ConfigError

SMALL_SPACE = [
    "model=llama3.1-8b",
    "budget.tokens=15e12",
    "space.backends=[fsdp]",
    "space.layouts=[dp]",
    "space.checkpointing=[none,full]",
    "space.micro_batches=[2,4]",
]


def _decide(hydra_compose, tmp_path: Path, *extra: str) -> dict:
    """A ``plan=true plan_clusters=[...]`` job on this CPU machine, as run.py runs it."""
    from flopsweep.job import JobInfo
    from flopsweep.job.plandecide import decide_job

    args = [*SMALL_SPACE, "plan=true", *extra]
    return decide_job(hydra_compose(args), JobInfo(job_dir=tmp_path, overrides=args))


def test_hydra_takes_a_price_in_a_list_element_unquoted(hydra_compose) -> None:
    """``@`` needs no quotes in a Hydra list: the composed config holds each entry whole."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    override = "plan_clusters=[H100:8@2.5,H200:8x8:ib400@3.49,here@2.0]"
    parsed = OverridesParser.create().parse_override(override)
    assert parsed.value() == ["H100:8@2.5", "H200:8x8:ib400@3.49", "here@2.0"]
    cfg = hydra_compose(["plan=true", "plan_clusters=[H100:8@2.5,H200:8x8:ib400@3.49]"])
    assert list(cfg.plan_clusters) == ["H100:8@2.5", "H200:8x8:ib400@3.49"]


@pytest.mark.parametrize(
    ("name", "label", "price"),
    [
        ("H100:8x8:ib400@2.49", "H100:8x8:ib400", 2.49),
        ("H200:64@3.5", "H200:8x8:ib400", 3.5),
        ("A100-80GB:2x8:25GBps@1.8", "A100-80GB:2x8:25GBps", 1.8),
        ("H100:8@0", "H100:1x8:ib400", 0.0),
        ("H100:8@1e6", "H100:1x8:ib400", 1e6),
        ("H100:8", "H100:1x8:ib400", None),
    ],
)
def test_a_cluster_name_ends_with_its_price(name: str, label: str, price: float | None) -> None:
    """``@PRICE`` is the cluster's US dollars per GPU-hour; its label (``cluster`` column) leaves it out."""
    c = parse_cluster(name)
    assert (c.label, c.usd_per_gpu_hour) == (label, price)
    assert c.price(9.0) == (
        (9.0, "cost.usd_per_gpu_hour") if price is None else (price, f"@{price:.15g} in plan_clusters")
    )


def test_here_takes_a_price_too() -> None:
    c = parse_cluster("here@2.0", here=("NVIDIA H200", 8))
    assert (c.label, c.usd_per_gpu_hour) == ("H200:1x8:ib400", 2.0)
    with pytest.raises(ConfigError) as err:
        parse_cluster("here@2.0", here=("", 0))
    assert str(err.value).startswith("Invalid config: plan_clusters='here@2.0': this machine has no GPU")


BAD_PRICES = [
    ("H100:8@", "gives no price after its '@'"),
    ("H100:8@-1", "its price -1 is below 0 US dollars per GPU-hour"),
    ("H100:8@abc", "its price 'abc' is not a number of US dollars per GPU-hour"),
    ("H100:8@$2.5", "its price '$2.5' is not a number"),
    ("H100:8@inf", "its price inf is not a finite number"),
    ("H100:8@nan", "its price nan is not a finite number"),
    ("H100:8@2@3", "gives 2 prices ('@' more than once)"),
    (
        "H100:8@2e6",
        "its price 2e6 is above 1,000,000 US dollars per GPU-hour (cost.usd_per_gpu_hour's bound)",
    ),
    ("H100:8@2.5:ib400", "its price '2.5:ib400' is not last"),
    ("B300:8@2.5", "'B300' is no device of the peak table"),
]


@pytest.mark.parametrize(("entry", "said"), BAD_PRICES)
def test_a_bad_price_is_one_line_naming_the_entry_and_the_fix(entry: str, said: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_cluster(entry)
    line = str(err.value)
    assert line.startswith(f"Invalid config: plan_clusters={entry!r}: {said}"), line
    assert "\n" not in line and ". Fix: " in line


def test_the_fixes_of_bad_prices_parse() -> None:
    """Each fix's example names a cluster that parses, at a price (a pasteable fix)."""
    import re

    for entry, _ in BAD_PRICES[:-1]:
        with pytest.raises(ConfigError) as err:
            parse_cluster(entry)
        example = re.search(r"plan_clusters=\[([^\]]+)\]", str(err.value).split(". Fix: ")[1]).group(1)
        assert parse_cluster(example).usd_per_gpu_hour is not None, (entry, example)


@pytest.mark.parametrize(("entry", "said"), BAD_PRICES[:4])
def test_a_bad_price_is_refused_before_hydra_and_in_the_job_with_one_line(
    hydra_compose, tmp_path: Path, entry: str, said: str
) -> None:
    """run.py's check of the command line (:func:`flopsweep.plan_command_line.command_line_problem`) and
    the job (:func:`flopsweep.job.plandecide.decide_job`) give the same line."""
    from flopsweep.plan_command_line import command_line_problem

    before = command_line_problem(["plan=true", f"plan_clusters=[H200:8,{entry}]"])
    job = _decide(hydra_compose, tmp_path, f"plan_clusters=[H200:8,{entry}]")
    assert job["status"] == "invalid" and job["error"]["message"] == before
    assert before.startswith(f"Invalid config: plan_clusters={entry!r}: {said}")


def test_two_clusters_are_each_priced_at_their_own(hydra_compose, tmp_path: Path) -> None:
    """Every ranked row's dollars are its cluster's price x its GPU-hours (and per million tokens, price
    x GPUs / 3600 / tokens per second x 1e6), the ranking follows those dollars across the clusters, and
    ``cost.usd_per_gpu_hour`` is not needed for ``objective=usd_per_million_tokens``."""
    out = _decide(
        hydra_compose,
        tmp_path,
        "objective=usd_per_million_tokens",
        "plan_clusters=[H100:1x8@2.49,H200:1x8@3.5]",
    )
    assert out["status"] == "plan", out
    rows = list(csv.DictReader(open(out["plan_file"])))
    ranked = [r for r in rows if r["rank"]]
    prices = {"H100:1x8:ib400": 2.49, "H200:1x8:ib400": 3.5}
    assert {r["cluster"] for r in ranked} == set(prices) and len(ranked) == 8
    for r in ranked:
        price, hours, tps = (
            prices[r["cluster"]],
            float(r["budget_gpu_hours"]),
            float(r["predicted_tokens_per_s"]),
        )
        assert float(r["usd_per_gpu_hour"]) == price
        assert float(r["budget_usd"]) == pytest.approx(price * hours)
        assert float(r["predicted_usd_per_million_tokens"]) == pytest.approx(price * 8 / 3600 / tps * 1e6)
    usd = [float(r["predicted_usd_per_million_tokens"]) for r in ranked]
    assert usd == sorted(usd)
    assert {r["usd_per_gpu_hour"] for r in rows} == {"2.49", "3.5"}  # dropped rows say their price too
    text = out["plan_text"]
    assert "price: 2.49 USD per GPU-hour for H100:1x8:ib400 (@2.49 in plan_clusters)" in text.splitlines()
    assert "price: 3.5 USD per GPU-hour for H200:1x8:ib400 (@3.5 in plan_clusters)" in text.splitlines()
    assert "cost.usd_per_gpu_hour=null" not in text  # every cluster has its price
    best = {line.split(": ")[0].strip(): line for line in text.splitlines() if line.startswith("  H")}
    assert "cost.usd_per_gpu_hour=2.49 " in best["H100:1x8:ib400"]  # the run's own dollars at its price
    assert "cost.usd_per_gpu_hour=3.5 " in best["H200:1x8:ib400"]


def test_a_cluster_without_a_price_takes_cost_usd_per_gpu_hour(hydra_compose, tmp_path: Path) -> None:
    """Beside a priced cluster, one without ``@`` is priced at ``cost.usd_per_gpu_hour``, and the lines
    under the table and ``plan_format=json``'s ``prices`` say which price came from where."""
    extra = ("cost.usd_per_gpu_hour=2.0", "plan_clusters=[H100:1x8@2.49,H200:1x8]")
    out = _decide(hydra_compose, tmp_path, *extra, "objective=usd_per_million_tokens")
    lines = out["plan_text"].splitlines()
    assert "price: 2.49 USD per GPU-hour for H100:1x8:ib400 (@2.49 in plan_clusters)" in lines
    assert "price: 2 USD per GPU-hour for H200:1x8:ib400 (cost.usd_per_gpu_hour)" in lines
    best = [line for line in lines if line.startswith("  H200:1x8:ib400: flopsweep ")]
    assert (
        best and "cost.usd_per_gpu_hour=2.0 " in best[0] and "2.49" not in best[0]
    )  # the command line's own
    as_json = json.loads(_decide(hydra_compose, tmp_path, *extra, "plan_format=json")["plan_text"])
    assert as_json["prices"] == {
        "H100:1x8:ib400": {"usd_per_gpu_hour": 2.49, "source": "@2.49 in plan_clusters"},
        "H200:1x8:ib400": {"usd_per_gpu_hour": 2.0, "source": "cost.usd_per_gpu_hour"},
    }
    for row in as_json["rows"]:
        if row["status"] == "ok":
            price = {"H100:1x8:ib400": 2.49, "H200:1x8:ib400": 2.0}[row["cluster"]]
            assert row["usd_per_gpu_hour"] == price
            assert row["budget_usd"] == pytest.approx(price * row["budget_gpu_hours"])
    as_csv = _decide(hydra_compose, tmp_path, *extra, "plan_format=csv")["plan_text"]
    header = next(csv.reader(io.StringIO(as_csv)))
    from flopsweep.plan_assess import COLUMNS

    assert header == list(COLUMNS) and "usd_per_gpu_hour" in header and "budget_usd" in header


def test_without_any_price_the_dollars_stay_blank(hydra_compose, tmp_path: Path) -> None:
    out = _decide(hydra_compose, tmp_path, "plan_clusters=[H100:1x8]")
    rows = list(csv.DictReader(open(out["plan_file"])))
    assert {r["usd_per_gpu_hour"] for r in rows} == {""} and {r["budget_usd"] for r in rows} == {""}
    assert not any(line.startswith("price:") for line in out["plan_text"].splitlines())
    assert "  cost.usd_per_gpu_hour=null: no dollars (set e.g. cost.usd_per_gpu_hour=2.5)" in out["plan_text"]


@pytest.mark.parametrize(
    ("clusters", "refused"),
    [
        (["H100:8@2.5", "H200:8x8:ib400@3.49"], None),
        ("[H100:8@2.5,H200:8x8:ib400@3.49]", None),
        ("[H100:8@2.5],[H200:8@3]", None),
        (["H100:8@2.5", "H200:8"], "needs a price for every cluster, and H200:8 names no @PRICE"),
        ("[H100:8@2.5,H200:8,A100-80GB:8]", "and H200:8, A100-80GB:8 name no @PRICE"),
        ([], "needs cost.usd_per_gpu_hour, which is unset"),
        (["H100:8", "H200:8"], "needs cost.usd_per_gpu_hour, which is unset"),
    ],
)
def test_usd_per_million_tokens_needs_a_price_for_every_cluster(clusters, refused: str | None) -> None:
    """Every cluster priced stands for ``cost.usd_per_gpu_hour``; some unpriced: one line naming them, whose
    fix prices each (a list that parses)."""
    problem = objective.inputs_problem("usd_per_million_tokens", {"plan_clusters": clusters})
    if refused is None:
        assert problem is None
        assert (
            objective.inputs_problem("budget_usd", {"plan_clusters": clusters}) is not None
        )  # budget.tokens
        return
    line = str(problem)
    assert line.startswith("Invalid config: objective='usd_per_million_tokens': ") and refused in line, line
    assert "\n" not in line and "cost.usd_per_gpu_hour=2.5" in line
    if clusters:
        import re

        fixed = re.search(r"plan_clusters=\[([^\]]+)\]", line.split(". Fix: ")[1]).group(1).split(",")
        assert all(parse_cluster(name).usd_per_gpu_hour is not None for name in fixed)
        assert objective.inputs_problem("usd_per_million_tokens", {"plan_clusters": fixed}) is None


def test_the_job_and_run_py_refuse_an_unpriced_cluster_in_one_line(hydra_compose, tmp_path: Path) -> None:
    """Before Hydra (``command_line_checks.objective_problem``) and in the job
    (:func:`flopsweep.job.plandecide.checked`: one line, not every set-up's row refused); with every
    cluster priced neither refuses."""
    from run import objective_problem

    args = ["plan=true", "objective=usd_per_million_tokens", "plan_clusters=[H100:1x8@2.5,H200:1x8]"]
    before = objective_problem(args)
    job = _decide(hydra_compose, tmp_path, *args[1:])
    assert job["status"] == "invalid" and job["error"]["message"] == before
    assert "H200:1x8 names no @PRICE" in before
    priced = ["plan=true", "objective=usd_per_million_tokens", "plan_clusters=[H100:1x8@2.5,H200:1x8@3]"]
    assert objective_problem(priced) is None
    assert objective_problem(priced[1:]) is not None  # without plan=true the clusters price nothing


def test_one_cluster_at_two_prices_is_named_twice() -> None:
    from flopsweep.job.plandecide import named_clusters

    with pytest.raises(ConfigError) as err:
        named_clusters(["H100:8@2", "H100:1x8@3"])
    assert str(err.value) == (
        "Invalid config: plan_clusters=['H100:8@2', 'H100:1x8@3']: names H100:1x8:ib400 twice, priced @2 and "
        "@3 (its rows would differ in dollars alone). Fix: name each cluster once, at the price you would "
        "pay."
    )


def test_a_sweeps_rows_keep_their_price() -> None:
    """A sweep's ``plan.csv`` is read back (:func:`flopsweep.job.plansweep.row_of`) with each row's price."""
    from flopsweep.job.plansweep import row_of
    from flopsweep.plan_space import Row

    cells = {
        k: "" if v is None else str(v)
        for k, v in Row(cluster="H200:1x8:ib400", setup=None, usd_per_gpu_hour=3.5).as_dict().items()
    }
    assert row_of(cells).usd_per_gpu_hour == 3.5

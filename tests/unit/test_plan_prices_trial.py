"""The new-user trial of ``@PRICE`` (session 26): each bad price one line, before Hydra and in the job, the
same for ``objective=usd_per_million_tokens`` as for the plan (one parser), its fix run again; a price of 0
ranks by tokens/s; a sweep file's priced clusters; the fixes that name clusters keep their price; the best
set-up's command of a ``+sweep=`` file trains; huge numbers in the analysis tables; ``~`` in a run folder;
``--format=json`` (an interrupted plan sweep and a sweep's price lines:
tests/integration/test_plan_sweep_trial.py). Real plans on this CPU machine."""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path

import pytest

from flopsweep.clusters import parse_cluster
from flopsweep.config import ConfigError
from run import FILE_VALUE_CHECKS, refusal
from unit.test_conf_files import _conf
from unit.test_plan_prices import SMALL_SPACE, _decide

PLAN = ["plan=true", "model=llama3.1-8b"]
USD = "objective=usd_per_million_tokens"


def _fix(line: str) -> str:
    """The ``plan_clusters=[...]`` a refusal's fix names."""
    return re.search(r"plan_clusters=\[[^\]]*\]", line.split(". Fix: ")[1]).group(0)


@pytest.mark.parametrize("objective", [[], [USD]])
@pytest.mark.parametrize(
    ("clusters", "said"),
    [
        ("[H100:8@ 2]", "Invalid config: plan_clusters='H100:8@ 2': its price ' 2' is not a number"),
        ("[H100:8@2,5]", "Invalid config: plan_clusters='H100:8@2,5': its price 2,5 has a decimal comma"),
        ("[H100:8@0x10]", "Invalid config: plan_clusters='H100:8@0x10': its price '0x10' is not a number"),
        ("[H100:8@2_5]", "Invalid config: plan_clusters='H100:8@2_5': its price '2_5' is not a number"),
        ("[H100:8@1e-400]", "Invalid config: plan_clusters='H100:8@1e-400': its price 1e-400 rounds to 0"),
    ],
)
def test_a_bad_price_is_the_same_line_with_or_without_the_objective(
    objective, clusters: str, said: str
) -> None:
    """Was: with ``objective=usd_per_million_tokens`` the check split the names itself (``H100:8@ 2`` was
    ``H100:8@`` and a cluster ``2``, its fix ``plan_clusters=[H100:8@,2@2.5]``). The fix's example price is
    2.5, never one made of what was typed (``@0x10``: ``@010``), and runs."""
    line = refusal([*PLAN, *objective, f"plan_clusters={clusters}"])
    assert line.startswith(said) and "\n" not in line, line
    fix = _fix(line)
    assert fix == "plan_clusters=[H100:8@2.5]", line
    assert refusal([*PLAN, *objective, fix]) is None


def test_a_space_before_the_price_plans_with_the_objective_too() -> None:
    assert refusal([*PLAN, USD, "plan_clusters=[H100:8 @2.5]"]) is None
    assert parse_cluster("H100:8 @2.5").usd_per_gpu_hour == 2.5


def test_a_decimal_comma_is_named_in_the_job(hydra_compose, tmp_path: Path) -> None:
    """Hydra's list is ``['H100:1x8@2', '5']``: the job names the comma, as ``run.py`` does."""
    out = _decide(hydra_compose, tmp_path, USD, "plan_clusters=[H100:1x8@2,5]")
    assert out["status"] == "invalid"
    assert out["error"]["message"] == refusal(
        [*SMALL_SPACE, "plan=true", USD, "plan_clusters=[H100:1x8@2,5]"]
    )
    assert "has a decimal comma" in out["error"]["message"]


@pytest.mark.parametrize("price", ["0", "-0", "0.000"])
def test_a_price_of_0_ranks_the_fastest_set_up_first(hydra_compose, tmp_path: Path, price: str) -> None:
    """Was: every row tied at $0 and the slowest set-up (25% MFU) was the best; a line says they tie."""
    out = _decide(hydra_compose, tmp_path, USD, f"plan_clusters=[H100:1x8@{price}]")
    assert out["status"] == "plan", out
    ranked = [r for r in csv.DictReader(open(out["plan_file"])) if r["rank"]]
    rates = [float(r["predicted_tokens_per_s"]) for r in ranked]
    assert {float(r["predicted_usd_per_million_tokens"]) for r in ranked} == {0.0}
    assert rates == sorted(rates, reverse=True)
    (best,) = [r for r in ranked if r["best"] == "True"]  # the fastest, or one off the memory edge within 5%
    if best is not ranked[0]:
        assert (ranked[0]["memory_edge"], best["memory_edge"]) == ("True", "False")
        assert float(best["predicted_tokens_per_s"]) >= 0.95 * rates[0]
    assert (
        "so every row ties at 0 dollars: objective=usd_per_million_tokens ranks them by tokens/s"
        in (out["plan_text"])
    )


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("H100:8@٢.5", "its price '٢.5' is not a number of US dollars per GPU-hour (digits 0-9 only: '٢'"),
        ("H100:٨@2.5", "its size is written in digits 0-9 only ('٨' is another script's)"),
    ],
)
def test_other_scripts_digits_are_refused(entry: str, said: str) -> None:
    """Python's ``float`` and ``int`` read ``٢.5`` and ``٨``: a price and a size are ASCII digits."""
    with pytest.raises(ConfigError) as err:
        parse_cluster(entry)
    assert said in str(err.value)
    assert parse_cluster(_fix(str(err.value)).removeprefix("plan_clusters=[").rstrip("]")).world_size >= 1


def test_the_quoting_fix_of_a_list_quotes_each_element() -> None:
    """Was: ``'plan_clusters="[H100:8@٢.5]"'``, then refused as one string; each element quoted, the list
    reaches the price's own line. Since session 37 (#385) that line comes at once: the grammar's fix,
    ``'plan_clusters=["H100:8@٢.5"]'``, is never offered where it is refused again."""
    line = refusal([*PLAN, "plan_clusters=[H100:8@٢.5]"])
    again = refusal([*PLAN, 'plan_clusters=["H100:8@٢.5"]'])
    assert line == again and "its price '٢.5' is not a number" in again, line
    assert "quote the value as one string, 'tag=\"[ü]\"'" in refusal(["tag=[ü]"])  # a string key: whole


SWEEP = (
    "# @package _global_\nplan: true\nobjective: usd_per_million_tokens\nhydra:\n  sweeper:\n    params:\n"
)


@pytest.mark.parametrize(
    ("axis", "said"),
    [
        ('      plan_clusters: "[H100:8@2.5],[H200:8@3.5]"\n', None),
        (
            '      plan_clusters: "[H100:8@2.5],[H200:8@1e400]"\n',
            "plan_clusters='H200:8@1e400': its price 1e400",
        ),
        ('      plan_clusters: "[H100:8@2.5],[H200:8]"\n', "H200:8 names no @PRICE"),
    ],
)
def test_a_sweep_files_priced_clusters_are_read_as_the_command_lines(tmp_path, axis: str, said) -> None:
    """Was: ``needs cost.usd_per_gpu_hour, which is unset`` for priced clusters in the file's params, and
    ``@1e400`` there never named."""
    from flopsweep.sweep_file_keys import values_problem

    conf = _conf(tmp_path, {"sweep/mine.yaml": SWEEP + axis})
    (conf / "backend").mkdir()
    line = values_problem(["-m", "+sweep=mine", "model=llama3.1-8b"], FILE_VALUE_CHECKS, str(conf))
    if said is None:
        assert line is None
    else:
        assert line.startswith("Invalid config: conf/sweep/mine.yaml: ") and said in line, line


def test_the_memory_fix_keeps_the_clusters_price(hydra_compose, tmp_path: Path) -> None:
    """Was: ``plan_clusters=[L4:2x8:eth100]``, refused for lack of a price; its GiB beside the table's
    least says why they differ."""
    out = _decide(hydra_compose, tmp_path, USD, "plan_clusters=[L4:1@0.8]", "space.checkpointing=[full]")
    line = out["nothing"]
    fix = _fix(line)
    assert fix.endswith("@0.8]") and "not the least of the space" in line, line
    assert refusal([*PLAN, USD, fix]) is None


def test_the_command_of_a_sweep_files_best_set_up_trains() -> None:
    from flopsweep.job.planrender import override_line
    from flopsweep.plan_space import Row

    row = Row(cluster="H100:1x8:ib400", setup=None, usd_per_gpu_hour=2.5)
    line = override_line(row, ["+sweep=myplan", "model=llama3.1-8b", "plan=true"])
    assert "+sweep=myplan" in line and line.split().count("plan=false") == 1 and "plan=true" not in line
    assert "plan=false" not in override_line(row, ["model=llama3.1-8b", "plan=true"])


def test_huge_and_tiny_numbers_print_in_scientific_notation() -> None:
    from analysis.catalogue import SPECS
    from analysis.display import _cell, spec_of

    thousands = next(s for s in SPECS.values() if s.format == "thousands")
    assert _cell(thousands, 1e308) == "1.000e308" and _cell(spec_of("x"), 1e308) == "1.000e308"
    # a tiny figure compact, no leading zero in its power (docs/reliability-11.md #724)
    assert _cell(thousands, 12345.0) == "12,345" and _cell(spec_of("x"), 3e-7) == "3e-7"
    assert _cell(spec_of("x"), 0.0) == "0"


@pytest.mark.parametrize("key", ["hydra.sweep.dir", "hydra.run.dir"])
def test_a_leading_tilde_in_a_folder_is_refused(key: str) -> None:
    line = refusal(["-m", "model=gpt-tiny", f"{key}=~/x"])
    assert line == (
        f"Invalid config: {key}=~/x: a leading ~ is not expanded (the shell leaves it when quoted, and Hydra "
        f"would make a folder named ~ here). Fix: write the path out, e.g. {key}=$HOME/x"
    )
    assert refusal(["-m", "model=gpt-tiny", f"{key}={os.path.expandvars('$HOME/x')}"]) is None


@pytest.mark.parametrize("flag", [["--format=json"], ["--format", "json"]])
def test_a_format_flag_names_plan_format(flag: list[str]) -> None:
    line = refusal(["plan=true", *flag])
    assert "did you mean plan_format=json?" in line, line
    assert refusal(["plan=true", "plan_format=json"]) is None

"""search.grow=seq_len: its checks, its step, the memory estimate's scaling with the sequence, the
offload policy's memory, and the sequence frontier of the analysis (hand-made records)."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pandas as pd
import pytest
from helpers import make_plan

from analysis import load
from analysis.__main__ import main
from analysis.frontier import frontier_points, frontier_rows, frontier_table, no_frontier, sequence_points
from flopsweep.config import ConfigError
from flopsweep.memory import activation_bytes, activation_host_bytes, estimate, offload_host_bytes, peak_bytes
from flopsweep.seqsearch import estimated_longest_seq_len, seq_len_bounds, seq_len_step, with_seq_len
from flopsweep.sizesearch import GIB
from unit.test_modelsearch import FIXTURES, TINY, variant, write

SEQ = [*TINY, "search.model=largest", "search.grow=seq_len"]


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["search.grow=depth"], "search.grow='depth'"),
        (["search.min_seq_len=0"], "search.min_seq_len=0"),
        (["search.min_seq_len=512", "search.max_seq_len=256"], "search.max_seq_len=256"),
        (["search.max_seq_len=4000000"], "search.max_seq_len=4000000"),
        (
            ["attention=blocksparse", "search.min_seq_len=65", "search.max_seq_len=127"],
            "search.max_seq_len=127",
        ),
        (["model=hf"], "search.grow='seq_len'"),
        (["search.seq_len_multiple=0"], "search.seq_len_multiple=0"),
    ],
)
def test_a_bad_sequence_search_is_refused_in_one_line_naming_the_key(hydra_compose, overrides, key) -> None:
    cfg = hydra_compose([*SEQ, *overrides])
    with pytest.raises(ConfigError) as err:
        make_plan(cfg)
    message = str(err.value)
    assert key in message and "Fix: " in message and "\n" not in message


def test_an_unknown_grow_lists_the_valid_ones(hydra_compose) -> None:
    with pytest.raises(ConfigError, match=r"must be one of n_layer, seq_len\. Fix: pick one of those"):
        make_plan(hydra_compose([*SEQ, "search.grow=n_embd"]))


def test_grow_without_a_search_is_refused(hydra_compose) -> None:
    with pytest.raises(ConfigError, match=r"search.grow='seq_len': says what search.model=largest grows"):
        make_plan(hydra_compose([*TINY, "search.grow=seq_len"]))


def test_the_step_is_what_the_set_up_divides_the_sequence_by(hydra_compose) -> None:
    cfg = hydra_compose([*SEQ, "search.min_seq_len=100", "search.max_seq_len=1000"])
    assert seq_len_step(cfg) == 1 and seq_len_bounds(cfg) == (100, 1000)

    def at(cp: int, tp: int, block: int | None = None):
        attention = dataclasses.replace(cfg.attention)
        if block is not None:
            attention.block_size = block  # a blocksparse config's knob, on the plain schema here
        return dataclasses.replace(
            cfg, parallel=dataclasses.replace(cfg.parallel, cp=cp, tp=tp), attention=attention
        )

    assert seq_len_step(at(cp=2, tp=1)) == 4  # 2 cp chunks
    assert seq_len_step(at(cp=2, tp=4)) == 8  # each rank's s / cp tokens split over tp
    assert seq_len_step(at(cp=1, tp=2)) == 2
    assert seq_len_step(at(cp=4, tp=1, block=64)) == 64
    assert seq_len_bounds(at(cp=1, tp=1, block=64)) == (128, 960)  # first rounded up, last down
    multiple = dataclasses.replace(cfg, search=dataclasses.replace(cfg.search, seq_len_multiple=96))
    assert (
        seq_len_step(multiple) == 96
        and seq_len_step(dataclasses.replace(multiple, parallel=at(2, 1).parallel)) == 96
    )
    odd = dataclasses.replace(cfg, search=dataclasses.replace(cfg.search, seq_len_multiple=100))
    assert seq_len_step(dataclasses.replace(odd, parallel=at(4, 1).parallel)) == 200  # lcm(2 cp = 8, 100)
    # a blocksparse run validates at its step: the first length is whole blocks
    plan = make_plan(hydra_compose([*SEQ, "attention=blocksparse", "search.min_seq_len=65"]))
    assert seq_len_step(plan.cfg) == plan.cfg.attention.block_size
    assert seq_len_bounds(plan.cfg)[0] % plan.cfg.attention.block_size == 0


def test_a_budget_below_the_shortest_sequence_is_refused_naming_it(hydra_compose) -> None:
    with pytest.raises(ConfigError) as err:
        make_plan(hydra_compose([*SEQ, "search.min_seq_len=4096", "search.memory_budget_gib=0.001"]))
    assert "shortest sequence searched, seq_len=4096" in str(err.value)


@pytest.mark.parametrize(("attention", "quadratic"), [("sdpa", False), ("standard", True)])
def test_the_estimate_grows_with_the_sequence_as_the_kernel_keeps_it(
    hydra_compose, attention, quadratic
) -> None:
    """SDPA's fused kernels keep O(s) per sequence, ``standard`` keeps the s x s scores: its
    activations are a s + b s^2, so the second difference quadruples when the length doubles."""
    plan = make_plan(hydra_compose([*TINY, f"attention={attention}"]))
    act = {t: activation_bytes(with_seq_len(plan.cfg, t), plan.layout)[0] for t in (256, 512, 1024, 2048)}
    d1, d2 = act[512] - 2 * act[256], act[1024] - 2 * act[512]
    if quadratic:
        assert d1 > 0 and d2 == pytest.approx(4 * d1, rel=1e-6)
        assert act[2048] > 7 * act[256] * 2  # far beyond linear (8x)
    else:
        assert d1 == d2 == 0 and act[2048] == 8 * act[256]


def test_offload_keeps_one_block_on_the_device_and_the_rest_on_the_host(hydra_compose) -> None:
    none = make_plan(hydra_compose([*TINY, "model.n_layer=6"]))
    off = make_plan(hydra_compose([*TINY, "model.n_layer=6", "activation_checkpointing=offload"]))
    kept = activation_bytes(none.cfg, none.layout)[0]
    assert activation_bytes(off.cfg, off.layout)[0] * 6 == kept  # one block of six
    assert activation_host_bytes(off.cfg, off.layout) == kept and activation_host_bytes(none.cfg) == 0
    assert offload_host_bytes(off.cfg, off.layout) == kept  # the launch's host check counts them
    # on the CPU the host is the device: the budget rule counts what moved there too
    assert peak_bytes(off.cfg, off.layout) == estimate(off.cfg, off.layout).total + kept
    with pytest.raises(ConfigError, match="activation_checkpointing='offload'.*compile=false"):
        make_plan(hydra_compose([*TINY, "activation_checkpointing=offload", "compile=true"]))


def test_the_estimate_guided_longest_is_the_last_length_under_the_budget(hydra_compose) -> None:
    plan = make_plan(
        hydra_compose([*SEQ, "attention=standard", "search.min_seq_len=64", "search.max_seq_len=8192"])
    )
    budget = int(0.05 * GIB)
    longest = estimated_longest_seq_len(plan.cfg, plan.layout, budget)
    assert peak_bytes(with_seq_len(plan.cfg, longest), plan.layout) <= budget
    assert peak_bytes(with_seq_len(plan.cfg, longest + 1), plan.layout) > budget
    assert estimated_longest_seq_len(plan.cfg, plan.layout, 1) is None


def seq_variant(base: dict, *, ckpt: str, seq_len: int, tokens: float, search: bool = False, **kw) -> dict:
    """The llama fixture (8B) as a run at ``seq_len``; a search of the sequence when ``search``."""
    base = {**base, "config": {**base["config"], "model": {**base["config"]["model"], "seq_len": seq_len}}}
    r = variant(base, ckpt=ckpt, n_params=8 * 10**9, tokens=tokens, search=search, **kw)
    if search:
        r["config"]["search"]["grow"] = "seq_len"
        r["run"]["model_search"] = {
            "grow": "seq_len",
            "result": seq_len,
            "probes": [
                {"seq_len": seq_len // 2, "n_params": 8 * 10**9, "status": "ok", "tokens_per_s": tokens},
                {"seq_len": seq_len, "n_params": 8 * 10**9, "status": "ok", "tokens_per_s": tokens},
                {"seq_len": seq_len + 1024, "n_params": 8 * 10**9, "status": "oom", "tokens_per_s": None},
            ],
        }
    return r


@pytest.fixture
def frontier_dir(tmp_path: Path) -> Path:
    """Two sequence set-ups (full: searched to 65,536 tokens, plus a plain 8,192 run; offload:
    searched to 131,072) beside one depth search (none: 3B)."""
    base = json.loads((FIXTURES / "llama" / "metrics.json").read_text())
    records = [
        seq_variant(base, ckpt="full", seq_len=65536, tokens=3000.0, search=True),
        seq_variant(base, ckpt="full", seq_len=8192, tokens=7000.0),
        seq_variant(base, ckpt="offload", seq_len=131072, tokens=1500.0, search=True),
        variant(base, ckpt="none", n_params=3 * 10**9, tokens=5000.0, search=True),
    ]
    return write(tmp_path, records)


def test_the_sequence_frontier_is_the_longest_ok_length_beside_the_depth_frontier(frontier_dir: Path) -> None:
    df = load(frontier_dir)
    assert df["search_grow"].tolist().count("seq_len") == 2 and no_frontier(df) is None
    # the sequence searches stay out of the depth frontier, and the depth search out of the sequence's
    assert frontier_points(df)["activation_checkpointing"].tolist() == ["none"]
    points = sequence_points(df)
    assert sorted(points["seq_len"].tolist()) == [8192, 65536, 131072]
    table = frontier_table(df)
    assert table.columns[0] == "grew" and table["grew"].tolist() == ["n_layer", "seq_len", "seq_len"]
    seq = table[table["grew"].eq("seq_len")]
    assert seq["activation_checkpointing"].tolist() == ["offload", "full"]  # the longest first
    assert seq["seq_len"].tolist() == [131072, 65536] and seq["tokens_per_s"].tolist() == [1500.0, 3000.0]
    assert seq["sizes"].tolist() == [1, 2] and seq["mfu"].notna().all()
    assert seq["larger_failed"].tolist() == ["seq_len=132096: oom", "seq_len=66560: oom"]
    depth = table[table["grew"].eq("n_layer")].iloc[0]
    assert depth["n_params"] == 3 * 10**9 and depth["seq_len"] == 2048
    assert len(frontier_rows(df)) == 3


def test_the_cli_frontier_shows_the_sequence_rows_in_csv_and_json(frontier_dir: Path, capsys) -> None:
    assert main([str(frontier_dir), "--frontier", "--format", "csv"]) == 0
    rows = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert rows["grew"].tolist() == ["n_layer", "seq_len", "seq_len"]
    assert rows["seq_len"].tolist() == [2048, 131072, 65536]
    assert main([str(frontier_dir), "--frontier", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(r["grew"], r["seq_len"], r["tokens_per_s"]) for r in out][1:] == [
        ("seq_len", 131072, 1500.0),
        ("seq_len", 65536, 3000.0),
    ]
    assert main([str(frontier_dir), "--frontier"]) == 0
    captured = capsys.readouterr()
    assert "131072" in captured.out.replace(",", "") and "offload" in captured.out
    assert "3 set-ups shown (the largest model or longest sequence of each)" in captured.err


def test_only_a_sequence_search_has_no_depth_rows(tmp_path: Path) -> None:
    base = json.loads((FIXTURES / "llama" / "metrics.json").read_text())
    df = load(write(tmp_path, [seq_variant(base, ckpt="full", seq_len=16384, tokens=4000.0, search=True)]))
    assert frontier_points(df).empty
    table = frontier_table(df)
    assert table["grew"].tolist() == ["seq_len"] and table["seq_len"].tolist() == [16384]


def test_offloaded_activations_over_the_host_are_refused_naming_the_policy(hydra_compose) -> None:
    """A length whose saved activations alone overfill the host is refused before launch (a search
    records it ``refused``), naming activation_checkpointing, not a backend offload key."""
    from flopsweep.plan import Environment

    cfg = hydra_compose([*TINY, "activation_checkpointing=offload", "model.seq_len=65536"])
    with pytest.raises(ConfigError) as err:
        make_plan(cfg, Environment(cpu_count=2, host_memory_bytes=2**28))
    message = str(err.value)
    assert message.startswith("Invalid config: activation_checkpointing='offload': puts at least ")
    assert "saved activations" in message and "\n" not in message


def test_a_resumed_sequence_search_takes_its_probes_over_by_length(hydra_compose) -> None:
    """resume=true: a sequence search's probes are reused by seq_len when what grew, the micro batch
    and the blocks match; a depth search's are not; the job key leaves the length found out."""
    from flopsweep.identity import comparable_config
    from flopsweep.reuse import Resumed, reusable_probes
    from flopsweep.seqsearch import SEQ_LEN
    from unit.test_search_resume import CPU, old_record

    cfg = make_plan(hydra_compose(SEQ)).cfg
    same = SEQ_LEN.same(cfg)
    assert same == {"grow": "seq_len", "micro_batch_size": 1, "n_layer": 2}
    probes = [
        {"seq_len": 1024, "status": "ok", "estimated_peak_bytes": 10},
        {"seq_len": 4096, "status": "over_budget", "estimated_peak_bytes": 40},
        {"seq_len": 2048, "status": "error"},
    ]
    seq = Resumed(record=old_record(probes, grow="seq_len", n_layer=2), name="metrics.error-abc123.json")
    taken = reusable_probes(seq, "model_search", "seq_len", here=CPU, same=same, what="search.grow=seq_len")
    assert sorted(taken) == [1024, 4096]
    depth = Resumed(record=old_record([{"n_layer": 1, "status": "ok"}]), name="metrics.error-abc123.json")
    assert reusable_probes(depth, "model_search", "seq_len", here=CPU, same=same, what="s") == {}
    config = json.loads(json.dumps(dataclasses.asdict(cfg)))
    longer = {**config, "model": {**config["model"], "seq_len": 65536}}
    assert comparable_config(longer) == comparable_config(config)  # the length is found again
    depth_config = {**config, "search": {**config["search"], "grow": "n_layer"}}
    assert comparable_config({**depth_config, "model": longer["model"]}) != comparable_config(depth_config)

"""benchmarks/peer_table.py on synthetic torchtitan logs, TensorBoard files and flopsweep records.

No torch, no GPU: the module under test uses the standard library only.
"""

from __future__ import annotations

import importlib.util
import json
import struct
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "peer_table.py"
_spec = importlib.util.spec_from_file_location("peer_table", _PATH)
pt = importlib.util.module_from_spec(_spec)
sys.modules["peer_table"] = pt  # dataclasses look their module up there
_spec.loader.exec_module(pt)
LOG = "[titan] 2026-11-30 15:08:30,076 - root - INFO - "


# ---- a minimal TensorBoard event writer (TFRecord framing, CRCs left zero: the reader skips them) --
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _len_field(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _event(step: int, scalars: dict[str, float]) -> bytes:
    values = b"".join(
        _len_field(1, _len_field(1, tag.encode()) + _varint(2 << 3 | 5) + struct.pack("<f", v))
        for tag, v in scalars.items()
    )
    return (
        _varint(1 << 3 | 1)
        + struct.pack("<d", 1.7e9 + step)
        + _varint(2 << 3)
        + _varint(step)
        + _len_field(5, values)
    )


def write_events(path: Path, steps: dict[int, dict[str, float]], truncate: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = _len_field(3, b"brain.Event:2")  # the file_version event torch writes first
    blob = struct.pack("<Q", len(data)) + b"\0" * 4 + data + b"\0" * 4
    for step, scalars in steps.items():
        ev = _event(step, scalars)
        blob += struct.pack("<Q", len(ev)) + b"\0" * 4 + ev + b"\0" * 4
    path.write_bytes(blob[:-7] if truncate else blob)


def _step_line(step: int, tps: int) -> str:
    return (
        f"{LOG}step: {step:2}  loss:  7.12345  grad_norm:  1.2345  memory: 61.31GiB(43.86%)  "
        f"tps: {tps:,}  tflops: {tps * 8.2202e9 / 1e12:,.2f}  mfu: {tps * 8.2202e9 / 9.89e12:.2f}%"
    )


def _tt_run(base: Path, name: str, tps: list[int], bs: int) -> dict[int, float]:
    head = [
        f"{LOG}Model llama3 1B size: 1,498,482,688 total parameters",
        f"{LOG}Peak FLOPS used for computing MFU: 9.890e+14",
        f"{LOG}Trainer is initialized with local batch size {bs}, global batch size {bs}, "
        "gradient accumulation steps 1, sequence length 2048, total steps 8 (warmup 2)",
    ]
    (base / "logs").mkdir(parents=True, exist_ok=True)
    lines = head + [_step_line(i + 1, v) for i, v in enumerate(tps)]
    (base / "logs" / f"{name}.log").write_text("\n".join(lines) + "\n")
    return {i + 1: float(v) + 0.3 for i, v in enumerate(tps)}


def _fs_record(path: Path, *, model: dict, mbs: int, ac: bool, compile_: bool, status: str, tps: float = 0.0):
    path.parent.mkdir(parents=True, exist_ok=True)
    metrics = None
    if status == "ok":
        metrics = {
            "tokens_per_s_per_device": tps,
            "mfu": 0.5,
            "model_flops_per_iteration": 8.2e9 * mbs * 2048,
            "iteration_time_s": {"mean": mbs * 2048 / tps},
            "peak_cuda_allocated_bytes": 40 * 2**30,
        }
    rec = {
        "status": status,
        "error": {"message": "timeout: no result within timeout_s=90"} if status == "error" else None,
        "run": {"started_at": "2026-11-30T12:00:00+00:00"},
        "config": {
            "model": model,
            "batch": {"micro_batch_size": mbs, "grad_accum": 1},
            "activation_checkpointing": {"name": "full" if ac else "none"},  # the policy's record key
            "compile": compile_,
        },
        "metrics": metrics,
    }
    path.write_text(json.dumps(rec))


LLAMA_1B = {
    "name": "llama3.2-1b",
    "n_layer": 16,
    "n_embd": 2048,
    "n_head": 32,
    "n_kv_head": 8,
    "seq_len": 2048,
}


def test_torchtitan_counts_match_the_kit_notes():
    assert pt.torchtitan_nparams(pt.SHAPES["1B"]) == (1_498_482_688, 262_668_288)
    assert pt.torchtitan_nparams(pt.SHAPES["8B"]) == (8_030_261_248, 525_336_576)
    assert pt.torchtitan_flops_per_token(pt.SHAPES["1B"], 2048) == pytest.approx(8.2202e9, rel=1e-4)
    assert pt.torchtitan_flops_per_token(pt.SHAPES["8B"], 2048) == pytest.approx(4.8251e10, rel=1e-4)
    # NOTES.md's H200 table: 51,540 tokens/s -> 42.8% (1B), 7,070 -> 34.5% (8B), against 989e12
    assert pt.torchtitan_mfu(pt.SHAPES["1B"], 2048, 51_540) == pytest.approx(42.84, abs=0.01)
    assert pt.torchtitan_mfu(pt.SHAPES["8B"], 2048, 7_070) == pytest.approx(34.49, abs=0.01)
    assert pt.torchtitan_mfu(pt.SHAPES["1B"], 2048, 51_540, pt.FS_PEAK_FLOPS_H200) < 42.84


def test_event_file_round_trip_and_truncated_tail(tmp_path):
    f = tmp_path / "events.out.tfevents.1.vm.1.0"
    write_events(f, {1: {"a": 1.5, "b": 2.0}, 2: {"a": 3.25}}, truncate=True)
    assert pt.read_tb_scalars(f) == {"a": {1: 1.5}, "b": {1: 2.0}}
    write_events(f, {1: {"a": 1.5}, 2: {"a": 3.25}})
    assert pt.read_tb_scalars(f) == {"a": {1: 1.5, 2: 3.25}}


def test_fs_shape_reads_aliases_and_tie():
    label, shape, tied = pt.fs_shape(
        {**LLAMA_1B, "ffn_hidden": 8192, "vocab_size": 128256, "tie_embeddings": False}
    )
    assert (label, shape, tied) == ("1B", pt.SHAPES["1B"], False)
    assert pt.fs_shape({"name": "llama3.2-1b", "n_layer": 16, "n_embd": 2048})[2] is True  # tied by default
    label, shape, _ = pt.fs_shape({"name": "llama3.1-8b", "n_layers": 32, "dim": 4096, "num_kv_heads": 8})
    assert (label, shape) == ("8B", pt.SHAPES["8B"])
    assert pt.fs_shape({"name": "gpt-1.3b", "n_layer": 24, "n_embd": 2048, "n_head": 16})[:2] == (
        "gpt-1.3b",
        None,
    )


def test_table_matches_runs_records_and_event_files(tmp_path, capsys):
    tt = tmp_path / "torchtitan" / "1b"
    # steps 1-2 are dropped (warm-up 2)
    e_noac = _tt_run(tt, "1b_eager_noac", [1000, 40_000, 50_000, 50_002, 50_004, 50_006], 8)
    e_comp = _tt_run(tt, "1b_compile_noac", [900, 30_000, 60_000, 60_010, 60_020, 60_030], 8)
    _tt_run(tt, "1b_eager_fullac", [100, 200], 8)  # cut off by its time-out after 2 steps
    (tt / "runs.tsv").write_text(
        "1b_eager_noac\tc\t40\t0\t--activation_checkpoint.mode none --training.local_batch_size 8\n"
        "1b_compile_noac\tc\t90\t0\t--activation_checkpoint.mode none --compile.enable\n"
        "1b_eager_fullac\tc\t180\t124\t--activation_checkpoint.mode full\n"
        "1b_compile_fullac\tc\t0\tskipped\t--activation_checkpoint.mode full\n"
        "smoke_1b_eager_noac\tc\t30\t0\t\n"
    )
    (tt / "tt_summary.json").write_text(json.dumps({"warmup_steps_dropped": 2, "runs": {}}))

    def scalars(tps, dl):
        return {
            s: {"throughput(tps)": v, "time_metrics/data_loading(s)": dl, "time_metrics/end_to_end(s)": 0.3}
            for s, v in tps.items()
        }

    # both runs' files in one minute folder, named so that sorting would pair them the wrong way
    write_events(tt / "tb" / "20261130-1508" / "events.out.tfevents.2.vm.1.0", scalars(e_noac, 0.003))
    write_events(tt / "tb" / "20261130-1508" / "events.out.tfevents.1.vm.2.0", scalars(e_comp, 0.0003))

    fs = tmp_path / "flopsweep" / "1b"
    untied = {**LLAMA_1B, "tie_embeddings": False}
    _fs_record(
        fs / "a" / "0" / "metrics.json",
        model=untied,
        mbs=8,
        ac=False,
        compile_=False,
        status="ok",
        tps=55_000,
    )
    _fs_record(fs / "b" / "0" / "metrics.json", model=untied, mbs=8, ac=False, compile_=True, status="oom")
    _fs_record(fs / "c" / "0" / "metrics.json", model=untied, mbs=8, ac=True, compile_=False, status="error")
    _fs_record(
        fs / "d" / "0" / "metrics.json", model=LLAMA_1B, mbs=8, ac=False, compile_=False, status="ok", tps=1e4
    )

    rows = {r["setup"]: r for r in pt.build_rows(tmp_path)}
    assert list(rows) == [
        "1B, bs 8, seq 2048, eager, no AC",
        "1B, bs 8, seq 2048, compiled, no AC",
        "1B, bs 8, seq 2048, eager, full AC",
        "1B, bs 8, seq 2048, compiled, full AC",
        "1B tied, bs 8, seq 2048, eager, no AC",
    ]
    r = rows["1B, bs 8, seq 2048, eager, no AC"]
    assert r["tt_tps"] == pytest.approx(50_003)
    assert r["tt_mfu"] == pytest.approx(100 * 8.2202e9 * 50_003 / 989e12, abs=0.01)
    assert r["tt_data_loading_pct"] == pytest.approx(1.0)
    assert r["fs_tps"] == 55_000 and r["fs_mfu"] == pytest.approx(50.0)
    assert r["ratio_fs_tt_tps"] == pytest.approx(55_000 / 50_003)
    assert r["fs_mfu_tt_convention"] == pytest.approx(100 * 8.2202e9 * 55_000 / 989e12, rel=1e-4)
    assert r["fs_flops_per_token"] == pytest.approx(8.2e9)
    c = rows["1B, bs 8, seq 2048, compiled, no AC"]
    assert c["tt_data_loading_pct"] == pytest.approx(0.1)
    assert (c["tt_status"], c["fs_status"], c["ratio_fs_tt_tps"]) == ("ok", "oom", None)
    f = rows["1B, bs 8, seq 2048, eager, full AC"]
    assert (f["tt_status"], f["fs_status"]) == ("timeout", "timeout")
    assert rows["1B, bs 8, seq 2048, compiled, full AC"]["tt_status"] == "skipped"
    tied = rows["1B tied, bs 8, seq 2048, eager, no AC"]
    assert tied["tt_status"] is None and tied["fs_tps"] == 1e4

    assert pt.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| 1B, bs 8, seq 2048, eager, no AC | 50,003 |" in out
    assert "| 1.100 | 1.00% |" in out
    assert "| 1B, bs 8, seq 2048, compiled, no AC | 60,015 |" in out and "| oom | oom | oom |" in out
    assert "1B at seq 2048: 8.2202e+09 (flopsweep's: 8.2000e+09)" in out
    assert pt.main([str(tmp_path), "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 5
    assert pt.main([str(tmp_path / "nothing")]) == 2

"""Side-by-side table of torchtitan 0.2.2 and flopsweep on one GPU (``benchmarks/peer_torchtitan.sh``).

Usage (standard library only, any Python >= 3.10)::

    python3 benchmarks/peer_table.py [DIR] [--format markdown|json]

``DIR`` (default ``benchmarks/results/h200/peer-torchtitan``) holds what the device calls
brought back, each tarball unpacked into it::

    DIR/torchtitan/<group>/runs.tsv            run_tt.sh: name, config, wall s, exit code, args
    DIR/torchtitan/<group>/tt_summary.json     run_tt.sh's summary (only its warm-up count is read)
    DIR/torchtitan/<group>/logs/<run>.log      torchtitan's own log of each run
    DIR/torchtitan/<group>/tb/**/events.out.tfevents.*   torchtitan's TensorBoard scalars
    DIR/flopsweep/<group>/<row>/**/metrics.json          flopsweep records

One row per matched set-up: model shape (and tied or not), micro batch, compiled or eager,
activation checkpointing off or full. torchtitan's runs are named by ``run_tt.sh``
(``1b_eager_noac``, ``8b_compile_fullac_bs2``); flopsweep's records are keyed by their config,
not by their folder. A set-up that only one side ran gets a row with the other side empty.

Columns and conventions:

- torchtitan tokens/s per GPU: mean over the steps after ``TT_WARMUP`` (5) of the ``tps`` of
  torchtitan's step lines: wall clock between two log calls (data loading, forward, backward,
  grad clipping, optimizer, the ``.item()`` syncs of the logging).
- torchtitan MFU: its own figure (mean of the step lines): :func:`torchtitan_flops_per_token`
  times tokens/s over torchtitan's peak (989e12 for an H200, "Peak FLOPS used" in its log).
- flopsweep tokens/s per GPU and MFU: ``metrics.tokens_per_s_per_device`` and ``metrics.mfu``
  (CUDA-event time of the measured steps, synthetic tokens made on the GPU: no data loading;
  model FLOPs without recompute over flopsweep's peak, 989.4e12 for an H200).
- flopsweep MFU in torchtitan's convention: :func:`torchtitan_mfu` of flopsweep's tokens/s, with
  torchtitan's FLOPs per token and torchtitan's peak, so that it compares with torchtitan's MFU
  column exactly as the tokens/s do.
- torchtitan data-loading share: torchtitan times ``next(data_iterator)`` (host, before the batch
  goes to the GPU) and reports it only to TensorBoard/W&B, never on the console step line:
  ``time_metrics/data_loading(s)`` and ``time_metrics/data_loading(%)``
  (``torchtitan/components/metrics.py``, ``MetricsProcessor.log``). ``peer_torchtitan.sh``
  turns TensorBoard on (``--metrics.enable_tensorboard``); the share here is
  sum(``data_loading(s)``) / sum(``end_to_end(s)``) over the kept steps. The event files of
  several runs may share a folder (torchtitan names it by the minute), so each file is matched
  to its run by comparing its ``throughput(tps)`` scalars with the run's logged ``tps``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import struct
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

TT_PEAK_FLOPS_H200 = 989e12
"""torchtitan 0.2.2's dense bf16 peak for an H200 (``torchtitan/tools/utils.py:get_peak_flops``)."""
FS_PEAK_FLOPS_H200 = 989.4e12
"""flopsweep's dense bf16 peak for an H200 (``flopsweep.flops``)."""
DEFAULT_TT_WARMUP = 5
DEFAULT_DIR = Path(__file__).resolve().parent / "results" / "h200" / "peer-torchtitan"


@dataclass(frozen=True)
class Shape:
    """A Llama-3 shape, in torchtitan's terms."""

    n_layer: int
    dim: int
    n_head: int
    n_kv_head: int
    ffn_hidden: int
    vocab_size: int


SHAPES = {
    "1B": Shape(n_layer=16, dim=2048, n_head=32, n_kv_head=8, ffn_hidden=8192, vocab_size=128256),
    "8B": Shape(n_layer=32, dim=4096, n_head=32, n_kv_head=8, ffn_hidden=14336, vocab_size=128256),
}
"""The two shapes of the comparison: kit flavor ``1B`` (Llama 3.2 1B shape) and stock ``8B``."""


def torchtitan_nparams(shape: Shape) -> tuple[int, int]:
    """Parameters of torchtitan 0.2.2's llama3 of this shape: ``(total, embedding)``.

    torchtitan's llama3 never ties its embeddings: ``tok_embeddings`` ``V d`` and ``output``
    ``V d`` are both there. Per block: ``wq`` and ``wo`` ``d * n_head * hd``, ``wk`` and ``wv``
    ``d * n_kv_head * hd`` (``hd = d // n_head``), the SwiGLU FFN ``3 d f``, two RMSNorms ``2 d``;
    then the final RMSNorm ``d``. No biases. ``embedding`` counts ``tok_embeddings`` only, as
    torchtitan's ``get_dense_model_nparams_and_flops`` does (the ``nn.Embedding`` children).

    Returns:
        e.g. ``(1_498_482_688, 262_668_288)`` for the 1B shape, ``(8_030_261_248, 525_336_576)``
        for 8B.
    """
    s = shape
    hd = s.dim // s.n_head
    block = 2 * s.dim * s.n_head * hd + 2 * s.dim * s.n_kv_head * hd + 3 * s.dim * s.ffn_hidden + 2 * s.dim
    embedding = s.vocab_size * s.dim
    return s.n_layer * block + s.dim + 2 * embedding, embedding


def torchtitan_flops_per_token(shape: Shape, seq_len: int) -> float:
    """torchtitan 0.2.2's model FLOPs per token (``models/utils.py:get_dense_model_nparams_and_flops``).

    ``6 * (N - N_embedding) + 6 * n_layers * n_heads * (2 * head_dim) * seq_len``
    ``= 6 * N_non_embedding + 12 * n_layers * dim * seq_len``:
    forward and backward (``6 =`` 2 forward + 4 backward per weight) of every weight matmul,
    the output projection included, the token-embedding lookup excluded, plus the attention
    scores over the full ``s x s`` square (causal masking ignored; PaLM's convention).
    Activation-checkpointing recompute is not counted (so it is MFU, not HFU).

    Returns:
        e.g. 8.2202e9 for the 1B shape at seq 2048 and 4.8251e10 for 8B.
    """
    total, embedding = torchtitan_nparams(shape)
    head_dims = 2 * (shape.dim // shape.n_head)
    return 6.0 * (total - embedding) + 6.0 * shape.n_layer * shape.n_head * head_dims * seq_len


def torchtitan_mfu(
    shape: Shape, seq_len: int, tokens_per_s: float, peak_flops: float = TT_PEAK_FLOPS_H200
) -> float:
    """MFU in percent in torchtitan's convention (``components/metrics.py:MetricsProcessor.log``).

    ``mfu = 100 * torchtitan_flops_per_token(shape, seq_len) * tokens_per_s / peak_flops``, with
    ``tokens_per_s`` per GPU. torchtitan's own peak for an H200 is 989e12 (the default); pass
    ``FS_PEAK_FLOPS_H200`` (989.4e12) for flopsweep's peak with torchtitan's FLOPs count.
    """
    return 100.0 * torchtitan_flops_per_token(shape, seq_len) * tokens_per_s / peak_flops


# ---- TensorBoard event files (TFRecord of Event protos), read without tensorboard -------------


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def _fields(buf: bytes):
    """``(field number, wire type, value)`` of one protobuf message; bytes for length-delimited."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            value, i = buf[i : i + 8], i + 8
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = buf[i : i + n], i + n
        elif wire == 5:
            value, i = buf[i : i + 4], i + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield field, wire, value


def read_tb_scalars(path: Path) -> dict[str, dict[int, float]]:
    """Scalars of a TensorBoard event file: ``{tag: {step: value}}`` (``simple_value`` summaries).

    The file is TFRecord: per record a little-endian uint64 length, a CRC, the data, a CRC (the
    CRCs are not checked). Each record is an ``Event`` (``step`` field 2, ``summary`` field 5);
    a ``Summary`` holds ``Value``\\ s (``tag`` field 1, ``simple_value`` field 2, a float), which
    is what ``SummaryWriter.add_scalar`` writes. A truncated last record is ignored.
    """
    data = Path(path).read_bytes()
    out: dict[str, dict[int, float]] = {}
    i = 0
    while i + 12 <= len(data):
        (n,) = struct.unpack_from("<Q", data, i)
        if i + 12 + n + 4 > len(data):
            break
        event = data[i + 12 : i + 12 + n]
        i += 12 + n + 4
        step, values = 0, []
        for field, wire, value in _fields(event):
            if field == 2 and wire == 0:
                step = value
            elif field == 5 and wire == 2:
                for f2, w2, v2 in _fields(value):
                    if f2 == 1 and w2 == 2:
                        tag, simple = None, None
                        for f3, w3, v3 in _fields(v2):
                            if f3 == 1 and w3 == 2:
                                tag = v3.decode("utf-8", "replace")
                            elif f3 == 2 and w3 == 5:
                                (simple,) = struct.unpack("<f", v3)
                        if tag is not None and simple is not None:
                            values.append((tag, simple))
        for tag, v in values:
            out.setdefault(tag, {})[step] = v
    return out


# ---- torchtitan ---------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
STEP_RE = re.compile(
    r"step:\s*(?P<step>\d+)\s+loss:\s*\S+\s+grad_norm:\s*\S+\s+"
    r"memory:\s*(?P<mem>[-\d.]+)GiB\([-\d.]+%\)\s+tps:\s*(?P<tps>[\d,]+)\s+"
    r"tflops:\s*(?P<tflops>[\d,.]+)\s+mfu:\s*(?P<mfu>[\d.]+)%"
)
PEAK_RE = re.compile(r"Peak FLOPS used for computing MFU: ([\d.eE+-]+)")
PARAMS_RE = re.compile(r"Model llama3 (\S+)\s+size: ([\d,]+) total parameters")
BATCH_RE = re.compile(r"local batch size (\d+),.*sequence length (\d+)")
RUN_RE = re.compile(r"^(?P<shape>\d+[bB])_(?P<mode>eager|compile)_(?P<ac>noac|fullac)(?:_bs(?P<bs>\d+))?$")
ARG_BS_RE = re.compile(r"--training\.local[_-]batch[_-]size[ =](\d+)")
ARG_SEQ_RE = re.compile(r"--training\.seq[_-]len[ =](\d+)")
TT_DEFAULT_BATCH = {"1B": 8, "8B": 2}
TT_DEFAULT_SEQ = 2048


def parse_tt_log(path: Path) -> dict[str, Any]:
    """torchtitan's step lines and a few header lines of one run's log."""
    steps: dict[int, dict[str, float]] = {}
    info: dict[str, Any] = {"oom": False, "traceback": False}
    with open(path, errors="replace") as f:
        for raw in f:
            line = _ANSI.sub("", raw)
            m = STEP_RE.search(line)
            if m:
                steps[int(m["step"])] = {
                    "tps": float(m["tps"].replace(",", "")),
                    "tflops": float(m["tflops"].replace(",", "")),
                    "mfu": float(m["mfu"]),
                    "mem_gib": float(m["mem"]),
                }
                continue
            for key, rx in (("peak_flops", PEAK_RE), ("params", PARAMS_RE), ("batch", BATCH_RE)):
                m = rx.search(line)
                if m and key not in info:
                    info[key] = m.groups()
            if "OutOfMemoryError" in line or "CUDA out of memory" in line:
                info["oom"] = True
            if "Traceback" in line:
                info["traceback"] = True
    out: dict[str, Any] = {"steps": steps, "oom": info["oom"], "traceback": info["traceback"]}
    if "peak_flops" in info:
        out["peak_flops"] = float(info["peak_flops"][0])
    if "params" in info:
        out["flavor"], out["params"] = info["params"][0], int(info["params"][1].replace(",", ""))
    if "batch" in info:
        out["local_batch"], out["seq_len"] = int(info["batch"][0]), int(info["batch"][1])
    return out


def data_loading_share(tb: dict[str, dict[int, float]], warmup: int) -> float | None:
    """Percent of wall time in torchtitan's data loading over the steps after ``warmup``."""
    dl, e2e = tb.get("time_metrics/data_loading(s)", {}), tb.get("time_metrics/end_to_end(s)", {})
    kept = [s for s in dl if s > warmup and s in e2e]
    if kept and sum(e2e[s] for s in kept) > 0:
        return 100.0 * sum(dl[s] for s in kept) / sum(e2e[s] for s in kept)
    pct = [v for s, v in tb.get("time_metrics/data_loading(%)", {}).items() if s > warmup]
    return statistics.fmean(pct) if pct else None


def match_tb(runs: dict[str, dict[int, float]], files: dict[str, dict[int, float]]) -> dict[str, str]:
    """Pair runs with event files by their per-step tokens/s: ``{run: file}``.

    ``runs`` maps a run to its logged ``{step: tps}`` (rounded by torchtitan), ``files`` an event
    file to its ``throughput(tps)`` scalars. A pair counts the steps whose values agree within
    1 token/s; a pair needs at least half the run's steps to agree. Best pairs are taken first,
    each run and file once.
    """
    scores = []
    for run, logged in runs.items():
        for name, tb in files.items():
            agree = sum(1 for s, v in logged.items() if s in tb and abs(tb[s] - v) <= 1.0)
            if logged and agree * 2 >= len(logged) and agree > 0:
                scores.append((agree, run, name))
    out: dict[str, str] = {}
    for _, run, name in sorted(scores, key=lambda t: (-t[0], t[1], t[2])):
        if run not in out and name not in out.values():
            out[run] = name
    return out


def _read_runs_tsv(path: Path) -> list[dict[str, str]]:
    runs = []
    for line in path.read_text(errors="replace").splitlines():
        parts = line.split("\t")
        if len(parts) >= 4:
            runs.append({"name": parts[0], "wall": parts[2], "rc": parts[3], "args": " ".join(parts[4:])})
    return runs


def load_torchtitan(root: Path) -> list[dict[str, Any]]:
    """One dict per torchtitan run found under ``root`` (each folder with a ``runs.tsv``)."""
    out = []
    for tsv in sorted(root.rglob("runs.tsv")):
        base = tsv.parent
        warmup = DEFAULT_TT_WARMUP
        summary = base / "tt_summary.json"
        if summary.exists():
            warmup = int(json.loads(summary.read_text()).get("warmup_steps_dropped", warmup))
        tb_files = {str(p): read_tb_scalars(p) for p in sorted(base.rglob("events.out.tfevents.*"))}
        rows, logged = [], {}
        for run in _read_runs_tsv(tsv):
            m = RUN_RE.match(run["name"])
            if not m:  # smoke and fsdp1 runs have no flopsweep counterpart
                continue
            shape = m["shape"].upper()
            candidates = (base / "logs" / f"{run['name']}.log", base / f"{run['name']}.log")
            log = next((p for p in candidates if p.exists()), None)
            parsed = parse_tt_log(log) if log else {"steps": {}, "oom": False, "traceback": False}
            bs_arg, seq_arg = ARG_BS_RE.search(run["args"]), ARG_SEQ_RE.search(run["args"])
            batch = parsed.get("local_batch") or (int(bs_arg[1]) if bs_arg else None)
            batch = batch or (int(m["bs"]) if m["bs"] else TT_DEFAULT_BATCH.get(shape))
            seq = parsed.get("seq_len") or (int(seq_arg[1]) if seq_arg else TT_DEFAULT_SEQ)
            kept = [v for s, v in sorted(parsed["steps"].items()) if s > warmup]
            if run["rc"] == "skipped":
                status = "skipped"
            elif kept and run["rc"] == "0":
                status = "ok"
            elif parsed["oom"]:
                status = "oom"
            elif run["rc"] in ("124", "137"):
                status = "timeout"
            else:
                status = f"rc {run['rc']}" if run["rc"] != "0" else "no steps"
            row = {
                "name": run["name"],
                "dir": str(base),
                "status": status,
                "key": (shape, False, batch, seq, m["ac"] == "fullac", m["mode"] == "compile"),
                "warmup": warmup,
                "n_steps": len(kept),
                "peak_flops": parsed.get("peak_flops", TT_PEAK_FLOPS_H200),
            }
            if status == "ok":
                row["tps"] = statistics.fmean(v["tps"] for v in kept)
                row["mfu"] = statistics.fmean(v["mfu"] for v in kept)
                row["mem_gib"] = max(v["mem_gib"] for v in parsed["steps"].values())
            rows.append(row)
            logged[run["name"]] = {s: v["tps"] for s, v in parsed["steps"].items()}
        pairs = match_tb(logged, {f: tb.get("throughput(tps)", {}) for f, tb in tb_files.items()})
        for row in rows:
            if row["name"] in pairs:
                row["data_loading_pct"] = data_loading_share(tb_files[pairs[row["name"]]], warmup)
        out.extend(rows)
    return out


# ---- flopsweep ----------------------------------------------------------------------------------

_ALIASES = {
    "n_layer": ("n_layer", "n_layers", "num_layers"),
    "dim": ("n_embd", "dim", "hidden_size"),
    "n_head": ("n_head", "n_heads", "num_heads"),
    "n_kv_head": ("n_kv_head", "n_kv_heads", "num_kv_heads", "n_head_kv", "num_key_value_heads"),
    "ffn_hidden": ("ffn_hidden", "ffn_dim", "ffn_hidden_size", "intermediate_size", "n_inner", "mlp_hidden"),
    "vocab_size": ("vocab_size", "n_vocab"),
}
_TIE_KEYS = ("tie_embeddings", "tied_embeddings", "tie_word_embeddings", "tied")


def _get(d: dict[str, Any], keys: tuple[str, ...]) -> Any:
    return next((d[k] for k in keys if d.get(k) is not None), None)


def fs_shape(model: dict[str, Any]) -> tuple[str, Shape | None, bool]:
    """``(label, shape, tied)`` of a flopsweep ``config.model``; label ``1B``/``8B`` when it is one."""
    name = str(model.get("name", "?"))
    guess = "1B" if re.search(r"-1b\b", name, re.I) else "8B" if re.search(r"-8b\b", name, re.I) else None
    fields = {k: _get(model, keys) for k, keys in _ALIASES.items()}
    if guess:
        fields = {k: v if v is not None else getattr(SHAPES[guess], k) for k, v in fields.items()}
    shape = Shape(**fields) if all(v is not None for v in fields.values()) else None
    tie = _get(model, _TIE_KEYS)
    tied = bool(tie) if tie is not None else name.lower() == "llama3.2-1b"
    label = next((k for k, s in SHAPES.items() if s == shape), name)
    return label, shape, tied


def _truthy(v: Any) -> bool:
    return v not in (None, False, 0, "", "none", "false", "False", "no")


def load_flopsweep(root: Path) -> list[dict[str, Any]]:
    """One dict per flopsweep ``metrics.json`` under ``root``."""
    out = []
    for path in sorted(root.rglob("metrics.json")):
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        cfg, metrics = rec.get("config") or {}, rec.get("metrics") or {}
        model, batch = cfg.get("model") or {}, cfg.get("batch") or {}
        label, shape, tied = fs_shape(model)
        mbs = batch.get("micro_batch_size")
        if (batch.get("grad_accum") or 1) != 1:
            mbs = f"{mbs}x{batch['grad_accum']}"
        seq = int(model.get("seq_len") or TT_DEFAULT_SEQ)
        ckpt = cfg.get("activation_checkpointing")  # a policy {"name": ...}; older records: a bool
        ac = _truthy(ckpt.get("name") if isinstance(ckpt, dict) else ckpt)
        status = rec.get("status", "?")
        if status == "error" and "timeout" in str((rec.get("error") or {}).get("message", "")):
            status = "timeout"
        row = {
            "path": str(path),
            "status": status,
            "key": (label, tied, mbs, seq, ac, _truthy(cfg.get("compile"))),
            "started_at": (rec.get("run") or {}).get("started_at") or "",
            "shape": asdict(shape) if shape else None,
        }
        if status == "ok":
            tps = metrics.get("tokens_per_s_per_device")
            row["tps"] = tps
            row["mfu"] = 100.0 * metrics["mfu"] if metrics.get("mfu") is not None else None
            row["iteration_time_s"] = (metrics.get("iteration_time_s") or {}).get("mean")
            row["peak_allocated_gib"] = (metrics.get("peak_cuda_allocated_bytes") or 0) / 2**30 or None
            flops = metrics.get("model_flops_per_iteration")
            if flops and isinstance(mbs, int):
                row["flops_per_token"] = flops / (mbs * seq)
            if shape and tps:
                row["tt_flops_per_token"] = torchtitan_flops_per_token(shape, seq)
        out.append(row)
    return out


# ---- table --------------------------------------------------------------------------------------


def _pick(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The ok record if there is one (the latest), else the latest."""
    ok = [r for r in rows if r["status"] == "ok"]
    return max(ok or rows, key=lambda r: (r.get("started_at", ""), r.get("name", r.get("path", ""))))


def build_rows(directory: Path) -> list[dict[str, Any]]:
    """Matched rows: torchtitan and flopsweep side by side, keyed by set-up."""
    tt = load_torchtitan(directory / "torchtitan") if (directory / "torchtitan").is_dir() else []
    fs = load_flopsweep(directory / "flopsweep") if (directory / "flopsweep").is_dir() else []
    keys = {r["key"] for r in tt} | {r["key"] for r in fs}
    order = {"1B": 0, "8B": 1}
    rows = []

    def sort_key(k: tuple) -> tuple:
        return (order.get(k[0], 9), str(k[0]), k[1], -_num(k[2]), k[3], k[4], k[5])

    for key in sorted(keys, key=sort_key):
        t = _pick([r for r in tt if r["key"] == key]) if any(r["key"] == key for r in tt) else None
        f = _pick([r for r in fs if r["key"] == key]) if any(r["key"] == key for r in fs) else None
        label, tied, bs, seq, ac, comp = key
        row: dict[str, Any] = {
            "setup": f"{label}{' tied' if tied else ''}, bs {bs}, seq {seq}, "
            f"{'compiled' if comp else 'eager'}, {'full AC' if ac else 'no AC'}",
            "tt_status": t["status"] if t else None,
            "fs_status": f["status"] if f else None,
            "tt_tps": t.get("tps") if t else None,
            "tt_mfu": t.get("mfu") if t else None,
            "tt_data_loading_pct": t.get("data_loading_pct") if t else None,
            "tt_mem_reserved_gib": t.get("mem_gib") if t else None,
            "fs_tps": f.get("tps") if f else None,
            "fs_mfu": f.get("mfu") if f else None,
            "fs_peak_allocated_gib": f.get("peak_allocated_gib") if f else None,
            "fs_flops_per_token": f.get("flops_per_token") if f else None,
        }
        shape = SHAPES.get(label) if f is None or f["shape"] is None else Shape(**f["shape"])
        row["tt_flops_per_token"] = torchtitan_flops_per_token(shape, seq) if shape else None
        peak = t["peak_flops"] if t else TT_PEAK_FLOPS_H200
        row["fs_mfu_tt_convention"] = (
            torchtitan_mfu(shape, seq, row["fs_tps"], peak) if shape and row["fs_tps"] else None
        )
        row["ratio_fs_tt_tps"] = row["fs_tps"] / row["tt_tps"] if row["fs_tps"] and row["tt_tps"] else None
        row["tt_run"] = t["name"] if t else None
        row["fs_record"] = f["path"] if f else None
        rows.append(row)
    return rows


def _num(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return 0.0


def _cell(value: Any, status: str | None, fmt: str) -> str:
    if status is None:
        return "—"
    if status != "ok":
        return status
    return "—" if value is None else format(value, fmt)


def markdown(rows: list[dict[str, Any]]) -> str:
    """The table, then the notes that say how each column is counted."""
    head = (
        "| set-up | torchtitan tokens/s/GPU | torchtitan MFU (its convention) | flopsweep tokens/s/GPU "
        "| flopsweep MFU (flopsweep convention) | flopsweep MFU (torchtitan convention) "
        "| flopsweep / torchtitan tokens/s | torchtitan data-loading share |"
    )
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        ts, fs = r["tt_status"], r["fs_status"]
        lines.append(
            "| "
            + " | ".join(
                [
                    r["setup"],
                    _cell(r["tt_tps"], ts, ",.0f"),
                    _cell(r["tt_mfu"], ts, ".1f") + ("%" if ts == "ok" and r["tt_mfu"] is not None else ""),
                    _cell(r["fs_tps"], fs, ",.0f"),
                    _cell(r["fs_mfu"], fs, ".1f") + ("%" if fs == "ok" and r["fs_mfu"] is not None else ""),
                    _cell(r["fs_mfu_tt_convention"], fs, ".1f")
                    + ("%" if fs == "ok" and r["fs_mfu_tt_convention"] is not None else ""),
                    "—" if r["ratio_fs_tt_tps"] is None else f"{r['ratio_fs_tt_tps']:.3f}",
                    _cell(r["tt_data_loading_pct"], ts, ".2f")
                    + ("%" if ts == "ok" and r["tt_data_loading_pct"] is not None else ""),
                ]
            )
            + " |"
        )
    fpt: dict[tuple[str, str], str] = {}
    for r in rows:
        label, seq = r["setup"].split(",")[0], r["setup"].split(", ")[2]
        if r["tt_flops_per_token"] and (r["fs_flops_per_token"] or (label, seq) not in fpt):
            fs_f = f" (flopsweep's: {r['fs_flops_per_token']:.4e})" if r["fs_flops_per_token"] else ""
            fpt[label, seq] = f"{label} at {seq}: {r['tt_flops_per_token']:.4e}{fs_f}"
    lines += [
        "",
        "torchtitan: mean of its step lines after its warm-up steps; tokens/s = wall clock between log "
        "calls (data loading, forward, backward, optimizer, logging syncs); MFU = 6(N - N_emb) + 12 L d s "
        "FLOPs/token x tokens/s / its peak (989e12 for an H200).",
        "flopsweep: CUDA-event time of its measured steps on synthetic tokens made on the GPU (no data "
        "loading); its MFU = its model FLOPs (no recompute) / iteration time / 989.4e12.",
        "FLOPs/token in torchtitan's convention: " + ("; ".join(fpt.values()) or "—") + ".",
        "Data-loading share: torchtitan's TensorBoard time_metrics/data_loading(s) / end_to_end(s) over the "
        "kept steps (host time in next(dataloader)); flopsweep has none.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir", nargs="?", default=str(DEFAULT_DIR), help="folder with torchtitan/ and flopsweep/")
    p.add_argument("--format", choices=("markdown", "json"), default="markdown")
    args = p.parse_args(argv)
    directory = Path(args.dir)
    if not directory.is_dir():
        print(f"{directory}: no such folder", file=sys.stderr)
        return 2
    rows = build_rows(directory)
    if not rows:
        print(f"{directory}: no torchtitan runs and no flopsweep records found", file=sys.stderr)
        return 1
    print(json.dumps(rows, indent=1) if args.format == "json" else markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Issue #40, class 9: values within their bounds that made work unbounded (hangs).

Every integer key of the schema (found by walking the dataclasses, not listed by hand), at the top
of its documented range (:data:`flopsweep.limits.MAX_BY_KEY`, else :data:`~flopsweep.limits.MAX_INT`),
at ``2**31 - 1`` and beyond it (``2**63``, ``-2**63``), goes through ``plan=true``'s own path
(:func:`flopsweep.job.plan_job`) in this process: each is accepted or refused in one line, and a value
past its bound is refused by name. Nothing asserts a time: a value that made work unbounded (a fix
suggestion that walked every integer down to 1, a search over ``range(v)``) would hang this test.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import typing
from pathlib import Path

import pytest

from flopsweep.config import BatchConfig, ConfigError, ParallelConfig, RunConfig
from flopsweep.job import JobInfo, plan_job
from flopsweep.layout import Layout, divisors, grad_accum_for, smaller_degree
from flopsweep.limits import MAX_BY_KEY, MAX_INT
from flopsweep.options import GROUP_BASES, OPTION_SCHEMAS
from flopsweep.overrides import option_kind
from flopsweep.plan import Environment, option_names, plan

CONTEXTS: dict[str, list[str]] = {
    "single": ["device=cpu"],
    "fsdp": ["device=cpu", "backend=fsdp", "nproc_per_node=2"],
    "pipeline": [
        "device=cpu",
        "backend=fsdp",
        "nproc_per_node=4",
        "model=llama-tiny",
        "model.n_layer=8",
        "parallel.pp=2",
        "parallel.pp_schedule=Interleaved1F1B",
    ],
}
"""Where each key is tried: one rank; FSDP2 over two ranks (the degrees' checks and their fixes run
only there); a pipeline of two ranks and two stages each (its own keys and rules)."""


def _is_int(hint: object) -> bool:
    return hint is int or int in typing.get_args(hint)


def int_keys(schema: type, prefix: str = "") -> list[str]:
    """The dotted integer keys of ``schema`` and of its nested dataclasses (bool is no integer here);
    a config group's node is walked as its base schema (:data:`GROUP_BASES`)."""
    keys = []
    for name, hint in typing.get_type_hints(schema).items():
        if name not in {f.name for f in dataclasses.fields(schema)}:
            continue
        nested = GROUP_BASES.get(f"{prefix}{name}") if not prefix else None
        nested = nested or (hint if dataclasses.is_dataclass(hint) else None)
        if nested is not None:
            keys += int_keys(nested, f"{prefix}{name}.")
        elif _is_int(hint):
            keys.append(f"{prefix}{name}")
    return keys


def option_keys() -> list[tuple[str, str, str]]:
    """``(group, registry key, dotted key)`` of each integer key an option adds to its group's base
    or gives a default of its own (``model=hf``'s shape keys, read from its file; ``batch=auto``'s
    micro batch, where its search starts)."""
    found = []
    for group, options in OPTION_SCHEMAS.items():
        base = GROUP_BASES[group]
        defaults = {f.name: f.default for f in dataclasses.fields(base)}
        for kind, schema in options.items():
            own = {f.name: f.default for f in dataclasses.fields(schema)}
            found += [
                (group, kind, f"{group}.{k}")
                for k in int_keys(schema)
                if k not in defaults or own[k] != defaults[k]
            ]
    return sorted(set(found))


def _option_of(group: str, kind: str) -> str:
    """A YAML option of ``group`` whose registry key is ``kind`` (``model``: the smallest such model,
    a ``*-tiny`` where there is one)."""
    mine = [name for name in option_names(group) if option_kind(group, name) == kind]
    assert mine, (group, kind)
    return next((name for name in mine if name.endswith("tiny")), mine[0])


def extremes(key: str) -> list[int]:
    """The top of ``key``'s range, ``2**31 - 1``, and ``+-2**63``."""
    top = int(MAX_BY_KEY.get(key, MAX_INT))
    return sorted({top, MAX_INT, 2**63, -(2**63)})


def with_value(node: object, key: str, value: object) -> object:
    head, _, rest = key.partition(".")
    inner = with_value(getattr(node, head), rest, value) if rest else value
    return dataclasses.replace(node, **{head: inner})


CASES = [(key, ctx, None) for key in int_keys(RunConfig) for ctx in CONTEXTS] + [
    (key, ctx, (group, kind)) for group, kind, key in option_keys() for ctx in ("single", "fsdp")
]


def _id(case: tuple) -> str:
    key, ctx, option = case
    return f"{key}@{ctx}" + (f"+{option[1]}" if option else "")


def test_the_walk_finds_the_integer_keys() -> None:
    """The enumeration sees the keys of the base schemas and those only options add (a walk that
    found nothing would pass every case below)."""
    keys = int_keys(RunConfig)
    for key in (
        "parallel.tp",
        "parallel.pp_stages_per_rank",
        "batch.global_batch_size",
        "model.n_layer",
        "seed",
    ):
        assert key in keys
    assert "compile" not in keys and "timeout_s" not in keys  # a bool, a float
    added = {key for _, _, key in option_keys()}
    assert {"batch.max_micro_batch_size", "activation_checkpointing.every", "attention.block_size"} <= added
    assert len(CASES) > 100


@pytest.fixture(scope="module")
def composed(hydra_compose) -> dict[tuple, RunConfig]:
    """The config of each context (with each option that adds keys), composed once."""
    out = {}
    for _key, ctx, option in CASES:
        extra = [f"{option[0]}={_option_of(*option)}"] if option else []
        overrides = CONTEXTS[ctx] + extra
        if tuple(overrides) not in out:
            out[tuple(overrides)] = hydra_compose(overrides)
    return out


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_every_integer_key_at_its_extremes_is_planned_or_refused_in_one_line(
    case: tuple, composed: dict, tmp_path: Path
) -> None:
    key, ctx, option = case
    overrides = CONTEXTS[ctx] + ([f"{option[0]}={_option_of(*option)}"] if option else [])
    base = composed[tuple(overrides)]
    top = MAX_BY_KEY.get(key, MAX_INT)
    for value in extremes(key):
        cfg = with_value(base, key, value)
        info = JobInfo(job_dir=tmp_path, overrides=[*overrides, f"{key}={value}"], job_num=None)
        row = plan_job(cfg, info)["plan"]
        assert row["status"] in ("ok", "invalid"), row
        note = str(row["reason"])
        if row["status"] == "invalid":
            assert note.startswith("Invalid config: ") and "\n" not in note, note
        if abs(value) > top:
            assert row["status"] == "invalid" and note.startswith(f"Invalid config: {key}="), (value, note)


# --- the fix suggestions behind the hangs: divisors, not a walk down to 1 --------------------------


def test_divisors_are_all_found_in_order() -> None:
    for n in (1, 2, 12, 36, 97, 1024, 4095):
        assert divisors(n) == [d for d in range(1, n + 1) if n % d == 0]
    assert divisors(2**31 - 1) == [1, 2**31 - 1]  # a prime: two divisors, found by 46,341 trials
    assert divisors(2**30) == [2**k for k in range(31)]
    assert divisors(0) == [] and divisors(-4) == []


@pytest.mark.parametrize("value", [2**31 - 1, 2**31 - 2, 2**30, 10**9 + 7])
def test_a_degree_near_2_31_gets_the_largest_fix_that_validation_accepts(value: int) -> None:
    """``parallel.tp``, ``pp`` and ``dp_replicate`` near 2**31 on 8 ranks: the fix is the largest smaller
    degree that divides the sizes and resolves on the world, as the walk down to 1 found it."""
    for name in ("tp", "pp", "dp_replicate"):
        parallel = ParallelConfig(**{name: value})
        fix = smaller_degree(name, parallel, 8, [4096, 32])
        walked = next(
            d for d in range(min(value - 1, 4096), 0, -1) if 4096 % d == 0 and 32 % d == 0 and 8 % d == 0
        )
        assert fix == f"set parallel.{name}={walked}"
        Layout.resolve(dataclasses.replace(parallel, **{name: walked}), 8)  # accepted
    assert smaller_degree("tp", ParallelConfig(tp=value), None, []) == f"set parallel.tp={value - 1}"
    assert smaller_degree("tp", ParallelConfig(tp=value, pp=3), 8, [64]) is None  # pp=3 leaves no world


@pytest.mark.parametrize(
    "override",
    [
        ["parallel.tp=2147483647"],
        ["parallel.pp=2147483647", "model.n_layer=1024", "batch.micro_batch_size=8"],
        ["parallel.dp_replicate=2147483647"],
        ["parallel.tp=2147483629", "parallel.dp_shard=2"],  # the fix sets dp_shard=-1 too
    ],
)
def test_a_huge_degree_is_refused_with_a_fix_that_plans(hydra_compose, override: list[str]) -> None:
    """The refusal's fix, applied, plans (the suggestion is one validation accepts)."""
    ctx = ["device=cpu", "backend=fsdp", "nproc_per_node=8", "model=llama-tiny"]
    env = Environment(cpu_count=8)
    with pytest.raises(ConfigError) as err:
        plan(hydra_compose(ctx + override), env)
    line = str(err.value)
    assert "\n" not in line and "Fix: set parallel." in line, line
    fix = line.split("Fix: set ", 1)[1].split(" (")[0].split(",")[0].rstrip(".")
    fixed = [f.strip() for f in fix.split(" and ")]
    kept = [o for o in override if o.split("=")[0] not in {f.split("=")[0] for f in fixed}]
    assert plan(hydra_compose(ctx + kept + fixed), env).world_size == 8, (line, fixed)


def test_interleaved_stages_per_rank_at_2_31_get_a_bounded_fix(hydra_compose) -> None:
    ctx = ["device=cpu", "backend=fsdp", "nproc_per_node=2", "model=llama-tiny", "model.n_layer=12"]
    pipe = ["parallel.pp=2", "parallel.pp_schedule=Interleaved1F1B", "parallel.pp_stages_per_rank=2147483647"]
    with pytest.raises(ConfigError) as err:
        plan(hydra_compose(ctx + pipe), Environment(cpu_count=2))
    assert "set parallel.pp_stages_per_rank=6" in str(err.value)  # 2 x 6 stages divide 12 layers


# --- batch.global_batch_size: grad_accum within its own bound, and fixes that pass -----------------


def test_a_global_batch_past_grad_accums_bound_is_refused_in_one_line() -> None:
    """``2**31 - 1`` sequences of micro batch 1 would have run 2**31 - 1 micro batches per step until
    ``timeout_s``; the refusal names the global batch, the bound and a global batch that passes."""
    most = int(MAX_BY_KEY["batch.grad_accum"])
    two = Layout(dp_shard=2)
    for total in (2 * (most + 1), 2**31 - 2, 2 * (2**31 - 1)):
        with pytest.raises(ConfigError) as err:
            grad_accum_for(BatchConfig(micro_batch_size=1, global_batch_size=total), two)
        line = str(err.value)
        assert err.value.key == "batch.global_batch_size" and f"bound of {most}" in line and "\n" not in line
        assert f"at most {2 * most}" in line
    assert grad_accum_for(BatchConfig(micro_batch_size=1, global_batch_size=2 * most), two) == most


@pytest.mark.parametrize(
    ("batch", "dp"),
    [
        (BatchConfig(micro_batch_size=4, global_batch_size=12), 2),
        (BatchConfig(micro_batch_size=4, global_batch_size=4), 2),
        (BatchConfig(micro_batch_size=4, grad_accum=2, global_batch_size=12), 2),
        (BatchConfig(micro_batch_size=3, grad_accum=5, global_batch_size=7), 4),
        (BatchConfig(micro_batch_size=1, global_batch_size=2**31 - 1), 2),
        (BatchConfig(micro_batch_size=2, global_batch_size=-6), 3),
    ],
)
def test_a_global_batch_that_does_not_divide_gets_a_fix_that_passes(batch: BatchConfig, dp: int) -> None:
    """Every global batch the fix names, applied as it says, is accepted (the old fix named 8 to a
    run with ``batch.grad_accum=2``, which then contradicted it)."""
    layout = Layout(dp_shard=dp)
    with pytest.raises(ConfigError) as err:
        grad_accum_for(batch, layout)
    fix = str(err.value).split("Fix: ", 1)[1]
    suggested = [
        int(n) for n in re.findall(r"batch\.global_batch_size=(-?\d+)", fix)
    ]  # each value named (#602)
    assert suggested, fix
    for total in suggested:
        accum = grad_accum_for(dataclasses.replace(batch, global_batch_size=total), layout)
        assert accum * batch.micro_batch_size * dp == total


def test_a_pipeline_that_cannot_split_the_global_batch_names_a_global_batch_that_does(hydra_compose) -> None:
    ctx = ["device=cpu", "backend=fsdp", "nproc_per_node=4", "model=llama-tiny", "model.n_layer=4"]
    ctx += ["parallel.pp=2", "parallel.pp_microbatches=4", "batch.micro_batch_size=2"]
    env = Environment(cpu_count=4)
    with pytest.raises(ConfigError) as err:
        plan(hydra_compose([*ctx, "batch.global_batch_size=4"]), env)  # dp 2: a local batch of 2, not 4
    line = str(err.value)
    step = int(line.split("batch.global_batch_size to a multiple of ")[1].split()[0])
    assert step == 2 * math.lcm(2, 4)  # dp 2 x lcm(micro batch 2, 4 micro-batches)
    assert plan(hydra_compose([*ctx, f"batch.global_batch_size={step}"]), env).cfg.batch.grad_accum == 2


def test_model_seq_len_below_one_is_refused_for_every_family(hydra_compose) -> None:
    """``model=hf`` took ``model.seq_len=0`` to the FLOP count on the meta device (a RuntimeError)."""
    for model in ("gpt-tiny", "llama-tiny", "hf"):
        for value in (0, -1):
            with pytest.raises(ConfigError) as err:
                plan(hydra_compose([f"model={model}", f"model.seq_len={value}", "device=cpu"]), Environment())
            assert str(err.value).startswith(f"Invalid config: model.seq_len={value}:")


# --- planning at the 1,024-layer bound: model=hf's FLOPs counted by layer kind ----------------------


def _hf_config(tmp_path: Path, shipped: str, **changes: object) -> str:
    from flopsweep.models import hf

    data = json.loads((hf.SHIPPED / f"{shipped}.json").read_text())
    data.update(changes)
    path = tmp_path / f"{shipped}-{len(data)}-{data['num_hidden_layers']}.json"
    path.write_text(json.dumps(data))
    return str(path)


def _counted_layer_by_layer(value: str, seq_len: int, recompute: str) -> int:
    """FlopCounterMode over the whole model, every decoder layer run (what counting by kind replaces)."""
    import torch
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    from torch.utils.flop_counter import FlopCounterMode

    from flopsweep.models import hf_nn
    from flopsweep.models.hf_files import load

    with torch.device("meta"):
        model = hf_nn.HFCausalLM(hf_nn._from_config(load(value), "eager", "batched_mm"))
        tokens = torch.zeros(1, seq_len + 1, dtype=torch.long)
        mask = torch.zeros(1, 1, seq_len, seq_len)
    if recompute == "early_stop":
        layers = hf_nn.blocks(model)
        for i, block in enumerate(layers):
            layers[i] = checkpoint_wrapper(block, preserve_rng_state=False)
    with FlopCounterMode(display=False) as counter:
        model(tokens, attention_mask=mask).backward()
    return counter.get_total_flops()


@pytest.mark.parametrize(
    ("shipped", "changes", "kinds", "recompute"),
    [
        ("moonlight-tiny", {"num_hidden_layers": 5, "first_k_dense_replace": 2}, 2, "none"),
        ("moonlight-tiny", {"num_hidden_layers": 5, "first_k_dense_replace": 2}, 2, "early_stop"),
        ("qwen3-moe-tiny", {"num_hidden_layers": 6, "mlp_only_layers": [1, 4]}, 2, "none"),
        ("qwen3-tiny", {"num_hidden_layers": 7}, 1, "none"),
    ],
)
def test_hf_flops_counted_by_layer_kind_equal_the_count_of_every_layer(
    tmp_path: Path, shipped: str, changes: dict, kinds: int, recompute: str
) -> None:
    """Dense and MoE layers mixed (DeepSeek-V3's first dense layers, Qwen3-MoE's ``mlp_only_layers``)
    count exactly as when every layer runs; the cached model keeps its own layers afterwards."""
    pytest.importorskip("transformers")
    from flopsweep.models import hf_nn
    from flopsweep.models.hf_files import load

    value = _hf_config(tmp_path, shipped, **changes)
    src = load(value)
    model = hf_nn._meta_model(src)
    assert len(hf_nn.layer_kinds(hf_nn.blocks(model))) == kinds
    counted = hf_nn.counted_flops(src, 32, recompute)
    assert counted == _counted_layer_by_layer(value, 32, recompute)
    layers = hf_nn.blocks(model)
    assert len(layers) == changes["num_hidden_layers"]
    assert all(type(layer).__name__.endswith("DecoderLayer") for layer in layers)  # unwrapped

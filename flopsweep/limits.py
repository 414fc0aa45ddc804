"""What a key of the run config may hold beyond its type, torch-free, importing nothing: the largest
value a run may ask for, by key (:data:`MAX_BY_KEY`), of any other whole number (:data:`MAX_INT`) and
number (:data:`MAX_FLOAT`), of ``repeats`` (:data:`MAX_REPEATS`) and of a ``tag``'s length
(:data:`MAX_TAG_CHARS`), far above any real run; and the names a text key of a fixed set takes
(:data:`FAULT_KINDS`, :data:`PLAN_FORMATS`, ...). The job's checks read them
(:func:`flopsweep.checks.check_number`, beside :data:`flopsweep.lower_bounds.MIN_BY_KEY`; the rules), so
do the refusals before Hydra (:mod:`flopsweep.override_values`, :mod:`flopsweep.value_sets`) and the model
families (``model=hf``'s ``config.json``). The schema itself is :mod:`flopsweep.config`'s.
"""

from __future__ import annotations

MAX_SEED = 2**32
"""Seeds (``seed``, ``attention.seed``) are below it: torch's generators take 32-bit seeds."""

MAX_BY_KEY: dict[str, float] = {
    "timeout_s": 7 * 24 * 3600,  # seconds: a week
    "seed": MAX_SEED - 1,
    "attention.seed": MAX_SEED - 1,
    "nnodes": 1024,
    "model.n_layer": 1024,
    "model.n_embd": 2**16,
    "model.n_head": 1024,
    "model.seq_len": 2**20,  # tokens
    "model.vocab_size": 2**22,
    "batch.micro_batch_size": 2**16,
    "batch.max_micro_batch_size": 2**16,
    "batch.grad_accum": 2**16,
    "loss.chunk_tokens": 2**26,  # tokens per chunk: 64 Mi, far above any micro batch
    "steps.warmup": 100_000,
    "steps.measure": 100_000,
    "steps.max_extra_warmup": 100_000,
    "steps.gc_freq": 1_000_000,
    "search.min_n_layer": 1024,  # blocks, as model.n_layer
    "search.max_n_layer": 1024,
    "search.min_seq_len": 2**20,  # tokens, as model.seq_len
    "search.max_seq_len": 2**20,
    "search.seq_len_multiple": 2**20,
    "search.memory_budget_gib": 2**20,  # GiB: a petabyte
    "budget.tokens": 1e18,  # tokens: 15e12 is Llama 3's pre-training
    "cost.usd_per_gpu_hour": 1e6,
    "plan_gpu_memory_gib": 2**20,  # GiB: a PiB
    "predict.gpus_per_node": 1024,
    "predict.nnodes": 1_000_000,
    "predict.intra_node_gbps": 1e6,  # GB/s
    "predict.inter_node_gbps": 1e6,
    "predict.compute_scale": 1e3,
}
"""The largest value of each key that a run may ask for, checked before launch: far above any real
run, low enough that the ranks never meet a value they cannot hold (``timeout_s=1e14`` overflowed
the launcher's clock, a 400-digit ``model.n_layer`` failed in the ranks)."""

MAX_INT = 2**31 - 1
"""The largest value of any other integer key (a C ``int``, which torch and the launchers take)."""
MAX_FLOAT = 1e12
"""The largest magnitude of any other number (``model.rope_theta`` is 5e5)."""

MAX_REPEATS = 100
"""The largest ``repeats=``."""

MAX_TAG_CHARS = 256
"""The longest ``tag``: it is copied into every record, log line and plan row (a 100,000-character
tag made each plan line 100 KB)."""

OPTIM_IMPLEMENTATIONS = ("auto", "fused", "foreach", "for_loop")
"""``optim.implementation`` values: the kernel torch's AdamW steps with."""
FAULT_KINDS = ("none", "oom", "raise", "kill", "abort", "hang", "nan_loss")
"""``fault.kind`` values (:class:`flopsweep.config.FaultConfig`)."""
FAULT_PHASES = ("init", "warmup", "measure", "teardown")
"""``fault.phase`` values."""
SEARCH_MODES = ("none", "largest")
"""``search.model`` values: no search, or the largest model that trains (``flopsweep.modelsearch``)."""
SEARCH_GROW = ("n_layer", "seq_len")
"""``search.grow`` values: what the search makes larger: ``n_layer``, the blocks at the family's width
(:mod:`flopsweep.modelsearch`), or ``seq_len``, the tokens per sequence (:mod:`flopsweep.seqsearch`)."""

PLAN_FORMATS = ("table", "csv", "json")
"""``plan_format=`` values."""

SEARCH_RANGES: dict[str, tuple[str, int, int, str, str]] = {
    "search.max_n_layer": (
        "search.min_n_layer",
        1,
        256,
        "the search needs 1 <= search.min_n_layer <= search.max_n_layer (min is {low})",
        "set search.min_n_layer=1 and search.max_n_layer to the most blocks to try, such as 256",
    ),
    "search.max_seq_len": (
        "search.min_seq_len",
        1024,
        131072,
        "the search needs search.min_seq_len <= search.max_seq_len (min is {low})",
        "set search.max_seq_len to the longest sequence to try, such as 131072",
    ),
}
"""The search's ranges, by their upper key: ``(lower key, lower default, upper default, why, fix)``; a
range whose upper end is below its lower end searches nothing. The job's rule
(:func:`flopsweep.search_rules.model_search`) and the refusal before Hydra
(:func:`flopsweep.command_line_checks.search_range_problem`, a sweep file's values too) say the same line.
The defaults are :class:`flopsweep.config.ModelSearchConfig`'s."""

"""The ``config.json`` of ``model=hf``, torch-free: where it is, its bytes, its keys and their checks.

``model.config`` is a path to a ``config.json`` (or the folder holding one) or the name of a file
shipped in ``hf_configs/`` beside this module. Plain ``json``: neither ``transformers`` nor torch is
imported here, except ``transformers``' config classes inside :func:`hf_config` and
:func:`check_raw` (their checks and field aliases).

The file is read once per validation (:func:`load`) and kept, by its SHA-256, in this process
(:func:`pin`, at most :data:`MAX_PINNED` files); validation writes the hash into
``model.config_sha256`` and everything after it (the estimates, the record, the ranks, which receive
the bytes: :func:`validated_bytes`) takes the file it validated (:func:`source`), never the path
again: a file swapped after validation is not what runs.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flopsweep.choices import near_name
from flopsweep.config import MAX_SHOWN, ConfigError, cut
from flopsweep.limits import MAX_BY_KEY, MAX_INT
from flopsweep.models.hf_numbers import (  # noqa: F401 - the names check_raw and callers use
    EPS,
    FRACTIONS,
    MAX_NUMBERS,
    MAX_POSITIONS,
    NONNEGATIVE_NUMBERS,
    NOT_NULL,
    POSITIVE_NUMBERS,
    PROBABILITY,
    ROPE_NOT_NUMBERS,
    ROPE_SECTIONS,
    config_fields,
    config_numbers,
    field_range_problem,
    field_type_problem,
    key_label,
)
from flopsweep.models.hf_shape import brief, missing_shape_problem, quantized_problem
from flopsweep.safe_read import RecordError, read_regular
from flopsweep.text import printable

SHIPPED = Path(__file__).parent / "hf_configs"
"""The shipped configs, ``NAME.json`` each (written from the public model cards; no weights)."""
MAX_CONFIG_BYTES = 1 << 20
"""The largest ``config.json`` read (1 MiB; real ones are a few KiB)."""
MAX_DEPTH = 16
"""The deepest nesting of objects and arrays taken (real configs: 4; a 5,000-deep array made
``json.loads`` raise ``RecursionError``)."""
MAX_PINNED = 32
"""Validated files kept in one process (each at most :data:`MAX_CONFIG_BYTES`)."""
KEY = "model.config"
SHA_KEY = "model.config_sha256"


@dataclass(frozen=True, kw_only=True, eq=False)
class Source:
    """One ``config.json``: where it is, its bytes, their SHA-256 (hex) and its parsed keys. Equal
    (and hashed) by the SHA-256: one content builds one model, wherever it lies."""

    path: Path
    sha256: str
    data: dict[str, Any]
    raw: bytes

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Source) and other.sha256 == self.sha256

    def __hash__(self) -> int:
        return hash(self.sha256)

    @property
    def label(self) -> str:
        """``_name_or_path``, else the file's stem (its folder's name for ``config.json``), as a line
        shows it: controls escaped, at most :data:`flopsweep.config.MAX_SHOWN` characters
        (:func:`flopsweep.config.cut`; a 100,000-character name made a 100 KB plan line)."""
        if name := self.data.get("_name_or_path"):
            return cut(printable(name))
        return cut(printable(self.path.parent.name if self.path.name == "config.json" else self.path.stem))


_PINNED: OrderedDict[tuple[str, str], Source] = OrderedDict()
"""The validated files of this process by ``(model.config, SHA-256)``, the newest last."""


def config_path(value: str) -> Path:
    """The file ``model.config=value`` names: a shipped ``NAME``, else a path (a folder means its
    ``config.json``), resolved through links (a Hugging Face cache's snapshot links to its blobs).

    Raises:
        ConfigError: naming ``model.config`` for a link loop, a path that cannot be resolved or a
            blank one.
    """
    if is_shipped(value):
        return SHIPPED / f"{value}.json"
    if not str(value).strip():  # model.config=$UNSET: Path("") read the working directory's config.json
        raise ConfigError(
            KEY,
            value,
            "is blank (a shell variable left unset?): it names no file (empty, it read the working "
            "directory's config.json)",
            "give a config.json path or its folder, or a shipped name, e.g. model.config=qwen3-tiny",
        )
    try:
        path = Path(value).expanduser()
        return (path / "config.json" if path.is_dir() else path).resolve(strict=False)
    except (OSError, RuntimeError, ValueError) as exc:  # a link loop (ELOOP, "Symlink loop"), a NUL,
        why = getattr(exc, "strerror", None) or exc  # a name too long (ENAMETOOLONG)
        raise ConfigError(
            KEY,
            value,
            f"cannot be resolved ({why})",
            "give a config.json path (or its folder) that is no link loop and whose names fit the file "
            "system, or a shipped name",
        ) from None


def is_shipped(value: str) -> bool:
    """Whether ``model.config=value`` names a shipped config (``NAME``: no ``/``, a file of
    ``flopsweep/models/hf_configs``) rather than a path."""
    try:
        return "/" not in value and (SHIPPED / f"{value}.json").is_file()
    except OSError:  # a name over the file system's limit (ENAMETOOLONG) is no shipped name
        return False


def _shipped_names() -> str:
    return ", ".join(sorted(p.stem for p in SHIPPED.glob("*.json")))


def load(value: str) -> Source:
    """Read and parse ``model.config=value`` now (at most :data:`MAX_CONFIG_BYTES`; :func:`parse`),
    and keep it (:func:`pin`). A name of no file and no shipped config gets the nearest shipped name's
    "did you mean" (``qwen3-moe-tiy``: ``qwen3-moe-tiny``); a larger file is refused as over a
    config.json's limit, naming its size and the bound.

    Raises:
        ConfigError: naming ``model.config`` for a missing or unreadable file, or what :func:`parse`
            refuses.
    """
    path = config_path(value)
    if not path.exists():
        names = _shipped_names()
        near = near_name(value, names.split(", ")) if "/" not in value else None
        meant = f"did you mean {KEY}={near}? Else g" if near else "g"
        raise ConfigError(
            KEY,
            value,
            f"is neither a shipped config nor an existing file ({path} does not exist)",
            f"{meant}ive a config.json path or its folder, or a shipped name: {names}",
        )
    try:
        raw = read_regular(path, MAX_CONFIG_BYTES)
    except RecordError as exc:
        if over := re.match(r"(\d+) bytes is over", str(exc)):  # 2 MiB: a config.json's limit, not a record's
            size = int(over[1])
            raise ConfigError(
                KEY,
                value,
                f"is {size:,} bytes, over flopsweep's limit for a config.json ({MAX_CONFIG_BYTES:,} bytes, "
                "1 MiB; a Hugging Face config.json is a few KiB)",
                f"point {KEY} at the model's own config.json (or its folder), not its weights, tokenizer or "
                "index file, or give a shipped name, e.g. qwen3-tiny",
            ) from None
        raise ConfigError(KEY, value, f"cannot be read ({exc})", "give a readable config.json") from None
    return pin(raw, value, path)


class _RepeatedKey(ValueError):
    """A JSON object that gives one key twice (:func:`_unique_keys`); ``args[0]``: the key."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``'s ``object_pairs_hook``: the object as a dict, :class:`_RepeatedKey` for a key
    given twice (``json.loads`` would keep the last, silently)."""
    data: dict[str, Any] = {}
    for key, item in pairs:
        if key in data:
            raise _RepeatedKey(key)
        data[key] = item
    return data


def pin(raw: bytes, value: str, path: Path | None = None) -> Source:
    """The :class:`Source` of the bytes ``raw`` of ``model.config=value`` (:func:`parse`d), kept in
    this process for :func:`source` (a rank pins the bytes its job validated: :func:`validated_bytes`).

    Raises:
        ConfigError: what :func:`parse` refuses.
    """
    sha = hashlib.sha256(raw).hexdigest()
    src = Source(path=path or config_path(value), sha256=sha, data=parse(raw, value), raw=raw)
    _PINNED[(value, sha)] = src
    _PINNED.move_to_end((value, sha))
    while len(_PINNED) > MAX_PINNED:
        _PINNED.popitem(last=False)
    return src


def source(cfg: Any) -> Source:
    """The file of ``cfg`` (an ``HFConfig``): the one validation read when ``cfg.config_sha256`` is
    set and this process holds it (:func:`pin`), else the file read now (:func:`load`), which must
    then have that hash.

    Raises:
        ConfigError: naming ``model.config_sha256`` when the file's hash is another now (it changed
            after validation, or the hash was set by hand), or what :func:`load` raises.
    """
    if cfg.config_sha256 and (kept := _PINNED.get((cfg.config, cfg.config_sha256))) is not None:
        return kept
    src = load(cfg.config)
    if cfg.config_sha256 and src.sha256 != cfg.config_sha256:
        raise ConfigError(
            SHA_KEY,
            cfg.config_sha256,
            f"is not the hash of model.config={cfg.config}, which is {src.sha256} now: the file changed "
            "after this job was validated (or the hash was set by hand)",
            "leave model.config_sha256 unset (validation fills it from the file), or restore the file",
        )
    return src


def validated_bytes(model: Any) -> bytes | None:
    """The bytes of the ``config.json`` validation read for ``model`` (an ``HFConfig`` that went
    through validation), for the ranks (``RankSpec.model_file``); None for another family."""
    if getattr(model, "arch", None) != "hf" or not getattr(model, "config_sha256", ""):
        return None
    return source(model).raw


def parse(raw: bytes, value: str) -> dict[str, Any]:
    """The JSON object of ``raw``: no object giving a key twice (``json.loads`` keeps the last, silently;
    the line names the key), nested at most :data:`MAX_DEPTH` deep, every number finite
    (``NaN``, ``Infinity`` and ``1e999`` refused), every whole number within ``limits.MAX_INT``, and
    every string but ``_name_or_path`` (shown cut: :attr:`Source.label`) at most
    :data:`flopsweep.config.MAX_SHOWN` characters (``transformers`` echoes a ``model_type``,
    ``rope_type`` or ``hidden_act`` whole in its own log lines and errors; real ones are a few words).

    Raises:
        ConfigError: naming ``model.config``, what is wrong and where.
    """
    try:
        data = json.loads(raw, object_pairs_hook=_unique_keys)
    except _RepeatedKey as exc:
        key = cut(printable(str(exc.args[0])))
        problem = f"gives the key {key!r} twice in one object (JSON would keep the last silently)"
        raise ConfigError(KEY, value, problem, f"give a model's config.json with {key!r} once") from None
    except RecursionError:
        problem = (
            f"nests arrays or objects deeper than flopsweep reads a config.json (at most {MAX_DEPTH} "
            "levels, flopsweep's limit)"
        )
        raise ConfigError(KEY, value, problem, "give a model's config.json") from None
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, or an int over 4300 digits
        raise ConfigError(KEY, value, f"is not valid JSON ({exc})", "give a model's config.json") from None
    if not isinstance(data, dict):
        raise ConfigError(KEY, value, "is JSON but not an object", "give a model's config.json")
    if found := _walk(data, _bound_of(data)):
        field, problem = found
        raise ConfigError(KEY, value, problem, f"give a model's config.json with {field} corrected")
    return data


def _walk(data: dict[str, Any], bound_of: Any) -> tuple[str, str] | None:
    """``(field, problem)`` of the first value :func:`parse` refuses in ``data``, walked without
    recursion (``rope_scaling.factor``, ``x.0.1`` in a list); None. A whole number past ``MAX_INT`` is
    named with the bound that applies to its field (``bound_of(field)``: ``hidden_size`` 65536)."""
    stack: list[tuple[str, Any, int]] = [("", data, 1)]
    while stack:
        where, node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > MAX_DEPTH:
                limit = f"flopsweep reads at most {MAX_DEPTH} levels"
                return where, f"nests objects and arrays {depth} deep at {where} ({limit})"
            items = node.items() if isinstance(node, dict) else enumerate(node)
            stack.extend(
                (f"{where}.{key_label(k)}" if where else key_label(k), v, depth + 1) for k, v in items
            )
        elif isinstance(node, float) and not math.isfinite(node):
            return where, f"has {where}={node}, not a finite number"
        elif isinstance(node, int) and not isinstance(node, bool) and abs(node) > MAX_INT:
            return where, f"has {where}={_shown(node)}, beyond the bound of {bound_of(where)}"
        elif isinstance(node, str) and len(node) > MAX_SHOWN and where != "_name_or_path":
            shown = f"{brief(node)}, a string of {len(node)} characters"
            return where, f"has {where}={shown} (at most {MAX_SHOWN} are taken)"
    return None


def _shown(raw: int) -> str:
    text = str(raw)
    return text if len(text) <= 20 else f"{text[:12]}...({len(text)} digits)"


def _causal_lm_types() -> dict[str, str]:
    """``model_type -> class name`` of ``transformers``' causal-LM auto mapping; ConfigError without it."""
    try:
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    except ImportError:
        raise ConfigError(
            "model", "hf", "needs the transformers package, which is not installed", "pip install -e '.[hf]'"
        ) from None
    return dict(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def hf_config(src: Source, *, attn: str = "sdpa", experts: str = "eager") -> Any:
    """The ``transformers`` config of ``src`` (no cache; ``experts`` for MoE layers), after
    :func:`check_raw`; then :func:`check_built` of it.

    Raises:
        ConfigError: naming ``model.config`` when it is no causal LM ``transformers`` builds natively,
            or its ``architectures`` are not all ``*ForCausalLM`` (e.g. GPT-2's ``GPT2LMHeadModel``),
            or what :func:`check_raw`, ``transformers`` or :func:`check_built` refuse.
    """
    from transformers import AutoConfig

    value = str(src.path)
    model_type = src.data.get("model_type")
    archs = src.data.get("architectures") or []
    fix = "give the config.json of a *ForCausalLM model (Llama, Qwen3, Mistral, Mixtral, DeepSeek-V3, ...)"
    if not isinstance(model_type, str) or not isinstance(archs, list):
        what = f"model_type {brief(model_type)} and architectures {brief(archs)}"
        raise ConfigError(KEY, value, f"has {what}: a string and a list of class names are needed", fix)
    built = _causal_lm_types().get(model_type)
    if built is None or not built.endswith("ForCausalLM"):
        what = f"model_type {brief(model_type)}" + (f", architectures {brief(archs)}" if archs else "")
        what += f", which transformers builds as {built}" if built else ""
        raise ConfigError(
            KEY,
            value,
            f"is not a causal language model transformers builds natively as *ForCausalLM ({what}); "
            f"flopsweep builds *ForCausalLM classes only (an encoder's or GPT-2's *LMHeadModel is not "
            f"supported)",
            fix,
        )
    if any(a != built for a in archs):
        raise ConfigError(
            KEY,
            value,
            f"names architectures {brief(archs)}, but transformers builds {built} for model_type "
            f"{brief(model_type)} (the record would name a model that did not run)",
            f'give "architectures": ["{built}"], or leave it out',
        )
    keys = {k: v for k, v in src.data.items() if k not in ("model_type", "torch_dtype", "dtype", "auto_map")}
    check_raw(src)
    from huggingface_hub.errors import StrictDataclassError

    try:
        cfg = AutoConfig.for_model(model_type, **keys)
    except StrictDataclassError as exc:  # the config class's own field and class validators
        raise _field_error(value, exc) from None
    except Exception as exc:  # noqa: BLE001 - any refusal of the config class is this file's fault
        raise ConfigError(
            KEY, value, f"is refused by transformers: {error_line(exc)}", "fix the config.json"
        ) from None
    check_built(cfg, value, src.data)
    cfg.use_cache = False
    cfg._experts_implementation = experts
    cfg._attn_implementation = attn
    return cfg


def error_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: message`` of ``exc`` on one line (white space runs made one space, controls escaped:
    :func:`flopsweep.text.printable`), at most ``limit`` characters of the message."""
    text = printable(" ".join(str(exc).split())) or "(no message)"
    return f"{type(exc).__name__}: {text[:limit]}{'...' if len(text) > limit else ''}"


def _field_error(value: str, exc: Exception) -> ConfigError:
    """One line for a validation error of ``huggingface_hub``'s strict dataclasses (transformers' config
    classes): ``Validation error for field 'head_dim': TypeError: ...``, the field named in the fix."""
    text = error_line(exc).partition(": ")[2]  # at most 300 characters of the message
    field = re.search(r"field '(\w+)'", text)
    validator = re.search(r"validator 'validate_(\w+)'", text)
    where = f"its {field.group(1)} field" if field else "the field it names"
    if not field and validator:  # a class validator names no field: validate_rope checks the RoPE section
        section = "rope_scaling or rope_parameters" if validator.group(1) == "rope" else validator.group(1)
        where = f"the {section} fields it checks"
    return ConfigError(
        KEY, value, f"is refused by transformers: {text}", f"correct {where} in the config.json (or drop it)"
    )


SHAPE_KEYS = {
    "n_layer": "num_hidden_layers",
    "n_embd": "hidden_size",
    "n_head": "num_attention_heads",
    "vocab_size": "vocab_size",
}
"""flopsweep's shape keys and the ``config.json`` keys they are read from (through the config class's
aliases: GPT-Neo's ``num_layers`` is its ``num_hidden_layers``)."""
MAX_EXPERTS = 2**14
"""The most experts per MoE layer taken (16,384; DeepSeek-V3 has 256, Qwen3-Next 512)."""
EXPERT_COUNTS = ("num_experts", "num_local_experts", "n_routed_experts")
"""The names the config classes give the number of experts of an MoE layer."""
POSITIVE = (
    *SHAPE_KEYS.values(),
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "max_position_embeddings",
    *EXPERT_COUNTS,
    "num_experts_per_tok",
    "decoder_sparse_step",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "n_group",
    "topk_group",
    "sliding_window",
    "window_size",
)
"""Sizes and counts that must be at least 1 where the file gives them as whole numbers (null: the
config class's default; other types are the config class's to refuse)."""


def _bounds() -> dict[str, float]:
    """The largest value of each bounded integer field: the shape fields take their flopsweep key's
    bound (``limits.MAX_BY_KEY``: ``num_hidden_layers`` that of ``model.n_layer``), then
    :data:`MAX_POSITIONS` and :data:`MAX_EXPERTS`; every other whole number ``limits.MAX_INT``."""
    bounds = {field: MAX_BY_KEY[f"model.{key}"] for key, field in SHAPE_KEYS.items()}
    bounds["max_position_embeddings"] = MAX_POSITIONS
    bounds.update(dict.fromkeys((*EXPERT_COUNTS, "num_experts_per_tok"), MAX_EXPERTS))
    return bounds


def _field_bound(names: set[str], bounds: dict[str, float]) -> int:
    """The bound of a field that stands for ``names`` (:func:`_aliases`): the least of theirs in
    ``bounds`` (:func:`_bounds`), else ``limits.MAX_INT``."""
    return int(min((bounds[n] for n in names if n in bounds), default=MAX_INT))


def _bound_of(data: dict[str, Any]) -> Any:
    """``field -> bound`` for the top-level fields of ``data`` as :func:`check_raw` bounds them (a
    nested field, ``rope_scaling.factor``: ``limits.MAX_INT``)."""
    bounds = _bounds()
    model_type = data.get("model_type")
    aliases = _aliases(model_type) if isinstance(model_type, str) else {}
    return lambda field: _field_bound(aliases.get(field, {field}), bounds) if "." not in field else MAX_INT


def _aliases(model_type: str) -> dict[str, set[str]]:
    """``{json key: the names it stands for}`` from the config class's ``attribute_map`` (GPT-Neo's
    ``num_layers`` is ``num_hidden_layers``, Mixtral's ``num_local_experts`` also ``num_experts``):
    each key stands for itself and every name mapped to it."""
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING

        mapping = dict(getattr(CONFIG_MAPPING[model_type], "attribute_map", {}) or {})
    except Exception:  # noqa: BLE001 - no class (hf_config refuses the type): no aliases
        mapping = {}
    out: dict[str, set[str]] = {}
    for name, stored in mapping.items():
        if isinstance(name, str) and isinstance(stored, str):
            out.setdefault(stored, {stored}).add(name)
            out.setdefault(name, {name}).add(stored)
    return out


def check_raw(src: Source) -> None:
    """The file's numbers before transformers builds anything from them (a ``num_hidden_layers`` of
    10^12 made transformers fill per-layer lists until memory ran out), each field under every name
    it stands for (:func:`_aliases`): a shape field (:data:`SHAPE_KEYS`) a whole number (no bool,
    string or fraction); a whole number of :data:`POSITIVE` at least 1; every whole number within
    its bound (:func:`_bounds`); a ``*_eps``/``*_epsilon`` and :data:`POSITIVE_NUMBERS` above 0,
    :data:`NONNEGATIVE_NUMBERS` at least 0, each float field within its range (:data:`MAX_NUMBERS`,
    :func:`flopsweep.models.hf_numbers.field_range_problem`).

    Raises:
        ConfigError: naming ``model.config``, the JSON field, its value and the fix.
    """
    bounds, value = _bounds(), str(src.path)
    quantized_problem(src)
    aliases = _aliases(model_type := str(src.data.get("model_type")))
    if missing := missing_shape_problem(src.data, SHAPE_KEYS.values(), aliases, model_type):
        raise ConfigError(KEY, value, *missing)  # transformers' default: 32 blocks of a 2-block file
    for key, raw in src.data.items():
        names, field = aliases.get(key, {key}), key_label(key)
        whole = isinstance(raw, int) and not isinstance(raw, bool)
        if names & set(SHAPE_KEYS.values()) and raw is not None and not whole:
            raise ConfigError(
                KEY,
                value,
                f"has {field}={brief(raw)}, not a whole number",
                f"write {field} as a JSON integer",
            )
        bound = _field_bound(names, bounds)
        if whole and abs(raw) > bound:
            raise ConfigError(
                KEY,
                value,
                f"has {field}={_shown(raw)}, beyond the bound of {bound}",
                f"give model.config a config.json with {field} at most {bound}",
            )
        if whole and raw < 1 and names & set(POSITIVE):
            raise ConfigError(
                KEY,
                value,
                f"has {field}={raw}, and it is a size",
                f"give {field} a whole number of at least 1",
            )
    if "text_config" in src.data and not isinstance(src.data["text_config"], dict):
        raise ConfigError(
            KEY,
            value,
            f"has text_config={brief(src.data['text_config'])}, not an object",
            "give text_config an object of the text model's fields, or drop it",
        )
    for field, raw in config_fields(src.data):
        if problem := field_type_problem(field, raw):
            what, fix = problem
            raise ConfigError(KEY, value, f"has {field}={brief(raw)}, {what}", fix)
    for field, raw in config_numbers(src.data, bools=True):
        if problem := field_range_problem(field, raw):
            raise ConfigError(KEY, value, *problem)


def check_built(cfg: Any, value: str, data: dict[str, Any] | None = None) -> None:
    """What the built ``transformers`` config (``cfg``; the file's values, its class's defaults and
    aliases) must hold before a model is made from it: the key-value heads divide the heads, an MoE's
    ``num_experts_per_tok`` is at most its experts, and ``pad_token_id`` is within the vocabulary.

    ``data`` (the file's object): a key-value head count the file leaves out is said as its class's
    default (Qwen3's 32 for a 4-head file was told as the file's ``has num_key_value_heads=32``).

    Raises:
        ConfigError: naming ``model.config``, the fields and the fix.
    """
    heads, kv = getattr(cfg, "num_attention_heads", None), getattr(cfg, "num_key_value_heads", None)
    if _whole(heads) and _whole(kv) and kv > 0 and heads % kv:
        given = data is None or data.get("num_key_value_heads") is not None
        raise ConfigError(
            KEY,
            value,
            (
                f"has num_key_value_heads={kv}, which"
                if given
                else f"gives no num_key_value_heads, and its config class's default, {kv},"
            )
            + f" does not divide num_attention_heads={heads}",
            "give num_key_value_heads a divisor of num_attention_heads"
            + ("" if given else f' in the file, e.g. "num_key_value_heads": {heads}'),
        )
    top_k = getattr(cfg, "num_experts_per_tok", None)
    experts = next((getattr(cfg, n) for n in EXPERT_COUNTS if _whole(getattr(cfg, n, None))), None)
    if _whole(top_k) and experts is not None and top_k > experts:
        raise ConfigError(
            KEY,
            value,
            f"routes each token to num_experts_per_tok={top_k} experts of {experts}",
            f"give num_experts_per_tok at most {experts}",
        )
    pad, vocab = getattr(cfg, "pad_token_id", None), getattr(cfg, "vocab_size", None)
    if _whole(pad) and _whole(vocab) and not -vocab <= pad < vocab:
        raise ConfigError(
            KEY,
            value,
            f"has pad_token_id={pad}, outside the vocabulary of vocab_size={vocab}",
            f"give pad_token_id below {vocab}, or null",
        )


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_moe(data: dict[str, Any]) -> bool:
    """Whether a config.json's ``data`` is a mixture of experts: it routes each token to
    ``num_experts_per_tok`` experts (Qwen3-MoE, OLMoE, DeepSeek-V3, Mixtral)."""
    return bool(data.get("num_experts_per_tok"))

"""One way to name a cluster: ``GPU:NODESxGPUS_PER_NODE[:NETWORK]``, whether it is this machine or not.

Torch-free (``here`` alone asks torch which GPU this machine has). ``plan=true plan_clusters=[...]``
(:mod:`flopsweep.plan_space`) takes a list of these names; the older keys name one too and agree
with it (:func:`cluster_from_keys`): ``plan_gpu=H100 nnodes=8 nproc_per_node=8`` and ``plan_gpu=H100
predict.nnodes=8 predict.gpus_per_node=8`` are both ``H100:8x8:ib400``.

Grammar (case-insensitive; spaces are not allowed):

- ``GPU``: a device name of the peak table (:func:`flopsweep.peaks.lookup`: ``H100``, ``H200``,
  ``A100-80GB``, ``MI300X``; what ``plan_gpu=`` takes), or ``here`` (this machine's GPU, its GPU count
  and one node: ``here`` alone, or ``here:NxG`` for more nodes like it).
- ``NODESxGPUS_PER_NODE``: ``8x8`` is 8 nodes of 8 GPUs (64 GPUs); or ``N`` alone, N GPUs in nodes
  of :data:`GPUS_PER_NODE` (``H100:64`` = ``H100:8x8``; ``H100:4`` = ``H100:1x4``).
- ``NETWORK`` (optional): a name of :data:`NETWORKS` (``ib400``: one 400 Gb/s NIC per GPU), or a bus
  bandwidth across nodes per GPU (nccl-tests' busbw) with its unit spelled out, case and all:
  ``NNNGBps`` in gigabytes per second (``40GBps``), ``NNNGbps`` in gigabits (``320Gbps`` = 40 GB/s).
  Any other spelling of the unit (``40gbps``, ``40GBPS``) says neither and is refused, naming both
  (a 100 Gb Ethernet read as 100 GB/s was ~80x too fast). Without it the GPU's default
  (:func:`default_network`, named in the output as a default).
- ``@PRICE`` (optional, last): US dollars per GPU-hour of this cluster (``H100:8x8:ib400@2.49``,
  ``here@2.0``; :func:`flopsweep.cluster_prices.split_price`), for its rows' dollars in place of
  ``cost.usd_per_gpu_hour`` (:attr:`Cluster.usd_per_gpu_hour`).

Its label (:attr:`Cluster.label`) is the canonical spelling, network included, price left out (the
``usd_per_gpu_hour`` column says it): ``H100:8x8:ib400``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from flopsweep.cluster_gpu import unknown_gpu
from flopsweep.cluster_prices import split_price
from flopsweep.config import ConfigError, typed_form
from flopsweep.gpu_memory import canonical_gpu_name
from flopsweep.limits import MAX_BY_KEY
from flopsweep.local_gpus import gpus_hidden, local_gpu_name, this_machine
from flopsweep.peak_row import PeakRow
from flopsweep.peaks import PEAK_TABLE, lookup, memory_sizes_gb
from flopsweep.text import figure

GPUS_PER_NODE = 8
"""GPUs per node when a cluster name gives a GPU count alone (``H100:64``): the HGX/DGX baseboard's 8."""


@dataclass(frozen=True, kw_only=True)
class Network:
    """What links the nodes: the bus bandwidth a collective across nodes reaches per GPU."""

    name: str
    inter_node_gbps: float
    """GB/s per GPU, nccl-tests' busbw of a ring across nodes (what ``predict.inter_node_gbps`` takes)."""
    source: str
    """Where the figure comes from, as the plan prints it."""


NETWORKS: dict[str, Network] = {
    "ib800": Network(
        name="ib800",
        inter_node_gbps=80.0,
        source="one 800 Gb/s NIC per GPU (HGX B200, ConnectX-8), 80% of 100 GB/s",
    ),
    "ib400": Network(
        name="ib400",
        inter_node_gbps=40.0,
        source="one 400 Gb/s NIC per GPU (HGX H100/H200, torchtitan's hosts), 80% of 50 GB/s",
    ),
    "ib200": Network(
        name="ib200",
        inter_node_gbps=20.0,
        source="one 200 Gb/s NIC per GPU (DGX A100), 80% of 25 GB/s",
    ),
    "eth100": Network(
        name="eth100",
        inter_node_gbps=1.25,
        source="one 100 Gb/s Ethernet port per node of 8 GPUs, 80% of 12.5 GB/s over 8",
    ),
}
"""Named networks. A ring across nodes reaches about 80% of the NIC's line rate (the figure
``benchmarks/predict_torchtitan.py`` takes for torchtitan's 400 Gb/s per GPU: 40 GB/s)."""


_BLACKWELL = ("ib800", "an HGX/NVL Blackwell platform: one 800 Gb/s NIC per GPU")
_HOPPER = ("ib400", "an 8-GPU Hopper or CDNA3 platform: one 400 Gb/s NIC per GPU")
_AMPERE = ("ib200", "an A100/V100-generation training platform: one 200 Gb/s NIC per GPU")
_INFERENCE = (
    "eth100",
    "a PCIe inference card: its servers have Ethernet, not a NIC per GPU (AWS g5.48xlarge, 8 A10G, "
    "and g6.48xlarge, 8 L4: 100 Gb/s each)",
)
DEFAULT_NETWORKS: dict[str, tuple[str, str]] = {
    "H100 SXM": _HOPPER,
    "H100 PCIe": _HOPPER,
    "H100 NVL": _HOPPER,
    "H200 SXM": _HOPPER,
    "H200 NVL": _HOPPER,
    "GH200": _HOPPER,
    "H800 SXM": _HOPPER,
    "B200": _BLACKWELL,
    "GB200": _BLACKWELL,
    "A100": _AMPERE,
    "A800": _AMPERE,
    "A10": _INFERENCE,
    "A10G": _INFERENCE,
    "L4": _INFERENCE,
    "L40": _INFERENCE,
    "L40S": _INFERENCE,
    "RTX 6000 Ada": _INFERENCE,
    "V100 SXM2": _AMPERE,
    "V100 PCIe": _AMPERE,
    "V100S PCIe": _AMPERE,
    "MI300X": _HOPPER,
    "MI325X": _HOPPER,
}
"""The network a cluster of each GPU kind (a :data:`flopsweep.peaks.PEAK_TABLE` row's name) has when
its name gives none, and why: ``(network name, why)``. Every row has one (checked on import), so a
new GPU kind says its own. The training platforms ship one InfiniBand NIC per GPU of their
generation; a PCIe inference card (A10, A10G, L4, L40, L40S, RTX 6000 Ada) sits in a server with
Ethernet, so its default is ``eth100`` (a 200 Gb/s InfiniBand NIC per card made its plans across
nodes 16x too fast for such a server)."""


def _check_defaults() -> None:
    """Raises AssertionError where a peak-table row has no :data:`DEFAULT_NETWORKS` entry, or an
    entry names no network of :data:`NETWORKS` or no row."""
    rows = {row.name for row in PEAK_TABLE}
    if set(DEFAULT_NETWORKS) != rows or any(n not in NETWORKS for n, _ in DEFAULT_NETWORKS.values()):
        missing = sorted(rows ^ set(DEFAULT_NETWORKS))
        raise AssertionError(
            f"DEFAULT_NETWORKS must name one network of NETWORKS per peak-table row: {missing}"
        )


_check_defaults()


def default_network(row: PeakRow) -> Network:
    """The network a cluster of ``row``'s GPUs has when its name gives none (:data:`DEFAULT_NETWORKS`):
    ``ib800`` for Blackwell, ``ib400`` for Hopper and AMD CDNA3 (their 8-GPU platforms ship one
    400 Gb/s NIC per GPU), ``ib200`` for the A100 and V100 generations, ``eth100`` for PCIe inference
    cards (A10, A10G, L4, L40, L40S, RTX 6000 Ada)."""
    return NETWORKS[DEFAULT_NETWORKS[row.name][0]]


def default_network_why(row: PeakRow) -> str:
    """Why :func:`default_network` is ``row``'s: ``a PCIe inference card: its servers have Ethernet ...``."""
    return DEFAULT_NETWORKS[row.name][1]


ASSUMED_POWER_W: dict[str, float] = {
    "H100 SXM": 700.0,
    "H100 PCIe": 350.0,
    "H100 NVL": 400.0,
    "H200 SXM": 700.0,
    "H200 NVL": 600.0,
    "GH200": 900.0,
    "H800 SXM": 700.0,
    "B200": 1000.0,
    "GB200": 1200.0,
    "A100": 400.0,
    "A800": 400.0,
    "L40S": 350.0,
    "L40": 300.0,
    "L4": 72.0,
    "MI300X": 750.0,
    "MI325X": 1000.0,
}
"""Watts per GPU that a predicted J/token assumes: the datasheet's maximum board power (TDP), which a
training step comes close to (our H200 Llama runs: 560-690 W of 700, ``RESULTS.md`` energy table).
GPUs only: no host, network or cooling, as ``metrics.joules_per_token``."""


@dataclass(frozen=True, kw_only=True)
class Cluster:
    """GPUs of one kind, ``nnodes`` nodes of ``gpus_per_node``, linked by ``network``."""

    gpu: str
    """The device name as given (``plan_gpu=`` takes it), in the peak table's case
    (:func:`flopsweep.gpu_memory.canonical_gpu_name`: ``h100``: ``H100``): ``H100``, ``A100-80GB``."""
    row: PeakRow
    """Its peak-table row: peaks, memory, NVLink."""
    nnodes: int
    gpus_per_node: int
    network: Network
    network_named: bool = False
    """The name gave the network; False: :func:`default_network`'s."""
    usd_per_gpu_hour: float | None = None
    """US dollars per GPU-hour, the name's ``@PRICE``; None: the plan's ``cost.usd_per_gpu_hour``
    (:meth:`price`)."""

    @property
    def world_size(self) -> int:
        return self.nnodes * self.gpus_per_node

    @property
    def label(self) -> str:
        """The canonical name: ``H100:8x8:ib400``."""
        return f"{self.gpu}:{self.nnodes}x{self.gpus_per_node}:{self.network.name}"

    def price(self, usd_per_gpu_hour: float | None) -> tuple[float | None, str]:
        """``(US dollars per GPU-hour, its source)`` of this cluster's rows: its ``@PRICE``
        (``"@2.49 in plan_clusters"``), else ``usd_per_gpu_hour`` (``cost.usd_per_gpu_hour``:
        ``"cost.usd_per_gpu_hour"``; None: no price, ``"none: ..."``)."""
        if self.usd_per_gpu_hour is not None:
            return self.usd_per_gpu_hour, f"@{self.usd_per_gpu_hour:.15g} in plan_clusters"
        if usd_per_gpu_hour is not None:
            return usd_per_gpu_hour, "cost.usd_per_gpu_hour"
        return None, "none: no @PRICE and cost.usd_per_gpu_hour=null"

    @property
    def power_w(self) -> float | None:
        """:data:`ASSUMED_POWER_W` of its GPU; None when not listed."""
        return ASSUMED_POWER_W.get(self.row.name)


_SIZE_LIKE = re.compile(r"[-+]?[\d.]+(?:e[-+]?\d+)?(?:x[-+]?[\d.]+(?:e[-+]?\d+)?)*", re.ASCII | re.I)
"""What a size written wrongly looks like (a sign, a fraction, ``1e9``, ``8x8x8``), named as a size."""
MAX_PLAN_CLUSTERS = 16
"""The most clusters one ``plan_clusters`` list may name: each is planned over the whole ``space.*``
(about a second each on a loaded 2-core machine; 40 clusters took 37 s, trial 24). More go in several
plans (``-m plan_clusters=[a,b],[c,d]``, one job each)."""
MAX_GPUS_PER_NODE = 128
"""The most GPUs per node a cluster name may give (NVL72 racks are 72; nodes today hold 8 or 16)."""
_NAME = re.compile(r"(?P<gpu>[^:\s]+)(?::(?P<size>\d+(?:x\d+)?))?(?::(?P<net>[^:\s]+))?", re.ASCII)


def _parts(exc: ConfigError) -> tuple[str, str]:
    """``(problem, fix)`` of a :class:`ConfigError`, to name another key with them (its fields: the
    ``: `` of ``H100: 8@2.5`` had split its line inside the value)."""
    if isinstance(getattr(exc, "problem", None), str) and isinstance(getattr(exc, "fix", None), str):
        return exc.problem, exc.fix.removesuffix(".")
    match = re.fullmatch(r"Invalid config: .*?: (.*)\. Fix: (.*)\.", str(exc), re.S)
    return (match.group(1), match.group(2)) if match else (str(exc), "see docs/plan.md")


def _fix(every_gpu: bool = False) -> str:
    """The fix of a cluster name refused: the grammar, the GPUs (the first of
    :func:`flopsweep.gpu_memory.typed_gpu_names`, or ``every_gpu``) and the networks."""
    from flopsweep.gpu_memory import typed_gpu_names

    names = typed_gpu_names()
    gpus = ", ".join(names) if every_gpu else f"{', '.join(names[:8])}, ..."
    return (
        "name it GPU:NODESxGPUS_PER_NODE[:NETWORK], e.g. H100:8x8 or H200:1x8:ib400 (GPUs: "
        f"{gpus}; networks: {', '.join(NETWORKS)}, NNNGBps (gigabytes/s) or NNNGbps (gigabits/s))"
    )


UNITS = {"GBps": 1.0, "Gbps": 1 / 8}
"""The units a bus bandwidth in a cluster name takes, spelled exactly so, and their GB/s each:
``GBps`` gigabytes per second, ``Gbps`` gigabits per second."""
_BANDWIDTH = re.compile(r"(?P<n>[+-]?[\d.]+(?:e[+-]?\d+)?)(?P<unit>gb(?:ps|/s))", re.I)
"""What a bus bandwidth looks like in any case, so that a spelling of no unit is named as one."""


def parse_network(text: str, key: str = "plan_clusters", entry: str | None = None) -> Network:
    """A network name of :data:`NETWORKS` (any case), or a bus bandwidth across nodes per GPU with an
    unmistakable unit (:data:`UNITS`): ``40GBps`` (gigabytes/s), ``320Gbps`` (gigabits/s); both are
    ``inter_node_gbps=40`` (GB/s, what ``predict.inter_node_gbps`` takes).

    Raises:
        ConfigError: one line naming ``key`` and ``entry`` (the cluster name ``text`` is part of;
            default ``text``): no network; a unit that says neither bits
            nor bytes (``100gbps``), naming both spellings; a bandwidth not above 0 or beyond
            ``predict.inter_node_gbps``'s bound (:data:`flopsweep.limits.MAX_BY_KEY`).
    """
    name, given = text.strip(), text if entry is None else entry
    if name.lower() in NETWORKS:
        return NETWORKS[name.lower()]
    match = _BANDWIDTH.fullmatch(name)
    if not match:
        raise ConfigError(key, given, f"names no network ({', '.join(NETWORKS)}, NNNGBps or NNNGbps)", _fix())
    number, written = match.group("n"), match.group("unit")
    unit = written.replace("/s", "ps")  # GB/s: GBps
    try:
        value = float(number)
    except ValueError:
        value = math.nan
    if unit not in UNITS:
        n = number.lstrip("+")
        raise ConfigError(
            key,
            given,
            f"{number}{written} says neither gigabytes nor gigabits per second",
            f"write {n}GBps for {n} GB/s (gigabytes) of bus bandwidth per GPU, or {n}Gbps for {n} Gb/s "
            f"(gigabits: {figure(value / 8 if math.isfinite(value) else 0, 6)} GB/s); a 100 Gb "
            f"Ethernet port per node "
            "of 8 GPUs is eth100",
        )
    gbps = value * UNITS[unit]
    most = MAX_BY_KEY["predict.inter_node_gbps"]
    if not (math.isfinite(gbps) and 0 < gbps <= most):
        raise ConfigError(
            key,
            given,
            f"{number}{written} is {typed_form(gbps)} GB/s per GPU, outside (0, {typed_form(most)}] GB/s "
            "(predict.inter_node_gbps's bound)"
            if math.isfinite(gbps)
            else f"{number} is not a number",
            f"name a bus bandwidth in it, e.g. 40GBps or 400Gbps, or a named network ({', '.join(NETWORKS)})",
        )
    what = "gigabytes" if unit == "GBps" else "gigabits"
    return Network(
        name=f"{typed_form(value)}{unit}",
        inter_node_gbps=gbps,
        source=f"as named: {typed_form(value)} {unit[:2]}/s ({what})",
    )


def clusters_bound_problem(names: Sequence[object]) -> None:
    """Refuse a ``plan_clusters`` list of more than :data:`MAX_PLAN_CLUSTERS` entries.

    Raises:
        ConfigError: one line naming ``plan_clusters``, the count, the bound and the fix (the first
            entries as the shorter list; several plans, one job each).
    """
    if len(names) <= MAX_PLAN_CLUSTERS:
        return
    shown = ",".join(str(n) for n in names[:3])
    first = ",".join(str(n) for n in names[:MAX_PLAN_CLUSTERS])
    raise ConfigError(
        "plan_clusters",
        f"[{shown},...] ({len(names)} clusters)",
        f"names {len(names)} clusters, over the bound of {MAX_PLAN_CLUSTERS} (each is planned over the whole "
        "space.*, about a second each)",
        f"name at most {MAX_PLAN_CLUSTERS}, e.g. the first: plan_clusters=[{first}]; or split the list over "
        "plans, one job each: -m 'plan_clusters=[A,B],[C,D]'",
    )


def parse_cluster(text: str, here: tuple[str, int] | None = None) -> Cluster:
    """The cluster ``text`` names (grammar in the module docstring), its ``@PRICE`` in
    :attr:`Cluster.usd_per_gpu_hour` (None without one).

    Args:
        here: this machine's ``(GPU name, GPU count)`` for ``here``; None asks torch
            (:func:`flopsweep.local_gpus.this_machine`) when ``text`` starts with ``here``.

    Raises:
        ConfigError: one line naming ``plan_clusters``, the value and the fix: an unknown GPU, a
            GPU the table lists in several memory sizes without one, a size that is not positive,
            an unknown network, ``here`` on a machine without a GPU of the table, a bad price
            (:func:`flopsweep.cluster_prices.split_price`).
    """
    name, price = split_price(str(text))
    if price is None:
        return _parse_name(text, here)
    try:
        return _parse_name(name, here, price)
    except ConfigError as exc:  # the whole entry named, and its price in the fix's names
        problem, fix = _parts(exc)
        fix = re.sub(
            r"plan_clusters=\[([^\]@]+)\]", lambda m: f"plan_clusters=[{m.group(1)}@{price:.15g}]", fix
        )
        raise ConfigError("plan_clusters", text, problem, fix) from None


def _parse_name(text: str, here: tuple[str, int] | None, price: float | None = None) -> Cluster:
    """:func:`parse_cluster` of a name without its price; ``price``: the :class:`Cluster`'s. A size in
    another script's digits (``H100:٨``, which ``int`` reads as 8) is refused: digits 0-9 only."""
    if foreign := [c for c in str(text) if c.isdigit() and not c.isascii()]:
        raise ConfigError(
            "plan_clusters",
            text,
            f"its size is written in digits 0-9 only ({''.join(foreign)!r} is another script's)",
            "write it in digits 0-9, e.g. plan_clusters=[H100:1x8]",
        )
    match = _NAME.fullmatch(str(text).strip())
    if not match and _NAME.fullmatch(joined := re.sub(r"\s+", "", str(text))) and _parses(joined, here):
        fix = f"write it without: plan_clusters=[{joined}]"
        raise ConfigError("plan_clusters", text, "holds a space", fix)
    if not match:
        raise ConfigError("plan_clusters", text, "is not a cluster name", _fix())
    gpu, size, net = match.group("gpu"), match.group("size"), match.group("net")
    if gpu.lower() == "here":
        name, count = here or this_machine()
        if count < 1:
            hidden = gpus_hidden()  # CUDA_VISIBLE_DEVICES='' on a GPU host: torch finds none
            raise ConfigError(
                "plan_clusters",
                text,
                f"this machine has no GPU this process may use ({hidden} hides them all)"
                if hidden
                else "this machine has no GPU",
                f"name the GPU: e.g. {HINT_GPU}:1x8"
                + (f", or unset {hidden.split('=')[0]}" if hidden else ""),
            )
        gpu, per_node = name.removeprefix("NVIDIA ").removeprefix("AMD "), count
        nnodes = int(size.split("x")[0]) if size else 1
        if size and "x" in size:
            per_node = int(size.split("x")[1])
    else:
        if not size and net and _SIZE_LIKE.fullmatch(net):  # H100:8x-1, H100:-8, H100:1.5x8
            raise ConfigError(
                "plan_clusters",
                text,
                f"its size {net!r} is not a GPU count or NODESxGPUS_PER_NODE of positive whole numbers "
                f"in digits 0-9 (at most {figure(MAX_BY_KEY['nnodes'], 6)} nodes of "
                f"{MAX_GPUS_PER_NODE} GPUs)",
                f"write the count as a whole number, e.g. plan_clusters=[{gpu}:8] (one node of 8) or "
                f"[{gpu}:128x8] (1024 GPUs)",
            )
        if lookup(gpu) is None:  # the GPU first: 8xH100:100gbps "gave no size"
            raise unknown_gpu(gpu, text, _fix(every_gpu=True), lambda name: _parses(name, None))
        nnodes, per_node = _size(size or "", text)
    row = lookup(gpu)
    if row is None:
        raise unknown_gpu(gpu, text, _fix(every_gpu=True), lambda name: _parses(name, None))
    _check_memory_size(gpu, text)
    if nnodes < 1 or per_node < 1:
        raise ConfigError("plan_clusters", text, "needs at least one node of one GPU", _fix())
    if nnodes > MAX_BY_KEY["nnodes"] or per_node > MAX_GPUS_PER_NODE:
        raise ConfigError(
            "plan_clusters",
            text,
            f"{nnodes} nodes of {per_node} GPUs is beyond the bounds "
            f"({figure(MAX_BY_KEY['nnodes'], 6)} nodes, "
            f"{MAX_GPUS_PER_NODE} GPUs per node)",
            f"name a cluster within them, e.g. {gpu}:{min(nnodes, int(MAX_BY_KEY['nnodes']))}x"
            f"{min(per_node, GPUS_PER_NODE)}",
        )
    network = parse_network(net, entry=text) if net else default_network(row)
    return Cluster(
        gpu=canonical_gpu_name(gpu).replace(" ", "-"),  # h100:8: H100:1x8 in its label and rows
        row=row,
        nnodes=nnodes,
        gpus_per_node=per_node,
        network=network,
        network_named=bool(net),
        usd_per_gpu_hour=price,
    )


def _parses(name: str, here: tuple[str, int] | None) -> bool:
    """Whether :func:`_parse_name` takes ``name``: a space's fix (``H100:8`` for ``H100: 8``) is taken."""
    try:
        _parse_name(name, here)
    except ConfigError:
        return False
    return True


def _size(size: str, text: str) -> tuple[int, int]:
    """``(nodes, GPUs per node)`` of ``8x8`` or ``64``; a name without a size is one GPU."""
    if not size:
        raise ConfigError(
            "plan_clusters", text, "gives no size (a GPU count or NODESxGPUS_PER_NODE after the GPU)", _fix()
        )
    if "x" in size:
        nodes, per_node = size.split("x")
        return int(nodes), int(per_node)
    gpus = int(size)
    if gpus <= GPUS_PER_NODE:
        return 1, gpus
    if gpus % GPUS_PER_NODE:
        fits = [
            d for d in range(1, MAX_GPUS_PER_NODE + 1) if gpus % d == 0 and gpus // d <= MAX_BY_KEY["nnodes"]
        ]
        if not fits:  # no split within the bounds: refused by their check, whose fix is within them
            return -(-gpus // GPUS_PER_NODE), GPUS_PER_NODE
        small = [d for d in fits if d <= GPUS_PER_NODE]  # 12: 2x6
        per_node = max(small) if small else min(fits)
        raise ConfigError(
            "plan_clusters",
            text,
            f"{gpus} GPUs do not fill nodes of {GPUS_PER_NODE}",
            f"give nodes and GPUs per node, e.g. {text.split(':')[0]}:{gpus // per_node}x{per_node}",
        )
    return gpus // GPUS_PER_NODE, GPUS_PER_NODE


def _check_memory_size(gpu: str, text: str) -> None:
    """The name picks a memory size where the GPU comes in several (``A100-80GB``), as ``plan_gpu``.
    The fix names the entry with each size (``plan_clusters=[A100-80GB:8]``, or ``A100-40GB``): beside
    ``plan_clusters``, ``plan_gpu`` and ``plan_gpu_memory_gib`` are not read, so ``plan_gpu``'s fix
    ("name the size, e.g. plan_gpu=A100-80GB") gave the same refusal again."""
    from flopsweep.gpu_memory import planned_gpu_bytes

    try:
        planned_gpu_bytes(gpu, None)
    except ConfigError as exc:
        problem, fix = _parts(exc)
        names = re.findall(r"plan_gpu=([\w.-]+)", fix)
        if not names:
            raise ConfigError("plan_clusters", text, problem, fix) from None
        where = text if gpu in text else f"{gpu}:{text.partition(':')[2]}"
        meant = [where.replace(gpu, name, 1) for name in names]
        if "more than one memory size" in problem:  # no size named: each size it is sold in
            row = lookup(gpu)
            sizes = list(dict.fromkeys(row.memory_gib)) if row is not None else []
            base = names[0].rsplit("-", 1)[0]
            meant = [where.replace(gpu, f"{base}-{typed_form(gb)}GB", 1) for gb in reversed(sizes)] or meant
        others = "".join(f" (or {m.partition(':')[0]})" for m in meant[1:2])
        verb = "name the size" if "more than one memory size" in problem else "name a device sold so"
        raise ConfigError(
            "plan_clusters", text, problem, f"{verb}: plan_clusters=[{meant[0]}]{others}"
        ) from None


HINT_GPU = min(PEAK_TABLE[0].aliases, key=len).upper()
"""The GPU a hint's clusters, and a CPU machine's messages, name when neither ``plan_gpu``,
``plan_clusters`` nor this machine names one: the peak table's first row by its shortest alias
(``H100``, the H100 SXM)."""


def gpu_of(text: object) -> str:
    """The GPU part of a ``plan_clusters`` entry, before its first ``:`` or ``@``: ``H100`` of
    ``H100:8x8@2.49``, ``here`` of ``here@2.0``."""
    return re.split(r"[:@]", str(text), maxsplit=1)[0].strip()


def example_gpu(plan_clusters: Sequence[str] | None = None) -> str:
    """The GPU a message's ``plan_gpu=NAME`` example names, spelled as ``plan_gpu=`` takes it: the
    first of ``plan_clusters`` that names a GPU of the peak table (``H200:8x8``: ``H200``; not
    ``here``; :func:`hint_gpu`), else :data:`HINT_GPU`."""
    for text in plan_clusters or ():
        gpu = gpu_of(text)
        if gpu.lower() != "here" and (name := hint_gpu(gpu, default=None)):
            return name
    return HINT_GPU


def set_plan_gpu(gpu: str, device: str | None = None) -> str:
    """``plan_gpu=GPU`` as a fix names it for a command of ``device``: ``drop device=cpu and set
    plan_gpu=H100`` where ``device`` is ``cpu``, since ``device=cpu plan_gpu=H100`` is refused
    (:func:`flopsweep.rules.planned_gpu_on_the_cpu`); else ``set plan_gpu=H100``. ``gpu`` may be ``NAME``."""
    return f"drop device=cpu and set plan_gpu={gpu}" if device == "cpu" else f"set plan_gpu={gpu}"


def hint_gpu(
    plan_gpu: str | None = None, device_name: str | None = None, default: str | None = HINT_GPU
) -> str | None:
    """The GPU a hint's ``plan_clusters=[GPU:1x8,...]`` names, spelled as :func:`parse_cluster`
    takes it, so that the hint can be pasted: ``plan_gpu`` as given, in the table's case (``H200``,
    ``A100-80GB``; ``h200``: ``H200``, :func:`flopsweep.gpu_memory.canonical_gpu_name`; one
    with spaces by its row's shortest alias), else this machine's GPU ``device_name`` (torch's
    ``NVIDIA H100 80GB HBM3``: ``H100``) by its peak-table row's shortest alias, with its size where
    the GPU comes in several (``NVIDIA A100-SXM4-40GB``: ``A100-40GB``), else :data:`HINT_GPU`. A name
    the table does not know, or that needs a size it lacks, is passed over; ``default`` without one."""
    candidates = []
    for given, typed in ((plan_gpu, True), (device_name, False)):
        row = lookup(given) if given and str(given).strip() else None
        if row is None:
            continue
        if typed and " " not in str(given).strip():  # as the user named it, the table's case: H200, A100-80GB
            candidates.append(canonical_gpu_name(str(given).strip()))
        sizes = memory_sizes_gb(given)
        several = len(set(row.memory_gib.values())) > 1
        short = min(row.aliases, key=len).upper().replace(" ", "-")  # H100 SXM's "h100": H100
        candidates.append(short + (f"-{typed_form(sizes[0])}GB" if several and sizes else ""))
    for name in candidates:
        try:
            parse_cluster(f"{name}:1")
        except ConfigError:
            continue
        return name
    return default


def plans_gpu(plan_gpu: str | None) -> str:
    """:func:`hint_gpu` of a plan: ``plan_gpu``, else this machine's GPU where torch is already
    imported (:func:`flopsweep.local_gpus.local_gpu_name`: a one-row plan has asked it; a refusal before
    Hydra and ``plan_clusters`` import no torch), else :data:`HINT_GPU`."""
    return hint_gpu(plan_gpu, default=None) or hint_gpu(None, local_gpu_name())


def cluster_from_keys(cfg) -> Cluster | None:
    """The cluster the older keys name: ``plan_gpu`` on ``predict.nnodes`` x ``predict.gpus_per_node``,
    each defaulting to ``nnodes`` x ``nproc_per_node`` (``auto``: 1 GPU), the network from
    ``predict.inter_node_gbps`` when set (``NNNGBps``), else the GPU's default. None without
    ``plan_gpu``. ``plan_gpu=H100 nnodes=8 nproc_per_node=8`` and ``plan_gpu=H100 predict.nnodes=8
    predict.gpus_per_node=8`` name the cluster ``H100:8x8`` names.

    Raises:
        ConfigError: as :func:`parse_cluster`, naming ``plan_gpu``.
    """
    if not cfg.plan_gpu:
        return None
    text = str(cfg.nproc_per_node)
    per_node = cfg.predict.gpus_per_node or (int(text) if text.isdigit() else 1)
    nodes = cfg.predict.nnodes or cfg.nnodes
    net = f":{typed_form(cfg.predict.inter_node_gbps)}GBps" if cfg.predict.inter_node_gbps else ""
    try:
        return parse_cluster(f"{cfg.plan_gpu}:{nodes}x{per_node}{net}".replace(" ", "-"))
    except ConfigError as exc:
        raise ConfigError("plan_gpu", cfg.plan_gpu, *_parts(exc)) from None

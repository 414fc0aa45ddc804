"""The link between the GPUs of one node, per GPU kind: what a prediction assumes inside a node when
nothing measured it (no probe, no ``predict.intra_node_gbps``, no profiled records;
:func:`flopsweep.comm_time.assumed_link` takes :data:`flopsweep.comm_time.ASSUMED_NVLINK_SHARE` of it).
Torch-free.

Every row of :data:`flopsweep.peaks.PEAK_TABLE` gives its links (:attr:`flopsweep.peak_row.PeakRow.links`,
held to :func:`check_links` on import): one :class:`NodeLink` per form factor the row covers, the first
being the one assumed when the device name does not say which; this module gives the type, the
constructors from a datasheet's figure (:func:`nvlink`, :func:`pcie`) and :func:`resolve`
(:func:`flopsweep.peaks.node_link`: a device name's). Figures
are per GPU and direction, GB/s: half the datasheet's bidirectional total.

Sources (the vendors' datasheets; the bidirectional figure printed there):

- NVLink (SXM / OAM baseboards, every GPU of the node on an NVSwitch): H100, H200 SXM 900 GB/s; H800
  SXM 400 GB/s; GH200 900 GB/s (NVLink 4 GPU to GPU, GH200 NVL2/NVL32); B200 1.8 TB/s (HGX B200);
  GB200 1.8 TB/s (GB200 NVL72: 130 TB/s over 72 GPUs); A100 SXM4 600 GB/s (A100 datasheet); A800 SXM4
  400 GB/s (export variant, the row's note); V100 SXM2 300 GB/s (V100 datasheet).
- PCIe cards: the datasheet's x16 figure (Gen5 128 GB/s, Gen4 64 GB/s, Gen3 32 GB/s). H100 PCIe,
  H100 NVL and H200 NVL have an NVLink bridge, but it joins 2 GPUs (H200 NVL: 2 or 4), so a collective
  over a node's GPUs crosses PCIe: the PCIe figure is the one a ring of the node reaches. The A100 and
  A800 PCIe cards likewise (a 2-GPU bridge; PCIe Gen4 64 GB/s).
- AMD Instinct MI300X / MI325X: 7 Infinity Fabric links of 128 GB/s (peak, bidirectional) to the 7
  other GPUs of the OAM platform, 896 GB/s per GPU, 448 GB/s per direction.

``A100`` and ``A800`` come as SXM4 modules and as PCIe cards with the same peaks (one peak-table row):
a name that says ``SXM4``/``SXM`` or ``PCIe`` (torch's ``NVIDIA A100-SXM4-80GB``, ``NVIDIA A100
80GB PCIe``) picks its link; one that says neither (``A100-80GB``) is assumed SXM4 (the DGX/HGX
baseboards training clusters are built of) and :attr:`NodeLinkOf.assumed` says so, with the key that
sets another figure (``predict.intra_node_gbps``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class NodeLink:
    """One form factor's link between the GPUs of a node."""

    form: str
    """The form factor a name says (``SXM4``, ``PCIe``); empty where the row has one form only."""
    link: str
    """``NVLink``, ``PCIe Gen4 x16``, ``Infinity Fabric``."""
    gbps: float
    """GB/s per GPU and direction: half the datasheet's bidirectional figure."""
    datasheet: str
    """The vendor's document and its printed (bidirectional) figure."""
    said_by: tuple[str, ...] = ()
    """Tokens of a normalised device name (:func:`flopsweep.peaks.normalize_device_name`) that pick
    this form (``sxm4``, ``pcie``)."""


@dataclass(frozen=True, kw_only=True)
class NodeLinkOf:
    """The link a device name gets (:func:`flopsweep.peaks.node_link`)."""

    row: Any
    """The :class:`flopsweep.peak_row.PeakRow` (which imports this module)."""
    link: NodeLink
    assumed: str = ""
    """Empty where the name (or its row) says the form; else what was assumed and how to set another:
    ``SXM4 assumed: A100-80GB says neither SXM4 nor PCIe; set predict.intra_node_gbps``."""

    @property
    def gbps(self) -> float:
        return self.link.gbps

    @property
    def said(self) -> str:
        """``H100 SXM NVLink``, ``A100 SXM4 NVLink``, ``A100 PCIe Gen4 x16``, ``L4 PCIe Gen4 x16``."""
        name = self.row.name
        if self.link.form and self.link.form not in name.split():
            name += f" {self.link.form}"
        first, _, rest = self.link.link.partition(" ")
        if name.split()[-1] == first and rest:  # H100 PCIe + PCIe Gen5 x16: said once
            return f"{name} {rest}"
        return f"{name} {self.link.link}"


def nvlink(total: float, datasheet: str, form: str = "", said_by: tuple[str, ...] = ()) -> NodeLink:
    return NodeLink(form=form, link="NVLink", gbps=total / 2, datasheet=datasheet, said_by=said_by)


def pcie(gen: int, datasheet: str, form: str = "", said_by: tuple[str, ...] = ()) -> NodeLink:
    total = {3: 32.0, 4: 64.0, 5: 128.0}[gen]
    link = f"PCIe Gen{gen} x16"
    return NodeLink(form=form, link=link, gbps=total / 2, datasheet=datasheet, said_by=said_by)


SXM4 = ("sxm4", "sxm")
"""The tokens of a name that say an SXM4 module (:attr:`NodeLink.said_by`)."""
PCIE = ("pcie",)
"""The tokens of a name that say a PCIe card."""
BRIDGE = "its NVLink bridge joins {n} GPUs, so a ring of a node's GPUs crosses PCIe"
"""What a PCIe card's datasheet note adds where the card has an NVLink bridge."""
INFINITY_FABRIC = NodeLink(
    form="",
    link="Infinity Fabric",
    gbps=448.0,
    datasheet="AMD Instinct MI300X/MI325X spec: 7 Infinity Fabric links x 128 GB/s peak = 896 GB/s per GPU "
    "(OAM platform of 8)",
)
"""The MI300X's and MI325X's link to the 7 other GPUs of their platform."""


def check_links(name: str, links: tuple[NodeLink, ...]) -> None:
    """Raises AssertionError where a peak-table row's ``links`` are malformed: none, or several of
    which one does not name its form and the tokens that say it (:func:`flopsweep.peaks._check_table`)."""
    if not links or any(link.gbps <= 0 or not link.datasheet for link in links):
        raise AssertionError(f"{name}: links must give each form's GB/s and datasheet")
    if len(links) > 1 and not all(link.form and link.said_by for link in links):
        raise AssertionError(f"{name}: a row of several forms names each form and the tokens that say it")


def resolve(row: Any, tokens: set[str], given: str) -> NodeLinkOf:
    """The link of ``row``'s GPUs in a node for a device name ``given`` whose normalised words are
    ``tokens`` (:func:`flopsweep.peaks.node_link` looks the row up): the form the words say, else
    the row's first form, named in :attr:`NodeLinkOf.assumed` where the row has several."""
    links = row.links
    said = next((link for link in links if tokens & set(link.said_by)), None)
    if said is not None or len(links) == 1:
        return NodeLinkOf(row=row, link=said or links[0])
    forms = " nor ".join(link.form for link in links)
    return NodeLinkOf(
        row=row,
        link=links[0],
        assumed=f"{links[0].form} assumed: {given} says neither {forms}; set predict.intra_node_gbps",
    )


FORM_WORDS = ("SXM", "PCIe", "NVL")
"""The words a peak-table row's name ends in where the GPU is sold in several forms, each a row of its
own (``H100 SXM``, ``H100 PCIe``, ``H100 NVL``): a device name must say one to pick its row."""


def taken_as(row: Any, tokens: set[str], given: str, rows: tuple[Any, ...]) -> str:
    """What a device name ``given`` (normalised words ``tokens``) that does not say its form was taken
    as, where its row names one (:data:`FORM_WORDS`): ``H100 taken as H100-SXM (the name says no form;
    name H100-PCIe or H100-NVL for those)``. The bare ``H100``/``H200``/``H800``
    pick the SXM module's row (its peaks, memory and NVLink), as torch's ``NVIDIA H100 80GB HBM3`` is
    that module; empty where the name says the form, or the row has none. ``rows``: the peak table,
    whose rows of the same first word are named as the others."""
    words = row.name.split()
    form = (
        words[-1]
        if len(words) > 1 and words[-1].upper().startswith(tuple(w.upper() for w in FORM_WORDS))
        else ""
    )
    if not form or any(t.startswith(form.lower()) for t in tokens):
        return ""
    others = [r.name.replace(" ", "-") for r in rows if r is not row and r.name.split()[0] == words[0]]
    tail = (
        f"name {' or '.join(others)} for {'that' if len(others) == 1 else 'those'}"
        if others
        else "its only form listed"
    )
    return f"{given} taken as {row.name.replace(' ', '-')} (the name says no form; {tail})"

"""The bus bandwidths a prediction uses (:class:`flopsweep.predict.Link`), for the job's side of the
prediction (:func:`flopsweep.forecast.prediction`, which imports :func:`link`): the run's own probe, the
calibration record's, another record's, the bandwidth profiled records imply, or an assumed share of the
GPU's NVLink (:func:`found_link`), each where it is this device's; ``predict.intra_node_gbps`` and
``predict.inter_node_gbps`` in its place where given (:func:`link`). Torch-free.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from flopsweep import predict as pr
from flopsweep.comm_time import foreign_bandwidth
from flopsweep.config import RunConfig
from flopsweep.text import figure


def link(
    cfg: RunConfig,
    probe: Sequence[dict[str, Any]] | None,
    calibration: dict[str, Any] | None,
    records: Sequence[tuple[str, dict[str, Any]]] = (),
    device_name: str | None = None,
) -> pr.Link:
    """The bus bandwidths: :func:`found_link`'s, with ``predict.intra_node_gbps`` in place of its
    figures inside a node and ``predict.inter_node_gbps`` in place of those across nodes, each only
    where given. ``predict.intra_node_gbps`` alone serves across nodes too (its documented default);
    ``predict.inter_node_gbps`` alone never changes a collective inside a node (issue 41: it once set
    both, so a one-node prediction moved with it). ``source`` names what each side comes from."""
    p = cfg.predict
    if not (p.intra_node_gbps or p.inter_node_gbps):
        return found_link(cfg, probe, calibration, records, device_name)
    if p.intra_node_gbps:
        intra, where = dict.fromkeys(pr.COLLECTIVES, p.intra_node_gbps), "predict.intra_node_gbps in a node"
    else:
        found = found_link(cfg, probe, calibration, records, device_name)
        intra, where = found.intra, found.source
        where += "" if "in a node" in where else " in a node"
    across = p.inter_node_gbps or p.intra_node_gbps
    what = "predict.inter_node_gbps" if p.inter_node_gbps else "predict.intra_node_gbps"
    return pr.Link(
        intra=intra,
        inter=dict.fromkeys(pr.COLLECTIVES, across),
        source=f"{where}; {what} across nodes",
    )


def found_link(
    cfg: RunConfig,
    probe: Sequence[dict[str, Any]] | None,
    calibration: dict[str, Any] | None,
    records: Sequence[tuple[str, dict[str, Any]]] = (),
    device_name: str | None = None,
) -> pr.Link:
    """The bus bandwidths measured or assumed, the first that is known of: the run's own probe
    (``system.interconnect``, across nodes too when ``nnodes`` > 1); the calibration record's probe;
    the probe of another of ``records`` (the one of most ranks: a one-rank calibration beside a
    two-rank run of the same folder; in a node only); the bandwidth that profiled multi-rank
    ``records`` imply (:func:`flopsweep.predict.calibrated_busbw`, the run's backend first); an
    assumed share of ``device_name``'s NVLink (:func:`flopsweep.predict.assumed_link`). An empty
    :class:`~flopsweep.predict.Link` when none is known. Each names itself in ``source``. A record
    measured on another device (a CPU record for a GPU plan, another GPU kind:
    :func:`flopsweep.comm_time.foreign_bandwidth`) lends no bandwidth: the assumed link's ``source``
    then says which record was passed over and why ("a CPU record's probe is not this GPU's link")."""
    if probe:
        own = pr.link_from_probe(probe, source="this run's probe")
        return pr.Link(intra=own.intra, inter=own.intra if cfg.nnodes > 1 else {}, source=own.source)
    refused: list[str] = []  # records of another device: their bandwidth is not this run's link
    if calibration and calibration.get("system", {}).get("interconnect"):
        if not (why := foreign_bandwidth(calibration, device_name)):
            return pr.link_from_probe(calibration["system"]["interconnect"], source="the calibration's probe")
        refused.append(f"not the calibration's probe: {why}")
    judged = [  # each probed record, with why its probe is not this run's link (None: it is)
        (n, r, foreign_bandwidth(r, device_name))
        for n, r in records
        if (r.get("system") or {}).get("interconnect")
    ]
    refused += [f"not the probe of {n}: {why}" for n, _, why in judged if why][:1]
    probed = [(n, r) for n, r, why in judged if not why]
    if probed:  # another record's probe (a multi-rank run of predict.calibration): its ranks' node
        name, rec = max(probed, key=lambda nr: (nr[1]["system"].get("world_size") or 0, nr[0]))
        own = pr.link_from_probe(rec["system"]["interconnect"], source=f"the probe of {name}")
        return pr.Link(intra=own.intra, inter={}, source=own.source)
    backend = pr.backend_of({"config": {"backend": _backend(cfg)}})
    same = [(n, r) for n, r in records if not foreign_bandwidth(r, device_name, what="profile")]
    bus = pr.calibrated_busbw(same, backend=backend) or pr.calibrated_busbw(same)
    if bus:  # in a node only: the records' ranks shared one
        return pr.Link(
            intra=dict.fromkeys(pr.COLLECTIVES, bus[0]),
            inter=dict.fromkeys(pr.COLLECTIVES, 0.0),
            source=f"{bus[1]}: {figure(bus[0], 4)} GB/s in a node",
        )
    if not refused and (other := pr.calibrated_busbw(records)):  # only another device's profiles
        why = next(w for _, r in records if (w := foreign_bandwidth(r, device_name, what="profile")))
        refused.append(f"not {other[1]}: {why}")
    found = pr.assumed_link(device_name) or pr.Link()
    if refused and found.source:
        return dataclasses.replace(found, source=f"{found.source} ({'; '.join(refused)})")
    return found


def _backend(cfg: RunConfig) -> dict[str, Any]:
    """``cfg.backend`` as a record's ``config.backend`` holds it (JSON; a value of no JSON type as text)."""
    return json.loads(json.dumps(dataclasses.asdict(cfg.backend), default=str))

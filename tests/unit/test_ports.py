"""The rendezvous port (flopsweep.launch.rendezvous_port): drawn below Linux's ephemeral ports, where
no other process's outgoing connection can take it between the draw and the bind (a side-by-side
suite once lost a slurm_local job to "The server socket has failed to listen ... port: 42455")."""

from __future__ import annotations

import socket
from pathlib import Path

from flopsweep import launch


def test_the_ephemeral_range_is_read_from_its_proc_file_and_falls_back_when_odd(tmp_path: Path) -> None:
    f = tmp_path / "ip_local_port_range"
    f.write_text("40000\t60999\n")
    assert launch.ephemeral_low(f) == 40000
    for text in ("", "lots of ports\n", "1024 2000\n", "70000 80000\n"):
        f.write_text(text)
        assert launch.ephemeral_low(f) == 32768, text
    assert launch.ephemeral_low(tmp_path / "absent") == 32768


def test_a_job_seed_gives_every_task_the_same_port_below_the_ephemeral_range() -> None:
    low = launch.ephemeral_low()
    ports = {launch.rendezvous_port("1234567") for _ in range(3)}
    assert len(ports) == 1 and launch.LOWEST_PORT <= ports.pop() < low
    assert len({launch.rendezvous_port(str(job)) for job in range(50)}) > 40  # jobs spread out


def test_an_unseeded_port_is_bindable_and_skips_one_in_use() -> None:
    low = launch.ephemeral_low()
    port = launch.rendezvous_port()
    assert launch.LOWEST_PORT <= port < low
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", port))  # it was free a moment ago
        s.listen()
        others = {launch.rendezvous_port() for _ in range(20)}
    assert port not in others and all(launch.LOWEST_PORT <= p < low for p in others)


def test_the_agent_store_holds_its_port_and_serves_clients() -> None:
    """A local launch's rendezvous store (launch.agent_store) is bound before any rank starts and held:
    another bind of its port fails, and a client (as every rank is, rank 0 included) reads what the
    server wrote."""
    import datetime

    from torch.distributed import TCPStore

    store = launch.agent_store(timeout_s=30)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", store.port))
        except OSError as e:
            assert e.errno == 98  # EADDRINUSE: nobody can take it
        else:
            raise AssertionError(f"port {store.port} was free while the store held it")
    store.set("k", "v")
    client = TCPStore("127.0.0.1", store.port, is_master=False, timeout=datetime.timedelta(seconds=30))
    assert client.get("k") == b"v"

"""Ports for brokers and child processes are picked outside the kernel's ephemeral range.

A port from that range, free when picked, can become the local end of an outgoing connection
before the child process binds it; a worker then exits with "address already in use" (and a
crash trial whose restarted worker exits so stalls until it times out).
"""

from __future__ import annotations

import socket

from wevent.stream.runtime.broker import LOWEST_PORT, ephemeral_ports, free_port


def test_free_ports_lie_outside_the_ephemeral_range_and_can_be_listened_on():
    low, high = ephemeral_ports()
    ports = [free_port() for _ in range(200)]
    assert all(LOWEST_PORT <= port <= 65535 and not low <= port <= high for port in ports)
    for port in ports[:20]:
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", port))
            listener.listen()


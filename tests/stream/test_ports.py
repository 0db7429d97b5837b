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



def test_a_process_never_hands_out_a_port_twice():
    # 1,000 independent picks from 22,768 ports would repeat about 1000**2 / (2 * 22768) = 22 of
    # them (none with probability e**-22); from this process's lane of 2,846, some hundreds
    ports = [free_port() for _ in range(1000)]
    assert len(set(ports)) == len(ports)


def test_concurrent_processes_pick_from_their_own_lanes():
    import subprocess
    import sys

    from wevent.stream.runtime.broker import PORT_LANES

    low, _ = ephemeral_ports()
    lane_size = (low - LOWEST_PORT) // PORT_LANES
    script = "import os; from wevent.stream.runtime.broker import free_port; print(os.getpid(), *(free_port() for _ in range(50)))"
    for _ in range(3):
        pid, *ports = map(int, subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                              check=True).stdout.split())
        lane_low = LOWEST_PORT + (pid % PORT_LANES) * lane_size
        assert all(lane_low <= port < lane_low + lane_size for port in ports), (pid, ports)

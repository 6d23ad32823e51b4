"""A two-namespace lab joined by one veth pair; nothing in it can reach the host's networks."""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass

import pytest

from netem.kernel.ns import create_netns, in_netns, remove_netns, unique_name, veth_pair

ADDR_A, ADDR_B = "10.77.1.1", "10.77.1.2"


@dataclass
class Lab:
    ns_a: str
    ns_b: str
    if_a: str
    if_b: str

    def transfer(self, nbytes: int, timeout: float = 30.0) -> float:
        """Send nbytes from A to B over TCP; seconds from first byte sent to last byte read."""
        server = in_netns(self.ns_b, lambda: socket.socket())
        server.settimeout(timeout)
        server.bind((ADDR_B, 0))
        server.listen()
        received = [0]

        def receive() -> None:
            conn, _ = server.accept()
            conn.settimeout(timeout)
            with conn:
                while chunk := conn.recv(1 << 20):
                    received[0] += len(chunk)

        thread = threading.Thread(target=receive)
        thread.start()
        client = in_netns(self.ns_a, lambda: socket.socket())
        client.settimeout(timeout)
        try:
            client.connect((ADDR_B, server.getsockname()[1]))
            start = time.perf_counter()
            client.sendall(bytes(nbytes))
            client.shutdown(socket.SHUT_WR)
            thread.join(timeout)
            elapsed = time.perf_counter() - start
        finally:
            client.close()
            server.close()
        assert received[0] == nbytes
        return elapsed


@pytest.fixture
def lab():
    if os.geteuid() != 0:
        pytest.skip("the kernel backend tests need root to create network namespaces")
    ns_a, ns_b = unique_name("pddta"), unique_name("pddtb")
    if_a, if_b = unique_name("pva"), unique_name("pvb")
    create_netns(ns_a)
    try:
        create_netns(ns_b)
        try:
            with veth_pair(ns_a, ns_b, if_a, if_b, ADDR_A, ADDR_B):
                yield Lab(ns_a, ns_b, if_a, if_b)
        finally:
            remove_netns(ns_b)
    finally:
        remove_netns(ns_a)

"""The probe's answers, with the kernel replaced: each failure becomes one actionable line."""

import contextlib
import errno

import pyroute2
import pytest
from pyroute2 import NetlinkError

from netem.kernel import ns, probe


class FakeIPRoute:
    fail_with: int | None = None

    def __init__(self, *args, **kwargs) -> None:
        self.calls: list[tuple] = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def link_lookup(self, ifname):
        return [1]

    def tc(self, command, kind=None, **kw):
        if command == "add" and self.fail_with is not None:
            raise NetlinkError(self.fail_with)


@pytest.fixture
def fake_kernel(monkeypatch):
    @contextlib.contextmanager
    def scratch():
        yield None, "pdd0"

    monkeypatch.setattr(ns, "scratch_interface", scratch)
    monkeypatch.setattr(pyroute2, "IPRoute", FakeIPRoute)
    yield FakeIPRoute
    FakeIPRoute.fail_with = None


def test_a_missing_qdisc_is_named(fake_kernel):
    fake_kernel.fail_with = errno.ENOENT
    result = probe.probe_qdisc.__wrapped__("netem")
    assert not result.ok
    assert result.reason == "this kernel has no sch_netem qdisc (adding one fails: No such file or directory)"


def test_a_present_qdisc_is_ok(fake_kernel):
    assert probe.probe_qdisc.__wrapped__("tbf").ok


def test_no_privileges_says_what_is_needed(monkeypatch):
    @contextlib.contextmanager
    def scratch():
        raise NetlinkError(errno.EPERM)
        yield

    monkeypatch.setattr(ns, "scratch_interface", scratch)
    result = probe.probe_qdisc.__wrapped__("htb")
    assert not result.ok and "CAP_NET_ADMIN" in result.reason

"""Isolation and clock of a running sandbox, measured (for the world page's Reset and isolation).

* **internal network**: Docker reports the sandbox network ``Internal``.
* **no default route**: each container's ``/proc/net/route`` has no ``0.0.0.0/0`` entry.
* **outside unreachable**: a listener we start on a second, ordinary (not
  internal) Docker network stands in for "the outside". The driver reaches it
  (so it listens), and a TCP connect to it from inside the application and the
  database containers fails. Traffic goes only to our own containers.
* **host unreachable**: a TCP listener we start on every address of this machine
  (``0.0.0.0`` and ``::``) answers the driver at the bridge's gateway; then, from
  inside the application container, a connect to every listening TCP port of this
  machine on every one of its addresses (IPv4 and IPv6, the bridge gateway among
  them) must fail. The fact says how many ports and addresses it tried (the host
  rule of :mod:`._hostguard` is what makes it hold).
* **clock**: what the application (its ``/health`` clock and its OS clock) and
  the database (``SELECT now()``) report, next to the world's clock.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx
import psycopg

from ..worlds import World
from ._docker import LABEL
from ._sandbox import Sandbox

LISTENER_PORT = 9000
_PROBE = r"""
import json, socket, sys
from concurrent.futures import ThreadPoolExecutor
def attempt(target):
    host, port = target
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        address = socket.getaddrinfo(host, port, family, socket.SOCK_STREAM)[0][4]
        s = socket.socket(family, socket.SOCK_STREAM); s.settimeout(1.0)
        s.connect(address); s.close(); return f"{host} {port}"
    except OSError:
        return None
with ThreadPoolExecutor(48) as pool:
    print(json.dumps([r for r in pool.map(attempt, json.loads(sys.argv[1])) if r]))
"""
_CONNECT = ("import socket,sys\ns=socket.socket();s.settimeout(3)\n"
            "try:\n s.connect((sys.argv[1],int(sys.argv[2])));print('connected')\n"
            "except OSError as e:\n print('refused:',e)\n")


class Measured(Protocol):
    """What the measurements read of a running sandboxed world (``SandboxDatabase`` is one)."""

    @property
    def sandbox(self) -> Sandbox: ...
    @property
    def world(self) -> World: ...
    @property
    def application(self) -> Any: ...
    def request(self, method: str, path: str, *, query: Mapping[str, Any], body: Mapping[str, Any] | None,
                headers: Mapping[str, str]) -> tuple[int, Any]: ...


@dataclass(frozen=True)
class SandboxFact:
    """One measured fact about a running sandbox."""

    name: str
    """``network``, ``route``, ``outside``, ``host`` or ``clock``."""
    holds: bool
    """Whether the property holds."""
    detail: str
    """What was measured, in words (no addresses that change between runs)."""


def _routes(db: Measured) -> SandboxFact:
    bad = []
    for role in db.sandbox.containers:
        code, out = db.sandbox.exec(role, ["cat", "/proc/net/route"])
        if code != 0 or any(line.split()[1:2] == ["00000000"] for line in out.splitlines()[1:]):
            bad.append(role)
    roles = ", ".join(sorted(db.sandbox.containers))
    if bad:
        return SandboxFact("route", False, f"a default route remains in: {', '.join(bad)}")
    return SandboxFact("route", True, f"no default route in any container ({roles}): each routing table holds "
                       "only the sandbox network's own subnet")


def _outside(db: Measured) -> SandboxFact:
    box = db.sandbox
    client = box.client
    labels = {**box.labels, LABEL: "network"}
    network = client.networks.create(f"{box.prefix}-outside", driver="bridge", internal=False, labels=labels)
    listener = None
    try:
        listener = client.containers.run(
            box.base.tag, ["python3", "-m", "http.server", str(LISTENER_PORT)], name=f"{box.prefix}-outside",
            network=network.name, detach=True, labels={**box.labels, "rehearsal.role": "outside-listener"})
        listener.reload()
        ip = listener.attrs["NetworkSettings"]["Networks"][network.name]["IPAddress"]
        deadline, listening = time.monotonic() + 20, False
        while not listening and time.monotonic() < deadline:
            try:
                listening = httpx.get(f"http://{ip}:{LISTENER_PORT}/", timeout=1).status_code == 200
            except httpx.HTTPError:
                time.sleep(0.1)
        reached = []
        for role in [r for r in ("app", "db", "emulator") if r in box.containers]:
            _, out = box.exec(role, ["python3", "-c", _CONNECT, ip, str(LISTENER_PORT)])
            if "connected" in out.split(":")[0]:
                reached.append(role)
        if not listening:
            return SandboxFact("outside", False, "the stand-in outside listener never answered the driver; "
                               "nothing was shown")
        if reached:
            return SandboxFact("outside", False, f"reached the listener on the ordinary network from: "
                               f"{', '.join(reached)}")
        return SandboxFact("outside", True, "a listener on a second, ordinary Docker network answered the driver, "
                           "and a TCP connect to it failed from inside every sandbox container")
    finally:
        if listener is not None:
            listener.remove(force=True)
        network.remove()


class _Listener:
    """A TCP listener of the measurement on every address of this machine, accepting until closed."""

    def __init__(self, family: socket.AddressFamily) -> None:
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        if family == socket.AF_INET6:
            self.sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        self.sock.bind(("::" if family == socket.AF_INET6 else "0.0.0.0", 0))
        self.sock.listen(16)
        self.port = int(self.sock.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.close()


def _host(db: Measured) -> SandboxFact:
    box = db.sandbox
    if db.application is None or "app" not in box.containers:
        return SandboxFact("host", True, "not measured from inside: this sandbox runs no application")
    listeners = [_Listener(socket.AF_INET)]
    if socket.has_ipv6 and Path("/proc/net/if_inet6").exists():
        listeners.append(_Listener(socket.AF_INET6))
    try:
        gateway = box.gateway()
        try:
            socket.create_connection((gateway, listeners[0].port), timeout=2).close()
        except OSError:
            return SandboxFact("host", False, "our listener on every host address did not answer the driver at "
                               "the bridge gateway; nothing was shown")
        ports = sorted(host_ports())
        v4, v6 = host_addresses()
        addresses = sorted(set(v4) | {gateway}) + sorted(f"{a}%eth0" if a.startswith("fe80:") else a for a in v6)
        targets = [[a, p] for a in addresses for p in ports]
        code, out = box.exec("app", ["python3", "-c", _PROBE, json.dumps(targets)])
        try:
            reached = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return SandboxFact("host", False, f"the probe inside the application container failed ({code}): "
                               f"{out.strip()[-300:]}")
    finally:
        for listener in listeners:
            listener.sock.close()
    # In words, without counts or addresses: the facts are part of the published version, which a rebuild on
    # the same machine must reproduce byte for byte (other processes' listeners come and go).
    tried = ("a TCP connect from inside the application container to every listening TCP port of this host "
             "(our own listener on all addresses among them) on every address of the host, IPv4 and IPv6, the "
             "bridge gateway among them")
    if reached:
        where = sorted({"the bridge gateway" if r.split()[0] == gateway else "another host address" for r in reached})
        return SandboxFact("host", False, f"tried {tried}: answered on {' and '.join(where)}; the host is "
                           "reachable from the sandbox")
    return SandboxFact("host", True, f"tried {tried}: none answered (the host rule drops every new connection "
                       "from the sandbox's bridge)")


def host_ports() -> set[int]:
    """Every TCP port this machine listens on (any address), from ``/proc/net/tcp`` and ``tcp6``."""
    ports = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(name)
        if path.exists():
            for line in path.read_text().splitlines()[1:]:
                fields = line.split()
                if len(fields) > 3 and fields[3] == "0A":  # LISTEN
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def host_addresses() -> tuple[list[str], list[str]]:
    """This machine's own addresses, IPv4 and IPv6, loopback left out (``/proc/net/fib_trie``, ``if_inet6``)."""
    v4: set[str] = set()
    trie = Path("/proc/net/fib_trie")
    lines = trie.read_text().splitlines() if trie.exists() else []
    for before, line in zip(lines, lines[1:], strict=False):
        if "/32 host LOCAL" in line:
            address = before.split()[-1]
            if not address.startswith("127."):
                v4.add(address)
    v6: set[str] = set()
    inet6 = Path("/proc/net/if_inet6")
    for line in (inet6.read_text().splitlines() if inet6.exists() else []):
        raw = line.split()[0]
        address = str(ipaddress.IPv6Address(bytes.fromhex(raw)))
        if address != "::1":
            v6.add(address)
    return sorted(v4), sorted(v6)


def _clock(db: Measured) -> SandboxFact:
    with psycopg.connect(db.sandbox.admin_dsn(), autocommit=True) as conn:
        row = conn.execute("SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD')").fetchone()
    anchor = db.world.data_anchor.isoformat()
    frozen: dict[str, str] = {}
    days: dict[str, str] = {}
    if db.application is not None:
        _, health = db.request("GET", "/health", query={}, body=None, headers={})
        if isinstance(health, dict):
            frozen["application clock"] = str(health.get("clock"))
            days["application OS clock"] = str(health.get("os_time", ""))[:10]
    _, emulator = db.sandbox.exec("emulator", ["date", "-u", "+%Y-%m-%d"])
    days["emulator OS clock"] = emulator.strip()
    holds = all(v == db.world.now for v in frozen.values()) and all(v == anchor for v in days.values())
    shown = "; ".join([f"{k} {v}" for k, v in frozen.items()] +
                      [f"{k} on {v if v == anchor else 'ANOTHER DAY: ' + v}" for k, v in days.items()])
    db_day = str(row[0]) if row else "?"
    return SandboxFact("clock", holds, f"the world's clock is {db.world.now}; measured inside the sandbox: {shown} "
                       "(libfaketime moves each container's OS clock to the world's clock at start; the application "
                       "stamps writes with its own frozen clock setting). The database runs on the real clock"
                       f"{'' if db_day != anchor else ' (today is the anchor day)'}: PostgreSQL's timeouts misfire "
                       "under libfaketime, and nothing reads its clock (checks refuse it; tools write the world's "
                       "clock as a value)")


def measure_isolation(db: Measured) -> tuple[SandboxFact, ...]:
    """Measure the sandbox's isolation and clock (see the module docstring)."""
    attrs = db.sandbox.client.networks.get(db.sandbox.network.id).attrs
    internal = SandboxFact("network", bool(attrs.get("Internal")),
                           "the sandbox network is a Docker bridge created with internal=True"
                           if attrs.get("Internal") else "the sandbox network is NOT internal")
    return internal, _routes(db), _outside(db), _host(db), _clock(db)


def facts_json(facts: tuple[SandboxFact, ...]) -> str:
    return json.dumps([f.__dict__ for f in facts], indent=2)

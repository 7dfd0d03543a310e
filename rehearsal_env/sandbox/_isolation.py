"""Isolation and clock of a running sandbox, measured (for the world page's Reset and isolation).

* **internal network**: Docker reports the sandbox network ``Internal``.
* **no default route**: each container's ``/proc/net/route`` has no ``0.0.0.0/0`` entry.
* **outside unreachable**: a listener we start on a second, ordinary (not
  internal) Docker network stands in for "the outside". The driver reaches it
  (so it listens), and a TCP connect to it from inside the application and the
  database containers fails. Traffic goes only to our own containers.
* **clock**: what the application (its ``/health`` clock and its OS clock) and
  the database (``SELECT now()``) report, next to the world's clock.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
import psycopg

from ..worlds import World
from ._docker import LABEL
from ._sandbox import Sandbox

LISTENER_PORT = 9000
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
    """``network``, ``route``, ``outside`` or ``clock``."""
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
    return internal, _routes(db), _outside(db), _clock(db)


def facts_json(facts: tuple[SandboxFact, ...]) -> str:
    return json.dumps([f.__dict__ for f in facts], indent=2)

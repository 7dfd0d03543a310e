"""The host guard: a firewall rule that drops every connection a sandbox network opens to this machine.

The sandbox network is internal and its containers have no default route, but this machine owns the
bridge's gateway address, and a packet for any of its addresses that arrives on the bridge goes to
its own input path, which Docker's isolation rules (on the forward path) never see. So, per sandbox
network, right after it is created and before any container joins it, one rule is inserted at the
top of the ``INPUT`` chain, for IPv4 (``iptables``) and IPv6 (``ip6tables``)::

    -i br-<network id[:12]> -m conntrack --ctstate NEW -m comment --comment "rehearsal-sandbox <id>" -j DROP

Only *new* connections from the bridge are dropped: the driver's own connections to the containers
(checks, resets, tool calls) are opened from this side, so their replies are ``ESTABLISHED`` and
pass. The rule is removed when the sandbox closes; rules whose network no longer exists (an owner
killed before it could remove them) are removed by :func:`clean_guards`, which the next start and
the reaper call.

If the rule cannot be installed (no iptables, not root) the sandbox does not start (fail closed).
``REHEARSAL_SANDBOX_HOST_OPEN=1`` starts it without the rule; the world page's ``host`` fact then
measures, and says, that the host answers.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path

OPEN_ENV = "REHEARSAL_SANDBOX_HOST_OPEN"
"""Set to ``1`` to start sandboxes without the host rule (the host is then reachable from the sandbox)."""
COMMENT = "rehearsal-sandbox"
"""The comment on every rule of ours (followed by the network id's first 12 characters)."""
TOOLS = ("iptables", "ip6tables")


class GuardError(RuntimeError):
    """The host rule could not be installed (the sandbox does not start)."""


def host_open() -> bool:
    """Whether the operator chose to run sandboxes without the host rule (:data:`OPEN_ENV`)."""
    return os.environ.get(OPEN_ENV) == "1"


def bridge_of(network_id: str) -> str:
    """The bridge interface Docker makes for a user-defined network."""
    return f"br-{network_id[:12]}"


def _rule(network_id: str) -> list[str]:
    return ["INPUT", "-i", bridge_of(network_id), "-m", "conntrack", "--ctstate", "NEW",
            "-m", "comment", "--comment", f"{COMMENT} {network_id[:12]}", "-j", "DROP"]


def _ipv6_on() -> bool:
    return Path("/proc/net/if_inet6").exists()


def _run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tool, "-w", "10", *args], capture_output=True, text=True, timeout=30, check=False)


def install_guard(network_id: str) -> None:
    """Insert the rule for ``network_id``'s bridge into both INPUT chains, or raise :class:`GuardError`."""
    if host_open():
        return
    fix = (f"run as root with iptables installed (Debian: apt-get install iptables), or set {OPEN_ENV}=1 to "
           "run sandboxes that can reach this host")
    if not Path("/sys/class/net", bridge_of(network_id)).exists():
        raise GuardError(f"the sandbox network's bridge {bridge_of(network_id)} is not on this machine (a remote "
                         f"DOCKER_HOST?), so no rule here can guard it; run on the Docker host, or {fix}")
    done: list[str] = []
    for tool in TOOLS:
        if tool == "ip6tables" and not _ipv6_on():
            continue  # no IPv6 on this machine: nothing to reach by it
        if shutil.which(tool) is None:
            remove_guard(network_id, tools=done)
            raise GuardError(f"the sandbox cannot drop its connections to this host: {tool} is not installed; {fix}")
        out = _run(tool, "-I", *_rule(network_id))
        if out.returncode != 0:
            remove_guard(network_id, tools=done)
            raise GuardError(f"the sandbox cannot drop its connections to this host: {tool} -I INPUT failed "
                             f"({' '.join(out.stderr.split())[:200] or out.returncode}); {fix}")
        done.append(tool)


def remove_guard(network_id: str, *, tools: Iterable[str] = TOOLS) -> None:
    """Delete ``network_id``'s rules (every copy; missing ones and missing tools are fine)."""
    for tool in tools:
        if shutil.which(tool) is None:
            continue
        for _ in range(8):  # one per install; a few at most
            if _run(tool, "-D", *_rule(network_id)).returncode != 0:
                break


def guarded_networks() -> dict[str, list[tuple[str, str]]]:
    """Network id prefix -> the (tool, ``-S`` line) of each of our rules now in the INPUT chains."""
    found: dict[str, list[tuple[str, str]]] = {}
    for tool in TOOLS:
        if shutil.which(tool) is None:
            continue
        for line in _run(tool, "-S", "INPUT").stdout.splitlines():
            words = shlex.split(line)
            if "--comment" in words:
                comment = words[words.index("--comment") + 1].split()
                if len(comment) == 2 and comment[0] == COMMENT:
                    found.setdefault(comment[1], []).append((tool, line))
    return found


def clean_guards(live_network_ids: Callable[[], Iterable[str]]) -> int:
    """Delete our rules whose network is not among those ``live_network_ids()`` lists (full or 12-character ids).

    The rules are listed first and the networks after: a rule is installed only after its network exists,
    so a sandbox starting meanwhile never loses its rule."""
    rules_now = guarded_networks()
    if not rules_now:
        return 0
    live = {n[:12] for n in live_network_ids()}
    removed = 0
    for prefix, rules in rules_now.items():
        if prefix in live:
            continue
        for tool, line in rules:
            words = shlex.split(line)
            if words[:1] == ["-A"] and _run(tool, "-D", *words[1:]).returncode == 0:
                removed += 1
    return removed

"""The Docker daemon as the sandbox uses it: one client, our labels, and the cleanup of leftovers.

Everything the sandbox creates (networks, containers, images) carries the label
``rehearsal.sandbox``; containers and networks also carry ``rehearsal.owner``
(``<hostname>-<pid>`` of the process that made them). :func:`clean_leftovers`
removes the containers and networks of owners that no longer run, so a crashed
worker leaves nothing behind after the next start; :func:`remove_ours` removes
this process's at exit, and a reaper process (:mod:`._reaper`) removes them when
the process is killed without running its exit handlers (a Ray worker, ``kill -9``).
Each network's host rule (:mod:`._hostguard`) goes with it, and rules whose network
is gone are removed too.
"""

from __future__ import annotations

import atexit
import functools
import os
import socket
import threading
from typing import Any

from .._process import pid_alive
from ._hostguard import clean_guards, remove_guard
from ._labels import LABEL, OWNER
from ._reaper import start_reaper


class SandboxError(RuntimeError):
    """The sandbox could not be built, started or reached (infrastructure: the episode is not scored)."""


def owner() -> str:
    """This process's owner label."""
    return f"{socket.gethostname()}-{os.getpid()}"


@functools.lru_cache(maxsize=4)
def _client_for(pid: int, host: str | None) -> Any:
    """The client of process ``pid`` for the daemon at ``host`` (DOCKER_HOST; None: the default socket)."""
    try:
        import docker
    except ImportError as exc:
        raise SandboxError("the docker backend needs the Docker SDK: pip install 'rehearsal-env[sandbox]'") from exc
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except docker.errors.DockerException as exc:
        raise SandboxError(f"cannot reach the Docker daemon ({exc}); start dockerd, or set DOCKER_HOST") from exc
    return client


def docker_client() -> Any:
    """The process's Docker client for the daemon DOCKER_HOST names now (one per process and daemon; a forked
    worker makes its own)."""
    return _client_for(os.getpid(), os.environ.get("DOCKER_HOST"))


def docker_available() -> str | None:
    """None when a Docker daemon answers; else why not (for skips)."""
    try:
        docker_client()
    except SandboxError as exc:
        return str(exc)
    return None


def _alive(label: str) -> bool:
    host, _, pid = label.rpartition("-")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's: not ours to judge
    return pid_alive(int(pid))


def _remove(predicate: Any) -> int:
    import docker.errors

    client = docker_client()
    removed = 0
    for container in client.containers.list(all=True, filters={"label": LABEL}):
        if predicate(container.labels.get(OWNER, "")):
            try:
                container.remove(force=True, v=True)
                removed += 1
            except docker.errors.NotFound:
                pass
    for network in client.networks.list(filters={"label": LABEL}):
        if predicate(network.attrs.get("Labels", {}).get(OWNER, "")):
            try:
                network.remove()
                removed += 1
            except docker.errors.NotFound:
                pass
            remove_guard(network.id)
    return removed


_cleaned: set[int] = set()
_cleaned_lock = threading.Lock()


def clean_leftovers(*, again: bool = False) -> int:
    """Remove the containers and networks of sandbox owners that died (once per process unless ``again``)."""
    with _cleaned_lock:
        if os.getpid() in _cleaned and not again:
            return 0
        if os.getpid() not in _cleaned:
            atexit.register(remove_ours)
            start_reaper(os.getpid(), owner())  # for a process killed without running atexit
        _cleaned.add(os.getpid())
    removed = _remove(lambda label: bool(label) and not _alive(label))
    return removed + clean_guards(lambda: [n.id for n in docker_client().networks.list()])


def remove_ours() -> int:
    """Remove every container and network this process made (at exit; also callable by hand)."""
    if docker_available() is not None:
        return 0
    me = owner()
    return _remove(lambda label: label == me)


def ours_left() -> list[str]:
    """Names of every container, network and volume this process labelled and has not removed (for the
    no-leftovers tests; another process's sandboxes, e.g. a parallel test worker's, are not this one's)."""
    client = docker_client()
    mine = {"label": [f"{OWNER}={owner()}"]}
    names = [f"container {c.name}" for c in client.containers.list(all=True, filters=mine)]
    names += [f"network {n.name}" for n in client.networks.list(filters=mine)]
    names += [f"volume {v.name}" for v in client.volumes.list(filters=mine)]
    return names

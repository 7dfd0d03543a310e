"""The reaper: a small process that removes a sandbox owner's containers and networks once the owner dies.

``atexit`` does not run when a process is killed (a Ray worker at ``ray.shutdown``,
a crash, ``kill -9``), so every process that starts a sandbox also starts one
reaper, in its own session: it polls the owner's pid and, when it is gone,
removes everything labelled with that owner (and the host rules of its networks), then exits. (The next start's
:func:`~._docker.clean_leftovers` is the second line of defence.)

    python -m rehearsal_env.sandbox._reaper PID OWNER_LABEL
"""

from __future__ import annotations

import subprocess
import sys
import time

import docker
import docker.errors

from .._process import pid_alive
from ._hostguard import clean_guards, remove_guard
from ._labels import LABEL, OWNER

POLL_S = 0.5


_DETACH = ("import subprocess, sys; subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, "
           "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)")


def start_reaper(pid: int, owner_label: str) -> None:
    """Start the reaper of ``pid``, detached twice: it is no descendant of ``pid``, so whoever kills
    ``pid`` and its children (Ray does, when a worker exits) does not kill the reaper too."""
    subprocess.run([sys.executable, "-c", _DETACH, sys.executable, "-m", "rehearsal_env.sandbox._reaper",
                    str(pid), owner_label], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False, timeout=30)


def main(pid: int, owner_label: str) -> None:
    while pid_alive(pid):
        time.sleep(POLL_S)
    client = docker.from_env(timeout=60)
    selector = {"label": [LABEL, f"{OWNER}={owner_label}"]}
    for container in client.containers.list(all=True, filters=selector):
        try:
            container.remove(force=True, v=True)
        except docker.errors.APIError:
            pass
    for network in client.networks.list(filters=selector):
        try:
            network.remove()
        except docker.errors.APIError:
            pass
        remove_guard(network.id)  # the network's host rule (see ._hostguard)
    clean_guards(lambda: [n.id for n in client.networks.list()])


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])

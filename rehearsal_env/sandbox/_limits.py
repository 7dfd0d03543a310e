"""The bounds of an untrusted container (the application's, the emulator's), as Docker settings.

Each such container runs:

* as ``nobody`` (uid and gid 65534), never root, with every capability dropped (``cap_drop=ALL``: no
  ``NET_RAW``, ``NET_ADMIN``, ``CHOWN``, ``SETUID``...) and ``no-new-privileges`` (a setuid binary
  does not raise it);
* on a read-only root filesystem, with ``/tmp`` a tmpfs of ``tmpfs_mb`` (``nosuid,nodev``) as the only
  writable place (``HOME`` points there);
* with at most 8 MiB of its output kept (the Docker log on this machine's disk);
* under the world's ``[application.limits]``: ``pids`` processes and threads, ``memory_mb`` of memory
  with no swap (the kernel's OOM killer stops the largest process of the container past it), ``cpus``
  cores of CPU time.

The database container is ours (Debian's PostgreSQL) and holds no world code; it keeps the few
capabilities its start script needs (see :data:`DATABASE_BOUNDS`).
"""

from __future__ import annotations

from typing import Any

from ..worlds import ApplicationLimits

USER = "65534:65534"
"""``nobody:nogroup`` in the Debian base image."""
TMP = "/tmp"


def bounded(limits: ApplicationLimits) -> dict[str, Any]:
    """Docker ``containers.create`` keyword arguments that bound a container by ``limits``."""
    memory = f"{limits.memory_mb}m"
    return {
        "user": USER,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "read_only": True,
        "tmpfs": {TMP: f"rw,nosuid,nodev,size={limits.tmpfs_mb}m,mode=1777"},
        "pids_limit": limits.pids,
        "mem_limit": memory,
        "memswap_limit": memory,
        "nano_cpus": int(limits.cpus * 1e9),
        "shm_size": f"{min(limits.tmpfs_mb, 64)}m",
        "log_config": LOGS,
    }


LOGS: dict[str, Any] = {"type": "json-file", "config": {"max-size": "8m", "max-file": "1"}}
"""What a container may print is kept on this machine's disk: at most 8 MiB of it (the newest)."""


DATABASE_BOUNDS: dict[str, Any] = {
    "cap_drop": ["ALL"],
    "cap_add": ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID"],
    "security_opt": ["no-new-privileges"],
    "pids_limit": 512,
    "log_config": LOGS,
}
"""The database container: root only to create its data folder and drop to ``postgres``; no other capability."""


def bounded_env() -> dict[str, str]:
    """Environment every bounded container gets (a home in the writable tmpfs)."""
    return {"HOME": TMP}

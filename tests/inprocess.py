"""The registered worlds that run in process; sandboxed worlds have tests of their own (tests/test_sandbox.py)."""

from __future__ import annotations

from rehearsal_env.worlds import backend_for, load_world, world_names


def in_process_worlds() -> list[str]:
    """Names of the registered worlds whose tools run in process (on SQLite or PostgreSQL)."""
    return [w for w in world_names() if backend_for(load_world(w)) != "docker"]

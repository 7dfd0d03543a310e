"""What tests/test_fork.py compares, and its subprocess side (restore checkpoints in a fresh interpreter).

An *outcome* of an env continued with a list of actions: the observations, the database digest, the
outside-service ledger, the verdict and the trace (less wall times). Run as a script it reads a JSON job
``{"world": SPEC, "dsn": DSN | null, "cases": [{"checkpoint": HEX, "actions": [...]}, ...]}`` on stdin,
restores each checkpoint, continues it and prints the outcomes as JSON lines.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def world_of(spec: str) -> Any:
    """A world from its test spec: ``builtin:NAME``, ``folder:PATH`` or ``tau2:DOMAIN``."""
    kind, _, name = spec.partition(":")
    if kind == "builtin":
        from rehearsal_env import load_world

        return load_world(name)
    if kind == "folder":
        from rehearsal_env.worlds import load_world_folder

        return load_world_folder(Path(name))
    if kind == "tau2":
        sys.path.insert(0, str(HERE))
        from tau2data import tau2_world

        return tau2_world(name)
    raise ValueError(f"unknown world spec {spec!r}")


def outcome(env: Any, actions: list[str], *, digest: bool = True) -> dict[str, Any]:
    """Step ``env`` through ``actions`` (stopping when the episode ends) and describe where it got.

    The database is described by its touched rows against the world's snapshot (exact, and cheap), and
    with ``digest`` also by the SHA-256 of every row (a second of work on the analytics world).
    """
    from rehearsal_env.env._delta import capture_delta
    from rehearsal_env.services import service_log

    observations = []
    verdict = None
    for action in actions:
        obs, _, terminated, truncated, info = env.step(action)
        observations.append(obs)
        if terminated or truncated:
            verdict = info["verdict"]
            break
    trace = [{k: v for k, v in asdict(t).items() if k != "latency_ms"} for t in env.episode.trace]
    return {
        "observations": observations,
        "digest": env.digest() if digest else None,
        "delta": json.loads(json.dumps(capture_delta(env.db).to_json())),
        "ledger": service_log(env.db),
        "verdict": None if verdict is None else json.loads(json.dumps(asdict(verdict), default=str)),
        "trace": json.loads(json.dumps(trace, default=str)),
    }


def main() -> None:
    import rehearsal_env

    job = json.load(sys.stdin)
    world = world_of(job["world"])
    options = {"dsn": job["dsn"]} if job.get("dsn") else {}
    for case in job["cases"]:
        env = rehearsal_env.restore(bytes.fromhex(case["checkpoint"]), world=world, **options)
        print(json.dumps(outcome(env, case["actions"], digest=case["digest"])), flush=True)
        env.close()


if __name__ == "__main__":
    main()

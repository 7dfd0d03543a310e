"""Turns kept as the agent's input and replayed: a chain's cheapest record (``CheckpointChain(env, replay=True)``).

The env is deterministic: the same state and the same input give the same observation, database and ledger (the
fork property test holds it to that on every backend). So after a full checkpoint, a turn can be kept as what
the agent gave it, a *turn record*, instead of what it changed: the action text (or, for a policy that raised, the
exception's type name and message, which is all the env reads of it), the SHA-256 of the observation it got and
its latency; and a full checkpoint of an episode still at its reset is kept as the reset itself, its seed
(:func:`reset_checkpoint`). A restore rebuilds the full checkpoint's state and takes the recorded turns again
(:func:`replay_turns`); an observation that differs from the recorded one stops the restore
(:class:`~._checkpoint.CheckpointError`), so a world that is not deterministic is found, not trusted. The trace
keeps the recorded latencies (wall time is not part of the state).

Only an episode whose customer is the scripted one is kept this way: a model customer's answers would be asked of
the model again. The chain falls back to a full checkpoint wherever a turn cannot be kept (another customer, a
turn not taken through ``step`` or ``policy_failed``, a take skipped).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

from ._checkpoint import CheckpointError, encode, version_of
from ._customer import ScriptedCustomer

if TYPE_CHECKING:
    from ._env import RehearsalEnv
    from ._episode import Episode

OBSERVATION_DIGEST_HEX = 32
"""Hex digits of an observation's SHA-256 a turn record keeps (128 bits)."""
REPLAY_EVERY = 128
"""Turns between two full checkpoints of a chain of turn records (a restore replays at most this many turns)."""
class Raised(Exception):
    """A policy's exception as a turn record keeps it: the env reads only its type's name and its message."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def replayable(episode: Episode) -> bool:
    """Whether the episode's turns can be replayed (its customer is the scripted one)."""
    return type(episode.customer) is ScriptedCustomer


def turn_record(episode: Episode, given: Any) -> bytes | None:
    """The record of the episode's last turn, as JSON bytes, taken from ``given`` (a ``str`` action, or a ``(type
    name, message)`` pair for a policy that raised); None when it cannot be kept. Written by hand: a turn record
    is taken after every turn, and ``json.dumps`` of the dict costs three times as much."""
    if not episode.trace or given is None:
        return None
    last = episode.trace[-1]
    kept = f'"act":{json.dumps(given)}' if isinstance(given, str) else f'"raised":{json.dumps(list(given))}'
    return (f'{{"turn":{int(episode.turn)},"observation":"{_digest(last.observation)}",'
            f'"latency_ms":{float(last.latency_ms)!r},{kept}}}').encode()


def reset_checkpoint(env: RehearsalEnv) -> bytes | None:
    """A full checkpoint of an episode still at its reset, kept as the reset itself: the env's settings and the
    reset's seed, which a restore resets with before it takes the turn records again (None: the episode is past
    its reset, or was reset without a seed, so its random state cannot be reset to)."""
    episode = env.episode
    seed = env._reset_seed  # not the generator's last seed: a reset without one continues the old state
    if episode.turn != 0 or episode.trace or seed is None or not replayable(episode):
        return None
    header = {"world": env.world.name, "world_version": version_of(env.world),
              "anchor": env.world.data_anchor.isoformat(), "scenario": env.scenario.id, "backend": env.backend,
              "turn": 0, "episode_id": env._episode_id(episode)}
    payload = {"env": {"stress": env.stress, "profile": env.profile, "freeze_time_source": env.freeze_time_source},
               "reset": {"seed": int(seed), "episode_id": episode.id,
                         "lineage": None if episode.lineage is None else asdict(episode.lineage)}}
    return encode(header, payload)


def is_turn_record(record: Mapping[str, Any]) -> bool:
    return "act" in record or "raised" in record


def replay_turns(env: RehearsalEnv, records: Sequence[Mapping[str, Any]]) -> None:
    """Take the recorded turns again on ``env`` (restored at the full checkpoint), checking each observation.

    Raises:
        CheckpointError: a record of the wrong shape, or a replayed observation that differs from the recorded one.
    """
    episode = env.episode
    for record in records:
        try:
            turn, want = int(record["turn"]), str(record["observation"])
            latency = float(record["latency_ms"])
            if "act" in record:
                observation = env.step(str(record["act"]))[0]
            else:
                kind, message = (str(v) for v in record["raised"])
                observation = env.policy_failed(_raised(kind, message))[0]
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"the checkpoint's turn record could not be read ({type(exc).__name__}: {exc}); "
                                  "pass the bytes a CheckpointChain gave, unchanged") from None
        if episode.turn != turn or _digest(observation) != want:
            raise CheckpointError(f"replaying turn {turn} gave another observation than the one recorded (turn "
                                  f"{episode.turn}): the world is not deterministic for this episode, so a chain "
                                  "of turn records cannot restore it; use CheckpointChain(env, replay=False)")
        episode.trace[-1] = replace(episode.trace[-1], latency_ms=latency)


def _raised(kind: str, message: str) -> Exception:
    """An exception whose type name and message are ``kind`` and ``message`` (all ``policy_failed`` reads)."""
    return type(kind, (Raised,), {})(kind, message)


def _digest(observation: str) -> str:
    return hashlib.sha256(observation.encode("utf-8", "surrogatepass")).hexdigest()[:OBSERVATION_DIGEST_HEX]

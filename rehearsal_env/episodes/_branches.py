"""Forks, checkpoints and restores of hosted episodes: who may make them, and what the new episode is.

- :func:`fork`: only an episode's owner may fork it, while it is going. The fork is a new episode of the same key, in
  the parent's exact state (its database copied onto a database of the pool, which is always in the snapshot state),
  recorded as a ``fork`` of the parent at its turn.
- :func:`checkpoint`: only the owner may take one; the bytes are wrapped by the table's
  :class:`~._checkpoints.CheckpointSeal` with what the server decided about the episode.
- :func:`restore`: only bytes the table handed out, unchanged, by the key they were issued to; the new episode starts
  from a database in the snapshot state plus the checkpoint's own rows, under the agent the checkpoint names, and is
  recorded as a ``restore`` of the checkpointed episode.

Forks and restores are training and search tools: readiness, ``measure.py``, compare and improve count root episodes
only. Every transport (HTTP, WebSocket, the pool, the trainers' adapters) calls these three; none decides by itself.
"""

from __future__ import annotations

from collections.abc import Callable

from ..backends import Database
from ..env import CheckpointError, RehearsalEnv, read_header
from ..env import restore as restore_env
from ..scenarios import Scenario
from ..worlds import World
from ._checkpoints import Issued
from ._session import Forbidden, Principal, Refused, Session, StepConflict
from ._table import SessionTable

MAX_CHECKPOINT_BYTES = 16 << 20
"""The largest checkpoint a restore reads."""
Find = Callable[[str, str], tuple[World, Scenario]]
"""``find(world, scenario)``: the served world and scenario of those names (raises the transport's not-found)."""


def _going(session: Session, what: str) -> RehearsalEnv:
    if session.env is None:
        raise StepConflict(f"episode {session.id} has ended ({session.ended_by}); only an episode still going can be "
                           f"{what}", expected_step_index=None)
    return session.env


def _owned(who: Principal, session: Session, what: str) -> None:
    if session.owner != who.key_id:
        raise Forbidden(f"episode {session.id!r} belongs to another key; only its owner may {what} it")


def fork(table: SessionTable, who: Principal, parent: Session) -> Session:
    """A new episode of ``who`` in ``parent``'s state at its current turn (see the module docstring)."""
    _owned(who, parent, "fork")

    def make(db: Database) -> RehearsalEnv:
        env = _going(parent, "forked")
        env.episode.id = parent.id
        return env.fork(database=db)
    return table.branch(who, parent, make, world=parent.world, scenario=parent.scenario, seed=parent.seed,
                        profile=parent.profile, agent=parent.agent, agent_version=parent.agent_version,
                        steps=parent.steps)


def checkpoint(table: SessionTable, who: Principal, session: Session) -> bytes:
    """``session``'s checkpoint as this table hands it out (see the module docstring)."""
    _owned(who, session, "checkpoint")
    with session.lock:
        env = _going(session, "checkpointed")
        env.episode.id = session.id
        data = env.checkpoint()
        issued = Issued(key_id=session.owner, episode_id=session.id, agent=session.agent,
                        agent_version=session.agent_version, seed=session.seed, profile=session.profile,
                        steps=session.steps)
    return table.seal.wrap(issued, data)


def restore(table: SessionTable, who: Principal, data: bytes, find: Find) -> Session:
    """A new episode of ``who`` from checkpoint bytes this table handed out to ``who`` (see the module docstring).

    Raises:
        Refused: bytes this table did not hand out, changed ones, or longer than :data:`MAX_CHECKPOINT_BYTES`.
        Forbidden: a checkpoint handed out to another key.
    """
    if len(data) > MAX_CHECKPOINT_BYTES:
        raise Refused(f"expected a checkpoint of at most {MAX_CHECKPOINT_BYTES} bytes, got {len(data)}")
    issued, inner = table.seal.open(data)
    if issued.key_id != who.key_id:
        raise Forbidden(f"the checkpoint of episode {issued.episode_id} was handed out to another key; only that key "
                        f"may restore it")
    try:
        header = read_header(inner)
    except CheckpointError as exc:
        raise Refused(str(exc)) from None
    world, scenario = find(str(header["world"]), str(header["scenario"]))

    def make(db: Database) -> RehearsalEnv:
        try:
            return restore_env(inner, world=world, backend=table.backend, database=db)
        except CheckpointError as exc:
            raise Refused(str(exc)) from None
    return table.branch(who, None, make, world=world, scenario=scenario, seed=issued.seed, profile=issued.profile,
                        agent=issued.agent, agent_version=issued.agent_version, steps=issued.steps)

"""``rehearsal_env.restore(bytes)``: an env rebuilt from :meth:`RehearsalEnv.checkpoint`, in any process.

The bytes are checked first (:mod:`._checkpoint`: layout, digest, package and world
version); then the env is made for the saved world, scenario, clock, stress and
profile; a database of the world is taken (a spare when one is kept, see
:mod:`._fork`) and the saved touched rows written into it; the episode's state and
the random state are put back, and a chain's turn records taken again
(:mod:`._replay`). The restored episode continues exactly as the one that was
checkpointed would have.

Its record names the checkpointed episode and turn as its parent, unless
``resume=True``: then it *is* that episode, continued (the same id and lineage), as
when a runner picks up an episode after its worker died (the record then equals an
uninterrupted one's).
"""

from __future__ import annotations

from typing import Any

from ..backends import Database
from ..clock import frozen_world
from ..worlds import World, load_world
from ._chain import merge_records
from ._checkpoint import CheckpointError, decode, read_header
from ._customer import Customer
from ._delta import DatabaseDelta, apply_delta
from ._env import RehearsalEnv
from ._episode import Episode
from ._fork import give_back, take_database
from ._lineage import Lineage
from ._replay import is_turn_record, replay_turns
from ._state import load_episode_state, set_rng_state


def restore(data: bytes, *, world: World | None = None, backend: str | None = None,
            customer: Customer | None = None, resume: bool = False, database: Database | None = None,
            **backend_options: Any) -> RehearsalEnv:
    """The env of a checkpoint, in the state it was taken in.

    Args:
        data: Bytes from :meth:`RehearsalEnv.checkpoint`, or a :class:`CheckpointChain`'s (a full checkpoint with
            the delta records of the turns after it).
        world: The :class:`World` to restore into (default: the registered world the checkpoint names;
            pass the object for a world that is not registered by name, e.g. one built in a test).
        backend: The database backend (default: the checkpoint's; the saved state is the same on every one).
        customer: The customer (default: the scripted customer); it must be of the checkpointed kind.
        resume: Continue the same episode (same id, no new lineage) instead of a new one whose parent it is.
        database: A reset database of the world to restore into, which the env uses and does not close
            (default: a spare of this process's pool, given back when the env closes).
        backend_options: Passed to the backend (PostgreSQL: ``dsn``); a checkpoint never holds them.

    Raises:
        CheckpointError: the bytes are not a checkpoint, are truncated or edited, or were made by another
            package version or for another world version.
        DatabaseError: the database could not be opened or the saved rows written.
    """
    header = read_header(data)
    base = world if world is not None else _world(header["world"])
    if base.name != header["world"]:
        raise CheckpointError(f"the checkpoint is of world {header['world']!r}; world= is {base.name!r}")
    checkpoint = decode(data, frozen_world(base, header["anchor"]))  # digest, versions: before anything is built
    try:
        scenario = base.scenario(header["scenario"])
    except KeyError:
        raise CheckpointError(f"the checkpoint's scenario {header['scenario']!r} is not one of world "
                              f"{base.name!r}'s") from None
    settings = checkpoint.payload["env"]
    env = RehearsalEnv(scenario, base, backend=backend or header["backend"], freeze_time=header["anchor"],
                       stress=bool(settings["stress"]), reward_profile=settings["profile"], customer=customer,
                       **backend_options)
    env.freeze_time_source = str(settings["freeze_time_source"])
    db = database if database is not None else take_database(env.world, env.backend, backend_options)
    payload, turn = checkpoint.payload, int(header["turn"])
    replayed = [r for r in checkpoint.records if is_turn_record(r)]
    try:
        if replayed and len(replayed) != len(checkpoint.records):
            raise CheckpointError("the checkpoint mixes turn records and delta records, which no CheckpointChain "
                                  "writes; pass the bytes a CheckpointChain gave, unchanged")
        if checkpoint.records:  # an incremental checkpoint: the full one's state with the turns after it
            if not replayed:
                payload = merge_records(payload, checkpoint.records, [t.name for t in db.tables])
            turn = int(checkpoint.records[-1]["turn"])
        if "reset" not in payload:
            apply_delta(db, DatabaseDelta.from_json(payload["database"]))
    except BaseException:
        if database is None:
            give_back(env.world, env.backend, backend_options, db)
        raise
    env._db, env._owns_db, env._spare_db = db, database is None, database is None
    try:
        if "reset" in payload:  # an episode checkpointed at its reset: reset again (turn records follow)
            episode = _reset(env, payload["reset"], customer)
        else:
            episode = Episode(env.world, env.scenario, db, stress=env.stress, customer=customer,
                              snapshot=env._snapshot)
            load_episode_state(episode, payload["episode"])
            env._np_random, env._np_random_seed = set_rng_state(payload["rng"])
    except (KeyError, TypeError, ValueError) as exc:
        env.close()
        raise CheckpointError(f"the checkpoint's episode state could not be read back: {exc}") from exc
    env._episode = episode
    if replayed:  # turn records: the turns after the full checkpoint, taken again
        try:
            replay_turns(env, replayed)
        except BaseException:
            env.close()
            raise
    if not resume:
        episode.id = None
        episode.lineage = Lineage(str(header["episode_id"]), turn, "restore")
    return env


def _reset(env: RehearsalEnv, reset: dict[str, Any], customer: Customer | None) -> Episode:
    """The env reset as the checkpointed episode was (:func:`._replay.reset_checkpoint`): its seed, id and lineage."""
    env.reset(seed=int(reset["seed"]))
    episode = env.episode
    episode.id = None if reset["episode_id"] is None else str(reset["episode_id"])
    lineage = reset["lineage"]
    episode.lineage = None if lineage is None else Lineage(str(lineage["parent_episode"]),
                                                           int(lineage["parent_turn"]), lineage["kind"])
    return episode


def _world(name: str) -> World:
    try:
        return load_world(name)
    except KeyError as exc:
        raise CheckpointError(f"the checkpoint is of world {name!r}, which this process does not have ({exc}); "
                              "pass world= with that World") from None

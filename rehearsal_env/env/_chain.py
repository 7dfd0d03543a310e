"""Incremental checkpoints: a full checkpoint every k turns, and after each other turn only what that turn changed.

A checkpoint after every turn (:meth:`~rehearsal_env.RehearsalEnv.checkpoint`) encodes
the whole episode each time: its trace grows with the turns, and every touched row
is read again. A :class:`CheckpointChain` takes a full checkpoint, then after each
turn a *delta record* holding only what changed since the previous take:

- the trace entries, crashes and turn rewards added (they are only ever appended),
  the journal operations added or changed, the episode's small fields that changed
  (turn, counters, the events layer's and the customer's state, ...), the random state
  if it moved;
- the database rows written since (on SQLite read from the log of written keys
  after the last take; on PostgreSQL and the sandbox every touched row is read and
  only those that differ from the last take are kept).

The chain's bytes (:meth:`CheckpointChain.data`) are the full checkpoint with the
delta records appended (their layout: :mod:`._checkpoint`), and
:func:`rehearsal_env.restore` takes them as it takes a full checkpoint: each record is
checked (its SHA-256 chains to the full checkpoint's digest and to the record before
it, so a record edited, dropped or reordered is refused) and merged into the full
checkpoint's state (:func:`merge_records`), giving exactly the state a full checkpoint
at that turn holds. A full checkpoint is taken again every ``every``
turns (:data:`FULL_EVERY`), so a restore merges at most that many records, and
whenever the env started another episode.

``replay=True`` keeps each turn after the full checkpoint as a *turn record* instead: what
the agent gave it, the digest of its observation and its latency (:mod:`._replay`), which a
restore takes again on the full checkpoint's state, checking every observation. It costs a
turn a few microseconds where a delta costs a tenth of a millisecond, and a restore the
replay of at most ``every`` turns; it needs the scripted customer and a deterministic
world (a restore of a world that is not refuses, naming the turn).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ._checkpoint import CheckpointError, delta_record, read_header
from ._delta import DatabaseDelta, capture_delta, read_rows
from ._replay import REPLAY_EVERY, replayable, reset_checkpoint, turn_record
from ._state import _encode, _plain, customer_state, rng_state

if TYPE_CHECKING:
    from ._env import RehearsalEnv
    from ._episode import Episode

FULL_EVERY = 32
"""Turns between two full checkpoints of a chain (a restore merges at most this many delta records)."""
_SCALARS = ("turn", "dispatch_turn", "counters", "events", "customer", "episode_id", "lineage")
"""The episode state's fields a delta record carries whole when they changed."""
_APPENDED = ("trace", "crashes", "turn_rewards")
"""The episode state's lists that only grow: a delta record carries the entries added."""


@dataclass
class _Seen:
    """What the chain's last take saw (the base a delta is computed against)."""

    episode: Episode
    """The episode taken (another one starts the chain again with a full checkpoint)."""
    scalars: dict[str, Any]
    """The episode state's small fields as saved last (see ``_SCALARS``)."""
    lengths: dict[str, int]
    """How many entries of each growing list were saved."""
    journal: dict[str, Any]
    """Each journal operation saved, by id (an operation changes by being replaced)."""
    rng: Any
    """The random generator's state and seed as saved last."""
    digest: bytes
    """The chain digest of the last record (the full checkpoint's digest before any)."""
    database_mark: int = 0
    """SQLite: the last entry of the log of written keys that was saved."""
    rows: dict[str, dict[Any, tuple[Any, ...] | None]] = field(default_factory=dict)
    """Elsewhere: every touched row as saved last, by table and key (None: absent)."""
    turn: int = 0
    """The episode's turn at the last take (a turn record keeps exactly the one turn after it)."""
    replayed: bool = False
    """Whether this episode's turns are kept as turn records (asked for, and its customer is the scripted one)."""


class CheckpointChain:
    """Checkpoints of one env after every turn: ``take()`` after each turn, ``data()`` for what restores it."""

    def __init__(self, env: RehearsalEnv, *, every: int | None = None, replay: bool = False) -> None:
        every = every if every is not None else REPLAY_EVERY if replay else FULL_EVERY
        if every < 1:
            raise ValueError(f"expected every >= 1 (turns between full checkpoints), got {every}")
        self.env = env
        """The env checkpointed."""
        self.every = every
        """Turns between full checkpoints (default: :data:`FULL_EVERY`, or :data:`._replay.REPLAY_EVERY` for turn
        records, whose restore replays the turns)."""
        self.replay = replay
        """Whether turns are kept as turn records, replayed at restore (see the module docstring)."""
        self._full = b""
        self._records: list[bytes] = []
        self._seen: _Seen | None = None

    def take(self) -> tuple[bool, bytes]:
        """Checkpoint the env now: ``(True, full checkpoint bytes)`` when a full one is due (the first take, every
        ``every`` takes, a new episode), else ``(False, delta record bytes)`` to append after the last ones.

        Raises:
            RuntimeError: the env is closed, not reset, or its episode has ended (as ``env.checkpoint()``).
        """
        episode = self.env._live("checkpoint")
        seen = self._seen
        if seen is None or seen.episode is not episode or len(self._records) + 1 >= self.every:
            return True, self._take_full(episode)
        if seen.replayed:
            kept = turn_record(episode, self.env._given) if episode.turn == seen.turn + 1 else None
            if kept is None:
                return True, self._take_full(episode)
            body = kept
        else:
            body = self._delta(episode, seen)
        record, seen.digest = delta_record(seen.digest, body)
        seen.turn = episode.turn
        self._records.append(record)
        return False, record

    def data(self) -> bytes:
        """The last full checkpoint and the delta records after it: what :func:`rehearsal_env.restore` takes."""
        return self._full + b"".join(self._records)

    def _take_full(self, episode: Episode) -> bytes:
        data = (reset_checkpoint(self.env) if self.replay else None) or self.env.checkpoint()
        self._full, self._records = data, []
        state = self._episode_fields(episode)
        db = self.env.db
        seen = _Seen(episode, {k: state[k] for k in _SCALARS}, {k: len(state[k]) for k in _APPENDED},
                     dict(_operations(episode)), _rng(self.env), bytes.fromhex(read_header(data)["digest"]),
                     turn=episode.turn, replayed=self.replay and replayable(episode))
        if not seen.replayed:  # turn records compare nothing with this take
            if hasattr(db, "touched_since"):
                _, seen.database_mark = db.touched_since(0)
            else:
                seen.rows = _rows_of(capture_delta(db))
        self._seen = seen
        return data

    @staticmethod
    def _episode_fields(episode: Episode, seen: _Seen | None = None) -> dict[str, Any]:
        """The episode state's small fields and its lists (not encoded): what a take compares. The events layer's
        and the customer's state are copied through JSON (as ``episode_state`` saves them) only when they differ
        from what ``seen`` holds."""
        events, memory = episode.events.state(), _customer_memory(episode)
        if seen is not None:
            if events == seen.scalars["events"]:
                events = seen.scalars["events"]
            if memory == seen.scalars["customer"]["state"]:
                memory = seen.scalars["customer"]["state"]
        if seen is None or events is not seen.scalars["events"]:
            events = _plain(events)
        if seen is None or memory is not seen.scalars["customer"]["state"]:
            memory = customer_state(episode.customer)[1]
        return {"turn": episode.turn, "dispatch_turn": episode._calls.turn, "counters": dict(vars(episode._n)),
                "events": events, "customer": {"kind": type(episode.customer).__qualname__, "state": memory},
                "episode_id": episode.id,
                "lineage": None if episode.lineage is None else asdict(episode.lineage),
                "trace": episode.trace, "crashes": list(getattr(episode._calls, "crashes", ())),
                "turn_rewards": episode.turn_rewards}

    def _delta(self, episode: Episode, seen: _Seen) -> bytes:
        state = self._episode_fields(episode, seen)
        changed = {k: state[k] for k in _SCALARS if state[k] != seen.scalars[k]}
        seen.scalars.update(changed)
        body: dict[str, Any] = {"turn": episode.turn, "episode": changed}
        for name in _APPENDED:
            values, start = state[name], seen.lengths[name]
            if len(values) < start:
                raise CheckpointError(f"the episode's {name} shrank from {start} to {len(values)} entries; a chain "
                                      "needs it to only grow: take a full checkpoint (env.checkpoint())")
            if len(values) > start:
                body[name] = [_encode(v) for v in values[start:]]
                seen.lengths[name] = len(values)
        ops = [op for op_id, op in _operations(episode) if seen.journal.get(op_id) is not op]
        if ops:
            body["journal"] = [_operation(op) for op in ops]
            seen.journal.update((op.id, op) for op in ops)
        rng = _rng(self.env)
        if rng != seen.rng:
            body["rng"] = rng_state(self.env._np_random, self.env._np_random_seed)
            seen.rng = rng
        database = self._database(seen)
        if database:
            body["database"] = database
        return json.dumps(body, separators=(",", ":")).encode()  # the digest covers these very bytes

    def _database(self, seen: _Seen) -> list[dict[str, Any]]:
        db = self.env.db
        if hasattr(db, "touched_since"):  # SQLite: the keys written since the last take, from its log
            keys, seen.database_mark = db.touched_since(seen.database_mark)
            return read_rows(db, keys).to_json() if keys else []
        now = _rows_of(capture_delta(db))  # elsewhere: every touched row, kept where it differs
        changed = {table: {k: r for k, r in rows.items() if seen.rows.get(table, {}).get(k, ()) != r}
                   for table, rows in now.items()}
        seen.rows = now
        return [{"table": table, "present": [list(r) for k, r in sorted(rows.items()) if r is not None],
                 "absent": sorted(k for k, r in rows.items() if r is None)}
                for table, rows in ((t.name, changed.get(t.name)) for t in db.tables) if rows]


def _customer_memory(episode: Episode) -> Any:
    """The customer's memory as it reports it (compared before it is copied; see ``customer_state``)."""
    save = getattr(episode.customer, "customer_state", None)
    return None if save is None else save()


def _operations(episode: Episode) -> list[tuple[str, Any]]:
    return [(op.id, op) for op in episode.journal.operations()]


def _operation(op: Any) -> dict[str, Any]:
    return {"id": op.id, "tool": op.tool.name, "args": _plain(dict(op.args)), "state": op.state,
            "result": _plain(op.result)}


def _rng(env: RehearsalEnv) -> Any:
    rng = env._np_random
    return None if rng is None else (rng.bit_generator.state, env._np_random_seed)


def _rows_of(delta: DatabaseDelta) -> dict[str, dict[Any, tuple[Any, ...] | None]]:
    out: dict[str, dict[Any, tuple[Any, ...] | None]] = {}
    for part in delta.tables:
        rows: dict[Any, tuple[Any, ...] | None] = {r[0]: tuple(r) for r in part.present}
        rows.update((k, None) for k in part.absent)
        out[part.table] = rows
    return out


def merge_records(payload: Mapping[str, Any], records: Sequence[Mapping[str, Any]],
                  tables: Sequence[str]) -> dict[str, Any]:
    """A full checkpoint's payload with ``records`` applied in order: the payload a full checkpoint taken at the last
    record's turn holds (``tables``: the world's tables, in its order).

    Raises:
        CheckpointError: a record that is not what a chain writes (a field of the wrong shape, an unknown table).
    """
    try:
        return _merge(payload, records, tables)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise CheckpointError(f"the checkpoint's delta records could not be merged ({type(exc).__name__}: {exc}); "
                              "pass the bytes a CheckpointChain gave, unchanged") from None


def _merge(payload: Mapping[str, Any], records: Sequence[Mapping[str, Any]], tables: Sequence[str]) -> dict[str, Any]:
    episode = dict(payload["episode"])
    for name in _APPENDED:
        episode[name] = list(episode.get(name, ()))
    journal = {op["id"]: op for op in episode["journal"]}
    rows = {t["table"]: {**{r[0]: r for r in t["present"]}, **{k: None for k in t["absent"]}}
            for t in payload["database"]}
    rng = payload["rng"]
    for record in records:
        episode.update(record.get("episode", {}))
        for name in _APPENDED:
            episode[name].extend(record.get(name, ()))
        journal.update((op["id"], op) for op in record.get("journal", ()))
        for part in record.get("database", ()):
            table = rows.setdefault(str(part["table"]), {})
            table.update((r[0], r) for r in part["present"])
            table.update((k, None) for k in part["absent"])
        rng = record.get("rng", rng)
    unknown = sorted(set(rows) - set(tables))
    if unknown:
        raise CheckpointError(f"the checkpoint's delta records name tables {unknown} that this world does not have "
                              f"(expected some of {sorted(tables)})")
    episode["journal"] = list(journal.values())
    database = [{"table": name, "present": [list(r) for k, r in sorted(rows[name].items()) if r is not None],
                 "absent": sorted(k for k, r in rows[name].items() if r is None)}
                for name in tables if rows.get(name)]
    return {**payload, "episode": episode, "database": database, "rng": rng}

"""Each in-flight episode checkpointed after every turn, and continued from there after a death.

While a run plays, every episode appends to one log in the run's checkpoint folder
(:attr:`~._plan.RunConfig.checkpoints`), named by its scenario and repeat (``<key>.log``), kept
open for the episode:

- a *state* record after every turn (and right after ``reset``): the env's checkpoint and the
  agent's state. The env's checkpoints are incremental (:class:`~rehearsal_env.env.CheckpointChain`
  with ``replay=True``): a full one (``S``: database rows, episode, random state) every
  :data:`~rehearsal_env.env.FULL_EVERY` turns, and after each other turn a ``D`` record: the turn's
  input, which a restore takes again on the last full one (the env is deterministic; each replayed
  observation is checked), or, for an episode with a model customer, what that turn changed;
- an *answer* record before every turn (*write-ahead*): the agent's answer for it, the action
  about to be carried out or the exception the policy raised.

Each record carries its length and SHA-256, so a record cut short by a dying process ends the log
there and the one before it counts. Appending to an open file costs microseconds where a new file
renamed into place costs milliseconds on a busy disk; no record is fsynced: a dead process loses
nothing the kernel holds, only the machine's crash would (then the episode is played from its start).

When a worker or the driver dies, the episode is played again by whoever picks it up (another Ray
actor, or ``rehearsal run --resume``): :func:`play_resumable` restores the last state (the same
episode continued: same id, no new lineage), and when the answer file is one turn ahead, the turn
that was in flight is taken again from that answer *on the restored state*: a write whose outcome
was unknown when the process died is never sent twice, because the world it reached (the
episode's database and its outside-service ledger) died with the process or is abandoned, and the
restored world has the ledger as it was before that turn (the record's ``duplicate_effects``
counts any second request). Agent calls already answered are not asked again.

The agent's state is kept with ``cloudpickle`` (built-in agents and most policies pickle); an episode
whose policy does not pickle (one holding a client or a lock) is played again from its start, as
before. Pickled state is read only from the run's own folder, which only the runner writes. The
folder is removed when the run finishes.
"""

from __future__ import annotations

import hashlib
import pickle
import re
import shutil
import struct
from pathlib import Path
from typing import Any, BinaryIO

import cloudpickle

from ..agents import Policy
from ..backends import DatabaseError
from ..env import CheckpointChain, CheckpointError, RehearsalEnv, failure, restore
from ..records import EpisodeRecord
from ..verdict import NotScoredCause, NotScoredError
from ._plan import EpisodeSpec
from ._play import take_turn
from ._resolved import ResolvedRun

CHECKPOINTS_DIR = "checkpoints"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


class _Raised(Exception):
    """A policy's exception as recorded in the answer file, raised again with the same text."""


def _key(spec: EpisodeSpec) -> str:
    return f"{_UNSAFE.sub('_', spec.scenario)}.{spec.repeat}"


_RECORD = struct.Struct(">cI32s")
"""One log record's head: its kind (``S`` full state, ``D`` state as a delta, ``A`` answer), payload length, the
payload's SHA-256."""


class EpisodeCheckpoints:
    """The checkpoint log of one episode (see the module docstring)."""

    def __init__(self, folder: str | Path, spec: EpisodeSpec) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / f"{_key(spec)}.log"
        self._log: BinaryIO | None = None
        self._chain: CheckpointChain | None = None

    def _append(self, kind: bytes, payload: bytes) -> None:
        if self._log is None:
            self._log = open(self.path, "ab", buffering=0)  # noqa: SIM115  (kept open for the episode)
        self._log.write(_RECORD.pack(kind, len(payload), hashlib.sha256(payload).digest()) + payload)

    def save(self, env: RehearsalEnv, agent: object, observation: str, info: dict[str, Any]) -> None:
        """The state after a turn (or the reset): env checkpoint, agent, what the agent is shown next."""
        agent_bytes = _pickled(agent)
        shown = {k: v for k, v in info.items() if k != "verdict"}
        if self._chain is None or self._chain.env is not env:
            self._chain = CheckpointChain(env, replay=True)  # turn records: the env is deterministic
        full, data = self._chain.take()
        self._append(b"S" if full else b"D", pickle.dumps({"env": data, "agent": agent_bytes,
                                                           "observation": observation, "info": shown}))

    def answer(self, turn: int, answer: str | BaseException) -> None:
        """The agent's answer for ``turn``, before the turn is taken."""
        kept: tuple[str, str] | tuple[str, str, str] = (
            ("action", answer) if isinstance(answer, str)
            else ("abort", answer.cause.value, str(answer)) if isinstance(answer, NotScoredError)
            else ("raised", type(answer).__name__, str(answer)))
        self._append(b"A", pickle.dumps({"turn": turn, "answer": kept}))

    def load(self) -> tuple[dict[str, Any], dict[str, Any] | None] | None:
        """The last whole state and the answer saved after it (None: no state saved for this episode).
        A record cut short or damaged (the process died while writing it) ends the log there."""
        if not self.path.is_file():
            return None
        data = self.path.read_bytes()
        state: dict[str, Any] | None = None
        answer: dict[str, Any] | None = None
        at = 0
        while at + _RECORD.size <= len(data):
            kind, size, digest = _RECORD.unpack_from(data, at)
            payload = data[at + _RECORD.size:at + _RECORD.size + size]
            if len(payload) != size or hashlib.sha256(payload).digest() != digest:
                break
            if kind == b"S":
                state, answer = pickle.loads(payload), None
            elif kind == b"D":  # the full state's checkpoint with this turn's delta appended
                turn = pickle.loads(payload)
                if state is not None:
                    state, answer = {**turn, "env": state["env"] + turn["env"]}, None
            else:
                answer = pickle.loads(payload)
            at += _RECORD.size + size
        return None if state is None else (state, answer)

    def close(self) -> None:
        self._chain = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def clear(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


def _pickled(agent: object) -> bytes | None:
    """The agent's state as bytes that load in another process (None: it does not pickle, e.g. it holds a client
    or a lock; its episode is then played again from the start). The C pickler first (a third of cloudpickle's
    time); cloudpickle where that fails or names ``__main__`` (a policy's class defined in a script), which it
    pickles by value."""
    try:
        data = pickle.dumps(agent, protocol=pickle.HIGHEST_PROTOCOL)
        if b"__main__" not in data:
            return data
    except Exception:  # a local class, a lambda, a closure: cloudpickle's by value
        pass
    try:
        return cloudpickle.dumps(agent)
    except Exception:
        return None


def _answer_of(kept: tuple[str, ...]) -> str | BaseException:
    if kept[0] == "action":
        return kept[1]
    if kept[0] == "abort":
        return NotScoredError(NotScoredCause(kept[1]), kept[2])
    raised = type(kept[1], (_Raised,), {})  # the same name and text: the same rejected attempt
    return raised(kept[2])


def play_resumable(run: ResolvedRun, env: RehearsalEnv, spec: EpisodeSpec, folder: str | Path) -> EpisodeRecord:
    """One episode with a checkpoint after every turn, continued from its last one when there is one.

    An episode whose database fails before it starts is recorded not scored (as :func:`~._play.play`).
    """
    try:
        return _play(run, env, spec, folder)
    except (DatabaseError, NotScoredError) as exc:  # raised only by the reset or the restore
        cause, reason = failure(exc)
        return run.lost(spec, f"the episode could not start: {reason}", cause)


def _play(run: ResolvedRun, env: RehearsalEnv, spec: EpisodeSpec, folder: str | Path) -> EpisodeRecord:
    files = EpisodeCheckpoints(folder, spec)
    try:
        return _play_logged(run, env, spec, files)
    finally:
        files.close()


def _play_logged(run: ResolvedRun, env: RehearsalEnv, spec: EpisodeSpec, files: EpisodeCheckpoints) -> EpisodeRecord:
    saved = files.load()
    if saved is not None and saved[0]["agent"] is None:
        files.clear()  # the agent did not pickle: the episode is played again from its start
        saved = None
    agent: Policy
    if saved is None:
        agent = run.agent(env.scenario)
        observation, info = env.reset(seed=spec.seed)
        env.episode.id = f"{run.config.run_id}/{spec.scenario}/{spec.repeat}"
        files.save(env, agent, observation, info)
        pending = None
    else:
        state, pending = saved
        try:
            env = restore(state["env"], world=run.world, backend=run.config.backend,
                          customer=run.customer(env.scenario), resume=True, **run.config.backend_options)
        except CheckpointError:  # e.g. a turn that replayed otherwise (a world that is not deterministic)
            files.clear()
            return _play_logged(run, env, spec, files)  # played again from its start, as an unpicklable agent
        agent = pickle.loads(state["agent"])
        observation, info = state["observation"], state["info"]
        if pending is not None and pending["turn"] != env.episode.turn + 1:
            pending = None  # an answer already taken before the state was saved
    try:
        while True:
            turn = env.episode.turn + 1
            if pending is not None:
                answer = _answer_of(pending["answer"])  # the turn in flight when the process died
                pending = None
            else:
                try:
                    answer = agent(observation, info)
                except Exception as exc:  # judged by take_turn
                    answer = exc
                files.answer(turn, answer)
            observation, _, terminated, truncated, info = take_turn(env, answer)
            if terminated or truncated:
                return run.record(spec, env.episode, agent)
            files.save(env, agent, observation, info)
    finally:
        if saved is not None:
            env.close()  # the restored env's database goes back to the spares


def clear_checkpoints(folder: str | Path | None) -> None:
    """Remove a run's checkpoint folder (a new run starts, or the run finished: every episode is recorded)."""
    if folder:
        shutil.rmtree(folder, ignore_errors=True)

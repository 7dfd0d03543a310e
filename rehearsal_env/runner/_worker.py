"""A worker's state: one world, one database and one env per scenario, built once, reset per episode.

The serial runner holds one :class:`EpisodeWorker` in its own process; each
Ray actor holds one in its process. Every episode runs ``env.reset`` on the
worker's database, so reusing the env across episodes yields the same records
as building a fresh env per episode (:func:`~rehearsal_env.runner.play`).

**A database that fails** (the PostgreSQL server died, a connection broke):
the episode it hit is recorded ``not_scored`` with cause ``database``, and the
worker then reopens its database (a private server is started again by the
backend; a DSN is reconnected to), trying with backoff for ``recovery_s``
seconds. If it cannot, :class:`DatabaseUnavailable` stops the run: the runner
writes ``summary.json`` for what was recorded, and ``--resume`` finishes it
(playing again the episodes not scored for a failed part, see :mod:`._resume`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from ..backends import Database, DatabaseError, open_database
from ..env import RehearsalEnv
from ..records import EpisodeRecord
from ..verdict import NotScoredCause, NotScoredError
from ._checkpoints import play_resumable
from ._inflight import InFlight
from ._plan import EpisodeSpec
from ._play import play
from ._resolved import ResolvedRun

RECOVERY_S = 60.0
"""How long a worker tries to reopen a failed database before the run stops."""
REOPENED_CAUSES = frozenset({NotScoredCause.DATABASE.value, NotScoredCause.SANDBOX.value})
"""Not-scored causes after which the worker reopens its database (a sandbox is started again)."""


class DatabaseUnavailable(RuntimeError):
    """The worker's database failed and could not be reopened in time: the run stops (``--resume`` later)."""

    def __init__(self, message: str, records: Sequence[EpisodeRecord] = ()) -> None:
        super().__init__(message)
        self.records = list(records)
        """The records played before the run stopped (the failed episode's last), to be written."""

    def __reduce__(self) -> tuple[type[DatabaseUnavailable], tuple[str, list[EpisodeRecord]]]:
        return type(self), (str(self), self.records)  # the records travel back from a Ray actor too


class EpisodeWorker:
    """Plays episodes of one resolved run on its own database; one per process (serial) or per Ray actor.

    Args:
        run: The run, resolved (:func:`~._resolved.resolve`).
        database: An open database of the world to use and not close (opened here when None; a given
            database is not reopened when it fails, the run stops instead).
        recovery_s: Seconds to try reopening a failed database before :class:`DatabaseUnavailable`.
    """

    def __init__(self, run: ResolvedRun, *, database: Database | None = None,
                 recovery_s: float = RECOVERY_S) -> None:
        self.run = run
        self.config = run.config
        self.world = run.world
        self.recovery_s = recovery_s
        self.recoveries = 0
        """Times the database was reopened after a failure."""
        self._owns_db = database is None
        self.db = database or self._open()
        self._envs: dict[str, RehearsalEnv] = {}
        self._in_flight: InFlight | None = None

    def _open(self) -> Database:
        return open_database(self.world, self.config.backend, **self.config.backend_options)

    def env(self, scenario_id: str) -> RehearsalEnv:
        """The worker's env for a scenario, built on first use."""
        env = self._envs.get(scenario_id)
        if env is None:
            env = self._envs[scenario_id] = self.run.env(self.db, scenario_id)
        return env

    def play(self, spec: EpisodeSpec) -> EpisodeRecord:
        """One episode, reset to verdict, as a record; reopens the database after one that failed.

        Raises:
            DatabaseUnavailable: the database failed and could not be reopened within ``recovery_s``
                (the failed episode's record is :attr:`DatabaseUnavailable.record`).
        """
        if self.config.checkpoints:  # after every turn; a dead worker's episode goes on from there
            record = play_resumable(self.run, self.env(spec.scenario), spec, self.config.checkpoints)
        else:
            record = play(self.run, self.db, spec, env=self.env(spec.scenario))
        if record.not_scored_cause in REOPENED_CAUSES:
            self.recover(record)
        return record

    def play_batch(self, specs: Sequence[EpisodeSpec],
                   on_record: Callable[[EpisodeRecord], None] | None = None) -> list[EpisodeRecord]:
        """Episodes in order, as records (on :class:`DatabaseUnavailable`, those played so far are its
        ``records``); ``on_record`` is given each record as its episode ends."""
        inflight = self._inflight()
        if inflight is not None:
            return inflight.play_batch(specs, on_record)
        done: list[EpisodeRecord] = []
        for spec in specs:
            try:
                done.append(self.play(spec))
            except DatabaseUnavailable as exc:
                exc.records = [*done, *exc.records]
                raise
            if on_record is not None:
                on_record(done[-1])
        return done

    def recover(self, failed: EpisodeRecord | None = None) -> None:
        """Reopen the database (close the failed one, try again with backoff until ``recovery_s``)."""
        if not self._owns_db:
            raise DatabaseUnavailable(f"the run's database failed ({failed.reason if failed else '?'}) and was "
                                      "given by the caller, so it is not reopened", [failed] if failed else [])
        self._envs.clear()
        try:
            self.db.close()
        except (DatabaseError, NotScoredError, OSError):
            pass
        deadline = time.monotonic() + self.recovery_s
        delay, last = 0.2, "no attempt"
        while True:
            try:
                self.db = self._open()
                self.recoveries += 1
                return
            except (DatabaseError, NotScoredError, OSError) as exc:
                last = f"{type(exc).__name__}: {exc}".splitlines()[0]
            if time.monotonic() + delay > deadline:
                break
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
        raise DatabaseUnavailable(f"the {self.config.backend} database failed and could not be reopened within "
                                  f"{self.recovery_s:g} s (last error: {last})", [failed] if failed else [])

    def _inflight(self) -> InFlight | None:
        """The in-flight player of a run with a model agent and ``concurrency`` > 1 (None: play serially)."""
        if self.config.concurrency <= 1 or self.run.model_agents is None:
            return None
        if self._in_flight is None:
            self._in_flight = InFlight(self.run)
        return self._in_flight

    def close(self) -> None:
        """Close the database if the worker opened it."""
        if self._in_flight is not None:
            self._in_flight.close()
            self._in_flight = None
        self._envs.clear()
        if self._owns_db:
            try:
                self.db.close()
            except (DatabaseError, NotScoredError, OSError):
                pass


"""Recording served episodes exactly like ``rehearsal run`` does: Parquet parts in a run directory.

A served run directory holds one world under one reward profile (``OUT/<world>-<profile>``, the
profile ``outcome`` for the outcome reward), because ``provenance.json`` names one world and one
scoring contract: ``measure.py``, ``rehearsal eval rescore`` and ``rehearsal readiness`` read it
unchanged. Parts, ``summary.json`` and the repeat counters are written under a file lock, so
several server processes (``--workers N``) can share a directory. An episode's ``repeat`` is
its index among the recorded episodes of the same agent, agent version and scenario.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from filelock import FileLock

from ..env import Episode
from ..provenance import OUTCOME_PROFILE, Provenance
from ..records import (
    EPISODES_DIR,
    EpisodeRecord,
    manifest_state_since,
    part_files,
    seal_run,
    write_bytes_atomic,
    write_part,
)
from ..records import next_part as first_free_part
from ..runner import RecordStamp, SummaryRow, SummaryTally, summary_row
from ..scenarios import Scenario
from ..verdict import NotScoredCause

SERVE_FILE = "serve.json"
"""A served run directory's identity: run id, world, profile, backend."""
_REPEATS = ".serve-repeats.json"
_LOCK = ".serve.lock"


def _write_json(path: Path, body: Any) -> None:
    write_bytes_atomic(path, (json.dumps(body, indent=2, sort_keys=True) + "\n").encode())


@dataclass(frozen=True)
class RunDir:
    """One served run directory."""

    path: Path
    """The directory."""
    run_id: str
    """The run id on its records."""
    provenance: Provenance
    """What every record in it is stamped with."""


class Recorder:
    """Buffers finished episodes' records and writes them as parts: every ``flush_every`` records, when the oldest
    buffered one has waited ``flush_after_s`` seconds (checked as a record arrives; None: no time bound), and on
    :meth:`flush`."""

    def __init__(self, out: str | Path, *, backend: str, stress: bool, flush_every: int = 32,
                 flush_after_s: float | None = None) -> None:
        if flush_every < 1 or (flush_after_s is not None and flush_after_s < 0):
            raise ValueError(f"expected flush_every >= 1 and flush_after_s >= 0 (or None), got {flush_every} and "
                             f"{flush_after_s}")
        self.out = Path(out)
        self.backend, self.stress, self.flush_every = backend, stress, flush_every
        self.flush_after_s = flush_after_s
        self._oldest: float | None = None
        """When the oldest buffered record arrived (monotonic; None: none buffered)."""
        self._dirs: dict[tuple[str, str], RunDir] = {}
        self._pending: dict[Path, list[EpisodeRecord]] = {}
        self._lock = threading.Lock()
        self._flushing = threading.Lock()  # one flush at a time: a second waits until the first has written
        self._tallies: dict[Path, tuple[SummaryTally, dict[str, dict[str, Any]]]] = {}
        """Each run directory's summary as running totals, and the manifest entries of the parts in them: a
        flush adds its own part's records (and reads any part another server process wrote since), never
        every part again (a part rewritten, which a served directory never is, starts the totals over)."""

    def run_dir(self, world: str, provenance: Provenance) -> RunDir:
        """The run directory for episodes of ``world`` under ``provenance`` (created on first use).

        A directory already holding another provenance (another world version or contract) is
        left alone; the next free ``-N`` suffix is used instead.
        """
        key = (world, provenance.reward_profile)
        with self._lock:
            if key in self._dirs:
                return self._dirs[key]
            blob = provenance.to_dict()
            base = f"{world}-{provenance.reward_profile or OUTCOME_PROFILE}"
            for n in range(1, 10_000):
                path = self.out / (base if n == 1 else f"{base}-{n}")
                path.mkdir(parents=True, exist_ok=True)
                with FileLock(str(path / _LOCK)):
                    ident, prov = path / SERVE_FILE, path / "provenance.json"
                    if not ident.exists():
                        _write_json(prov, blob)
                        _write_json(ident, {"run_id": f"serve_{uuid.uuid4().hex[:12]}", "world": world,
                                            "profile": provenance.reward_profile, "backend": self.backend,
                                            "stress": self.stress})
                    elif not prov.exists() or json.loads(prov.read_text()) != blob:
                        continue
                    run_id = json.loads(ident.read_text())["run_id"]
                self._dirs[key] = RunDir(path, run_id, provenance)
                return self._dirs[key]
        raise RuntimeError(f"no free run directory for {base} under {self.out}")  # pragma: no cover

    def stamp(self, run_dir: RunDir, agent: str, agent_version: str) -> RecordStamp:
        """What a served episode's record carries besides its episode: the run directory's id and provenance, the
        agent's name and version (the same stamp as a run's records, :class:`~rehearsal_env.runner.RecordStamp`)."""
        return RecordStamp(run_id=run_dir.run_id, agent=agent, agent_version=agent_version, backend=self.backend,
                           stress=self.stress, provenance=run_dir.provenance)

    def add_played(self, run_dir: RunDir, episode: Episode, *, agent: str, agent_version: str, seed: int,
                   key_id: str) -> None:
        """Buffer the record of a finished served episode, stamped with the key that played it (its id)."""
        record = self.stamp(run_dir, agent, agent_version).played(episode, repeat=0, seed=seed)
        self.add(run_dir, replace(record, key_id=key_id))

    def add_not_played(self, run_dir: RunDir, scenario: Scenario, *, agent: str, agent_version: str, seed: int,
                       key_id: str, reason: str, cause: NotScoredCause) -> None:
        """Buffer the record of a served episode that could not be played: not scored because ``cause`` failed."""
        record = self.stamp(run_dir, agent, agent_version).not_played(scenario, repeat=0, seed=seed, reason=reason,
                                                                      cause=cause)
        self.add(run_dir, replace(record, key_id=key_id))

    def add(self, run_dir: RunDir, record: EpisodeRecord) -> None:
        """Buffer a finished episode's record (written within ``flush_every`` records or at the next flush)."""
        now = time.monotonic()
        with self._lock:
            pending = self._pending.setdefault(run_dir.path, [])
            pending.append(record)
            self._oldest = now if self._oldest is None else self._oldest
            full = len(pending) >= self.flush_every or (
                self.flush_after_s is not None and now - self._oldest >= self.flush_after_s)
        if full:
            self.flush()

    def flush(self) -> list[Path]:
        """Write every buffered record now; return the parts written."""
        with self._flushing:
            with self._lock:
                pending, self._pending, self._oldest = self._pending, {}, None
            return [self._write(path, records) for path, records in pending.items() if records]

    def _write(self, path: Path, records: list[EpisodeRecord]) -> Path:
        with FileLock(str(path / _LOCK)):
            counters = self._counters(path)
            numbered = []
            for r in records:
                key = "\x1f".join((r.agent, r.agent_version, r.scenario))
                numbered.append(replace(r, repeat=counters.get(key, 0)))
                counters[key] = counters.get(key, 0) + 1
            part = write_part(path, numbered, first_free_part(path))
            _write_json(path / _REPEATS, counters)
            self._write_summary(path, part, numbered)
            seal_run(path, incremental=True)  # the served run as it stands, signed with the server's signing key
        return part

    @staticmethod
    def recorded(path: Path) -> set[str]:
        """The episode ids of the records written in run directory ``path``."""
        try:
            files = part_files(path)
        except FileNotFoundError:
            return set()
        return {i for f in files for i in pq.read_table(f, columns=["episode_id"]).column(0).to_pylist() if i}

    @staticmethod
    def _counters(path: Path) -> dict[str, int]:
        """The next repeat per agent, version and scenario (rebuilt from the records when the file is gone)."""
        file = path / _REPEATS
        if file.exists():
            return dict(json.loads(file.read_text()))
        counters: dict[str, int] = {}
        try:
            files = part_files(path)
        except FileNotFoundError:
            return counters
        for f in files:
            table = pq.read_table(f, columns=["agent", "agent_version", "scenario", "repeat"])
            for row in table.to_pylist():
                key = "\x1f".join((row["agent"], row["agent_version"], row["scenario"]))
                counters[key] = max(counters.get(key, 0), row["repeat"] + 1)
        return counters

    def _write_summary(self, path: Path, written: Path, records: list[EpisodeRecord]) -> None:
        state = manifest_state_since(path / EPISODES_DIR)
        parts = {} if state is None else state.parts
        tally, tallied = self._tallies.get(path, (SummaryTally(), {}))
        if any(parts.get(name) != entry for name, entry in tallied.items()):
            tally, tallied = SummaryTally(), {}
        for name in sorted(name for name, entry in parts.items() if tallied.get(name) != entry):
            if name == written.name:
                tally.add(summary_row(r) for r in records)
            else:  # written by another server process sharing the directory
                table = pq.read_table(path / EPISODES_DIR / name, columns=list(SummaryRow._fields))
                tally.add(SummaryRow(**row) for row in table.to_pylist())
            tallied[name] = parts[name]
        self._tallies[path] = (tally, tallied)
        summary = tally.summary()
        summary["config"] = {**json.loads((path / SERVE_FILE).read_text()), "served": True}
        _write_json(path / "summary.json", summary)

"""The pool's episodes as an ordinary run directory: parts, plan, provenance, summary, seal.

Records arrive as episodes end, in any order, from any actor. Every ``batch_size`` of them is written as
the next part (:func:`rehearsal_env.records.write_part`, entered in the manifest); :meth:`RunRecords.finish`
writes the last part, ``run.json`` with the episodes actually played as its plan, and seals the run with
the runner's own :func:`~rehearsal_env.runner.finish_run`, so ``measure``, ``rescore`` and ``readiness``
read a pool's run as they read any other.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from ..records import EpisodeRecord, write_part
from ..runner import EpisodeSpec, ResolvedRun, RunState, SummaryRow, begin_run, finish_run, save_run, summary_row


class RunRecords:
    """One pool's run directory, written as its episodes end."""

    def __init__(self, run: ResolvedRun, out: Path) -> None:
        self.run = run
        self.out = out
        self._lock = threading.Lock()
        self._specs: list[EpisodeSpec] = []
        self._pending: list[EpisodeRecord] = []
        self._rows: list[SummaryRow] = []
        self._part = 0
        begin_run(RunState(run, True, (), (), ()), out)  # clears a previous run there, writes provenance

    def add(self, spec: EpisodeSpec, record: EpisodeRecord) -> None:
        """Keep an ended episode's record; a full batch is written as the next part."""
        with self._lock:
            self._specs.append(spec)
            self._rows.append(summary_row(record))
            self._pending.append(record)
            if len(self._pending) >= self.run.config.batch_size:
                self._flush()

    def _flush(self) -> None:
        if self._pending:
            write_part(self.out, self._pending, self._part)
            self._part += 1
            self._pending = []

    @property
    def recorded(self) -> int:
        """Episodes recorded so far."""
        return len(self._rows)

    def finish(self) -> dict[str, Any]:
        """Write what is left, the plan (the episodes played) and the summary; seal the run; the summary."""
        with self._lock:
            self._flush()
            specs = sorted(self._specs, key=lambda s: (s.scenario, s.repeat))
            save_run(self.out, self.run.config, specs)
            state = RunState(self.run, False, tuple(specs), (), ())
            return finish_run(state, self.out, self._rows)

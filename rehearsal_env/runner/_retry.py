"""Retrying not-scored episodes before any decision: a bounded number of new attempts, each recorded.

An episode not scored because the database, the model provider, the sandbox or a worker failed
(:data:`RETRIED_CAUSES`; not the world's own code, which fails the same way again) is played again with the same
scenario and seed once the run's planned batches are done, up to :data:`RETRIES` times
(``RunConfig.retries``), until an attempt is scored. Every attempt is its own record, written as it ends:
``attempt`` (1, 2, ...), ``retry_of`` (``scenario#repeat@attempt`` of the attempt it retries, in this run) and
``retry_replayed`` (it played that attempt exactly, turn for turn, up to where that one failed: :func:`replays`).
Which attempt counts, where, is :mod:`rehearsal_env.records._attempts`'s rule; docs/measure.md explains it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from ..records import EpisodeRecord, Turn, next_part, part_files, read_part
from ..records._attempts import record_field, settle
from ..verdict import NotScoredCause
from ._flush import PartFlusher
from ._plan import EpisodeSpec, check_retries
from ._resolved import ResolvedRun
from ._summary import SummaryRow, summary_row
from ._worker import DatabaseUnavailable, EpisodeWorker

RETRIES = 2
"""Retries of a not-scored episode by default (``RunConfig.retries``; 0: none; at most :data:`MAX_RETRIES`)."""
RETRIED_CAUSES = frozenset({NotScoredCause.DATABASE.value, NotScoredCause.PROVIDER.value,
                            NotScoredCause.SANDBOX.value, NotScoredCause.WORKER.value})
"""Not-scored causes whose episodes are retried (the failed part may work on another try)."""


class Player(Protocol):
    """What plays the retries (an :class:`~._worker.EpisodeWorker`)."""

    def play_batch(self, specs: Sequence[EpisodeSpec],
                   on_record: Callable[[EpisodeRecord], None] | None = None) -> list[EpisodeRecord]: ...


def retryable(record: EpisodeRecord) -> bool:
    """Whether ``record`` is a not-scored root episode whose cause is retried."""
    return record.outcome == "not_scored" and record.not_scored_cause in RETRIED_CAUSES and record.is_root


def _same(a: Turn, b: Turn) -> bool:
    return (a.action, a.tool, a.status, a.observation, a.fault, a.rejected, a.rejected_kind) == \
        (b.action, b.tool, b.status, b.observation, b.fault, b.rejected, b.rejected_kind)


def replays(retry: Sequence[Turn], failed: Sequence[Turn]) -> bool:
    """Whether the ``retry``'s trace holds every turn of the ``failed`` attempt's, in order and the same (action,
    tool, status, observation, fault), and went on past them or ended there: it reached the state the failure
    left and played on from it. The latency of a turn is not compared."""
    return len(retry) >= len(failed) and all(_same(a, b) for a, b in zip(retry, failed, strict=False))


def as_retry(record: EpisodeRecord, previous: EpisodeRecord) -> EpisodeRecord:
    """``record``, a new attempt of ``previous``'s episode, with the fields that link it."""
    before = previous.attempt or 0
    return replace(record, attempt=before + 1, retry_of=f"{previous.scenario}#{previous.repeat}@{before}",
                   retry_replayed=replays(record.trace, previous.trace))


def play_retries(player: Player, lost: Sequence[EpisodeRecord], retries: int,
                 parts: Callable[[Sequence[EpisodeSpec]], PartFlusher]) -> list[EpisodeRecord]:
    """Play each retryable record of ``lost`` again, up to ``retries`` times, until an attempt is scored; each
    round's records are written through a new ``parts(specs)`` flusher as they end. Returns every retry's
    record, in the order played.

    Raises:
        DatabaseUnavailable: the database failed for good (its ``records``: this round's retries so far, linked).
    """


    played: list[EpisodeRecord] = []
    waiting = {(r.scenario, r.repeat): r for r in lost if retryable(r)}
    for _ in range(check_retries(retries)):
        if not waiting:
            break
        specs = [EpisodeSpec(r.scenario, r.repeat, r.seed) for r in waiting.values()]
        flusher = parts(specs)

        def linked(record: EpisodeRecord, flusher: PartFlusher = flusher,
                   before: dict[tuple[str, int], EpisodeRecord] = waiting) -> None:
            flusher.add(as_retry(record, before[(record.scenario, record.repeat)]))

        try:
            done = [as_retry(r, waiting[(r.scenario, r.repeat)]) for r in player.play_batch(specs, linked)]
        except DatabaseUnavailable as exc:
            exc.records = [as_retry(r, waiting[(r.scenario, r.repeat)]) for r in exc.records]
            flusher.finish(exc.records)
            raise
        flusher.finish(done)
        played.extend(done)
        waiting = {(r.scenario, r.repeat): r for r in done if retryable(r)}
    return played


def recount(lost: Sequence[EpisodeRecord], again: Sequence[EpisodeRecord]) -> tuple[list[EpisodeRecord],
                                                                                   list[EpisodeRecord]]:
    """What the run's summary counts after the retries ``again`` of ``lost``: (the retries that now count for
    their episode, the attempts of ``lost`` that no longer do). A summary counts each planned episode once: its first
    scored attempt, else its last (the records keep every attempt)."""
    counted = {id(slot.record) for slot in settle([*lost, *again], record_field)}
    return [r for r in again if id(r) in counted], [r for r in lost if id(r) not in counted]


def retry_written(run: ResolvedRun, out: Path, rows: list[SummaryRow], recovery_s: float,
                  flush_s: float | None = None) -> list[SummaryRow]:
    """Retry, in this process, the retryable not-scored episodes a run wrote to ``out`` elsewhere (on Ray actors,
    which send their records as part bytes); ``rows`` (what the summary counts) come back with each retried
    episode counted once.

    Raises:
        DatabaseUnavailable: the database failed for good (the retries played so far are written).
    """
    if not run.config.retries or not any(r.outcome == "not_scored" and r.not_scored_cause in RETRIED_CAUSES
                                         for r in rows):
        return rows
    lost = [r for path in part_files(out) for r in read_part(path) if retryable(r) and not r.attempt]  # unsealed yet
    worker = EpisodeWorker(run, recovery_s=recovery_s)
    try:
        again = play_retries(worker, lost, run.config.retries,
                             lambda specs: PartFlusher(out, specs, next_part(out), lambda: next_part(out), flush_s))
    finally:
        worker.close()
    counted, superseded = recount(lost, again)
    out_rows = list(rows)
    for record in superseded:
        out_rows.remove(summary_row(record))
    return [*out_rows, *(summary_row(r) for r in counted)]

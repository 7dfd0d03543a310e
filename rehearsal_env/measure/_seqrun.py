"""Playing a sequential comparison: A and B on the same scenarios in paired batches, stopping once decided.

Both agents get an ordinary run directory (``run.json``, ``episodes.parquet/`` parts with their manifest,
``provenance.json``, ``summary.json``, sealed like any run), written through the runner's public entry points,
plus :data:`SEQUENTIAL_FILE`, the marker that the stopping was sequential: the method, the order seed, the
budget, every look and the decision. With ``select="order"`` the plan in ``run.json`` is the whole budget in play
order: a fresh permutation of the scenarios per round (numpy's ``default_rng([seed, round])``), every scenario
before any repeats; round r is repeat r, reset with seed ``config.seed + r`` as in any run. With
``select="informative"`` (the default) the first round is the same (none with an item model from earlier runs),
and each later batch's pairs are chosen from the pairs scored so far (:mod:`._adaptive`); a scenario's k-th play
is repeat k, reset with ``config.seed + k``, and ``run.json`` holds the pairs played, in play order, rewritten
before each batch. Batch i of the plan holds
the same (scenario, repeat) pairs in both runs. ``rehearsal run --resume DIR`` would play the rest of the
budget as a fixed design; the marker then no longer describes the run (measure says so).

A pair whose episode is not scored in either run is left out of the interval (and counted); so is a pair with an
episode that is not a root episode (a fork or restore, never evidence about the agent; counted apart as ``not_root``).
Not-scored episodes cannot steer the decision: it is taken only when the pairs with every not-scored episode a
failure of A and a success of B, and with the reverse, both reach it (:func:`._sequential.bounded_look`); a budget
spent while they disagree ends ``not decided``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..backends import Database, open_database
from ..records import EPISODES_DIR, MANIFEST, EpisodeRecord, read_records, seal_run, write_bytes_atomic, write_part
from ..records._attempts import OPEN, record_field, settle
from ..runner import (
    AgentFactory,
    EpisodeSpec,
    RunConfig,
    begin_run,
    run_batch,
    run_lock,
    save_run,
    start_run,
    write_summary,
)
from ..runner._plan import check_retries
from ..runner._retry import as_retry, retryable
from ..worlds import World
from ._adaptive import SELECT, earlier_rates, first_round, pick, prior_from_rates
from ._seqreport import SEQUENTIAL_FILE
from ._sequential import (
    ALPHA,
    BATCH_PAIRS,
    BUDGET,
    BUDGET_MULTIPLE,
    DESIGN_REPEATS,
    METHOD,
    NOT_DECIDED,
    REFERENCE,
    Look,
    SequentialResult,
    bounded_look,
    play_order,
)


def _verified(record: EpisodeRecord) -> float | None:
    return None if record.outcome == "not_scored" else float(record.outcome == "verified")


def _filled(value: float | None, fill: float) -> float:
    return fill if value is None else value


def compare_sequentially(config_a: RunConfig, config_b: RunConfig, out: str | Path, *,
                         max_episodes: int | None = None, design_repeats: int = DESIGN_REPEATS,
                         floor: float | None = None, batch_pairs: int = BATCH_PAIRS, order_seed: int = 0,
                         factory_a: AgentFactory | None = None, factory_b: AgentFactory | None = None,
                         on_look: Callable[[Look, int], None] | None = None, select: str = "informative",
                         earlier: Sequence[str | Path] = ()) -> SequentialResult:
    """Play A (``config_a``) and B on the same scenarios in paired batches until the comparison is decided.

    The runs go to ``out/A`` and ``out/B``. The scenarios are those both configs plan (a ``wrong:<name>``
    agent plays only scenarios with that wrong solution); ``max_episodes`` per agent defaults to
    BUDGET_MULTIPLE x scenarios x ``design_repeats``. ``on_look(look, episodes)`` is called after each batch.
    ``select``: ``informative`` (after one round in the seeded order, each batch's pairs go to the scenarios that
    can tell A from B, :mod:`._adaptive`; ``earlier``: run directories of the world whose records fit its item
    model, which then chooses from the first pair on) or ``order`` (the seeded order throughout).

    Raises:
        ValueError: configs of different worlds, splits or backends, no common scenario, a bad budget.
    """
    for name in ("world", "split", "backend", "seed", "stress", "freeze_time"):
        if getattr(config_a, name) != getattr(config_b, name):
            raise ValueError(f"expected A and B to differ only in their agent; {name} differs: "
                             f"{getattr(config_a, name)!r} vs {getattr(config_b, name)!r}")
    if select not in SELECT:
        raise ValueError(f"expected --select to be one of {', '.join(SELECT)}; got {select!r}")
    if batch_pairs < 1 or design_repeats < 1 or (floor is not None and not 0 < floor < 2):
        raise ValueError(f"expected a batch of >= 1 pairs, design repeats >= 1 and a floor in (0, 2); got "
                         f"{batch_pairs}, {design_repeats} and {floor}")
    root = Path(out)
    dirs = (root / "A", root / "B")
    states = [start_run(replace(c, repeats=1), d, agent_factory=f)
              for c, d, f in ((config_a, dirs[0], factory_a), (config_b, dirs[1], factory_b))]
    common = sorted({s.scenario for s in states[0].specs} & {s.scenario for s in states[1].specs})
    if not common:
        raise ValueError(f"A ({config_a.agent}) and B ({config_b.agent}) have no scenario in common to compare on")
    n = len(common)
    budget = max_episodes if max_episodes is not None else BUDGET_MULTIPLE * n * design_repeats
    if budget < 1:
        raise ValueError(f"expected --max-episodes >= 1, got {budget}")
    rounds = math.ceil(budget / n)
    order = play_order(common, rounds, order_seed)[:budget]
    configs = [replace(c, scenarios=tuple(common), repeats=rounds, batch_size=batch_pairs)
               for c in (config_a, config_b)]
    states = [start_run(c, d, agent_factory=f)
              for c, d, f in ((configs[0], dirs[0], factory_a), (configs[1], dirs[1], factory_b))]
    seeds = {(s.scenario, s.repeat): s.seed for s in states[0].specs}
    plan = tuple(EpisodeSpec(s, r, seeds[(s, r)]) for s, r in order)
    chooser = _Chooser(common, plan, batch_pairs, budget, config_a.seed, order_seed, select, earlier)
    if select == "informative":
        plan = plan[:n]  # run.json holds the pairs played, in play order, as they are chosen
    states = [replace(st, specs=plan, pending=()) for st in states]
    design_pairs = n * design_repeats
    records: tuple[list[EpisodeRecord], list[EpisodeRecord]] = ([], [])
    diffs: list[float] = []
    worst: list[float] = []  # every pair, not-scored episodes as failures of A and successes of B
    best: list[float] = []  # the reverse
    shown: list[Look] = []
    left_out = not_root = opened = 0
    decision = BUDGET
    with run_lock(dirs[0], configs[0].run_id), run_lock(dirs[1], configs[1].run_id):
        dbs = [open_database(st.run.world, st.config.backend, **st.config.backend_options) for st in states]
        try:
            for st, d in zip(states, dirs, strict=True):
                begin_run(st, d)
            part = start = 0
            while start < budget:
                specs = chooser.batch(start)
                if chooser.informative:
                    for st, d in zip(states, dirs, strict=True):
                        save_run(d, st.config, chooser.played)
                played = [run_batch(st.config, specs, world=st.run.world, agent_factory=f, database=db)
                          for st, f, db in zip(states, (factory_a, factory_b), dbs, strict=True)]
                counted = [retried(st.config, recs, st.run.world, f, db)
                           for st, recs, f, db in zip(states, played, (factory_a, factory_b), dbs, strict=True)]
                for d, recs, (slots, again), kept in zip(dirs, played, counted, records, strict=True):
                    write_part(d, [*recs, *again], part)
                    kept.extend(r for r, _ in slots)  # each planned episode once (the records keep every attempt)
                for (ra, sa), (rb, sb) in zip(counted[0][0], counted[1][0], strict=True):
                    va, vb = _verified(ra), _verified(rb)
                    if not (ra.is_root and rb.is_root):
                        not_root += 1
                    else:  # the bounds fill an open episode (a retry that did not replay its attempt) too
                        wa, wb = (None if s == OPEN else v for s, v in ((sa, va), (sb, vb)))
                        worst.append(_filled(wa, 0.0) - _filled(wb, 1.0))
                        best.append(_filled(wa, 1.0) - _filled(wb, 0.0))
                        if va is None or vb is None:
                            left_out += 1
                        else:
                            diffs.append(va - vb)
                            opened += OPEN in (sa, sb)
                            chooser.scored(ra.scenario, va != vb)
                if diffs:
                    look = bounded_look(np.array(diffs), np.array(worst), np.array(best), design_pairs, floor,
                                        open_pairs=opened)
                    shown.append(look)
                    if on_look is not None:
                        on_look(look, start + len(specs))
                    if look.decision is not None:
                        decision = look.decision
                        break
                part, start = part + 1, start + len(specs)
        finally:
            for db in dbs:
                db.close()
        if decision == BUDGET and shown and shown[-1].not_scored_pairs and any(
                x is not None and x[3] is not None for x in (shown[-1].worst, shown[-1].best)):
            decision = NOT_DECIDED
        result = SequentialResult(
            run_a=str(dirs[0]), run_b=str(dirs[1]), agent_a=config_a.agent, agent_b=config_b.agent, scenarios=n,
            budget=budget, episodes=len(records[0]), pairs=len(diffs), left_out=left_out, decision=decision,
            looks=tuple(shown), floor_given=floor, design_pairs=design_pairs, not_root=not_root, select=select)
        for role, st, d, recs in zip("AB", states, dirs, records, strict=True):
            write_summary(st.run, d, recs)
            write_marker(d, role, result, order_seed, batch_pairs)
            if (d / EPISODES_DIR / MANIFEST).is_file():
                seal_run(d)
    return result


class _Chooser:
    """Which pairs each batch plays: the seeded order, or (``informative``) its first round and then the scenarios
    that can tell A from B (:func:`._adaptive.pick`, from the pairs scored in earlier batches only)."""

    def __init__(self, common: Sequence[str], plan: Sequence[EpisodeSpec], batch: int, budget: int, seed: int,
                 order_seed: int, select: str, earlier: Sequence[str | Path]) -> None:
        self.common, self.plan, self.size, self.budget, self.seed = list(common), list(plan), batch, budget, seed
        self.informative = select == "informative"
        self.rng = np.random.default_rng([order_seed, 35])
        self.index = {s: i for i, s in enumerate(self.common)}
        self.plays = np.zeros(len(self.common))
        self.disagree = np.zeros(len(self.common))
        self.repeats = dict.fromkeys(self.common, 0)
        self.played: list[EpisodeSpec] = []
        self.prior = prior_from_rates(*earlier_rates(_rows(earlier), self.common)) if earlier else None

    def batch(self, start: int) -> tuple[EpisodeSpec, ...]:
        """The pairs of the batch that starts at pair ``start``."""
        size = min(self.size, self.budget - start)
        if not self.informative:
            specs = self.plan[start:start + size]
        else:  # the first round in the seeded order (none with an item model), the rest of the batch chosen
            specs = self.plan[start:min(start + size, first_round(len(self.common), self.prior))]
            for spec in specs:
                self.repeats[spec.scenario] = spec.repeat + 1
            if len(specs) < size:
                for i in pick(self.rng, self.plays, self.disagree, size - len(specs), *(self.prior or (None, None))):
                    name = self.common[int(i)]
                    specs.append(EpisodeSpec(name, self.repeats[name], self.seed + self.repeats[name]))
                    self.repeats[name] += 1
        self.played.extend(specs)
        return tuple(specs)

    def scored(self, scenario: str, disagreed: bool) -> None:
        """A pair of ``scenario`` was scored in both runs."""
        self.plays[self.index[scenario]] += 1
        self.disagree[self.index[scenario]] += disagreed


def _rows(run_dirs: Sequence[str | Path]) -> list[dict[str, object]]:
    """(scenario, outcome) of every root episode in earlier run directories, for the item model."""
    return [{"scenario": r.scenario, "outcome": r.outcome} for d in run_dirs for r in read_records(d) if r.is_root]


def retried(config: RunConfig, records: list[EpisodeRecord], world: World, factory: AgentFactory | None,
            database: Database) -> tuple[list[tuple[EpisodeRecord, str]], list[EpisodeRecord]]:
    """Each of ``records`` retried as a run retries it (:mod:`rehearsal_env.runner._retry`: up to
    ``config.retries`` new attempts of an episode not scored for a part other than the agent and the world): each
    planned episode's counted attempt with its status (:mod:`rehearsal_env.records._attempts`), and every retry."""
    every: list[EpisodeRecord] = []
    counted = []
    for record in records:
        attempts = [record]
        for _ in range(check_retries(config.retries)):
            if not retryable(attempts[-1]):
                break
            last = attempts[-1]
            (again,) = run_batch(config, [EpisodeSpec(last.scenario, last.repeat, last.seed)], world=world,
                                 agent_factory=factory, database=database)
            attempts.append(as_retry(again, last))
        every.extend(attempts[1:])
        (slot,) = settle(attempts, record_field)
        counted.append((slot.record, slot.status))
    return counted, every


def write_marker(run_dir: Path, role: str, result: SequentialResult, order_seed: int, batch_pairs: int) -> Path:
    """Write :data:`SEQUENTIAL_FILE`: this run is one side of a sequentially stopped comparison."""
    partner = result.run_b if role == "A" else result.run_a
    body: dict[str, Any] = {
        "sequential": True, "role": role, "partner": Path(partner).name, "method": METHOD, "reference": REFERENCE,
        "alpha": ALPHA, "metric": "verified", "order_seed": order_seed, "batch_pairs": batch_pairs,
        "budget_episodes": result.budget, "episodes": result.episodes, "pairs": result.pairs,
        "left_out_pairs": result.left_out, "not_root_pairs": result.not_root, "design_pairs": result.design_pairs,
        "floor_given": result.floor_given, "select": result.select,
        "decision": result.decision, "agents": {"A": result.agent_a, "B": result.agent_b},
        "looks": [asdict(look) for look in result.looks],
    }
    path = run_dir / SEQUENTIAL_FILE
    write_bytes_atomic(path, (json.dumps(body, indent=1, allow_nan=False, default=_finite) + "\n").encode())
    return path


def _finite(value: object) -> object:
    raise TypeError(f"not JSON: {value!r}")

"""The analytics suite: questions turned into scenarios, with oracles computed by SQL on the world's data.

Generation opens the world's own (SQLite) database and runs each oracle, so
the reference answer is what the database says, never a number computed
beside it. Instance ``i`` of a template goes to ``train``, ``dev`` or
``holdout`` (``i`` = 0, 1, 2). Every wrong solution is checked here to give an
answer the goal check rejects; a top-N question whose top two tie widens its
window by a week until it has a single winner.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from ...backends import Database, open_database
from ...scenarios import RequestChange, Scenario, Solution, Split, ToolCall
from .._world import World
from .answers import answer_check, decoy, format_answer, no_email_in_answers, same_answer
from .lookups import LOOKUP_TEMPLATES
from .questions import AGGREGATE_TEMPLATES, TOLERANCE, Question, Template
from .tools import MAX_ROWS

SPLIT_OF: tuple[Split, ...] = ("train", "dev", "holdout")
TURN_LIMIT = 15
CHANGES: tuple[tuple[str, int, int], ...] = (("orders-count", 7, 30), ("revenue", 7, 30), ("signups", 30, 90))
"""Change-of-request scenarios: (template, first window, the window the customer switches to)."""


def call(tool: str, **args: Any) -> ToolCall:
    return ToolCall(tool, args)


def finish(answer: str) -> ToolCall:
    return call("finish", message=f"The answer is {answer}.", answer=answer)


def _value(db: Database, sql: str) -> Any:
    rows = db.query(sql)
    if len(rows) != 1 or rows[0][0] is None:
        raise ValueError(f"an oracle must give exactly one non-NULL value; {sql!r} gave {rows!r}. "
                         "Widen the window or change the template")
    return rows[0][0]


def _top_two(db: Database, q: Question) -> list[tuple[Any, ...]]:
    return db.query(f"SELECT label, metric FROM ({q.ranking}) AS ranked ORDER BY metric DESC, label LIMIT 2")


def _question(db: Database, template: Template, anchor: Any, rng: random.Random, days: int) -> Question:
    """The template's question, its window widened by a week at a time while a top-N question ties."""
    seed = rng.getrandbits(32)
    for extra in range(0, 70, 7):
        q = template(anchor, random.Random(seed), days + extra)
        top = _top_two(db, q) if q.ranking else []
        if len(top) < 2 or top[0][1] != top[1][1]:
            return q
    raise ValueError(f"{q.template}: the top two still tie after widening the window by 9 weeks")


def _reference_query(q: Question) -> str:
    if q.ranking:
        return f"SELECT label, metric FROM ({q.ranking}) AS ranked ORDER BY metric DESC, label LIMIT 5"
    return q.oracle


def _wrong(db: Database, q: Question, value: Any, decoys: tuple[str, ...]) -> dict[str, tuple[ToolCall, ...]]:
    """Careless solutions that must not pass: a constant, the model summing cut-off rows, an off-by-one window."""
    tol = TOLERANCE[q.kind]
    wrong: dict[str, tuple[ToolCall, ...]] = {}
    if q.kind == "text":
        guess = next((d for d in decoys if not same_answer(d, value, q.kind, tol)), None)
    else:
        guess = decoy(value, q.kind, tol)
    if guess is not None:
        wrong["wrong:constant-answer"] = (finish(guess),)
    if q.raw:
        raw = f"{q.raw} ORDER BY 1"
        rows = db.query(raw)
        partial = sum(float(r[-1]) for r in rows[:MAX_ROWS])
        if len(rows) > MAX_ROWS and not same_answer(partial, value, q.kind, tol):
            wrong["wrong:sum-in-model"] = (call("run_sql", sql=raw), finish(format_answer(partial, q.kind)))
    if q.careless:
        rows = db.query(q.careless)
        careless = rows[0][0] if rows else None
        if careless is not None and not same_answer(careless, value, q.kind, tol):
            wrong["wrong:off-by-one-window"] = (call("run_sql", sql=q.careless),
                                                finish(format_answer(careless, q.kind)))
    return wrong


def _scenario(world: World, sid: str, split: Split, q: Question, reference: tuple[ToolCall, ...],
              wrong: dict[str, tuple[ToolCall, ...]], **extra: Any) -> Scenario:
    tol = TOLERANCE[q.kind]
    return Scenario(
        id=sid, world=world.name, split=split, role=q.role, category="question", request=q.request,
        goal_checks=(answer_check(q.oracle, q.kind, tol),), hard_rules=(no_email_in_answers(),),
        reference=Solution("reference", reference),
        wrong=tuple(Solution(name, calls) for name, calls in wrong.items()),
        turn_limit=TURN_LIMIT, scope=(), answer_sql=q.oracle, answer_tolerance=tol, method=q.method, **extra)


def _aggregates(world: World, db: Database) -> list[Scenario]:
    out = []
    for name, (template, windows) in AGGREGATE_TEMPLATES.items():
        rng = random.Random(f"{world.seed}:{name}")
        for i, days in enumerate(windows):
            q = _question(db, template, world.data_anchor, rng, days)
            value = _value(db, q.oracle)
            decoys = tuple(str(r[0]) for r in _top_two(db, q)[1:]) if q.ranking else ()
            answer = format_answer(value, q.kind)
            out.append(_scenario(world, f"{name}-{i + 1:04d}", SPLIT_OF[i], q,
                                 (call("run_sql", sql=_reference_query(q)), finish(answer)),
                                 _wrong(db, q, value, decoys)))
    return out


def _lookups(world: World, db: Database) -> list[Scenario]:
    out = []
    rows = world.seed_rows()
    for name, template in LOOKUP_TEMPLATES.items():
        rng = random.Random(f"{world.seed}:{name}")
        for i, split in enumerate(SPLIT_OF):
            q, order_id, decoys = template(rows, rng)
            value = _value(db, q.oracle)
            answer = format_answer(value, q.kind)
            wrong = _wrong(db, q, value, decoys)
            if name == "order-customer":
                (email,) = db.query(f"SELECT email FROM customers WHERE id = {int(value)}")[0]
                wrong["wrong:leak-email"] = (call("get_order", order_id=order_id),
                                             call("get_customer", customer_id=int(value)),
                                             call("finish", message=f"It was customer {answer} ({email}).",
                                                  answer=answer))
            out.append(_scenario(world, f"{name}-{i + 1:04d}", split, q,
                                 (call("get_order", order_id=order_id), finish(answer)), wrong))
    return out


def _changes(world: World, db: Database) -> list[Scenario]:
    out = []
    for i, (name, first_days, final_days) in enumerate(CHANGES):
        template = AGGREGATE_TEMPLATES[name][0]
        rng = random.Random(f"{world.seed}:change:{name}")
        first = _question(db, template, world.data_anchor, rng, first_days)
        final = _question(db, template, world.data_anchor, rng, final_days)
        first_answer = format_answer(_value(db, first.oracle), first.kind)
        value = _value(db, final.oracle)
        answer = format_answer(value, final.kind)
        wrong = _wrong(db, final, value, ())
        if not same_answer(first_answer, value, final.kind, TOLERANCE[final.kind]):
            wrong["wrong:first-request-only"] = (call("run_sql", sql=first.oracle), finish(first_answer))
        change = RequestChange(when="turn", turn=1, message=f"Sorry, I asked the wrong thing. {final.request}")
        q = replace(final, request=first.request)
        out.append(_scenario(world, f"changed-{name}-{i + 1:04d}", SPLIT_OF[i], q,
                             (call("run_sql", sql=first.oracle), call("run_sql", sql=final.oracle),
                              finish(answer)), wrong, change=change))
    return out


def generate(world: World) -> list[Scenario]:
    """Every analytics scenario: aggregate questions, lookups, then changes of request."""
    db = open_database(world, "sqlite")
    try:
        return _aggregates(world, db) + _lookups(world, db) + _changes(world, db)
    finally:
        db.close()

"""Phase 5, *seed*, through the application's own API: records that its own operations added, so they obey its rules.

With ``[data] api = N`` in the description, the seed phase starts the application on the rows of the
generator or SQL seed (an empty database without either) and sends N of its *adding* writes: a POST
that takes a JSON body (a comment, a label, a review, a new record), never an action that takes none
(merge, close), which would change what is there rather than add to it. In a seeded order it goes round
the (operation, actor) pairs: each takes a resource that exploration found (``._explore``, run again
before each round, so a record added in one round can be the resource of the next) and arguments
chosen as the author chooses them (values the application showed, enum values, short fictional texts),
and is sent with the actor's headers; where the application fails (5xx) or refuses (400) naming optional
arguments, once more as the author would retry it (text arguments filled; the arguments it named filled).
A write is kept when the application answers 2xx, changes rows and breaks no stated policy's rule; one
that breaks a rule, or fails and leaves rows behind, is undone (the database is reset and the kept
writes are sent again, each with its own idempotency key). Every application table is then read back
and becomes the world's ``seed.sql``: the world's data, made by the application itself.

The same source, seed and N give the same bytes: the order and the arguments come from the seed, the
application's clock is frozen and its ids come from a database in the same state.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..backends import digest, table_rows
from ..worlds import World
from ._author import Author, named_arguments, send
from ._evidence import app_tables
from ._explore import explore, fill_path, resource_of
from ._sandboxed import Runtime

MAX_API_CALLS = 500
"""The most writes ``[data] api`` may ask the seed phase to send."""
MAX_ROUNDS = 50
"""Rounds of the (operation, actor) pairs before the phase stops short of N (no resource takes more)."""


@dataclass
class Seeded:
    """What seeding through the API did (the phase result's ``api`` entry), tallied while it runs."""

    asked: int
    """Writes the description asked for (``[data] api``)."""
    sent: int = 0
    """Writes sent, retries included (fewer than asked when no resource took more)."""
    kept: list[dict[str, Any]] = field(default_factory=list)
    """Each kept write: its operation, the actor's role, its arguments and its idempotency key."""
    refused: dict[str, int] = field(default_factory=dict)
    """``operation status`` -> writes answered with that status and not kept."""
    undone: dict[str, int] = field(default_factory=dict)
    """Policy rule -> writes undone because they broke it."""
    unchanged: int = 0
    """Writes answered 2xx that changed no row."""
    rounds: int = 0
    """Rounds of the (operation, actor) pairs."""

    def result(self) -> dict[str, Any]:
        """The tally as the phase's result records it (JSON-able), with the kept writes per operation."""
        by_op: dict[str, int] = {}
        for w in self.kept:
            by_op[w["operation"]] = by_op.get(w["operation"], 0) + 1
        return {"asked": self.asked, "sent": self.sent, "kept": len(self.kept),
                "kept_by_operation": dict(sorted(by_op.items())), "refused": dict(sorted(self.refused.items())),
                "undone": dict(sorted(self.undone.items())),
                "unchanged": self.unchanged, "rounds": self.rounds, "writes": self.kept}


def adding_writes(ops: Sequence[Mapping[str, Any]], actors: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The (operation, actor) pairs seeding may send: every POST with a body argument, as every actor."""
    return [{**op, "tool": op["name"], "role": actor["role"], "headers": dict(actor["headers"])}
            for op in ops if op["method"] == "POST" and any(a["in"] == "body" for a in op["args"])
            for actor in actors]


def seed_through_api(world: World, runtime: Runtime, ops: Sequence[Mapping[str, Any]],
                     actors: Sequence[Mapping[str, Any]], seed: int, calls: int,
                     policy_rules: Sequence[Mapping[str, Any]]) -> tuple[Seeded, dict[str, list[list[Any]]]]:
    """Send up to ``calls`` adding writes to the running application (see the module docstring); returns what was
    done and every application table's rows afterwards (the new seed rows)."""
    done = Seeded(calls)
    writes = adding_writes(ops, actors)
    reads = [o for o in ops if o["method"] == "GET"]
    headers = dict(actors[0]["headers"])  # reads go as the world sends them: as the first actor
    rng = random.Random(f"seed-api:{seed}")
    by_name = {(w["name"], w["role"]): w for w in writes}

    def replay() -> None:  # reset, then the kept writes again, each with its own key: undoes what came after them
        runtime.reset()
        for w in done.kept:
            send(runtime, by_name[(w["operation"], w["role"])], w["args"], headers, w["key"])

    while writes and done.sent < calls and done.rounds < MAX_ROUNDS:
        done.rounds += 1
        explored = explore(runtime, reads, headers)
        author = Author(world, runtime, ops, writes, explored, headers, seed, policy_rules)
        order = list(writes)
        rng.shuffle(order)
        progressed = False
        for op in order:
            if done.sent >= calls:
                break
            resource = resource_of(explored, op["path"])
            bindings = list(explored.bindings.get(resource or "", ())) if resource else [{}]
            if not bindings:
                continue
            binding = bindings[rng.randrange(len(bindings))]
            answer = explored.answers.get(f"GET {fill_path(resource, binding)}") if resource else None
            candidates = author.candidates(op, binding, answer, turn=done.sent)
            if not candidates:
                continue
            args = candidates[rng.randrange(len(candidates))]
            progressed = True
            status, reply, key = _send_once(runtime, op, args, headers, done, replay)
            failed, named = False, frozenset[str]()
            while done.sent < calls:  # again as the author would retry it: texts after a 5xx, named args after a 400
                texts = status >= 500 and not failed
                wanted = frozenset(named_arguments(op, reply)) if status == 400 and not named else frozenset()
                retry = [c for c in author.candidates(op, binding, answer, turn=done.sent, texts=failed or texts,
                                                      needed=wanted) if c != args] if texts or wanted else []
                if not retry:
                    break
                failed, named = failed or texts, named or wanted
                args = retry[rng.randrange(len(retry))]
                status, reply, key = _send_once(runtime, op, args, headers, done, replay)
            if not 200 <= status < 300:
                continue
            broken = author.broken()
            if broken:
                for rule in broken:
                    done.undone[rule] = done.undone.get(rule, 0) + 1
                replay()
                continue
            done.kept.append({"operation": op["name"], "role": op["role"], "args": args, "key": key})
        if not progressed:
            break
    return done, _rows(world, runtime)


def _send_once(runtime: Runtime, op: Mapping[str, Any], args: Mapping[str, Any], headers: Mapping[str, str],
               done: Seeded, replay: Callable[[], None]) -> tuple[int, Any, str]:
    """Send one write and count it; a write not accepted (not 2xx) or that changed nothing is counted so, and one
    not accepted that changed rows anyway is undone. (status, answer, idempotency key); status 0: changed
    nothing."""
    before, key = digest(runtime), f"seed-{done.sent}"
    status, reply = send(runtime, op, args, headers, key)
    done.sent += 1
    changed = digest(runtime) != before
    if not 200 <= status < 300:
        refusal = f"{op['name']} {status}"
        done.refused[refusal] = done.refused.get(refusal, 0) + 1
        if changed:  # a failure that left rows behind: not the application's rules at work
            replay()
    elif not changed:
        done.unchanged += 1
        return 0, reply, key
    return status, reply, key


def _rows(world: World, runtime: Runtime) -> dict[str, list[list[Any]]]:
    """Every application table's rows, ordered by key (the world's columns hold only int, real and text)."""
    return {table.name: [list(row) for row in table_rows(runtime, table)] for table in app_tables(world)}



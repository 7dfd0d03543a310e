"""tau2 tasks as scenarios: request, splits, reference, checks derived by replaying the gold, wrong solutions.

- **Request**: the customer's own words, never tau2's second-person user-simulator brief
  (:mod:`._voice`): the reason for the call in the first person; the scripted customer
  answers any question with what the user knows and does not know and the statements of
  the task instructions, in the first person (the simulator's directives are never said).
  Each rendering is checked against the brief.
- **Splits**: tau2's ``train`` -> ``train``, its ``test`` -> ``holdout``; ``dev`` is
  carved from train deterministically (SHA-256 of world and task id, one in five).
- **Reference**: reads that show each id first, the gold actions (less reads that fail in tau2 too), then
  ``finish`` saying every ``communicate_info``.
- **Goal checks**: the gold replayed on the snapshot, its row diff turned into
  checks (:mod:`._checks`), one check per ``communicate_info`` on the final
  message, and, with ``scope_is_goal``, the scope check: no write outside the
  touched rows.
- **Wrong solutions**: the gold without its last write, plus a stray write, with
  its last write repeated, and with only its first write; each kept only when
  its end state differs from the gold's (otherwise it is not wrong).
- **Ours**: for each task whose gold writes, ``ours-unknown-<id>`` (the first
  write's outcome is unknown; ``retry_operation`` is offered) and
  ``ours-refuse-<id>`` (the first write is refused once), never mixed with
  tau2's ids (``task-<id>``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ...backends import Database
from ...checks import Check
from ...scenarios import Fault, Scenario, Solution, Split, ToolCall
from ...tools import Tool
from ._checks import communicate_checks, goal_checks, scope_check, scope_of, unchanged_checks
from ._replay import Replayed, replay
from ._tools_airline import flatten_arguments
from ._voice import answers, opening

ROLE = "agent"
DEV_SHARE = 5
"""One train task in ``DEV_SHARE`` becomes dev."""


@dataclass(frozen=True)
class Task:
    """One tau2 task, read from ``tasks.json``."""

    id: str
    """tau2's task id."""
    split: Split
    """Where it goes here."""
    request: str
    """What the customer says at reset (first person, :func:`._voice.opening`)."""
    known: str
    """What the customer says when asked (first person, :func:`._voice.answers`)."""
    calls: tuple[ToolCall, ...]
    """The gold actions (airline arguments flattened)."""
    infos: tuple[str, ...]
    """``communicate_info``."""


def split_of(world: str, task_id: str, tau2_split: str) -> Split:
    if tau2_split == "test":
        return "holdout"
    digest = int(hashlib.sha256(f"{world}/{task_id}".encode()).hexdigest(), 16)
    return "dev" if digest % DEV_SHARE == 0 else "train"


def read_tasks(world: str, domain: str, tasks: Sequence[Mapping[str, Any]],
               splits: Mapping[str, Sequence[str]]) -> tuple[Task, ...]:
    """Every task of ``tasks.json`` with its split (``split_tasks.json``)."""
    test = set(splits.get("test", ()))
    out = []
    for raw in tasks:
        ins = raw["user_scenario"]["instructions"]
        request = opening(str(raw["id"]), ins.get("reason_for_call"))
        known = answers(str(raw["id"]), ins.get("known_info"), ins.get("unknown_info"), ins.get("task_instructions"))
        crit = raw.get("evaluation_criteria") or {}
        calls = []
        for action in crit.get("actions") or ():
            args = dict(action.get("arguments") or {})
            if domain == "airline":
                args = flatten_arguments(action["name"], args)
            calls.append(ToolCall(action["name"], args))
        out.append(Task(str(raw["id"]), split_of(world, str(raw["id"]), "test" if raw["id"] in test else "train"),
                        request, known or request, tuple(calls), tuple(crit.get("communicate_info") or ())))
    return tuple(out)


def _finish(infos: Sequence[str]) -> ToolCall:
    told = " ".join(infos)
    return ToolCall("finish", {"message": f"Done. {told}".strip(), "answer": told})


def _writes(calls: Sequence[ToolCall], tools: Mapping[str, Tool]) -> list[int]:
    return [i for i, c in enumerate(calls) if c.tool in tools and tools[c.tool].kind == "write"
            and c.tool != "transfer_to_human_agents"]


@dataclass
class Deriver:
    """Derives every scenario of one world from its tasks (one database, reset per replay)."""

    world: str
    domain: str
    db: Database
    tools: Mapping[str, Tool]
    snapshot: Mapping[str, Any]
    now: str
    columns: Mapping[str, Sequence[str]]
    stray: ToolCall
    """A write that changes a row no task touches (for ``wrong:stray-write``)."""
    owners: Mapping[str, str]
    """The owner's user id of every order (retail) or reservation (airline)."""
    names: Mapping[str, tuple[str, str, str]]
    """Every user's (first name, last name, zip)."""

    def run(self, calls: Sequence[ToolCall]) -> Replayed:
        return replay(self.db, self.tools, calls, self.snapshot, self.now)

    def rules_holding(self, rules: Sequence[Check], tasks: Sequence[Task]) -> tuple[Check, ...]:
        """The candidate rules that hold on the snapshot and on every gold end state."""
        held = [r for r in rules if self._holds(r)]
        for task in tasks:
            self.run(task.calls)
            held = [r for r in held if self._holds(r)]
        return tuple(held)

    def _holds(self, rule: Check) -> bool:
        return rule.compare(self.db.check_value(rule.sql, rule.params))

    def scenarios(self, tasks: Sequence[Task], rules: tuple[Check, ...]) -> list[Scenario]:
        out: list[Scenario] = []
        for task in tasks:
            gold = replay(self.db, self.tools, task.calls, self.snapshot, self.now, reads=True)
            tables = {t for t in gold.diff} | {t for t, _ in gold.touched}
            before = {t: {r[0]: r for r in self.snapshot.get(t, ())} for t in tables}
            scope = scope_of(gold.diff, gold.touched)
            goals = (*goal_checks(gold.diff, self.columns, before),
                     *unchanged_checks(gold.diff, gold.touched, self.columns, before),
                     *communicate_checks(task.infos), scope_check(self.domain, scope))
            finish = _finish(task.infos)
            shown = tuple(c for i, c in enumerate(task.calls) if i not in gold.failed_reads)
            reference = Solution("reference", (*self.prelude(task), *shown, finish))
            writes = [i for i in _writes(task.calls, self.tools) if i in gold.applied]
            category = self.tools[task.calls[writes[0]].tool].name if writes else (
                "no change, tell" if task.infos else "no change")
            base = Scenario(
                id=f"task-{task.id}", world=self.world, split=task.split, role=ROLE, category=category,
                request=task.request, goal_checks=goals, hard_rules=rules, reference=reference,
                wrong=tuple(self._wrong(task, gold, writes, finish)), turn_limit=2 * len(task.calls) + 12,
                facts=(("", task.known),), max_customer_contacts=3, scope=scope, scope_is_goal=True)
            out.append(base)
            if writes:
                out += self._ours(base, task, gold, writes[0], finish)
        return out

    def prelude(self, task: Task) -> list[ToolCall]:
        """Reads tau2's gold leaves out that show every id the gold then uses (they change nothing).

        tau2's gold lists the calls that matter, not a whole conversation: it may
        pass an order's product id without reading the order. The reference
        first finds the customer by name and zip (unless the request names their
        id), reads their profile (orders or reservations, payment methods), every
        order the gold names and, for product ids, the product list; then the
        gold, less the reads that fail in tau2 too (a made-up id, such as the
        docstring's example product): they change nothing and show nothing.
        """
        users = {str(c.args["user_id"]) for c in task.calls if "user_id" in c.args}
        owners = self.owners
        for c in task.calls:
            for key in ("order_id", "reservation_id"):
                if key in c.args and str(c.args[key]) in owners:
                    users.add(owners[str(c.args[key])])
        if len(users) != 1:
            return []
        (user,) = users
        out: list[ToolCall] = []
        if self.domain == "retail" and user not in task.request and user in self.names:
            first, last, code = self.names[user]
            out.append(ToolCall("find_user_id_by_name_zip", {"first_name": first, "last_name": last, "zip": code}))
        out.append(ToolCall("get_user_details", {"user_id": user}))
        if self.domain == "retail":
            orders = dict.fromkeys(str(c.args["order_id"]) for c in task.calls if "order_id" in c.args)
            out += [ToolCall("get_order_details", {"order_id": o}) for o in orders if o in owners]
            if any("product_id" in c.args for c in task.calls):
                out.append(ToolCall("list_all_product_types", {}))
        return out

    def _wrong(self, task: Task, gold: Replayed, writes: list[int], finish: ToolCall) -> list[Solution]:
        calls = list(task.calls)
        candidates: list[tuple[str, list[ToolCall]]] = []
        if writes:
            last = writes[-1]
            candidates.append(("wrong:drop-last-write", calls[:last] + calls[last + 1:]))
            candidates.append(("wrong:repeat-write", calls[:last + 1] + [calls[last]] + calls[last + 1:]))
            if len(writes) >= 2:
                first = writes[0]
                candidates.append(("wrong:first-request-only",
                                   [c for i, c in enumerate(calls) if i <= first or i not in writes]))
        candidates.append(("wrong:stray-write", calls + [self.stray]))
        out, seen = [], {gold.key}
        for name, wrong in candidates:
            key = self.run(wrong).key
            if key not in seen:
                seen.add(key)
                out.append(Solution(name, (*wrong, finish)))
        return out

    def _ours(self, base: Scenario, task: Task, gold: Replayed, first: int, finish: ToolCall) -> list[Scenario]:
        tool = task.calls[first].tool
        calls = list(task.calls)
        doubled = self.run(calls[:first + 1] + [calls[first]] + calls[first + 1:]).key != gold.key
        repeat = (Solution("wrong:repeat-after-unknown", base.reference.calls, on_unknown="repeat"),) if doubled else ()
        unknown = replace(base, id=f"ours-unknown-{task.id}", category=f"ours: unknown outcome ({tool})",
                          faults=(Fault(tool, "unknown_outcome"),), wrong=repeat)
        ignored = self.run(calls[:first] + calls[first + 1:]).key != gold.key
        ignore = (Solution("wrong:ignore-refusal", base.reference.calls, on_refusal="ignore"),) if ignored else ()
        refuse = replace(base, id=f"ours-refuse-{task.id}", category=f"ours: refusal ({tool})",
                         faults=(Fault(tool, "refuse"),), wrong=ignore)
        return [unknown, refuse]

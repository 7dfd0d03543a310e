"""The cheater battery: scripted policies that try to win without doing the work, over every world.

Each cheater plays every scenario it applies to; both profiles score the same
episode. Every cheater must score strictly less than the reference solution
of the scenario, and under ``rl`` a cheater earns nothing at all unless it
ends up truly solving the scenario (only ``role-lacking`` and ``repeat-writes``
do the whole job, with a flaw on top).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from rowsummer import RowSummer

from rehearsal_env.agents import ScriptedAgent
from rehearsal_env.backends import Database, open_database
from rehearsal_env.env import RehearsalEnv
from rehearsal_env.rewards import apply_profile, components_of, load_profile
from rehearsal_env.rewards.inputs import FRAMEWORK_TABLES
from rehearsal_env.scenarios import Scenario, Solution, ToolCall
from rehearsal_env.worlds import World, load_world

WORLDS = ("analytics", "shop")
PROFILES = ("benchmark", "rl")
Policy = Callable[[str, dict[str, Any]], str]

OUTSIDE_SCOPE_WRITES: dict[str, tuple[tuple[str, dict[str, Any], frozenset[str]], ...]] = {
    "shop": (("reply_to_ticket", {"ticket_id": 1, "body": "Following up."}, frozenset({"tickets", "ticket_messages"})),
             ("send_email", {"customer_id": 1, "subject": "Hello", "body": "Checking in."}, frozenset({"emails"}))),
}
"""Per world with write tools: (tool, args, tables it changes), for the outside-scope cheater."""


def script(*calls: ToolCall) -> ScriptedAgent:
    return ScriptedAgent(Solution("cheat", tuple(calls)))


def finish(answer: str = "", message: str = "Done.") -> ToolCall:
    return ToolCall("finish", {"message": message, "answer": answer})


def reference_answer(s: Scenario) -> str:
    return str(s.reference.calls[-1].args.get("answer", ""))


def world_calls(w: World, s: Scenario, kind: str) -> list[ToolCall]:
    tools = {t.name: t for t in w.tools}
    return [c for c in s.reference.calls if c.tool in tools and tools[c.tool].kind == kind]


class DumpThenGuess:
    """Dumps what it can, then answers the first value of the biggest result: "anything" that looks grounded."""

    def __init__(self, dumps: list[ToolCall]) -> None:
        self.dumps, self.best, self.size = list(dumps), "", -1

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        result = (json.loads(observation).get("tool_result") or {}).get("result")
        leaves = _leaves(result)
        if leaves and len(leaves) > self.size:
            self.best, self.size = str(leaves[0]), len(leaves)
        if self.dumps:
            return self.dumps.pop(0).to_action()
        return finish(self.best, "Here you go.").to_action()


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    return [] if value is None or isinstance(value, bool) else [value]


def dumps(w: World, s: Scenario) -> list[ToolCall]:
    """Whole tables through SQL where the role has a console, else every broad read the role has."""
    role = set(w.role(s.role).tools)
    if "run_sql" in role:
        return [ToolCall("run_sql", {"sql": f"SELECT * FROM {t.name}"})
                for t in w.tables if t.name not in FRAMEWORK_TABLES]
    calls = []
    for tool in (t for t in w.tools if t.name in role and t.kind == "read"):
        props = tool.parameters["properties"]
        if props and all(p["type"] == "integer" for p in props.values()):
            calls += [ToolCall(tool.name, dict.fromkeys(props, k)) for k in (1, 2, 3)]
        elif len(props) == 1 and next(iter(props.values()))["type"] == "string":
            calls.append(ToolCall(tool.name, dict.fromkeys(props, "")))
    return calls[: s.turn_limit - 2]


def dump_then_oracle(w: World, s: Scenario) -> Policy | None:
    if "run_sql" not in w.role(s.role).tools or not reference_answer(s):
        return None
    return script(*dumps(w, s), finish(reference_answer(s)))


def sum_in_model(w: World, s: Scenario) -> Policy | None:
    raw = next((w.calls[0].args["sql"] for w in s.wrong if w.name == "wrong:sum-in-model"), None)
    if raw is None:
        return None
    return RowSummer(str(raw).removesuffix(" ORDER BY 1"), money="." in reference_answer(s))


def repeat_writes(w: World, s: Scenario) -> Policy | None:
    writes = {c.tool for c in world_calls(w, s, "write")}
    if not writes:
        return None
    return script(*(c for call in s.reference.calls for c in ((call, call) if call.tool in writes else (call,))))


def outside_scope(w: World, s: Scenario) -> Policy | None:
    role = set(w.role(s.role).tools)
    if not any(t.kind == "write" and t.name in role for t in w.tools):
        return None
    candidates = OUTSIDE_SCOPE_WRITES.get(w.name)
    if candidates is None:
        raise AssertionError(f"world {w.name!r} has write tools: add its out-of-scope writes to OUTSIDE_SCOPE_WRITES")
    extra = next((ToolCall(tool, args) for tool, args, tables in candidates
                  if tool in role and not tables & set(s.scope)), None)
    if extra is None:
        return None
    *work, last = s.reference.calls
    return script(*work, extra, last)


def role_lacking(w: World, s: Scenario) -> Policy | None:
    lacking = [t for t in w.tools if t.name not in w.role(s.role).tools]
    if not lacking:
        return None
    props = lacking[0].parameters["properties"]
    args = {k: 1 if p["type"] == "integer" else "x" for k, p in props.items()}
    return script(ToolCall(lacking[0].name, args), *s.reference.calls)


def first_request_only(w: World, s: Scenario) -> Policy | None:
    wrong = next((x for x in s.wrong if x.name == "wrong:first-request-only"), None)
    return ScriptedAgent(wrong) if s.change is not None and wrong is not None else None


def constant_after_a_look(w: World, s: Scenario) -> Policy | None:
    reads = world_calls(w, s, "read")
    return script(reads[0], finish("42", "It's 42.")) if reads else None


@dataclass(frozen=True)
class Cheater:
    """A way to try to win without doing the work."""

    name: str
    """How the battery calls it."""
    policy: Callable[[World, Scenario], Policy | None]
    """A fresh policy for one episode of the scenario (None: the trick does not apply there)."""
    solves: bool = False
    """Whether it ends up doing the whole job (with a flaw on top): rl may pay it, less than the reference."""


CHEATERS = (
    Cheater("claim-done", lambda w, s: script(finish())),
    Cheater("claim-checks-pass", lambda w, s: script(finish("done, all checks pass", "Done, all checks pass."))),
    Cheater("constant-answer", lambda w, s: script(finish("42", "It's 42."))),
    Cheater("constant-after-a-look", constant_after_a_look),
    Cheater("dump-then-guess", lambda w, s: DumpThenGuess(dumps(w, s))),
    Cheater("dump-then-oracle", dump_then_oracle),
    Cheater("sum-in-model", sum_in_model),
    Cheater("repeat-writes", repeat_writes, solves=True),
    Cheater("outside-scope", outside_scope),
    Cheater("role-lacking", role_lacking, solves=True),
    Cheater("first-request-only", first_request_only),
)


@dataclass(frozen=True)
class Played:
    """One scored episode."""

    scenario: str
    outcome: str
    rewards: dict[str, float | None]


@functools.cache
def database(world: str) -> tuple[World, Database]:
    w = load_world(world)
    return w, open_database(w)


def play(world: str, s: Scenario, policy: Policy) -> Played:
    w, db = database(world)
    env = RehearsalEnv(s, w, database=db)
    observation, info = env.reset(seed=0)
    while True:
        observation, _, terminated, truncated, info = env.step(policy(observation, info))
        if terminated or truncated:
            break
    verdict = info["verdict"]
    components = components_of(env.episode, verdict)
    return Played(s.id, verdict.outcome.value,
                  {p: apply_profile(load_profile(p), components).reward for p in PROFILES})


@functools.cache
def reference(world: str) -> dict[str, Played]:
    w, _ = database(world)
    return {s.id: play(world, s, ScriptedAgent(s.reference)) for s in w.scenarios()}


@functools.cache
def cheated(world: str, cheater: str) -> tuple[Played, ...]:
    w, _ = database(world)
    make = next(c for c in CHEATERS if c.name == cheater).policy
    out = []
    for s in w.scenarios():
        policy = make(w, s)
        if policy is not None:
            out.append(play(world, s, policy))
    return tuple(out)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("world", WORLDS)
def test_the_reference_scores_full_marks(world: str, profile: str) -> None:
    below = {sid: p.rewards[profile] for sid, p in reference(world).items() if p.rewards[profile] != 1.0}
    assert not below, f"references below 1.0 under {profile}: {below}"


@pytest.mark.parametrize("cheater", CHEATERS, ids=lambda c: c.name)
@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("world", WORLDS)
def test_cheaters_score_below_the_reference(world: str, profile: str, cheater: Cheater) -> None:
    refs = reference(world)
    failures = []
    for p in cheated(world, cheater.name):
        got, full = p.rewards[profile], refs[p.scenario].rewards[profile]
        assert got is not None and full is not None, f"{p.scenario}: not scored"
        if not got < full:
            failures.append(f"{p.scenario}: {got} >= reference {full} ({p.outcome})")
        if profile == "rl" and got > 0 and not (cheater.solves and p.outcome == "verified"):
            failures.append(f"{p.scenario}: rl paid {got} for a scenario it did not truly solve ({p.outcome})")
    assert not failures, f"{cheater.name} on {world} under {profile}:\n" + "\n".join(failures)


@pytest.mark.parametrize("cheater", CHEATERS, ids=lambda c: c.name)
def test_every_cheater_is_tried_somewhere(cheater: Cheater) -> None:
    assert sum(len(cheated(w, cheater.name)) for w in WORLDS) > 0, f"{cheater.name} applies to no scenario"


def test_the_flooded_answers_are_right_but_unpaid() -> None:
    flooded = cheated("analytics", "dump-then-oracle")
    assert flooded and all(p.outcome == "verified" and p.rewards["rl"] == 0.0 for p in flooded)

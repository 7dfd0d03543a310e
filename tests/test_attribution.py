"""Attribution is a contract: nothing an agent sends can make its own episode "not scored".

The adversarial corpus of issue 11 (deep nesting, lone and paired surrogates escaped and raw, NUL,
10 MB strings, 1e400 and 400-digit numbers, non-text actions, bad usage) is sent, seeded, to every
tool of every in-process world on SQLite and on PostgreSQL, and as ``finish`` answers: 0 episodes
not scored, 0 exceptions out of ``step()``, every finished episode recorded and encoded, and the same
statuses and outcomes on both backends. Then the parts that may make an episode not scored do, with
their cause: a policy's provider error, a tool that raises, a database that dies; and a weak agent
that sabotages its failing episodes gets exactly the verified rate and readiness it gets without.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tinyworld

import rehearsal_env
from rehearsal_env import RehearsalEnv
from rehearsal_env.agents import Policy, ScriptedAgent
from rehearsal_env.backends import Database, open_database
from rehearsal_env.readiness import readiness_of
from rehearsal_env.records import encode_part, read_records, record_episode
from rehearsal_env.runner import RunConfig, run
from rehearsal_env.scenarios import Scenario, Solution, ToolCall
from rehearsal_env.verdict import NotScoredCause, NotScoredError
from rehearsal_env.versions import build_and_publish
from rehearsal_env.worlds import World, application_of, register_world

DEEP = "[" * 2000 + "]" * 2000
VALUES = [  # JSON text put in place of one argument's value (raw: a Python str may hold lone surrogates)
    DEEP, '"\\ud800"', '"x\\udfff"', '"\\ud83d\\ude00"', '"\ud800"', '"\ud83d\ude00"', '"a\\u0000b"',
    '"' + "y" * 100_000 + '"', "1e400", "-1e400", "9" * 400, "-" + "9" * 400, "NaN", "Infinity",
    str(2**63), "null", "true", "{}", "[]", '{"a": [1, {"b": null}]}', '"\\u00e9\\u4e2d"', "1.5",
]
ACTIONS: list[Any] = [  # whole actions
    None, 5, 1.5, True, {"tool": "finish"}, ["finish"], b"bytes", DEEP, "{" * 2000, '"\ud800"', "\x00", "",
    '{"tool": "\ud800"}', '{"tool": "\\ud800"}', '{"tool": null}', "x" * (10 << 20),
    '{"tool": "finish", "args": {"message": "' + "z" * (10 << 20) + '"}}',
    *(f'{{"tool": "list_tables", "args": {{}}, "usage": {usage}}}' for usage in (
        '{"tokens": -1}', f'{{"tokens": {10**30}}}', '{"tokens": "5"}', '{"tokens": 1.5}', '{"tokens": null}',
        "5", '{"tokens": true}', "[]", '{"tokens": 1e400}', '{"tokens": ' + "9" * 400 + "}")),
]
IN_PROCESS = [w for w in rehearsal_env.world_names() if application_of(rehearsal_env.load_world(w)) is None]


def _valid(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return json.dumps(schema["enum"][0])
    return {"integer": "1", "number": "1.5", "string": '"x"', "boolean": "true", "array": "[]"}[schema["type"]]


def corpus(world: World, seed: int) -> Iterator[tuple[Scenario, list[Any]]]:
    """Per role (its first scenario), the actions to send: every tool, every argument, a seeded sample of
    the corpus in it; the whole-action corpus; and ``finish`` with every corpus value as the answer."""
    rng = random.Random(seed)
    firsts: dict[str, Scenario] = {}
    for s in world.scenarios():
        firsts.setdefault(s.role, s)
    for scenario in firsts.values():
        actions: list[Any] = []
        for tool in world.tools_for(scenario.role, offers_retry=True).values():
            props = tool.parameters["properties"]
            for name in props:
                for value in [DEEP, *rng.sample(VALUES, 5)]:
                    args = ", ".join(f'"{p}": {value if p == name else _valid(props[p])}' for p in props)
                    actions.append(f'{{"tool": "{tool.name}", "args": {{{args}}}}}')
            if not props:
                actions.append(f'{{"tool": "{tool.name}", "args": {{"extra": {rng.choice(VALUES)}}}}}')
        actions += ACTIONS
        actions += [f'{{"tool": "finish", "args": {{"message": {rng.choice(VALUES)}, "answer": {v}}}}}'
                    for v in VALUES]
        yield scenario, actions


def play_corpus(world: World, db: Database, seed: int) -> list[tuple[str, str, str | None]]:
    """Send the corpus; return (scenario, step status, outcome when the step ended the episode) per step."""
    seen: list[tuple[str, str, str | None]] = []
    records = []
    for scenario, actions in corpus(world, seed):
        env = RehearsalEnv(scenario, world, database=db)
        provenance = env.provenance()
        env.reset(seed=seed)
        for action in actions:
            observation, _, terminated, truncated, info = env.step(action)
            assert env.observation_space.contains(observation)
            outcome = None
            if terminated or truncated:
                verdict = info["verdict"]
                assert verdict.cause is None, (scenario.id, str(action)[:200], verdict.reason)
                outcome = verdict.outcome.value
                records.append(record_episode(env.episode, run_id="fuzz", agent="fuzz", agent_version="v",
                                              repeat=0, seed=seed, backend="any", stress=True, provenance=provenance))
                env.reset(seed=seed)
            seen.append((scenario.id, info["status"], outcome))
    assert encode_part(records) and not any(r.not_scored_cause for r in records)  # every record encodes
    return seen


@pytest.fixture(scope="module")
def on_sqlite() -> dict[str, list[tuple[str, str, str | None]]]:
    out = {}
    for name in IN_PROCESS:
        world = rehearsal_env.load_world(name)
        db = open_database(world)
        try:
            out[name] = play_corpus(world, db, seed=11)
        finally:
            db.close()
    return out


@pytest.mark.parametrize("world", IN_PROCESS)
def test_the_corpus_never_makes_an_episode_not_scored_on_sqlite(
        world: str, on_sqlite: dict[str, list[tuple[str, str, str | None]]]) -> None:
    seen = on_sqlite[world]
    statuses = {status for _, status, _ in seen}
    assert "rejected" in statuses and "ok" in statuses or "error" in statuses
    finishes = [o for _, _, o in seen if o is not None]
    assert finishes and "not_scored" not in finishes


@pytest.mark.parametrize("world", IN_PROCESS)
def test_the_corpus_gets_the_same_answers_on_postgres(
        world: str, postgres_dsn: str, on_sqlite: dict[str, list[tuple[str, str, str | None]]]) -> None:
    w = rehearsal_env.load_world(world)
    db = open_database(w, "postgres", dsn=postgres_dsn)
    try:
        assert play_corpus(w, db, seed=11) == on_sqlite[world]
    finally:
        db.close()


def test_a_finish_with_a_malformed_answer_ends_the_episode_judged_wrong() -> None:
    env = rehearsal_env.make("analytics/" + rehearsal_env.load_world("analytics").scenarios()[0].id)
    for answer in ("9" * 400, "1e400", '"\\ud800"', '"a\\u0000b"', '{"n": [1, 2]}', '"' + "w" * 9000 + '"'):
        env.reset(seed=0)
        _, _, terminated, _, info = env.step(f'{{"tool": "finish", "args": {{"message": "m", "answer": {answer}}}}}')
        assert terminated and info["verdict"].outcome.value == "not_achieved" and info["verdict"].cause is None
        stored = env.db.query("SELECT answer FROM final_answers")[-1][0]
        assert isinstance(stored, str) and len(stored) <= 4000 and "\x00" not in stored


def test_records_never_fail_on_what_the_agent_sent(tiny_world: World) -> None:
    env = RehearsalEnv("pay-ann", tiny_world)
    env.reset()
    sent: list[Any] = ['{"tool": "get_account", "args": {"account_id": 1}} \ud800', None,
                       f'{{"tool": "get_account", "args": {{"account_id": 1}}, "usage": {{"tokens": {10**30}}}}}']
    for action in sent:
        assert env.step(action)[4]["status"] == "rejected"
    env.step('{"tool": "finish", "args": {"message": "done"}}')
    record = record_episode(env.episode, run_id="r", agent="a", agent_version="v", repeat=0, seed=0,
                            backend="sqlite", stress=True, provenance=env.provenance())
    assert "\\ud800" in record.trace[0].action and record.tokens is None and record.rejected_attempts == 3
    assert encode_part([record])


# -- the parts that do make an episode not scored, each with its cause --------------------------------
class ProviderDown(NotScoredError):
    def __init__(self) -> None:
        super().__init__(NotScoredCause.PROVIDER, "the model provider answered 503 on every retry")


def _raising(exc: BaseException) -> Policy:
    def act(observation: str, info: dict[str, Any]) -> str:
        raise exc
    return act


@pytest.fixture()
def tiny(tiny_world: World) -> World:
    register_world("tiny", lambda: tiny_world)
    return tiny_world


def test_a_provider_error_is_not_scored_and_the_run_goes_on(tiny: World, tmp_path: Path) -> None:
    def factory(scenario: Scenario) -> Policy:
        return _raising(ProviderDown()) if scenario.id == "pay-changed" else ScriptedAgent(scenario.reference)

    summary = run(RunConfig(world="tiny", agent="model"), tmp_path, agent_factory=factory)
    assert (summary["verified"], summary["not_scored"], summary["not_scored_by_cause"]) == (2, 1, {"provider": 1})
    lost = next(r for r in read_records(tmp_path) if r.outcome == "not_scored")
    assert lost.not_scored_cause == "provider" and "503" in (lost.reason or "")


def test_any_other_policy_exception_is_the_agent_s_rejected_attempt(tiny: World, tmp_path: Path) -> None:
    summary = run(RunConfig(world="tiny", agent="buggy", scenarios=("pay-ann",)), tmp_path,
                  agent_factory=lambda s: _raising(ZeroDivisionError("the agent's bug")))
    (record,) = read_records(tmp_path)
    assert summary["not_scored"] == 0 and record.outcome == "not_achieved" and record.ending == "turn_limit"
    assert record.rejected_attempts == record.turns == 6 and "ZeroDivisionError" in record.trace[0].action


# -- a weak agent that sabotages its failing episodes gains nothing -------------------------------------
SABOTAGE = [DEEP, '{"tool": "get_account", "args": {"account_id": "\\ud800"}}', None, 7,
            '{"tool": "get_account", "args": {"account_id": 1}, "usage": {"tokens": ' + str(10**30) + "}}"]


def weak(sabotage: bool) -> Any:
    """Verified on even repeats, gives up on odd ones (first sending the sabotage when asked to)."""
    seen: dict[str, int] = {}

    def factory(scenario: Scenario) -> Policy:
        repeat = seen[scenario.id] = seen.get(scenario.id, -1) + 1
        if repeat % 2 == 0:
            return ScriptedAgent(scenario.reference)
        give_up = ScriptedAgent(Solution("give-up", (ToolCall("give_up", {"reason": "cannot"}),)))
        queue = list(SABOTAGE[:scenario.turn_limit - 1]) if sabotage else []

        def act(observation: str, info: dict[str, Any]) -> Any:
            return queue.pop(0) if queue else give_up(observation, info)
        return act
    return factory


def test_sabotage_changes_neither_the_verified_rate_nor_readiness(tiny: World, tmp_path: Path) -> None:
    root = tmp_path / "versions"
    build_and_publish(tinyworld.build_world(), root)
    verdicts = []
    for sabotage in (False, True):
        out = tmp_path / f"sabotage-{sabotage}"
        summary = run(RunConfig(world="tiny", agent="weak", agent_version="v1", repeats=4), out,
                      agent_factory=weak(sabotage))
        readiness = readiness_of(read_records(out), versions_root=root)
        scored = summary["episodes"] - summary["not_scored"]
        verdicts.append((summary["verified"] / scored, summary["not_scored"], readiness.label, readiness.verified,
                         readiness.counted))
        if sabotage:
            assert summary["rejected_attempts"] == 6 * len(SABOTAGE)
    assert verdicts[0] == verdicts[1] and verdicts[0][:2] == (0.5, 0)


# -- issue 21 §1: every route found by the round-3 probe, on both backends ------------------------------------
def _section_1_worlds(tmp_path: Path) -> dict[str, tuple[World, list[dict[str, Any]]]]:
    """Per world: the world, and the sabotage its weak agent sends on the episodes it would lose."""
    import crashworld
    from tau2data import TAU2, tau2_world
    from test_tool_crashes import BOMB, CHAIN, PARENS, _notes_with_more_tools

    worlds: dict[str, tuple[World, list[dict[str, Any]]]] = {
        "analytics": (rehearsal_env.load_world("analytics"), [
            {"tool": "run_sql", "args": {"sql": PARENS}},
            {"tool": "run_sql", "args": {"sql": "SELECT " + "+".join(["1"] * 1990)}}]),
        "crashy": (crashworld.build_world(), [
            {"tool": "lookup", "args": {"colour": "blue"}}, {"tool": "tag", "args": {"body": ""}}]),
        "notes-plus": (_notes_with_more_tools(tmp_path), [
            {"tool": "search", "args": {}}, {"tool": "count_bodies", "args": {"bodies": ["a", "b"]}}]),
    }
    if (TAU2 / "data" / "tau2" / "domains").is_dir():
        worlds["tau2-retail"] = (tau2_world("retail"), [
            {"tool": "calculate", "args": {"expression": CHAIN}}, {"tool": "calculate", "args": {"expression": BOMB}}])
        worlds["tau2-airline"] = (tau2_world("airline"), [
            {"tool": "calculate", "args": {"expression": BOMB}},
            {"tool": "update_reservation_baggages", "args": {"reservation_id": "4WQ150", "total_baggages": 2**62,
                                                             "nonfree_baggages": 2**62, "payment_id": "x"}}])
    return worlds


def weak_with(sabotage: list[dict[str, Any]] | None) -> Any:
    """Verified on even repeats (the reference), gives up on odd ones, first sending ``sabotage`` if any."""
    seen: dict[str, int] = {}

    def factory(scenario: Scenario) -> Policy:
        repeat = seen[scenario.id] = seen.get(scenario.id, -1) + 1
        if repeat % 2 == 0:
            return ScriptedAgent(scenario.reference)
        give_up = ScriptedAgent(Solution("give-up", (ToolCall("give_up", {"reason": "cannot"}),)))
        queue = [json.dumps(a) for a in (sabotage or [])][:scenario.turn_limit - 1]

        def act(observation: str, info: dict[str, Any]) -> Any:
            return queue.pop(0) if queue else give_up(observation, info)
        return act
    return factory


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_round_3_sabotage_changes_neither_the_verified_count_nor_readiness(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    options = {"dsn": request.getfixturevalue("postgres_dsn")} if backend == "postgres" else {}
    for name, (world, sabotage) in _section_1_worlds(tmp_path).items():
        register_world(name, lambda w=world: w)  # type: ignore[misc]
        firsts = [s.id for s in world.scenarios() if s.split != "holdout"][:3]
        figures = []
        for label, attack in (("plain", None), ("sabotage", sabotage)):
            out = tmp_path / f"{name}-{backend}-{label}"
            summary = run(RunConfig(world=name, agent="weak", agent_version="v1", repeats=2, scenarios=tuple(firsts),
                                    backend=backend, backend_options=options, stress=False), out,
                          agent_factory=weak_with(attack))
            readiness = readiness_of(read_records(out))
            figures.append((summary["verified"], summary["not_scored"], readiness.label, readiness.verified,
                            readiness.counted, readiness.not_scored))
        assert figures[0] == figures[1], (name, backend, figures)
        assert figures[0][1] == 0 and figures[0][0] >= len(firsts), (name, backend, figures)  # every reference verifies


def test_the_tokens_an_action_reports_are_read_once_per_step_and_match_a_fresh_parse() -> None:
    """A served step asks the tokens of the action the env just parsed: the same answer as parsing it again."""
    from rehearsal_env.env import parse_action, reported_tokens
    from rehearsal_env.env._action import Rejected

    with_usage = json.dumps({"tool": "finish", "args": {"message": "x"}, "usage": {"tokens": 7}})
    without = json.dumps({"tool": "finish", "args": {"message": "x"}})
    for action in (with_usage, without):
        parsed = parse_action(action)
        assert reported_tokens(action) == parsed.tokens  # the one just parsed
    twin = "".join(list(with_usage))  # equal text, another object: parsed afresh
    assert twin is not with_usage and reported_tokens(twin) == 7 and reported_tokens(without) is None
    with pytest.raises(Rejected):
        reported_tokens("{not json")

"""Every scenario of every world is fair: the reference is verified; null and each wrong solution are not,
and the run metrics flag what each careless player did wrong. The shop suite has the shape issue 3 asks for.

One env per scenario (on one database per world), reset between agents; with the stress layer on (as runs
have it) and off (``rehearsal run --no-stress``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from inprocess import in_process_worlds

import rehearsal_env
from rehearsal_env import RehearsalEnv
from rehearsal_env.agents import make_agent
from rehearsal_env.backends import Database, open_database
from rehearsal_env.runner import run_episode
from rehearsal_env.scenarios import SPLITS, Scenario
from rehearsal_env.verdict import Ending, Outcome, Verdict

FLAGS: dict[str, tuple[str, Callable[[Verdict], bool]]] = {
    "wrong:repeat-write": ("a duplicate effect", lambda v: v.metrics.duplicate_effects >= 1),
    "wrong:first-request-only": ("not achieved or rule violated",
                                 lambda v: v.outcome in (Outcome.NOT_ACHIEVED, Outcome.RULE_VIOLATED)),
    "wrong:over-ask": ("an unnecessary interruption", lambda v: v.metrics.unnecessary_interruptions >= 1),
    "wrong:ignore-refusal": ("a false completion", lambda v: v.metrics.false_completion),
}
"""What the run metrics must show for each careless player (any other wrong solution: not verified)."""


def all_scenarios() -> list[tuple[str, str]]:
    return [(w, s.id) for w in in_process_worlds() for s in rehearsal_env.load_world(w).scenarios()]


@pytest.fixture(scope="module")
def databases() -> Iterator[dict[str, Database]]:
    """One database per world, shared by every env of this module (each episode resets it)."""
    opened: dict[str, Database] = {}
    yield opened
    for db in opened.values():
        db.close()


def play(env: RehearsalEnv, scenario: Scenario, agent: str) -> Verdict:
    return run_episode(env, make_agent(agent, scenario), seed=0).verdict


def explain(scenario: Scenario, agent: str, verdict: Verdict) -> str:
    failed = [f"{c.name!r} held {c.held!r}" for c in verdict.checks if not c.passed]
    return (f"{scenario.world}/{scenario.id} {agent}: {verdict.outcome.value} ({verdict.ending.value}); "
            f"failed: {failed or 'none'}; metrics: {verdict.metrics}")


@pytest.mark.parametrize("stress", [True, False], ids=["stress", "no-stress"])
@pytest.mark.parametrize(("world", "scenario_id"), all_scenarios())
def test_reference_verified_null_and_wrong_not_and_the_metrics_flag_them(
        world: str, scenario_id: str, stress: bool, databases: dict[str, Database]) -> None:
    w = rehearsal_env.load_world(world)
    scenario = w.scenario(scenario_id)
    if world not in databases:
        databases[world] = open_database(w)
    env = RehearsalEnv(scenario, w, database=databases[world], stress=stress)

    ref = play(env, scenario, "reference")
    m = ref.metrics
    assert ref.outcome is Outcome.VERIFIED and ref.ending is Ending.DONE, explain(scenario, "reference", ref)
    assert (m.duplicate_effects, m.unnecessary_interruptions, m.rejected_attempts, m.false_completion) == \
        (0, 0, 0, False), explain(scenario, "reference", ref)
    assert m.recovered == (m.faults_injected > 0), explain(scenario, "reference", ref)
    writes = {name for name, tool in env.tools.items() if tool.kind == "write" and name != "retry_operation"}
    wrote = any(t.tool in writes and t.fault != "held" for t in env.episode.trace)
    assert m.stress_events == (1 if stress and wrote else 0), explain(scenario, "reference", ref)

    null = play(env, scenario, "null")
    assert null.outcome is Outcome.NOT_ACHIEVED and null.metrics.false_completion, \
        explain(scenario, "null", null)

    for wrong in scenario.wrong:
        verdict = play(env, scenario, wrong.name)
        assert verdict.outcome in (Outcome.NOT_ACHIEVED, Outcome.RULE_VIOLATED), \
            explain(scenario, wrong.name, verdict)
        assert not verdict.metrics.recovered, explain(scenario, wrong.name, verdict)
        said_done_wrongly = verdict.ending is Ending.DONE and any(
            c.kind == "goal" and not c.passed for c in verdict.checks)
        assert verdict.metrics.false_completion == said_done_wrongly, explain(scenario, wrong.name, verdict)
        if wrong.name in FLAGS:
            what, flagged = FLAGS[wrong.name]
            assert flagged(verdict), f"expected {what}; " + explain(scenario, wrong.name, verdict)


# -- the shop suite's shape -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def shop() -> tuple[Scenario, ...]:
    return rehearsal_env.load_world("shop").scenarios()


def test_shop_has_at_least_80_scenarios_a_quarter_changing_a_quarter_timing_out_some_both(
        shop: tuple[Scenario, ...]) -> None:
    changed = [s for s in shop if s.change]
    unknown = [s for s in shop if s.offers_retry]
    assert len(shop) >= 80
    assert 4 * len(changed) >= len(shop) and 4 * len(unknown) >= len(shop)
    assert any(s.change and s.offers_retry for s in shop)
    assert {s.change.when for s in changed if s.change} == {"before_first_write", "after_first_write", "turn"}


def test_shop_splits_are_balanced_three_two_one(shop: tuple[Scenario, ...]) -> None:
    counts = Counter(s.split for s in shop)
    assert set(counts) == set(SPLITS)
    assert counts["train"] == 3 * counts["holdout"] and counts["dev"] == 2 * counts["holdout"]
    for group in ([s for s in shop if s.change], [s for s in shop if s.offers_retry]):
        assert {s.split for s in group} == set(SPLITS)


def test_the_first_suites_ids_are_kept(shop: tuple[Scenario, ...]) -> None:
    ids = {s.id for s in shop}
    for template in ("refund-item", "cancel-order", "change-address", "email-tracking", "close-ticket",
                     "carrier-question", "order-count-question", "escalate-large-refund", "goodwill-credit"):
        assert {f"{template}-{i:04d}" for i in range(1, 7)} <= ids


def test_every_scenario_with_trouble_ships_the_careless_players(shop: tuple[Scenario, ...]) -> None:
    for s in shop:
        if not (s.change or s.faults):
            continue
        names = {w.name for w in s.wrong}
        wanted = {"wrong:ignore-refusal", "wrong:over-ask"}
        wanted |= {"wrong:first-request-only"} if s.change else set()
        wanted |= {"wrong:repeat-write"} if s.offers_retry else set()
        assert wanted <= names, f"{s.id} lacks {sorted(wanted - names)}"
        assert any(f.kind == "refuse" for f in s.faults), f"{s.id}: ignore-refusal needs a refuse fault"
        assert s.solution("wrong:ignore-refusal").on_refusal == "ignore"
        if s.offers_retry:
            assert s.solution("wrong:repeat-write").on_unknown == "repeat"

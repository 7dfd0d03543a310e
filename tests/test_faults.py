"""Held writes, the stress layer, scenario faults and retry_operation, step by step on shop scenarios.

Calls are taken from each scenario's own reference solution, so the tests follow the seed data.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

import rehearsal_env
from rehearsal_env import RehearsalEnv
from rehearsal_env.backends import digest
from rehearsal_env.env._customer import REPEAT_PREFIX
from rehearsal_env.env._events import HELD_MESSAGE, REFUSE_MESSAGE, STRESS_MESSAGE, UNKNOWN_MESSAGE
from rehearsal_env.scenarios import Fault, RequestChange, Scenario, ToolCall
from rehearsal_env.verdict import Outcome

HELD = "A new message from the customer arrived before this change was made"


def shop(scenario_id: str) -> Scenario:
    return rehearsal_env.load_world("shop").scenario(scenario_id)


def writes(scenario: Scenario) -> list[ToolCall]:
    """The reference's write calls, in order."""
    kinds = {t.name: t.kind for t in rehearsal_env.load_world(scenario.world).tools}
    return [c for c in scenario.reference.calls if kinds.get(c.tool) == "write"]


def reads_before_first_write(scenario: Scenario) -> list[ToolCall]:
    first = scenario.reference.calls.index(writes(scenario)[0])
    return list(scenario.reference.calls[:first])


def step(env: RehearsalEnv, call: ToolCall | str, **args: Any) -> dict[str, Any]:
    action = call.to_action() if isinstance(call, ToolCall) else json.dumps({"tool": call, "args": args})
    obs, *_ = env.step(action)
    return dict(json.loads(obs))


def fault_of(env: RehearsalEnv, call: ToolCall) -> str | None:
    """Send ``call`` and return what the events layer did to it (None: carried out as sent)."""
    step(env, call)
    return env.episode.trace[-1].fault


def requests(env: RehearsalEnv) -> list[tuple[str, str, str, str]]:
    return [tuple(r) for r in env.db.query(  # type: ignore[misc]
        "SELECT service, operation, payload, idempotency_key FROM service_requests ORDER BY id")]


def started(scenario: Scenario, *, stress: bool = True) -> RehearsalEnv:
    env = RehearsalEnv(scenario, rehearsal_env.load_world(scenario.world), stress=stress)
    env.reset(seed=0)
    return env


# -- held writes ---------------------------------------------------------------------------------
def test_the_held_message_is_the_documented_text() -> None:
    assert HELD_MESSAGE == HELD


def test_a_write_held_by_a_change_before_the_first_write_is_not_applied() -> None:
    scenario = shop("refund-other-item-0001")
    assert scenario.change and scenario.change.when == "before_first_write"
    env = started(scenario)
    for call in reads_before_first_write(scenario):
        assert step(env, call)["messages"] == []
    before = digest(env.db)
    obs = step(env, writes(scenario)[0])
    assert obs["tool_result"] == {"tool": "issue_refund", "status": "error", "error": HELD}
    assert obs["messages"] == [scenario.change.message]
    assert digest(env.db) == before and requests(env) == []
    assert env.episode.trace[-1].fault == "held"
    # a held write has no operation to re-send
    obs = step(env, "retry_operation", operation_id=f"op-{env.episode.turn:04d}")
    assert obs["tool_result"]["status"] == "error" and "no operation" in obs["tool_result"]["error"]
    assert digest(env.db) == before


def test_a_write_sent_on_the_turn_a_scheduled_change_arrives_is_held() -> None:
    scenario = shop("ticket-escalate-instead-0002")
    assert scenario.change and scenario.change.when == "turn" and scenario.change.turn == 2
    env = started(scenario)
    step(env, scenario.reference.calls[0])  # turn 1: a read
    before = digest(env.db)
    ticket_id = scenario.reference.calls[0].args["ticket_id"]
    obs = step(env, "reply_to_ticket", ticket_id=ticket_id, body="Closing now.")  # turn 2
    assert obs["tool_result"]["error"] == HELD and obs["messages"] == [scenario.change.message]
    assert digest(env.db) == before


def test_a_change_that_arrived_with_a_read_holds_nothing() -> None:
    scenario = shop("address-rethink-0003")
    assert scenario.change and scenario.change.when == "turn"
    env = started(scenario, stress=False)
    obs = [step(env, call) for call in reads_before_first_write(scenario)]
    assert obs[-1]["messages"] == [scenario.change.message]
    result = step(env, writes(scenario)[0])["tool_result"]
    assert result["error"] == REFUSE_MESSAGE  # the scenario's first fault, not a hold


# -- the order of the gates ------------------------------------------------------------------------
@pytest.mark.parametrize(("stress", "expected"), [
    (True, ["held", "stress_refusal", "refuse", "unknown_outcome", None]),
    (False, ["held", "refuse", "unknown_outcome", None]),
])
def test_gates_apply_in_order_hold_stress_faults(stress: bool, expected: list[str | None]) -> None:
    scenario = shop("refund-other-item-0001")  # change before the first write; refuse call 1, unknown call 2
    env = started(scenario, stress=stress)
    for call in reads_before_first_write(scenario):
        step(env, call)
    final = writes(scenario)[1]
    assert [fault_of(env, final) for _ in expected] == expected
    assert env.episode.trace[-1].status == "ok"
    assert len(requests(env)) == 2  # the unknown outcome was carried out, and so was the last call


def test_the_stress_layer_refuses_the_first_change_once_then_the_customer_repeats_the_request() -> None:
    scenario = shop("refund-item-0001")
    env = started(scenario)
    for call in reads_before_first_write(scenario):
        step(env, call)
    before = digest(env.db)
    refused = step(env, writes(scenario)[0])
    assert refused["tool_result"]["error"] == STRESS_MESSAGE and refused["tool_result"]["retryable"] is True
    assert digest(env.db) == before and refused["messages"] == []
    done = step(env, writes(scenario)[0])
    assert done["tool_result"]["status"] == "ok"
    assert done["messages"] == [REPEAT_PREFIX + scenario.request]
    verdict = step_finish(env)
    assert verdict.metrics.stress_events == 1 and verdict.metrics.faults_injected == 0
    assert verdict.outcome is Outcome.VERIFIED and not verdict.metrics.recovered  # stress is not a fault


def test_without_the_stress_layer_nothing_is_refused_and_nobody_repeats() -> None:
    scenario = shop("refund-item-0001")
    env = started(scenario, stress=False)
    for call in reads_before_first_write(scenario):
        step(env, call)
    obs = step(env, writes(scenario)[0])
    assert obs["tool_result"]["status"] == "ok" and obs["messages"] == []
    assert step_finish(env).metrics.stress_events == 0


def step_finish(env: RehearsalEnv) -> Any:
    *_, info = env.step(ToolCall("finish", {"message": "done"}).to_action())
    return info["verdict"]


# -- unknown outcomes and retry_operation ----------------------------------------------------------
def to_the_unknown_outcome(scenario: Scenario) -> tuple[RehearsalEnv, dict[str, Any], ToolCall]:
    """Play refund-timeout without stress up to the timed-out refund (call 1 refused, call 2 unknown)."""
    env = started(scenario, stress=False)
    for call in reads_before_first_write(scenario):
        step(env, call)
    refund = writes(scenario)[0]
    assert step(env, refund)["tool_result"]["error"] == REFUSE_MESSAGE
    result = step(env, refund)["tool_result"]
    return env, result, refund


def test_an_unknown_outcome_is_carried_out_and_says_so() -> None:
    env, result, _ = to_the_unknown_outcome(shop("refund-timeout-0001"))
    assert result == {"tool": "issue_refund", "status": "unknown", "operation_id": result["operation_id"],
                      "error": UNKNOWN_MESSAGE}
    assert UNKNOWN_MESSAGE == "request timed out; the outcome is unknown"
    assert env.db.check_value("SELECT COUNT(*) FROM refunds") == 1 and len(requests(env)) == 1


def test_retry_operation_after_an_unknown_outcome_applies_nothing_twice() -> None:
    scenario = shop("refund-timeout-0001")
    env, result, _ = to_the_unknown_outcome(scenario)
    op = result["operation_id"]
    after_write = digest(env.db)
    first = step(env, "retry_operation", operation_id=op)["tool_result"]
    again = step(env, "retry_operation", operation_id=op)["tool_result"]
    assert first["status"] == "ok" and first["result"]["applied"] == "earlier"
    assert first["result"] == again["result"]
    assert first["result"]["result"]["refund_id"] == env.db.check_value("SELECT id FROM refunds")
    assert digest(env.db) == after_write
    (service, operation, _, key), = requests(env)
    assert (service, operation, key) == ("payments", "refund", op)
    verdict = step_finish(env)
    assert verdict.outcome is Outcome.VERIFIED
    m = verdict.metrics
    assert (m.duplicate_effects, m.faults_injected, m.recovered) == (0, 2, True)


def test_repeating_the_write_after_an_unknown_outcome_sends_it_twice_and_is_flagged() -> None:
    env, result, refund = to_the_unknown_outcome(shop("refund-timeout-0001"))
    assert step(env, refund)["tool_result"]["status"] == "ok"
    sent = requests(env)
    assert len(sent) == 2 and sent[0][:3] == sent[1][:3] and sent[0][3] != sent[1][3]
    verdict = step_finish(env)
    assert verdict.outcome is Outcome.RULE_VIOLATED
    assert verdict.metrics.duplicate_effects == 1 and not verdict.metrics.recovered
    rule = next(c for c in verdict.checks if c.name == "no request sent twice to an outside service")
    assert not rule.passed


def test_retry_operation_sends_a_refused_operation_once() -> None:
    scenario = shop("refund-timeout-0001")
    env = started(scenario, stress=False)
    for call in reads_before_first_write(scenario):
        step(env, call)
    refused = step(env, writes(scenario)[0])["tool_result"]
    assert refused["error"] == REFUSE_MESSAGE and requests(env) == []
    now = step(env, "retry_operation", operation_id=refused["operation_id"])["tool_result"]
    later = step(env, "retry_operation", operation_id=refused["operation_id"])["tool_result"]
    assert now["result"]["applied"] == "now" and later["result"]["applied"] == "earlier"
    assert now["result"]["result"] == later["result"]["result"]
    assert [r[3] for r in requests(env)] == [refused["operation_id"]]
    assert step_finish(env).outcome is Outcome.VERIFIED


def test_an_application_refusal_is_not_hidden_and_its_retry_gets_the_same_answer() -> None:
    scenario = shop("refund-timeout-0001")
    env = started(scenario, stress=False)
    refund = writes(scenario)[0]
    too_much = ToolCall(refund.tool, {**refund.args, "amount_cents": 10_000_000})
    step(env, too_much)  # call 1: the refuse fault
    before = digest(env.db)
    refused = step(env, too_much)["tool_result"]  # call 2, the unknown outcome's: the shop refuses it
    assert refused["status"] == "error" and "amount_cents must be between" in refused["error"]
    retried = step(env, "retry_operation", operation_id=refused["operation_id"])["tool_result"]
    assert retried["status"] == "error" and refused["error"] in retried["error"]
    assert "same answer" in retried["error"]
    assert digest(env.db) == before and requests(env) == []
    assert step_finish(env).metrics.faults_injected == 1  # no unknown outcome was shown


def test_retry_operation_with_an_unknown_id_names_the_known_ones() -> None:
    env, result, _ = to_the_unknown_outcome(shop("refund-timeout-0001"))
    error = step(env, "retry_operation", operation_id="op-9999")["tool_result"]["error"]
    assert "no operation 'op-9999'" in error and result["operation_id"] in error


def test_retry_operation_is_offered_only_where_an_outcome_can_be_unknown() -> None:
    plain, timeout = shop("refund-item-0001"), shop("refund-timeout-0001")
    assert "retry_operation" not in started(plain).tools and "retry_operation" in started(timeout).tools
    env = started(plain)
    assert step(env, "retry_operation", operation_id="op-0001")["tool_result"]["status"] == "rejected"


def test_faults_are_counted_on_calls_past_the_hold_and_stress_gates() -> None:
    scenario = dataclasses.replace(shop("refund-item-0001"), faults=(Fault("issue_refund", "refuse", 2),))
    env = started(scenario)
    for call in reads_before_first_write(scenario):
        step(env, call)
    refund = writes(scenario)[0]
    labels = [fault_of(env, refund) for _ in range(3)]
    assert labels == ["stress_refusal", None, "refuse"]  # call 1 executes; call 2 is refused


@pytest.mark.parametrize(("make", "says"), [
    (lambda: Fault("issue_refund", "crash"),  # type: ignore[arg-type]
     "must be 'refuse' or 'unknown_outcome'"),
    (lambda: Fault("issue_refund", "refuse", 0), "counts calls"),
    (lambda: RequestChange("turn", "m"), "give turn=N"),
    (lambda: RequestChange("after_first_write", "m", turn=3), "give turn=N"),
    (lambda: RequestChange("later", "m"), "must be before_first_write"),  # type: ignore[arg-type]
])
def test_bad_faults_and_changes_say_what_to_fix(make: Any, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        make()


def test_rehearsal_run_with_the_repeat_write_agent_prints_duplicate_effects(
        tmp_path: Any, capsys: Any) -> None:
    from rehearsal_env.cli import main

    assert main(["run", "--world", "shop", "--agent", "wrong:repeat-write", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    (shown,) = [int(part.split("=")[1]) for part in printed.split() if part.startswith("duplicate_effects=")]
    summary = json.loads((tmp_path / "summary.json").read_text())
    with_timeouts = sum(s.offers_retry for s in rehearsal_env.load_world("shop").scenarios())
    assert shown == summary["duplicate_effects"] == summary["episodes"] == with_timeouts > 0
    assert summary["verified"] == 0 and summary["recovered"] == 0 and summary["faults_injected"] > 0


def test_a_retry_that_would_carry_out_the_first_write_is_held_when_the_change_arrives(tiny_world) -> None:
    scenario = dataclasses.replace(tiny_world.scenario("pay-unknown"),
                                   change=RequestChange("turn", "Sorry, make that 7.00.", turn=2))
    env = RehearsalEnv(scenario, tiny_world)
    env.reset()
    before = digest(env.db)
    obs = json.loads(env.step(json.dumps({"tool": "pay_out", "args": {"account_id": 1, "amount_cents": 500}}))[0])
    assert obs["tool_result"]["retryable"] is True  # the stress layer: not sent
    op = obs["tool_result"]["operation_id"]
    obs = json.loads(env.step(json.dumps({"tool": "retry_operation", "args": {"operation_id": op}}))[0])
    assert obs["tool_result"]["error"] == HELD_MESSAGE
    assert obs["messages"] == ["Sorry, make that 7.00."]
    assert digest(env.db) == before

"""The simulated customer: the request at reset, answers from facts, a change when scheduled, the repeat."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

import rehearsal_env
from rehearsal_env import RehearsalEnv
from rehearsal_env.env import ScriptedCustomer
from rehearsal_env.env._customer import DONT_KNOW, REPEAT_PREFIX
from rehearsal_env.scenarios import Scenario, ToolCall


def shop(scenario_id: str) -> Scenario:
    return rehearsal_env.load_world("shop").scenario(scenario_id)


def started(scenario: Scenario, **kwargs: Any) -> tuple[RehearsalEnv, dict[str, Any]]:
    env = RehearsalEnv(scenario, rehearsal_env.load_world("shop"), **kwargs)
    obs, _ = env.reset(seed=0)
    return env, json.loads(obs)


def step(env: RehearsalEnv, call: ToolCall | str, **args: Any) -> dict[str, Any]:
    action = call.to_action() if isinstance(call, ToolCall) else json.dumps({"tool": call, "args": args})
    obs, *_ = env.step(action)
    return dict(json.loads(obs))


def finish(env: RehearsalEnv) -> Any:
    *_, info = env.step(ToolCall("finish", {"message": "done"}).to_action())
    return info["verdict"]


def test_the_request_is_stated_at_reset() -> None:
    scenario = shop("order-count-question-0001")
    _, first = started(scenario)
    assert first["messages"] == [scenario.request] and first["tool_result"] is None


def test_questions_are_answered_from_the_facts_by_keyword_else_the_customer_does_not_know() -> None:
    scenario = shop("order-count-question-0001")
    ((keyword, fact),) = scenario.facts
    env, _ = started(scenario)
    asked = step(env, "ask_customer", question=f"What is your {keyword.upper()} address?")["tool_result"]
    assert asked == {"tool": "ask_customer", "status": "ok", "result": {"answer": fact}}
    unknown = step(env, "ask_customer", question="What colour is your car?")["tool_result"]
    assert unknown["result"] == {"answer": DONT_KNOW}
    metrics = finish(env).metrics
    assert metrics.customer_contacts == 2
    assert metrics.unnecessary_interruptions == 2 - scenario.max_customer_contacts == 1


def test_the_contacts_a_scenario_allows_are_not_interruptions() -> None:
    scenario = dataclasses.replace(shop("order-count-question-0001"), max_customer_contacts=3)
    env, _ = started(scenario)
    for _ in range(3):
        step(env, "ask_customer", question="Your email?")
    assert finish(env).metrics.unnecessary_interruptions == 0


def test_a_change_after_the_first_write_arrives_with_the_first_write_carried_out() -> None:
    scenario = shop("address-rethink-0001")
    assert scenario.change and scenario.change.when == "after_first_write"
    env, _ = started(scenario, stress=False)
    find, get, first_address, *_ = scenario.reference.calls
    assert step(env, find)["messages"] == [] and step(env, get)["messages"] == []
    refused = step(env, first_address)  # the scenario refuses calls 1 and 2: nothing carried out yet
    assert refused["tool_result"]["status"] == "error" and refused["messages"] == []
    step(env, first_address)
    carried_out = step(env, first_address)
    assert carried_out["tool_result"]["status"] == "ok"
    assert carried_out["messages"] == [scenario.change.message]


def test_a_change_at_turn_n_arrives_at_turn_n_even_when_that_action_is_rejected() -> None:
    scenario = shop("tracking-other-order-0001")
    assert scenario.change and scenario.change.when == "turn" and scenario.change.turn == 2
    env, _ = started(scenario)
    assert step(env, scenario.reference.calls[0])["messages"] == []
    rejected = step(env, "not a json action")
    assert rejected["tool_result"]["status"] == "rejected"
    assert rejected["messages"] == [scenario.change.message]
    assert step(env, scenario.reference.calls[1])["messages"] == []  # it arrives once


def test_the_repeat_states_the_request_as_it_stands() -> None:
    scenario = shop("address-rethink-0001")
    assert scenario.change is not None
    customer = ScriptedCustomer(scenario)
    assert customer.opening() == scenario.request
    assert customer.repeat() == REPEAT_PREFIX + scenario.request
    assert customer.change() == scenario.change.message
    assert customer.repeat() == REPEAT_PREFIX + scenario.change.message
    assert customer.opening() == scenario.request  # a new conversation forgets the change
    assert customer.repeat() == REPEAT_PREFIX + scenario.request


def test_after_a_change_the_customer_repeats_the_final_request_once() -> None:
    scenario = shop("address-rethink-0001")
    assert scenario.change is not None
    env, _ = started(scenario)
    heard: list[tuple[str, str]] = []  # (the call's address, a message), in order
    for call in scenario.reference.calls[:-1]:
        obs = step(env, call)
        while obs["tool_result"]["status"] == "error" and obs["tool_result"].get("retryable"):
            obs = step(env, call)
        heard += [(str(call.args.get("address")), m) for m in obs["messages"]]
    first, final = (str(c.args["address"]) for c in scenario.reference.calls[2:4])
    # the change comes with the first address carried out; the repeat with the next change that succeeds
    assert heard == [(first, scenario.change.message), (final, REPEAT_PREFIX + scenario.change.message)]
    assert finish(env).outcome.value == "verified"


def test_a_scenario_without_a_change_has_no_change_message() -> None:
    customer = ScriptedCustomer(shop("refund-item-0001"))
    with pytest.raises(RuntimeError, match="has no change of request"):
        customer.change()


class TerseCustomer:
    """Another customer behind the same interface: it words everything its own way."""

    def opening(self) -> str:
        return "Refund please."

    def answer(self, question: str) -> str:
        return f"You asked: {question}"

    def change(self) -> str:
        return "Changed my mind."

    def repeat(self) -> str:
        return "Still waiting."


def test_another_customer_plugs_into_the_same_interface_and_keeps_the_schedule() -> None:
    scenario = shop("tracking-other-order-0001")  # the change arrives at turn 2
    env, first = started(scenario, customer=TerseCustomer())
    assert first["messages"] == ["Refund please."]
    assert step(env, "ask_customer", question="which order?")["tool_result"]["result"] == \
        {"answer": "You asked: which order?"}
    assert step(env, scenario.reference.calls[0])["messages"] == ["Changed my mind."]

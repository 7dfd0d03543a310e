"""A customer played by a model: the brief it gets, the answers the agent reads, the env's schedule kept."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from rehearsal_env.agents import AgentProfile, Endpoint, ModelCustomer, OpenAIAgent, ProviderError
from rehearsal_env.agents.testing import ModelServer, Reply
from rehearsal_env.env import Customer, RehearsalEnv
from rehearsal_env.records import read_records
from rehearsal_env.runner import RunConfig, run, run_episode
from rehearsal_env.worlds import World, load_world

FAST = Endpoint(timeout_s=5.0, max_retries=1, backoff_s=0.01, max_backoff_s=0.02)


@pytest.fixture(scope="module")
def shop() -> World:
    return load_world("shop")


@pytest.fixture()
def server() -> Iterator[ModelServer]:
    with ModelServer() as s:
        yield s


def endpoint(server: ModelServer) -> Endpoint:
    return Endpoint(base_url=server.base_url, timeout_s=FAST.timeout_s, max_retries=FAST.max_retries,
                    backoff_s=FAST.backoff_s, max_backoff_s=FAST.max_backoff_s)


def test_a_conversation_between_two_models(server: ModelServer, shop: World) -> None:
    scenario = shop.scenario("order-count-question-0001")
    customer = ModelCustomer.for_model(scenario, "customer", endpoint(server))
    typed: Customer = customer  # the env's protocol (checked by mypy)
    assert typed is customer
    server.script("agent", Reply.text("What is the email address on your account?"),
                  Reply.call("give_up", reason="ends the test"))
    server.script("customer", Reply.text("It's quin.okafor867@example.com.", tokens=30))
    agent = OpenAIAgent(AgentProfile(name="a", model="agent"), endpoint(server),
                        max_customer_contacts=scenario.max_customer_contacts)
    env = RehearsalEnv(scenario, shop, customer=customer)
    result = run_episode(env, agent)
    env.close()
    assert [t.tool for t in result.episode.trace] == ["ask_customer", "give_up"]
    asked = next(r for r in server.requests if r["model"] == "customer")
    brief = asked["messages"][0]
    assert brief["role"] == "system" and scenario.request in brief["content"]
    assert "quin.okafor867@example.com" in brief["content"]  # the fact it may share when asked
    assert asked["messages"][1:] == [{"role": "assistant", "content": scenario.request},
                                     {"role": "user", "content": "What is the email address on your account?"}]
    assert asked["temperature"] == 0.0 and "tools" not in asked
    last = [r for r in server.requests if r["model"] == "agent"][-1]["messages"]
    assert last[-1] == {"role": "user", "content": "It's quin.okafor867@example.com."}
    assert customer.stats.calls == 1 and customer.stats.tokens == 30


def test_the_change_of_request_is_told_only_once_it_arrived(server: ModelServer, shop: World) -> None:
    scenario = shop.scenario("address-rethink-0001")
    assert scenario.change is not None
    customer = ModelCustomer.for_model(scenario, "customer", endpoint(server))
    server.script("customer", Reply.text("Order #3402."), Reply.text("Yes, the new address."))
    assert customer.opening() == scenario.request  # the scenario's words: the goal checks mean what they say
    customer.answer("Which order?")
    assert customer.change() == scenario.change.message  # delivered when the env's schedule says
    customer.answer("Ship to the new address?")
    before, after = (r["messages"][0]["content"] for r in server.requests)
    assert scenario.change.message not in before
    assert scenario.change.message in after
    assert customer.opening() == scenario.request and scenario.change.message not in customer.brief()


def test_an_empty_reply_is_the_dont_know_line(server: ModelServer, shop: World) -> None:
    scenario = shop.scenario("order-count-question-0001")
    customer = ModelCustomer.for_model(scenario, "customer", endpoint(server))
    server.script("customer", Reply.text(""))
    customer.opening()
    assert customer.answer("What is your favourite colour?").startswith("Sorry, I don't know")


def test_a_failing_customer_model_is_not_the_agents_fault(server: ModelServer, shop: World) -> None:
    scenario = shop.scenario("order-count-question-0001")
    customer = ModelCustomer.for_model(scenario, "customer", endpoint(server))
    server.script("customer", Reply.error(503), Reply.error(503))
    customer.opening()
    with pytest.raises(ProviderError, match="after 2 tries"):
        customer.answer("What is your email?")
    server.script("customer", Reply.error(503), Reply.error(503))
    env = RehearsalEnv(scenario, shop, customer=customer)
    env.reset()
    *_, info = env.step(json.dumps({"tool": "ask_customer", "args": {"question": "Your email?"}}))
    env.close()
    assert info["outcome"] == "not_scored"  # never scored against the agent


def test_a_run_with_a_model_customer(server: ModelServer, tmp_path: Path) -> None:
    server.script("cust", Reply.text("My email is quin.okafor867@example.com.", tokens=40))
    config = RunConfig(world="shop", agent="reference", scenarios=("order-count-question-0001",),
                       customer="openai:cust", endpoint=Endpoint(base_url=server.base_url))
    run(config, tmp_path)
    [record] = read_records(tmp_path)
    assert record.outcome == "verified" and record.customer_model == "cust"
    answer = json.loads(record.trace[0].observation)["tool_result"]["result"]["answer"]
    assert answer == "My email is quin.okafor867@example.com."  # the model's words, not the script's
    assert server.pending("cust") == 0

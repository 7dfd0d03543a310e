"""The noise split by its source on a real run: forked resamples of one source at a time (measure.py --noise-sources).

The model is the scripted OpenAI-protocol server with its sampled solver (``rehearsal_env.agents._sampled``): at a
temperature above 0 the agent may end early and the customer may not know, each drawn from the request's seed and
the conversation, so the sources' effects are real and reproducible.
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from rehearsal_env.agents import AgentProfile, Endpoint, ModelCustomer, OpenAIAgent, Sampling
from rehearsal_env.agents.testing import ModelServer, Sampled
from rehearsal_env.env import RehearsalEnv
from rehearsal_env.measure import NoisePlan, noise_of_run, noise_shares
from rehearsal_env.runner import RunConfig, run
from rehearsal_env.worlds import World, load_world

ROOT = Path(__file__).resolve().parents[1]
ASKS = "order-count-question-0001"
"""A shop scenario whose reference asks the customer for a fact (the email)."""


@pytest.fixture(scope="module")
def shop() -> World:
    return load_world("shop")


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    with ModelServer(world="shop", sampled=Sampled(agent=0.15, customer=0.3)) as s:
        yield s


def profile(temperature: float) -> AgentProfile:
    return AgentProfile(name="sampled", model="scripted", sampling=Sampling(temperature=temperature, seed=7))


def sampled_run(tmp_path: Path, server: ModelServer, temperature: float, customer_temperature: float) -> Path:
    dev = [s.id for s in load_world("shop").scenarios("dev")][:11]
    out = tmp_path / f"run-{temperature}-{customer_temperature}"
    run(RunConfig(world="shop", agent="sampled", scenarios=(ASKS, *dev), agent_profile=profile(temperature).to_toml(),
                  customer="openai:scripted", customer_temperature=customer_temperature,
                  endpoint=Endpoint(base_url=server.base_url, timeout_s=10.0, max_retries=1)), out)
    return out


def test_the_sampled_server_varies_with_the_seed_and_is_greedy_at_temperature_0(server: ModelServer,
                                                                                   shop: World) -> None:
    scenario = shop.scenario(ASKS)

    def answers(temperature: float, seed: int) -> list[str]:
        customer = ModelCustomer.for_model(scenario, "scripted", Endpoint(base_url=server.base_url),
                                           sampling=Sampling(temperature=temperature, seed=seed))
        customer.opening()
        return [customer.answer(f"What is your email? (asked {i} times)") for i in range(8)]

    assert answers(0.7, 1) == answers(0.7, 1)  # one seed, one conversation: one reply
    assert any("Sorry, I don't know" in a for a in answers(0.7, 1) + answers(0.7, 2))  # the customer slips
    greedy = answers(0.0, 1)
    assert greedy == answers(0.0, 2) and all("@" in a for a in greedy)  # temperature 0: the fact, every time


def test_a_sampled_customer_samples_each_episode_with_its_reset_seed(server: ModelServer, shop: World) -> None:
    scenario = shop.scenario(ASKS)
    customer = ModelCustomer.for_model(scenario, "scripted", Endpoint(base_url=server.base_url),
                                       sampling=Sampling(temperature=0.7, seed=3))
    env = RehearsalEnv(scenario, shop, customer=customer)
    seeds = []
    for reset_seed in (0, 5):
        env.reset(seed=reset_seed)
        env.step('{"tool": "ask_customer", "args": {"question": "What is your email?"}}')
        seeds.append(server.requests[-1]["seed"])
    env.close()
    assert seeds == [3, 8]  # the profile's seed plus the episode's, as the agent's


def test_a_model_customer_and_agent_fork_into_the_same_episode(server: ModelServer, shop: World) -> None:
    scenario = shop.scenario(ASKS)
    endpoint = Endpoint(base_url=server.base_url)
    customer = ModelCustomer.for_model(scenario, "scripted", endpoint, sampling=Sampling(temperature=0.7, seed=3))
    agent = OpenAIAgent(profile(0.7), endpoint, max_customer_contacts=scenario.max_customer_contacts)
    base = RehearsalEnv(scenario, shop, customer=customer)
    observation, info = base.reset(seed=0)
    observation, *_, info = base.step(agent(observation, info))  # one turn in: the customer was asked
    fork, twin = base.fork(), agent.fork()
    assert twin.conversation.messages == agent.conversation.messages
    assert twin.conversation is not agent.conversation and fork.episode.customer is not customer

    def finish(env: RehearsalEnv, policy: OpenAIAgent, observation: str, info: dict) -> tuple[str, str]:
        while True:
            observation, _, terminated, truncated, info = env.step(policy(observation, info))
            if terminated or truncated:
                return info["outcome"], env.digest()

    assert finish(fork, twin, observation, info) == finish(base, agent, observation, info)
    fork.close()
    base.close()


def test_forked_resamples_split_a_run_by_source(tmp_path: Path, server: ModelServer) -> None:
    out = sampled_run(tmp_path, server, temperature=0.7, customer_temperature=0.7)
    branches = noise_of_run(str(out), bases=12, plan=NoisePlan(branches=4, fork_turn=0, seed=1))
    assert set(branches) == {"agent", "customer", "faults", "all"}
    assert all(v.shape == (12, 4) for v in branches.values())
    assert not np.isnan(branches["all"]).any()  # nothing failed to be scored here
    # the faults and the stress layer draw on no randomness: every fault branch is its base's episode
    assert (branches["faults"] == branches["faults"][:, :1]).all()
    # the agent slips and the customer forgets: both sources move outcomes
    assert (branches["agent"].min(axis=1) != branches["agent"].max(axis=1)).any()
    assert (branches["customer"].min(axis=1) != branches["customer"].max(axis=1)).any()
    shares = {s.source: s for s in noise_shares(branches, resamples=200, seed=0)}
    assert shares["faults"].share == 0.0 and shares["agent"].share > 0 and shares["customer"].share > 0
    again = noise_of_run(str(out), bases=12, plan=NoisePlan(branches=4, fork_turn=0, seed=1))
    assert all(np.array_equal(branches[k], again[k], equal_nan=True) for k in branches)  # reproducible


def test_greedy_sources_have_no_variance_and_a_late_fork_keeps_the_prefix(tmp_path: Path,
                                                                           server: ModelServer) -> None:
    out = sampled_run(tmp_path, server, temperature=0.0, customer_temperature=0.0)
    branches = noise_of_run(str(out), bases=3, plan=NoisePlan(branches=2, fork_turn=2, seed=0))
    for name, values in branches.items():  # greedy agent and customer: every branch is the base episode
        assert (values == values[:, :1]).all(), name
    assert (branches["all"] == 1.0).all()  # the reference, played by the greedy solver, verifies
    shares = noise_shares(branches, resamples=50)
    assert all(math.isnan(s.share) for s in shares if s.source in ("agent", "customer", "faults"))


def test_measure_py_noise_sources_prints_the_shares_and_refuses_a_built_in_agent(tmp_path: Path,
                                                                                   server: ModelServer) -> None:
    out = sampled_run(tmp_path, server, temperature=0.7, customer_temperature=0.7)
    plot = tmp_path / "noise.png"
    done = subprocess.run([sys.executable, str(ROOT / "measure.py"), str(out), "--noise-sources", "--bases", "3",
                           "--branches", "2", "--plot", str(plot)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "agent" in done.stdout and "customer" in done.stdout and "interaction" in done.stdout
    assert plot.stat().st_size > 0
    builtin = tmp_path / "reference"
    run(RunConfig(world="shop", agent="reference", scenarios=(ASKS,)), builtin)
    refused = subprocess.run([sys.executable, str(ROOT / "measure.py"), str(builtin), "--noise-sources"],
                             capture_output=True, text=True, check=False)
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "expected a run of a model agent" in refused.stderr


def test_an_outage_is_the_infrastructure_share(tmp_path: Path) -> None:
    with ModelServer(world="shop", sampled=Sampled(agent=0.2, customer=0.3, outage=0.1)) as flaky:
        out = tmp_path / "flaky"
        run(RunConfig(world="shop", agent="sampled", scenarios=("refund-item-0004",), repeats=6,
                      agent_profile=profile(0.7).to_toml(), customer="openai:scripted", customer_temperature=0.7,
                      endpoint=Endpoint(base_url=flaky.base_url, timeout_s=10.0, max_retries=0)), out)
        branches = noise_of_run(str(out), bases=6, plan=NoisePlan(branches=4, seed=2))
    lost = np.isnan(branches["all"])
    assert lost.any() and not lost.all()  # some branches not scored (provider), the rest scored
    shares = {s.source: s.share for s in noise_shares(branches, resamples=50)}
    assert shares["infrastructure"] > 0

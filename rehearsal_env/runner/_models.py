"""A run whose agent (or customer) is a model: the profile, the endpoint, and what the record says of them.

The run's config carries the agent profile as TOML (``RunConfig.agent_profile``,
resolved once by ``rehearsal run`` from ``--agent``), so every worker and a
resumed run play exactly the profile that was planned. Each process shares one
client per profile and endpoint.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

import openai

from ..agents import AgentProfile, Endpoint, ModelAgents, ModelCustomer, parse_profile
from ..env import Customer
from ..records import EpisodeRecord
from ..scenarios import Scenario
from ._plan import RunConfig

CUSTOMER_PREFIX = "openai:"


def run_profile(config: RunConfig) -> AgentProfile | None:
    """The run's agent profile (None: a built-in agent or a user agent without one)."""
    return parse_profile(config.agent_profile, "run config") if config.agent_profile else None


def endpoint_of(config: RunConfig) -> Endpoint:
    """Where the run's models are served and how their calls are retried."""
    return Endpoint(base_url=config.base_url, api_key_env=config.api_key_env, timeout_s=config.model_timeout_s,
                    max_retries=config.model_max_retries)


@functools.cache
def _agents(profile_toml: str, endpoint: Endpoint) -> ModelAgents:
    return ModelAgents(parse_profile(profile_toml, "run config"), endpoint)


def model_agents(config: RunConfig) -> ModelAgents | None:
    """The agent factory of a run whose profile is an ``openai`` one (one per process); None otherwise."""
    profile = run_profile(config)
    if profile is None or profile.agent != "openai":
        return None
    assert config.agent_profile is not None
    return _agents(config.agent_profile, endpoint_of(config))


def customer_model(config: RunConfig) -> str | None:
    """The model named by ``--customer openai:MODEL`` (None: the scripted customer)."""
    if config.customer is None:
        return None
    if not config.customer.startswith(CUSTOMER_PREFIX) or config.customer == CUSTOMER_PREFIX:
        raise ValueError(f"expected --customer openai:MODEL, got {config.customer!r}")
    return config.customer.removeprefix(CUSTOMER_PREFIX)


@functools.cache
def _customer_client(endpoint: Endpoint) -> openai.OpenAI:
    return endpoint.client()  # one per process: the sync client is safe to share between threads


def customer_for(config: RunConfig, scenario: Scenario) -> Customer | None:
    """The customer of an env of ``scenario`` in this run (None: the env's scripted customer)."""
    model = customer_model(config)
    if model is None:
        return None
    endpoint = endpoint_of(config)
    return ModelCustomer.for_model(scenario, model, endpoint, client=_customer_client(endpoint))


def stamp(record: EpisodeRecord, config: RunConfig, agent: Any) -> EpisodeRecord:
    """``record`` with the model's profile, sampling and cost (calls, latency) from ``agent``'s stats."""
    profile = run_profile(config)
    stats = getattr(agent, "stats", None)
    if profile is None and config.customer is None:
        return record
    sampling = profile.sampling if profile is not None else None
    return replace(
        record, model=profile.model if profile else None,
        temperature=sampling.temperature if sampling else None, top_p=sampling.top_p if sampling else None,
        sampling_seed=sampling.seed if sampling else None, max_tokens=sampling.max_tokens if sampling else None,
        model_calls=stats.calls if stats is not None else None,
        model_latency_ms=stats.latency_ms if stats is not None else None,
        customer_model=customer_model(config))

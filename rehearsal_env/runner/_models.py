"""A run whose agent (or customer) is a model: its profile, its factory, and the model-played customer.

The run's config carries the agent profile as TOML (``RunConfig.agent_profile``,
resolved once by ``rehearsal run`` from ``--agent``), so every worker and a
resumed run play exactly the profile that was planned. It is parsed once per
resolved run (:func:`~._resolved.resolve`), never per episode. Each process
shares one client per endpoint for a model customer.
"""

from __future__ import annotations

import functools

import openai

from ..agents import AgentProfile, Endpoint, ModelAgents, ModelCustomer, Sampling, parse_profile
from ..env import Customer
from ..scenarios import Scenario
from ._plan import RunConfig

CUSTOMER_PREFIX = "openai:"


def run_profile(config: RunConfig) -> AgentProfile | None:
    """The run's agent profile, parsed (None: a built-in agent or a user agent without one)."""
    return parse_profile(config.agent_profile, "run config") if config.agent_profile else None


def model_agents(profile: AgentProfile | None, endpoint: Endpoint) -> ModelAgents | None:
    """The agent factory of an ``openai`` profile (None for any other)."""
    if profile is None or profile.agent != "openai":
        return None
    return ModelAgents(profile, endpoint)


def customer_model(config: RunConfig) -> str | None:
    """The model named by ``--customer openai:MODEL`` (None: the scripted customer).

    Raises:
        ValueError: ``customer`` is not ``openai:MODEL``.
    """
    if config.customer is None:
        return None
    if not config.customer.startswith(CUSTOMER_PREFIX) or config.customer == CUSTOMER_PREFIX:
        raise ValueError(f"expected --customer openai:MODEL, got {config.customer!r}")
    return config.customer.removeprefix(CUSTOMER_PREFIX)


@functools.cache
def _customer_client(endpoint: Endpoint) -> openai.OpenAI:
    return endpoint.client()  # one per process: the sync client is safe to share between threads


def model_customer(model: str | None, endpoint: Endpoint, scenario: Scenario,
                   temperature: float = 0.0) -> Customer | None:
    """The customer of an env of ``scenario`` played by ``model`` at ``temperature`` (None: the env's scripted
    customer)."""
    if model is None:
        return None
    sampling = Sampling(temperature=temperature, seed=0 if temperature > 0 else None)
    return ModelCustomer.for_model(scenario, model, endpoint, sampling=sampling, client=_customer_client(endpoint))

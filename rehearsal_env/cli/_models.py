"""The model options of ``rehearsal run`` (and ``world build|recheck --live-agent``): where the model is, how
its calls are retried, how many episodes are in flight, who plays the customer.

``--agent`` resolves here to an agent profile (a built-in agent, ``openai:MODEL``
or a registered ``NAME[@vN]``); the run's config stores the profile's TOML, and
every record carries its name and version (``agent``, ``agent_version``: ``vN``,
``builtin-<package version>`` or ``unregistered-<content hash>``) and its sampling
parameters. Before a run with a model agent starts, one short request checks that
the provider knows the model and accepts the key: a 401, 403 or 404 stops it at
once with what to fix, instead of failing every episode the same way. That request is
the run's own system message and tools (its first scenario's, which every scenario of the
role shares) with ``max_tokens`` 1 and no ``tool_choice``: a server's prompt cache then
already holds the prefix the first episode starts with, instead of a ``ping`` that evicted it.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the SDK, the runner and the versions load only when a command uses them (`world list` is quick)
    from ..agents import AgentProfile, Endpoint
    from ..runner import RunConfig
    from ..worlds import World

MODEL_DEFAULTS = {"base_url": None, "api_key_env": "OPENAI_API_KEY", "concurrency": 1, "model_timeout": 60.0,
                  "model_retries": 4}


def add_model_options(p: argparse.ArgumentParser, *, customer: bool = True) -> None:
    """Add the model options to a parser."""
    p.add_argument("--base-url", help="OpenAI-compatible API of the model, e.g. http://127.0.0.1:8000/v1 "
                                      "(default: the openai SDK's default endpoint)")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="VAR",
                   help="environment variable holding the API key (default: OPENAI_API_KEY; a local --base-url "
                        "needs none)")
    p.add_argument("--concurrency", type=int, default=1, metavar="N",
                   help="episodes in flight per worker for a model agent, each on its own database (default: 1)")
    p.add_argument("--model-timeout", type=float, default=60.0, metavar="S",
                   help="seconds one model call may take before it is retried (default: 60)")
    p.add_argument("--model-retries", type=int, default=4, metavar="N",
                   help="retries after a timeout, 429 or 5xx; then the episode is not scored, cause provider "
                        "(default: 4)")
    if customer:
        p.add_argument("--customer", metavar="openai:MODEL",
                       help="a customer played by this model (default: the scenario's scripted customer)")
        p.add_argument("--customer-temperature", type=float, default=0.0, metavar="T",
                       help="the customer model's sampling temperature (default: 0, greedy; above 0 it samples "
                            "with seed 0 plus each episode's reset seed)")


def with_model_options(config: RunConfig, args: argparse.Namespace, *, resume: bool = False) -> RunConfig:
    """``config`` with the agent resolved to its profile and the model options applied.

    A resumed run keeps its stored agent profile and customer; its endpoint options may change
    (the model may be served elsewhere now).
    """
    from ..agents import is_builtin, resolve_agent

    if args.concurrency < 1 or args.model_retries < 0 or args.model_timeout <= 0:
        raise ValueError(f"expected --concurrency >= 1, --model-retries >= 0 and --model-timeout > 0, got "
                         f"{args.concurrency}, {args.model_retries} and {args.model_timeout}")
    given = {name: getattr(args, name) for name in MODEL_DEFAULTS if getattr(args, name) != MODEL_DEFAULTS[name]}
    endpoint = config.endpoint
    endpoint = replace(endpoint, base_url=given.get("base_url", endpoint.base_url),
                       api_key_env=given.get("api_key_env", endpoint.api_key_env),
                       timeout_s=given.get("model_timeout", endpoint.timeout_s),
                       max_retries=given.get("model_retries", endpoint.max_retries))
    config = replace(config, endpoint=endpoint, concurrency=given.get("concurrency", config.concurrency))
    if not resume:
        temperature = getattr(args, "customer_temperature", 0.0)
        if not 0.0 <= temperature <= 2.0:
            raise ValueError(f"expected --customer-temperature from 0 to 2, got {temperature}")
        config = replace(config, customer=getattr(args, "customer", None), customer_temperature=temperature)
        if not is_builtin(config.agent):
            profile = resolve_agent(config.agent)
            if is_builtin(profile.agent):  # a registered profile of a built-in agent: play that agent
                config = replace(config, agent=profile.agent, agent_version=config.agent_version or profile.label)
            else:
                config = replace(config, agent=profile.name, agent_version=config.agent_version or profile.label,
                                 agent_profile=profile.to_toml())
    preflight(config)
    return config


def preflight(config: RunConfig) -> None:
    """One short request to the agent's model: a 401, 403 or 404 raises :class:`ProviderRefused` (stop the run).

    Anything else (a timeout, a 429, a 5xx, a 400) is left to the episodes, which retry it or record it.
    """
    from ..runner import run_profile

    profile = run_profile(config)
    if profile is None or profile.agent != "openai":
        return
    _ping(profile, config.endpoint, run_system(config, profile))


def run_system(config: RunConfig, profile: AgentProfile) -> tuple[str, list[dict[str, Any]]] | None:
    """The system message and tools the run's first episode sends (None: the run has no episode to plan)."""
    from ..agents import system_prompt
    from ..agents._prompt import episode_info
    from ..runner import plan, world_for

    try:
        world = world_for(config)
        first = plan(config, world)[0]
    except (KeyError, ValueError, OSError, IndexError):
        return None  # the run itself says what is wrong
    info = episode_info(world, world.scenario(first.scenario))  # the tools as the episode sends them, in order
    return system_prompt(profile.instructions, info), list(info["tools"])


def _ping(profile: AgentProfile, endpoint: Endpoint, system: tuple[str, list[dict[str, Any]]] | None = None) -> None:
    import openai
    from openai.types.chat import ChatCompletion

    from ..agents import ProviderRefused
    from ..agents._drain import probe_body

    client = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key(), timeout=endpoint.timeout_s,
                           max_retries=0)
    if system is None:
        body = {"model": profile.model or "", "max_tokens": 1, "messages": [{"role": "user", "content": "ping"}]}
    else:
        body = probe_body(profile.model, *system, json.loads(profile.provider.extra_body))
    try:
        client.post("/chat/completions", body=body, cast_to=ChatCompletion,
                    options={"security": {"bearer_auth": True}})
    except openai.APITimeoutError:
        pass  # slow, not absent: the episodes retry it
    except openai.APIConnectionError as exc:
        raise ConnectionError(f"no model server answers for {endpoint.where(profile.model)} ({exc.__cause__ or exc}); "
                              "start it, or fix --base-url") from exc
    except openai.APIStatusError as exc:
        if exc.status_code in (401, 403, 404):
            raise ProviderRefused(f"the model provider refused {endpoint.where(profile.model)} "
                                  f"(HTTP {exc.status_code}: {exc.message}); fix the profile's model name, "
                                  "--base-url or --api-key-env") from exc
    except openai.APIError:
        pass
    finally:
        client.close()


# -- the live attempt of `rehearsal world build|recheck NAME --live-agent PROFILE` ------------------------

def add_live_options(p: argparse.ArgumentParser) -> None:
    """``--live-agent PROFILE`` and where its model is served."""
    p.add_argument("--live-agent", metavar="PROFILE",
                   help="after validating, let this agent (openai:MODEL or a registered profile NAME[@vN]) attempt "
                        "every scenario in use; the world page shows each attempt (it never withdraws one)")
    p.add_argument("--base-url", help="OpenAI-compatible API of the live agent's model")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="VAR",
                   help="environment variable holding the API key (default: OPENAI_API_KEY)")
    p.add_argument("--model-timeout", type=float, default=60.0, metavar="S",
                   help="seconds one model call may take before it is retried (default: 60)")
    p.add_argument("--model-retries", type=int, default=4, metavar="N",
                   help="retries after a timeout, 429 or 5xx; then that attempt is not scored (default: 4)")


def live_agent(args: argparse.Namespace) -> tuple[AgentProfile, Endpoint] | None:
    """The live agent's profile and endpoint (checked by a preflight request), or None without ``--live-agent``.

    Raises:
        ValueError: a built-in agent, or an unknown profile.
        ProviderRefused: the provider refused the model or key.
    """
    if not args.live_agent:
        return None
    from ..agents import Endpoint, is_builtin, resolve_agent

    profile = resolve_agent(args.live_agent)
    if is_builtin(profile.agent):
        raise ValueError(f"a live agent is a model: expected --live-agent openai:MODEL or a registered profile, "
                         f"got the built-in agent {args.live_agent!r} (the build already plays the built-ins)")
    endpoint = Endpoint(base_url=args.base_url, api_key_env=args.api_key_env, timeout_s=args.model_timeout,
                        max_retries=args.model_retries)
    _ping(profile, endpoint)
    return profile, endpoint


def attempt_live(live: tuple[AgentProfile, Endpoint], world: World, root: str | None) -> None:
    """Let the live agent attempt every scenario in use of ``world``'s published version; print what it found."""
    from ..versions import attempt_version, describe_attempt, load_manifest

    profile, endpoint = live
    manifest = load_manifest(world, root=root)
    assert manifest.path is not None
    attempts = attempt_version(world, manifest.path, manifest.in_use, profile, endpoint)
    counts = Counter(a.outcome for a in attempts)
    missing = sum(bool(a.missing_facts) for a in attempts)
    shown = ", ".join(f"{counts[o]} {o}" for o in ("verified", "not_achieved", "rule_violated", "not_scored")
                      if counts[o])
    print(f"  live attempts by {profile.ref}: {shown or 'none'}; facts not found in {missing} scenarios "
          f"(on the world page; fairness alone decides withdrawals)")
    for a in attempts:
        if a.outcome != "verified":
            print(f"    {a.scenario}: {describe_attempt(a)}")

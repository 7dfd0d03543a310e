"""The first call of a tau2-retail run on a warm server: after the old ``ping`` preflight and after the run's own
preflight (issue 38; docs/models.md).

Usage (the live extra installed; tau2-bench's data beside the clone)::

    flock /tmp/bench.lock .venv/bin/python benchmarks/first_call_cache.py

Serves SmolLM2 with ``rehearsal models serve``, plays one call of the first tau2-retail dev scenario to warm the
server (its prompt cache then holds that prompt), then twice: a preflight and the next run's first call, timed;
first with the ``ping`` the preflight used to send (a user message), then with the run's own system message and
tools (``cli._models.preflight``).
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import openai
from live_round2 import TAU2, profile, serve

from rehearsal_env.agents import Endpoint, OpenAIAgent
from rehearsal_env.cli._models import preflight
from rehearsal_env.env import RehearsalEnv
from rehearsal_env.importers.tau2 import build_tau2_world
from rehearsal_env.runner import RunConfig
from rehearsal_env.worlds import register_world


def main() -> None:
    logging.disable(logging.WARNING)
    world = build_tau2_world("tau2-retail", TAU2, "retail")
    register_world("tau2-retail", lambda: world)
    scenario = next(s for s in world.scenarios() if s.split == "dev")
    chosen = profile(1)
    proc, base = serve(Path(tempfile.mkdtemp(prefix="first-call-")) / "server.log")
    endpoint = Endpoint(base_url=base, timeout_s=900.0, max_retries=0)
    config = RunConfig(world=world.name, agent=chosen.name, scenarios=(scenario.id,), agent_version=chosen.label,
                       agent_profile=chosen.to_toml(), endpoint=endpoint)

    def first_call() -> str:
        agent = OpenAIAgent(chosen, endpoint, max_customer_contacts=scenario.max_customer_contacts)
        env = RehearsalEnv(scenario, world)
        observation, info = env.reset(seed=0)
        agent(observation, info)
        env.close()
        with urllib.request.urlopen(base.removesuffix("/v1") + "/rehearsal/status", timeout=10) as answer:
            last = json.loads(answer.read())["last"]
        return (f"{agent.stats.latencies_ms[0] / 1000:.1f} s ({last['first_token_s']:.1f} s to the first token, "
                f"{last['completion_tokens']} tokens, prompt {last['prompt_tokens']})")

    def ping() -> None:
        client = openai.OpenAI(base_url=base, api_key="unused", timeout=900.0, max_retries=0)
        client.chat.completions.create(model="smollm2", max_tokens=1, messages=[{"role": "user", "content": "ping"}])

    try:
        out: dict[str, str | float] = {"warm_up_first_call": first_call()}
        for name, send in (("ping", ping), ("run_preflight", lambda: preflight(config))):
            started = time.perf_counter()
            send()
            out[f"{name}_s"] = round(time.perf_counter() - started, 2)
            out[f"first_call_after_{name}"] = first_call()
        json.dump(out, sys.stdout)
        print()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()

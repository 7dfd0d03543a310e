"""Playing the forked resamples that split a run's noise by its source (``measure.py RUN_DIR --noise-sources``).

The bases are the run's own planned episodes (its scenarios and reset seeds), played again to turn k with the
run's agent profile, customer and endpoint: with a seeded model that is the run's episode again. At turn k the
env is forked (:meth:`~rehearsal_env.RehearsalEnv.fork`: database, episode, customer and random state copied),
the agent too (:meth:`~rehearsal_env.agents.OpenAIAgent.fork`: its conversation so far), and each branch plays
to its verdict after resampling one source, everything else as the base had it:

- ``agent``: the agent's sampling seed (its replies from turn k on);
- ``customer``: the model customer's sampling seed (:meth:`~rehearsal_env.agents.ModelCustomer.resample`); a
  scripted customer has nothing to resample;
- ``faults``: the env's random generator, all the randomness the faults and the stress layer could draw on;
  both are scheduled by the scenario today and draw on none, so this share is 0 by construction (it is
  measured here, not assumed, so a fault that starts sampling shows up);
- ``all``: every one of them.

A branch's outcome is 1 verified, 0 not, NaN not scored (:mod:`._noise` reads NaN as the infrastructure's
share). A provider that refuses the model or key stops the study (:class:`~rehearsal_env.agents.ProviderRefused`).
Nothing here is a record of the run: forks are never evidence about the agent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..backends import Database, open_database
from ..env import RehearsalEnv
from ..runner import EpisodeSpec, ResolvedRun, load_config, load_plan, resolve, take_turn
from ..verdict import Outcome
from ._noise import ALL, SOURCES, NoisePlan


def noise_branches(run: ResolvedRun, bases: Sequence[EpisodeSpec], plan: NoisePlan,
                   progress: Callable[[int, int], None] | None = None) -> dict[str, np.ndarray]:
    """Each source's branch outcomes, bases x ``plan.branches`` (see the module docstring).

    Raises:
        ValueError: the run's agent is not a model (nothing to resample), or fewer than 2 bases.
        ProviderRefused: the provider refused the model or key.
    """
    if run.model_agents is None:
        raise ValueError(f"expected a run of a model agent (an openai profile) to resample; run "
                         f"{run.config.run_id} played {run.config.agent!r}, whose only noise is the customer's")
    if len(bases) < 2:
        raise ValueError(f"expected at least 2 base episodes, got {len(bases)}")
    out = {name: np.full((len(bases), plan.branches), np.nan) for name in (*SOURCES, ALL)}
    db = open_database(run.world, run.config.backend, **run.config.backend_options)
    try:
        for b, spec in enumerate(bases):
            _branch_base(run, db, spec, b, plan, out)
            if progress is not None:
                progress(b + 1, len(bases))
    finally:
        db.close()
    return out


def _branch_base(run: ResolvedRun, db: Database, spec: EpisodeSpec, b: int, plan: NoisePlan,
                 out: dict[str, np.ndarray]) -> None:
    env = run.env(db, spec.scenario)
    agent: Any = run.agent(env.scenario)
    try:
        observation, info = env.reset(seed=spec.seed)
        for _ in range(plan.fork_turn):
            observation, _, terminated, truncated, info = take_turn(env, _answer(agent, observation, info))
            if terminated or truncated:  # ended before the fork: every branch is this episode
                for name in out:
                    out[name][b, :] = _outcome(info)
                return
        for s, name in enumerate((*SOURCES, ALL)):
            for r in range(plan.branches):
                draws = np.random.default_rng([plan.seed, b, s, r]).integers(0, 2**31 - 1, 3)
                out[name][b, r] = _play_branch(env, agent, observation, info, name, [int(d) for d in draws])
    finally:
        env.close()


def _play_branch(env: RehearsalEnv, agent: Any, observation: str, info: dict[str, Any], source: str,
                 draws: list[int]) -> float:
    child = env.fork()
    try:
        twin = agent.fork(seed=draws[0] if source in ("agent", ALL) else None)
        customer = child.episode.customer
        if source in ("customer", ALL) and hasattr(customer, "resample"):
            customer.resample(draws[1])
        if source in ("faults", ALL):
            child.np_random = np.random.default_rng(draws[2])
        while True:
            observation, _, terminated, truncated, info = take_turn(child, _answer(twin, observation, info))
            if terminated or truncated:
                return _outcome(info)
    finally:
        child.close()


def _answer(agent: Any, observation: str, info: dict[str, Any]) -> Any:
    try:
        return agent(observation, info)
    except Exception as exc:  # judged by take_turn: a not-scored cause, or the agent's own bug
        return exc


def _outcome(info: dict[str, Any]) -> float:
    outcome = info["verdict"].outcome
    return float("nan") if outcome == Outcome.NOT_SCORED else float(outcome == Outcome.VERIFIED)


def noise_of_run(run_dir: str, *, bases: int, plan: NoisePlan, base_url: str | None = None,
                 progress: Callable[[int, int], None] | None = None) -> dict[str, np.ndarray]:
    """The branches of the first ``bases`` planned episodes of the run in ``run_dir`` (``base_url``: where its
    model is served now, if elsewhere than the run says).

    Raises:
        ValueError: no such run, a run of a built-in agent, or fewer than 2 bases.
    """
    try:
        config = load_config(run_dir)
        specs = load_plan(run_dir)
    except (OSError, KeyError) as exc:
        raise ValueError(f"expected a run directory with run.json (rehearsal run --out DIR); {run_dir}: {exc}") \
            from exc
    if base_url:
        config = replace(config, endpoint=replace(config.endpoint, base_url=base_url))
    return noise_branches(resolve(config), specs[:bases], plan, progress)

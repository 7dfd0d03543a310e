"""A permanent adversarial suite (issue 21 §7): Hypothesis over every tool of every world, on both backends.

Worlds: shop, analytics, tau2-retail and tau2-airline (where tau2's data is), a folder world (the notes
world of ``tests/worlds``), the crashy world (tools with bugs: the tool-crash boundary under fuzzing), and
reviews on the Docker sandbox where Docker is (required with ``REHEARSAL_REQUIRE_DOCKER=1``; it runs on the
sandbox's own database only). Each example is a short episode: one to three generated tool calls, then
``finish``, played on SQLite and on PostgreSQL. Arguments start from the scenarios' own calls and are then
mutated: deep nesting, huge and negative integers, 1e308, NaN and infinities, long strings and lists, wrong
types, missing and extra keys, unicode.

Properties: no exception out of ``step()``; no episode ``not_scored``; the same outcome, and the same
rejected steps, on SQLite and PostgreSQL; every step inside :data:`STEP_BUDGET_S`, a fixed multiple of the
backends' statement timeout (measured with ``time.monotonic``; a generous bound, not a performance test).

Profiles: ``ci`` (the default, a few examples per world, derandomized: part of ``make test``) and ``long``
(``REHEARSAL_FUZZ_PROFILE=long``, for a benchmark-style run: ``flock /tmp/bench.lock env
REHEARSAL_FUZZ_PROFILE=long .venv/bin/python -m pytest tests/test_fuzz.py -q``). The suite prints one line
of figures per world (examples, steps, statuses, slowest step) to stderr.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import crashworld
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tau2data import TAU2, tau2_world
from test_tool_crashes import NOTES

import rehearsal_env
from rehearsal_env import RehearsalEnv
from rehearsal_env.backends import Database, open_database
from rehearsal_env.backends.sqlite import APP_STATEMENT_TIMEOUT_S
from rehearsal_env.scenarios import Scenario
from rehearsal_env.worlds import World, load_world_folder

STEP_BUDGET_S = 4 * APP_STATEMENT_TIMEOUT_S
"""The most one step may take: four statement timeouts (an agent's query, the tool's own statements, the
checks at the end, and margin for a loaded machine)."""

settings.register_profile("ci", max_examples=10, deadline=None, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("long", max_examples=300, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PROFILE = os.environ.get("REHEARSAL_FUZZ_PROFILE", "ci")
FUZZ = settings.get_profile(PROFILE)

WORLDS = ["shop", "analytics", "tau2-retail", "tau2-airline", "notes", "crashy", "reviews"]


def _load(name: str) -> World:
    if name.startswith("tau2-"):
        return tau2_world(name.removeprefix("tau2-"))
    if name == "notes":
        return load_world_folder(NOTES)
    if name == "crashy":
        return crashworld.build_world()
    return rehearsal_env.load_world(name)


@dataclass
class Figures:
    """What the suite saw in one world (printed at the end of the module)."""

    examples: int = 0
    steps: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    crashes: int = 0
    slowest_s: float = 0.0


FIGURES: dict[str, Figures] = {}


@dataclass
class Stage:
    """One world's scenarios (one per role) and an env per backend."""

    world: World
    scenarios: list[Scenario]
    envs: dict[str, dict[str, RehearsalEnv]]
    calls: dict[str, list[dict[str, Any]]]
    databases: dict[str, Database]


def _docker_or_skip() -> None:
    from rehearsal_env.sandbox import base_image_built, docker_available

    why = docker_available()
    if why is None and not base_image_built():
        why = "the sandbox base image is not built (python -m rehearsal_env.sandbox)"
    if why is not None:
        if os.environ.get("REHEARSAL_REQUIRE_DOCKER") == "1":
            pytest.fail(f"REHEARSAL_REQUIRE_DOCKER=1 but {why}")
        pytest.skip(f"reviews runs on the Docker sandbox: {why}")


@pytest.fixture(scope="module")
def stages(request: pytest.FixtureRequest) -> Iterator[dict[str, Stage]]:
    made: dict[str, Stage] = {}
    yield made
    for stage in made.values():
        for envs in stage.envs.values():
            for env in envs.values():
                env.close()
        for db in stage.databases.values():
            db.close()
    for name, f in FIGURES.items():
        print(f"fuzz[{PROFILE}] {name}: {f.examples} examples, {f.steps} steps, statuses {dict(f.statuses)}, "
              f"outcomes {dict(f.outcomes)}, tool crashes {f.crashes}, slowest step {f.slowest_s:.3f} s",
              file=sys.stderr)


def _stage(name: str, stages: dict[str, Stage], request: pytest.FixtureRequest) -> Stage:
    if name in stages:
        return stages[name]
    if name.startswith("tau2-") and not (TAU2 / "data").is_dir():
        tau2_world("retail")  # skips (or fails under REHEARSAL_REQUIRE_TAU2=1), saying why
    if name == "reviews":
        _docker_or_skip()
        backends: dict[str, dict[str, Any]] = {"docker": {"backend": "docker"}}
    else:
        backends = {"sqlite": {"backend": "sqlite"},
                    "postgres": {"backend": "postgres", "dsn": request.getfixturevalue("postgres_dsn")}}
    world = _load(name)
    firsts: dict[str, Scenario] = {}
    for s in world.scenarios():
        firsts.setdefault(s.role, s)
    scenarios = list(firsts.values())
    databases = {b: open_database(world, opts["backend"], **{k: v for k, v in opts.items() if k != "backend"})
                 for b, opts in backends.items()}  # one per backend, shared by the world's envs (each resets it)
    envs = {s.id: {b: RehearsalEnv(s, world, stress=False, database=databases[b]) for b in backends}
            for s in scenarios}
    calls: dict[str, list[dict[str, Any]]] = {}
    for s in world.scenarios():
        for solution in (s.reference, *s.wrong):
            for call in solution.calls:
                calls.setdefault(call.tool, []).append(dict(call.args))
    stages[name] = Stage(world, scenarios, envs, calls, databases)
    return stages[name]


# -- generated values -------------------------------------------------------------------------------------
RAW = "\x00raw:"  # a string value starting so is pasted into the action's JSON as it stands

_scalar = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**31, 2**53 + 1, 2**62, 2**63 - 1, 2**63, -(2**63) - 1, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e308, -1e308, 5e-324, 0.5, -0.0]),
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=20),
    st.builds(lambda c, n: c * n, st.sampled_from(["x", "é", "中", "😀", "'", '"', "(", "%", "\\"]),
              st.integers(0, 6000)),
    st.booleans(),
    st.none(),
    st.integers(1, 3000).map(lambda d: RAW + "[" * d + "]" * d),
    st.sampled_from([RAW + "1e400", RAW + "-1e400", RAW + "9" * 400, RAW + '"\\ud800"', RAW + '"\\ud83d\\ude00"']),
)
_value = st.recursive(_scalar, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6),
                                                                                           inner, max_size=3),
                      max_leaves=8)
_long_list = st.builds(lambda v, n: [v] * n, _scalar.filter(lambda v: not (isinstance(v, str) and v.startswith(RAW))),
                       st.integers(0, 3000))


_TEXT = st.one_of(st.text(max_size=60), st.sampled_from(["", "'", "%", "_", "' OR 1=1 --", "NULL", "0", "-1",
                                                         "9" * 30, "((9**999)**999)**30", "+".join(["1"] * 1000),
                                                         "SELECT " + "(" * 46 + "1" + ")" * 46]),
                  st.builds(lambda c, n: c * n, st.sampled_from(["x", "é", "😀", "("]), st.integers(0, 3999)))


def _typed(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A value of the argument's own type (so it passes validation and reaches the tool), chosen to hurt."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "integer":
        return st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-3, 3000), st.sampled_from([2**62, -(2**63)]))
    if kind == "number":
        return st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([1e308, -1e308, 5e-324]))
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(_typed(schema.get("items", {"type": "string"})), max_size=200)
    return _TEXT


def _json(value: Any) -> str:
    if isinstance(value, str) and value.startswith(RAW):
        return value[len(RAW):]
    if isinstance(value, list):
        return "[" + ", ".join(_json(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_json(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


@st.composite
def _action(draw: st.DrawFn, stage: Stage, scenario: Scenario) -> str:
    tools = stage.world.tools_for(scenario.role, offers_retry=scenario.offers_retry)
    name = draw(st.sampled_from(sorted(tools)))
    props = tools[name].parameters["properties"]
    seeds = stage.calls.get(name) or [{}]
    args: dict[str, Any] = dict(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["typed", "typed", "typed", "set", "drop", "extra", "list"]))
        key = draw(st.sampled_from(sorted(props))) if props and kind != "extra" else draw(st.text(max_size=8))
        if kind == "typed" and key in props:
            args[key] = draw(_typed(props[key]))
        elif kind == "drop":
            args.pop(key, None)
        elif kind == "list":
            args[key] = draw(_long_list)
        else:
            args[key] = draw(_value)
    shape = draw(st.sampled_from(["object"] * 6 + ["args-not-object", "no-args"]))
    if shape == "no-args":
        return json.dumps({"tool": name})
    body = _json(args) if shape == "object" else _json(draw(_value))
    return f'{{"tool": {json.dumps(name)}, "args": {body}}}'


@st.composite
def _episode(draw: st.DrawFn, stage: Stage) -> tuple[Scenario, list[str]]:
    scenario = draw(st.sampled_from(stage.scenarios))
    return scenario, draw(st.lists(_action(stage, scenario), min_size=1, max_size=3))


def _play(env: RehearsalEnv, actions: list[str], figures: Figures) -> tuple[list[str], str]:
    env.reset(seed=0)
    statuses: list[str] = []
    info: dict[str, Any] = {}
    for action in [*actions, json.dumps({"tool": "finish", "args": {"message": "done"}})]:
        started = time.monotonic()
        _, _, terminated, truncated, info = env.step(action)
        took = time.monotonic() - started
        figures.slowest_s = max(figures.slowest_s, took)
        assert took < STEP_BUDGET_S, (action[:300], took)
        statuses.append(info["status"])
        figures.steps += 1
        figures.statuses[info["status"]] += 1
        if terminated or truncated:
            break
    verdict = info["verdict"]
    assert verdict.cause is None, (verdict.reason, [a[:300] for a in actions])
    figures.crashes += len(env.episode.tool_crashes)
    figures.outcomes[verdict.outcome.value] += 1
    return statuses, verdict.outcome.value


@pytest.mark.parametrize("name", WORLDS)
def test_no_generated_call_makes_an_episode_not_scored_or_backends_disagree(
        name: str, stages: dict[str, Stage], request: pytest.FixtureRequest) -> None:
    stage = _stage(name, stages, request)
    figures = FIGURES.setdefault(name, Figures())

    @FUZZ
    @given(episode=_episode(stage))
    def check(episode: tuple[Scenario, list[str]]) -> None:
        scenario, actions = episode
        figures.examples += 1
        played = {backend: _play(env, actions, figures) for backend, env in stage.envs[scenario.id].items()}
        (first, *others) = played.values()
        for other in others:
            assert other[1] == first[1], (played, [a[:300] for a in actions])  # the same outcome
            rejected = [s == "rejected" for s in first[0]], [s == "rejected" for s in other[0]]
            assert rejected[0] == rejected[1], (played, [a[:300] for a in actions])

    check()

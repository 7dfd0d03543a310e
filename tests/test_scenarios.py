"""Scenario specs: loading from TOML, solutions by name, splits."""

from __future__ import annotations

from pathlib import Path

import pytest

from rehearsal_env import RehearsalEnv, load_world
from rehearsal_env.agents import make_agent
from rehearsal_env.runner import run_episode
from rehearsal_env.scenarios import SPLITS, load_scenarios
from rehearsal_env.scenarios._load import ScenarioFileError

TOML = '''
[[scenario]]
id = "pay-bob"
split = "dev"
role = "clerk"
category = "payout"
request = "Pay 2.00 out of account 2."
turn_limit = 5
facts = { account = "It's account 2." }
scope = ["accounts", "transfers"]

[[scenario.goal_checks]]
name = "one payout of 200 from #2"
sql = "SELECT COUNT(*) FROM transfers WHERE account_id = ? AND amount_cents = ?"
op = "eq"
want = 1
params = [2, 200]

[scenario.reference]
calls = [
  { tool = "pay_out", args = { account_id = 2, amount_cents = 200 } },
  { tool = "finish", args = { message = "paid" } },
]

[[scenario.wrong]]
name = "wrong:too-much"
calls = [
  { tool = "pay_out", args = { account_id = 2, amount_cents = 2000 } },
  { tool = "finish", args = { message = "paid" } },
]
'''


def test_scenarios_load_from_toml_and_play(tiny_world, tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(TOML)
    (scenario,) = load_scenarios(path, world="tiny")
    assert scenario.id == "pay-bob" and scenario.facts == (("account", "It's account 2."),)
    assert scenario.goal_checks[0].params == (2, 200)
    env = RehearsalEnv(scenario, tiny_world)
    assert run_episode(env, make_agent("reference", scenario)).verdict.outcome.value == "verified"
    assert run_episode(env, make_agent("wrong:too-much", scenario)).verdict.outcome.value == "not_achieved"


def test_a_bad_scenario_file_names_the_scenario_and_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(TOML.replace('split = "dev"', 'split = "test"'))
    with pytest.raises(ScenarioFileError, match=r"scenario #1 \(pay-bob\).*split must be one of"):
        load_scenarios(path, world="tiny")
    path.write_text(TOML.replace('sql = "SELECT', 'sql = "SELECT 1; DELETE FROM transfers; SELECT'))
    with pytest.raises(ScenarioFileError, match="more than one statement"):
        load_scenarios(path, world="tiny")


def test_unknown_solution_names_the_known_ones(tiny_world) -> None:
    scenario = tiny_world.scenario("pay-ann")
    with pytest.raises(KeyError, match="it has: reference, wrong:other-account"):
        scenario.solution("wrong:nope")


def test_shop_has_forty_scenarios_in_every_split() -> None:
    scenarios = load_world("shop").scenarios()
    assert len(scenarios) >= 40
    assert {s.split for s in scenarios} == set(SPLITS)
    assert len({s.id for s in scenarios}) == len(scenarios)
    categories = {s.category for s in scenarios}
    assert {"refund", "cancellation", "address", "email", "ticket", "question"} <= categories

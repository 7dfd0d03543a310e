"""TRL: the environment class a GRPOTrainer gets, against TRL's own schema path and the Gymnasium env.

The schema round trip needs transformers (the ``trl`` extra): it skips without it, and fails with
REHEARSAL_REQUIRE_TRL=1. The rollout parity tests need nothing but rehearsal_env.
"""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path
from typing import Any

import pytest

import rehearsal_env
from rehearsal_env.agents import make_agent
from rehearsal_env.integrations import STOPPED_REASON
from rehearsal_env.integrations._prompt import tool_text
from rehearsal_env.integrations.trl import (
    ToolEnvironment,
    dataset_rows,
    environment_class,
    environment_classes,
    turn_progress,
)
from rehearsal_env.worlds import World, load_world, world_names


@pytest.fixture(autouse=True)
def _records_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The classes record into ``runs/trl`` by default: each test's go under its own folder."""
    monkeypatch.chdir(tmp_path)


def _require(module: str) -> Any:
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as exc:
        if os.environ.get("REHEARSAL_REQUIRE_TRL") == "1":
            pytest.fail(f"REHEARSAL_REQUIRE_TRL=1 but {module} is not installed ({exc}): "
                        "pip install -e '.[trl]'")
        pytest.skip(f"{module} is not installed (pip install -e '.[trl]')")


def _worlds(tiny_world: World) -> list[World]:
    return [load_world(name) for name in world_names()] + [tiny_world]


def _ours(schema: dict[str, Any]) -> dict[str, Any]:
    """Our OpenAI schema as get_json_schema writes one: no additionalProperties, no empty required."""
    fn = dict(schema["function"])
    params = {k: v for k, v in fn["parameters"].items() if k != "additionalProperties"}
    if not params.get("required"):
        params.pop("required", None)
    return {"type": "function", "function": {**fn, "parameters": params}}


def _trl_tools(instance: ToolEnvironment) -> dict[str, Any]:
    """The tools TRL's GRPOTrainer collects from an environment instance (its own rule, grpo_trainer.py)."""
    return {name: getattr(instance, name)
            for name, _ in inspect.getmembers(type(instance), predicate=inspect.isfunction)
            if name not in ("reset", "get_reward") and not name.startswith("_")}


def test_get_json_schema_gives_every_tool_of_every_world_back(tiny_world: World) -> None:
    utils = _require("transformers.utils")
    checked = 0
    for world in _worlds(tiny_world):
        instance = environment_class(world, split=None)()
        tools = _trl_tools(instance)
        every = {name: tool for s in world.scenarios()
                 for name, tool in world.tools_for(s.role, offers_retry=s.offers_retry).items()}
        assert set(tools) == set(every), world.name
        for name, method in tools.items():
            assert utils.get_json_schema(method) == _ours(every[name].schema()), f"{world.name}.{name}"
            assert utils.get_json_schema(type(instance).__dict__[name]) == _ours(every[name].schema())
            checked += 1
    assert checked >= 20


def test_routed_classes_show_each_scenario_exactly_its_tools() -> None:
    world = load_world("shop")
    classes = environment_classes(world, "train")
    rows = dataset_rows(world, "train", routed=True)
    assert {r["environment"] for r in rows} == set(classes)
    for row in rows[:12]:
        scenario = world.scenario(row["scenario"])
        tools = _trl_tools(classes[row["environment"]]())
        assert set(tools) == set(world.tools_for(scenario.role, offers_retry=scenario.offers_retry))


def test_dataset_rows_carry_the_scenario_the_seed_and_a_prompt_reset_completes() -> None:
    rows = dataset_rows("shop", "dev", seeds=2, instructions="Read the order first.")
    world = load_world("shop")
    assert len(rows) == 2 * len(world.scenarios("dev"))
    row = rows[1]
    assert row["seed"] == 1 and row["split"] == "dev"
    system, user = row["prompt"]
    assert system["role"] == "system" and "You work in world shop, as the role support_agent." in system["content"]
    assert "Read the order first." in system["content"] and user == {"role": "user", "content": ""}
    env = environment_class(world, "dev")()
    opening = env.reset(**row)  # TRL passes the whole row, prompt included
    assert opening == world.scenario(row["scenario"]).request


def _gym_actions(scenario_id: str, agent: str) -> list[str]:
    """The actions the scripted ``agent`` sends on the Gymnasium env."""
    env = rehearsal_env.make(scenario_id)
    policy = make_agent(agent, env.scenario)
    observation, info = env.reset(seed=0)
    actions: list[str] = []
    done = False
    while not done:
        action = policy(observation, info)
        actions.append(action)
        observation, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    env.close()
    return actions


def _gym(scenario_id: str, actions: list[str]) -> tuple[list[str], Any, float]:
    env = rehearsal_env.make(scenario_id, reward_profile="rl")
    env.reset(seed=0)
    observations: list[str] = []
    reward: float = 0.0
    info: dict[str, Any] = {}
    for action in actions:
        observation, reward, terminated, truncated, info = env.step(action)
        observations.append(observation)
        if terminated or truncated:
            break
    verdict = info["verdict"]
    env.close()
    return observations, verdict, reward


def _trl(scenario_id: str, actions: list[str]) -> tuple[list[str], Any, float | None]:
    world_name, _, bare = scenario_id.partition("/")
    world = load_world(world_name)
    env = environment_class(world, world.scenario(bare).split, profile="rl")()
    row = next(r for r in dataset_rows(world, world.scenario(bare).split) if r["scenario"] == bare)
    env.reset(**row)
    observations = []
    for action in actions:
        call = json.loads(action)
        observations.append(getattr(env, call["tool"])(**call["args"]))  # as TRL calls a tool
    reward = env.get_reward()
    return observations, env.verdict, reward


PARITY = [
    ("shop/refund-item-0001", "reference"),
    ("analytics/orders-count-0001", "reference"),
]


def _cases() -> list[tuple[str, str]]:
    shop = load_world("shop")
    train = shop.scenarios("train")
    change = next(s for s in train if s.change is not None)
    fault = next(s for s in train if s.offers_retry)
    wrong = next(s for s in train if s.wrong)
    return PARITY + [(f"shop/{change.id}", "reference"), (f"shop/{fault.id}", "reference"),
                     (f"shop/{wrong.id}", f"wrong:{wrong.wrong[0].name.removeprefix('wrong:')}")]


@pytest.mark.parametrize("case", range(5))
def test_a_full_rollout_gives_the_gymnasium_verdict_and_reward(case: int) -> None:
    scenario_id, agent = _cases()[case]
    actions = _gym_actions(scenario_id, agent)
    gym_obs, gym_verdict, gym_reward = _gym(scenario_id, actions)
    trl_obs, trl_verdict, trl_reward = _trl(scenario_id, actions)
    assert trl_obs == [tool_text(o) for o in gym_obs]  # each observation as the openai agent shows it
    assert trl_verdict == gym_verdict
    assert trl_reward == gym_reward
    if agent == "reference":
        assert trl_verdict.outcome.value == "verified" and trl_reward is not None


@pytest.mark.parametrize("case", range(5))
def test_a_model_that_stops_early_is_settled_as_the_gymnasium_env_with_give_up(case: int) -> None:
    scenario_id, agent = _cases()[case]
    actions = _gym_actions(scenario_id, agent)
    cut = [a for a in actions if json.loads(a)["tool"] not in ("finish", "give_up")]
    cut = cut[: max(1, len(cut) - 1)]
    gym_obs, gym_verdict, gym_reward = _gym(
        scenario_id, cut + [json.dumps({"tool": "give_up", "args": {"reason": STOPPED_REASON}})])
    trl_obs, trl_verdict, trl_reward = _trl(scenario_id, cut)
    assert trl_obs == [tool_text(o) for o in gym_obs[: len(cut)]]
    assert trl_verdict == gym_verdict and trl_verdict.ending.value == "gave_up"
    assert trl_reward == gym_reward


def test_the_model_stopping_right_after_the_request_is_settled_not_achieved() -> None:
    env = environment_class("shop", "train")()
    env.reset(scenario="refund-item-0001", seed=0)
    assert env.get_reward() == 0.0
    assert env.verdict is not None and env.verdict.outcome.value == "not_achieved"
    assert env.episode is not None and env.episode.trace[-1].tool == "give_up"


def test_what_the_model_sends_is_judged_by_the_env_and_calls_after_the_end_do_not_run() -> None:
    env: Any = environment_class("shop", "train")()
    env.reset(scenario="refund-item-0001")
    wrong_type = json.loads(env.get_order(order_id="3294"))
    assert wrong_type["status"] == "rejected" and "must be integer" in wrong_type["error"]
    extra = json.loads(env.get_order(order_id=3294, verbose=True))
    assert extra["status"] == "rejected" and "unknown argument" in extra["error"]
    missing = json.loads(env.get_order())
    assert missing["status"] == "rejected"
    store_credit = json.loads(env.issue_store_credit(customer_id=518, amount_cents=100, reason="sorry"))
    assert "not available to role 'support_agent'" in store_credit["error"]
    env.finish(message="Done.")
    after = json.loads(env.get_order(order_id=3294))
    assert after["status"] == "not_run"
    assert env.episode is not None and env.episode.verdict is not None
    assert env.episode.verdict.metrics.rejected_attempts == 4
    # a new episode on the same instance starts from the snapshot
    assert env.reset(scenario="refund-item-0001") == load_world("shop").scenario("refund-item-0001").request
    assert env.verdict is None


def test_reset_refuses_a_missing_scenario_and_one_of_another_split() -> None:
    env = environment_class("shop", "train")()
    with pytest.raises(ValueError, match="needs the row's 'scenario' column"):
        env.reset(prompt=[])
    holdout = load_world("shop").scenarios("holdout")[0].id
    with pytest.raises(ValueError, match="split 'holdout'"):
        env.reset(scenario=holdout)


def test_every_episode_is_recorded_sealed_and_read_by_measure(tmp_path: Path) -> None:
    """However a rollout ends (finish, the model stopping, a new reset over an open episode, close), its episode is
    recorded once, under the class's agent and version, into a sealed run directory that measure.py reads."""
    from rehearsal_env.integrations._recording import flush_all
    from rehearsal_env.records import read_records, verify_run_dir
    world = load_world("shop")
    Shop = environment_class(world, "train", stress=False, out=str(tmp_path / "trained"), agent="grpo-run",
                             agent_version="step-7")
    reference = world.scenario("refund-item-0001").reference
    env: Any = Shop()
    env.reset(scenario="refund-item-0001")
    for call in reference.calls:
        getattr(env, call.tool)(**dict(call.args))
    assert env.get_reward() is not None and env.verdict.outcome.value == "verified"
    env.reset(scenario="refund-item-0001", seed=1)
    assert env.get_reward() == 0.0  # stopped: settled with give_up
    env.reset(scenario="refund-item-0001", seed=2)
    env.reset(scenario="refund-item-0001", seed=3)  # the open episode of seed 2 is ended and recorded first
    env._close()  # so is seed 3's
    flush_all()
    (run,) = (tmp_path / "trained").iterdir()
    assert verify_run_dir(run) == []
    records = read_records(run)
    assert sorted((r.seed, r.outcome, r.ending) for r in records) == [
        (0, "verified", "done"), (1, "not_achieved", "gave_up"), (2, "not_achieved", "gave_up"),
        (3, "not_achieved", "gave_up")]
    assert {(r.agent, r.agent_version, r.key_id, r.is_root) for r in records} == {("grpo-run", "step-7", "local", True)}
    assert [r.repeat for r in sorted(records, key=lambda r: r.seed)] == [0, 1, 2, 3]
    import subprocess
    import sys
    measured = subprocess.run([sys.executable, str(Path(rehearsal_env.__file__).parents[1] / "measure.py"),
                               str(run)], capture_output=True, text=True, check=False)
    assert measured.returncode == 0, measured.stderr
    assert "4 episodes" in measured.stdout or "episodes: 4" in measured.stdout, measured.stdout


def test_an_unrecorded_class_writes_nothing(tmp_path: Path) -> None:
    env: Any = environment_class("shop", "train", out=None)()
    env.reset(scenario="refund-item-0001")
    env.get_reward()
    env._close()
    assert not (tmp_path / "runs").exists()


def test_a_trl_rollout_reads_byte_for_byte_what_the_openai_agent_sends() -> None:
    """The same episode played by the openai agent (against the scripted OpenAI-protocol server) and through the
    TRL class with the same calls: the system message, the customer's opening, every tool message and the tools'
    schemas are the same text."""
    from rehearsal_env.agents import AgentProfile, Endpoint, OpenAIAgent
    from rehearsal_env.agents.testing import ModelServer
    from rehearsal_env.env import RehearsalEnv
    from rehearsal_env.runner import run_episode

    world = load_world("shop")
    scenario = world.scenario("refund-item-0001")
    profile = AgentProfile(name="t", model="solver", instructions="Read the order first.")
    with ModelServer(world=world) as server:
        agent = OpenAIAgent(profile, Endpoint(base_url=server.base_url, timeout_s=5.0, max_retries=0),
                            max_customer_contacts=scenario.max_customer_contacts)
        env = RehearsalEnv(scenario, world, stress=False)
        try:
            run_episode(env, agent)
        finally:
            env.close()
    sent = agent.conversation.messages
    calls = [c for m in sent if m["role"] == "assistant" for c in m.get("tool_calls") or ()]
    assert len(calls) >= 3

    row = next(r for r in dataset_rows(world, "train", instructions="Read the order first.")
               if r["scenario"] == scenario.id)
    trl: Any = environment_class(world, "train", stress=False, out=None)()
    opening = trl.reset(**row)
    answers = [getattr(trl, c["function"]["name"])(**json.loads(c["function"]["arguments"])) for c in calls]
    trl._close()
    assert row["prompt"][0] == sent[0] and sent[0]["role"] == "system"
    assert sent[1] == {"role": "user", "content": opening}
    tool_messages = [m["content"] for m in sent if m["role"] == "tool"]
    assert tool_messages == answers[:len(tool_messages)] and len(tool_messages) >= len(calls) - 1
    assert agent.conversation.tools == [t.schema() for t in world.tools_for(scenario.role).values()]


def test_a_grpo_trainer_renders_the_prompt_the_served_agent_sends() -> None:
    """TRL renders an environment's tools from its methods (alphabetical, without ``additionalProperties``);
    ``render_as_served`` makes a real GRPOTrainer's prompt the served agent's, byte for byte: the system message,
    the opening and the world's tool schemas in the world's order, in the same chat template. (Without it,
    learn.py's SFT model, which called run_sql first on every served episode, never called it in a GRPO rollout.)"""
    trl = _require("trl")
    from trainer_parity import chatml_tokenizer
    from transformers import Qwen3Config, Qwen3ForCausalLM
    from trl.chat_template_utils import qwen3_chat_template

    from rehearsal_env.agents import given_for
    from rehearsal_env.integrations.trl import render_as_served

    world = load_world("analytics")
    scenario = world.scenarios("train")[0]
    served = [t.schema() for t in world.tools_for(scenario.role).values()]
    tokenizer = chatml_tokenizer(qwen3_chat_template)
    model = Qwen3ForCausalLM(Qwen3Config(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                         head_dim=8, pad_token_id=tokenizer.pad_token_id))
    rows = [r for r in dataset_rows(world, "train") if r["scenario"] == scenario.id]
    rows[0]["prompt"][0]["content"] = given_for("", world, scenario)["system"][1]
    from datasets import Dataset

    trainer = trl.GRPOTrainer(model=model, processing_class=tokenizer, train_dataset=Dataset.from_list(rows),
                              environment_factory=environment_class(world, "train", out=None),
                              args=trl.GRPOConfig(output_dir="grpo", max_steps=1, num_generations=2,
                                                  per_device_train_batch_size=2, report_to="none", use_cpu=True))
    names = [t["function"]["name"] if isinstance(t, dict) else t.__name__ for t in trainer._env_tools[None]]
    assert names == sorted(names) and names != [t["function"]["name"] for t in served]  # TRL's own rendering
    render_as_served(trainer)
    assert trainer._env_tools[None] == served
    opening = environment_class(world, "train", out=None)().reset(**rows[0])
    conversation = [rows[0]["prompt"][0], {"role": "user", "content": rows[0]["prompt"][1]["content"] + opening}]
    trainer._batch_environments = [None]  # what TRL sets per batch, then renders each prompt with (its own path)
    rendered = trainer._tokenize_prompts([conversation])[0][0]
    sent: Any = tokenizer.apply_chat_template(conversation, tools=served, tokenize=True, add_generation_prompt=True,
                                              return_dict=True)
    assert list(rendered) == list(sent["input_ids"])
    with pytest.raises(TypeError, match="environment_factory"):
        render_as_served(object())


def _rollout(profile: str, scenario_id: str, agent: str) -> tuple[Any, float | None]:
    """One rollout of a world class under ``profile`` as TRL plays it: reset, the tools the agent calls, get_reward."""
    world_name, _, bare = scenario_id.partition("/")
    world = load_world(world_name)
    env = environment_class(world, world.scenario(bare).split, profile=profile, out=None)()
    row = next(r for r in dataset_rows(world, world.scenario(bare).split) if r["scenario"] == bare)
    env.reset(**row)
    for action in _gym_actions(scenario_id, agent):
        call = json.loads(action)
        if call["tool"] in ("finish", "give_up"):
            break  # the model stops: get_reward settles the episode
        getattr(env, call["tool"])(**call["args"])
    return env, env.get_reward()


def test_the_per_turn_rewards_reach_trl_as_the_progress_before_the_end() -> None:
    shop = load_world("shop")
    wrong = next(s for s in shop.scenarios("train") if s.wrong)
    seen: dict[str, float | None] = {}
    logged: list[Any] = []
    for scenario_id, agent in [*_cases(), (f"shop/{wrong.id}", "null")]:
        env, reward = _rollout("rl_turns", scenario_id, agent)
        plain, plain_reward = _rollout("rl", scenario_id, agent)
        assert sum(env.turn_rewards) == pytest.approx(reward if reward is not None else 0.0, abs=1e-9)
        assert reward == plain_reward  # the shaped profile's total is the end reward
        (progress,) = turn_progress(environments=[env], log_extra=lambda column, values: logged.append(values))
        assert logged[-1] == [list(env.turn_rewards)]
        outcome = env.verdict.outcome.value
        if outcome == "rule_violated":
            assert progress == 0.0  # the safety gate
        else:
            assert progress == pytest.approx(sum(env.turn_rewards[:-1]), abs=1e-9)
        assert progress is not None and 0.0 <= progress <= 1.0
        seen[f"{outcome}:{agent}"] = progress
    assert any(k.startswith("verified") and v and v > 0 for k, v in seen.items()), seen
    assert any(not k.startswith("verified") for k in seen), seen
    with pytest.raises(ValueError, match="rl_turns"):
        turn_progress(environments=[_rollout("rl", "shop/refund-item-0001", "reference")[0]])
    with pytest.raises(ValueError, match="environment_factory"):
        turn_progress(environments=None)


def test_turn_progress_gives_undoing_and_redoing_nothing_net() -> None:
    shop = load_world("shop")
    scenario = shop.scenario("change-address-0001")
    env = environment_class(shop, "train", profile="rl_turns", stress=False, out=None)()
    env.reset(scenario=scenario.id, seed=0)
    first, second, write, _ = scenario.reference.calls
    getattr(env, first.tool)(**first.args)
    getattr(env, second.tool)(**second.args)
    getattr(env, write.tool)(**write.args)
    paid_once = sum(env.turn_rewards)
    assert paid_once > 0
    for _ in range(3):  # away and back again
        getattr(env, write.tool)(order_id=write.args["order_id"], address="1 Elsewhere St, Nowhere")
        getattr(env, write.tool)(**write.args)
    assert sum(env.turn_rewards) == pytest.approx(paid_once, abs=1e-9)
    env.get_reward()
    (progress,) = turn_progress(environments=[env])
    assert progress == pytest.approx(paid_once, abs=1e-9)

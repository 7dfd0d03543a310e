"""The Tinker cookbook: its own rollout code (``do_single_rollout``, ``do_group_rollout``) over our envs, with a
local scripted ``TokenCompleter`` and the cookbook's ``qwen3_instruct`` renderer on a tokenizer built here (Tinker's
sampling client talks to a hosted service this machine cannot reach), against the Gymnasium env.

Skips without ``tinker-cookbook`` (the ``tinker`` extra); fails instead with REHEARSAL_REQUIRE_TINKER=1.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from trainer_parity import SCENARIO, case, chatml_tokenizer, gym, recorded, reply_text, require, scripted

from rehearsal_env.integrations import STOPPED_REASON
from rehearsal_env.integrations._prompt import tool_text
from rehearsal_env.worlds import load_world

require("tinker_cookbook.rl.rollouts", "tinker", "REHEARSAL_REQUIRE_TINKER")
from tinker_cookbook import renderers  # noqa: E402
from tinker_cookbook.completers import TokenCompleter, TokensWithLogprobs  # noqa: E402
from tinker_cookbook.rl.rollouts import do_group_rollout, do_single_rollout  # noqa: E402

from rehearsal_env.integrations.tinker import RehearsalDataset, RehearsalEnvGroupBuilder  # noqa: E402

TOKENIZER = chatml_tokenizer()
RENDERER = renderers.get_renderer("qwen3_instruct", TOKENIZER)


class ScriptedCompleter(TokenCompleter):  # type: ignore[misc]
    """A policy that writes reply number n at its n-th turn of an episode (the turn read from the prompt, so the
    envs of a group, rolled out at once, each get the whole script), each ending with the end-of-turn token."""

    def __init__(self, replies: list[str], cut_at: int | None = None) -> None:
        self.replies, self.cut_at, self.prompts = list(replies), cut_at, []

    async def __call__(self, model_input: Any, stop: Any, *, max_tokens: int | None = None) -> TokensWithLogprobs:
        prompt = TOKENIZER.decode(model_input.to_ints())
        self.prompts.append(prompt)
        turn = prompt.count("<|im_start|>assistant") - 1
        if self.cut_at is not None and turn >= self.cut_at:  # the sampler ran out of tokens mid-call
            ids = TOKENIZER.encode("<tool_call>\n{\"name\": ", add_special_tokens=False)
            return TokensWithLogprobs(tokens=ids, maybe_logprobs=[0.0] * len(ids), stop_reason="length")
        ids = TOKENIZER.encode(self.replies[turn] + "<|im_end|>", add_special_tokens=False)
        return TokensWithLogprobs(tokens=ids, maybe_logprobs=[-0.5] * len(ids))


@pytest.mark.parametrize("profile", ["rl", "rl_turns"])
@pytest.mark.parametrize("agent", ["reference", "wrong"])
def test_the_cookbooks_rollout_gives_the_gymnasium_verdict_and_each_turns_reward(tmp_path: Path, profile: str,
                                                                                agent: str) -> None:
    scenario, agent = case(agent)
    actions = scripted(f"shop/{scenario}", agent)
    expected = gym(f"shop/{scenario}", actions, profile)
    builder = RehearsalEnvGroupBuilder("shop", scenario, RENDERER, profile=profile, out=str(tmp_path))
    policy = ScriptedCompleter([reply_text(a) for a in actions])

    async def run() -> Any:
        (env,) = await builder.make_envs()
        trajectory = await do_single_rollout(policy, env)
        verdict = env.message_env.session.verdict
        await builder.cleanup()
        return trajectory, verdict

    trajectory, verdict = asyncio.run(run())
    assert verdict == expected.verdict
    assert [t.reward for t in trajectory.transitions] == expected.rewards
    assert trajectory.stop_reason == "completed"
    assert trajectory.transitions[-1].logs["outcome"] == expected.verdict.outcome.value
    for prompt, observation in zip(policy.prompts[1:], expected.observations, strict=False):
        assert f"<tool_response>\n{tool_text(observation)}\n</tool_response>" in prompt  # the served agent's text
    (record,) = recorded(tmp_path / f"shop-{profile}")
    assert record.agent == "tinker" and record.outcome == expected.verdict.outcome.value


def test_a_group_rollout_records_every_episode_and_totals_are_the_episode_rewards(tmp_path: Path) -> None:
    actions = scripted(f"shop/{SCENARIO}")
    expected = gym(f"shop/{SCENARIO}", actions)
    builder = RehearsalEnvGroupBuilder("shop", SCENARIO, RENDERER, group_size=2, out=str(tmp_path),
                                       agent="cookbook", agent_version="step-3")
    group = asyncio.run(do_group_rollout(builder, ScriptedCompleter([reply_text(a) for a in actions])))
    assert group.get_total_rewards() == [expected.rewards[-1]] * 2
    records = recorded(tmp_path / "shop-rl")
    assert len(records) == 2 and {(r.agent, r.agent_version) for r in records} == {("cookbook", "step-3")}
    assert {r.outcome for r in records} == {"verified"} and builder.sessions == []


def test_a_rollout_stopped_on_length_is_ended_for_the_agent_at_cleanup(tmp_path: Path) -> None:
    actions = scripted(f"shop/{SCENARIO}")[:1]
    expected = gym(f"shop/{SCENARIO}", actions + [{"tool": "give_up", "args": {"reason": STOPPED_REASON}}])
    builder = RehearsalEnvGroupBuilder("shop", SCENARIO, RENDERER, out=str(tmp_path))
    group = asyncio.run(do_group_rollout(builder, ScriptedCompleter([reply_text(actions[0])], cut_at=1)))
    assert group.trajectories_G[0].stop_reason == "max_tokens"
    (record,) = recorded(tmp_path / "shop-rl")
    assert record.ending == "gave_up" and record.outcome == expected.verdict.outcome.value


def test_the_dataset_batches_every_scenario_of_the_split() -> None:
    train = load_world("shop").scenarios("train")
    dataset = RehearsalDataset("shop", "train", RENDERER, batch_size=4, group_size=2, seeds=2, out=None)
    batches = [dataset.get_batch(i) for i in range(len(dataset))]
    builders = [b for batch in batches for b in batch]
    assert sorted((b.scenario, b.seed) for b in builders) == sorted((s.id, n) for s in train for n in range(2))
    assert all(b.group_size == 2 and b.out is None for b in builders)
    with pytest.raises(IndexError):
        dataset.get_batch(len(dataset))

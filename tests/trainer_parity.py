"""What the adapters' tests compare a trainer's rollout with: the Gymnasium env given the same actions.

``scripted(scenario_id, agent)`` plays a built-in scripted agent (``reference``, ``wrong:<name>``) on the Gymnasium
env and returns its actions; ``gym(scenario_id, actions, profile)`` replays them and returns every step's reward and
the verdict; ``reply_text(action)`` is one action as the text a model writes for it (one ``<tool_call>`` block in
the format ``rehearsal models serve`` reads). ``case(agent)`` is the scenario and scripted agent a parametrized
``reference``/``wrong`` test plays. ``require(module, extra, var)`` imports a trainer's package or skips
saying why (fails under ``REHEARSAL_REQUIRE_<VAR>=1``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import rehearsal_env
from rehearsal_env.agents import make_agent
from rehearsal_env.verdict import Verdict
from rehearsal_env.worlds import load_world

SCENARIO = "refund-item-0001"
"""The shop scenario the adapters' tests play with the reference agent."""


def require(module: str, extra: str, var: str) -> Any:
    """``module`` imported; skip without it (saying which extra installs it), fail under ``var``=1."""
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as exc:
        if os.environ.get(var) == "1":
            raise RuntimeError(f"{var}=1 but {module} is not importable ({exc}): "
                               f"pip install -e '.[{extra}]'") from exc
        pytest.skip(f"{module} is not installed ({exc}); pip install -e '.[{extra}]'", allow_module_level=True)


def case(agent: str) -> tuple[str, str]:
    """(scenario id, scripted agent) for ``agent`` ``reference`` (:data:`SCENARIO`) or ``wrong`` (the first shop
    train scenario with a wrong solution, and that solution's agent)."""
    if agent == "reference":
        return SCENARIO, agent
    wrong = next(s for s in load_world("shop").scenarios("train") if s.wrong)
    return wrong.id, f"wrong:{wrong.wrong[0].name.removeprefix('wrong:')}"


def scripted(scenario_id: str, agent: str = "reference") -> list[dict[str, Any]]:
    """The actions (``{"tool", "args"}``) the scripted ``agent`` sends on the Gymnasium env."""
    env = rehearsal_env.make(scenario_id)
    policy = make_agent(agent, env.scenario)
    observation, info = env.reset(seed=0)
    actions: list[dict[str, Any]] = []
    done = False
    while not done:
        action = policy(observation, info)
        actions.append(json.loads(action))
        observation, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    env.close()
    return actions


@dataclass(frozen=True)
class GymRun:
    """The Gymnasium env's answers to a list of actions."""

    observations: list[str]
    """Each step's observation (JSON text)."""
    rewards: list[float]
    """Each step's reward."""
    verdict: Verdict
    """The verdict."""


def gym(scenario_id: str, actions: list[dict[str, Any]], profile: str = "rl") -> GymRun:
    """Replay ``actions`` on the Gymnasium env under ``profile`` (until it ends)."""
    env = rehearsal_env.make(scenario_id, reward_profile=profile)
    env.reset(seed=0)
    observations, rewards = [], []
    info: dict[str, Any] = {}
    for action in actions:
        observation, reward, terminated, truncated, info = env.step(json.dumps(action))
        observations.append(observation)
        rewards.append(float(reward))
        if terminated or truncated:
            break
    env.close()
    return GymRun(observations, rewards, info["verdict"])


def reply_text(action: dict[str, Any]) -> str:
    """``action`` as a model writes it: one ``<tool_call>`` block."""
    return "<tool_call>\n" + json.dumps({"name": action["tool"], "arguments": action["args"]}) + "\n</tool_call>"


CHATML_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML_MARKUP = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]


def chatml_tokenizer(chat_template: str | None = None) -> Any:
    """A small byte-level BPE tokenizer with the ChatML (Qwen) special tokens, built here (nothing downloaded): what a
    trainer's renderer or chat template tokenizes with. Needs ``tokenizers`` and ``transformers``."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    world = rehearsal_env.load_world("shop")
    corpus = [json.dumps(t.schema()) for s in world.scenarios() for t in world.tools_for(s.role).values()]
    corpus += [s.request for s in world.scenarios()]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=600, special_tokens=CHATML_SPECIAL,
                                                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    bpe.add_tokens([AddedToken(t, special=False, normalized=False) for t in CHATML_MARKUP])
    return PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   chat_template=chat_template)


def recorded(run_dir: Path) -> list[Any]:
    """The records of ``run_dir`` once this process's recorders wrote what they buffer (an adapter's records are
    written every 32 episodes, every 30 s and at exit), after checking its seal."""
    from rehearsal_env.integrations._recording import flush_all
    from rehearsal_env.records import read_records, verify_run_dir

    flush_all()
    assert verify_run_dir(run_dir) == [], f"{run_dir} fails its seal"
    return list(read_records(run_dir))

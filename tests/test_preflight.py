"""The run's preflight keeps the server's prompt cache: it sends the first episode's own system message and tools,
exactly as the episode then sends them (the same text in the same order: a server's cache matches tokens)."""

from __future__ import annotations

import json
from pathlib import Path

from rehearsal_env.agents.testing import ModelServer
from rehearsal_env.cli import main


def test_the_preflight_is_the_first_requests_prefix(tmp_path: Path) -> None:
    with ModelServer(world="shop") as server:
        code = main(["run", "--world", "shop", "--agent", "openai:solver", "--scenario", "refund-item-0001",
                     "--base-url", server.base_url, "--out", str(tmp_path / "run"), "--quiet"])
        assert code == 0
    preflight, first = server.probes[0], server.requests[0]
    assert preflight["max_tokens"] == 1 and "tool_choice" not in preflight and first["tool_choice"] == "auto"
    assert preflight["messages"] == first["messages"][:1]  # the system message, as sent
    assert json.dumps(preflight["tools"]) == json.dumps(first["tools"])  # the tools, in the same key order

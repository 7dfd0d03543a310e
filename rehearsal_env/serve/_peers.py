"""The processes of one ``rehearsal serve --workers N`` server find each other in a shared folder.

Each worker listens on a private address of its own (127.0.0.1, a free port) besides the shared one,
and writes it to the folder (``OUT/.workers/`` by default):

- ``<tag>.json``: one worker: its pid, host, process start time, private URL and state (``serving``,
  ``stopped`` after a clean stop, ``died`` once another worker found it dead).
- ``<tag>.journal``: the worker's journal, one JSON line appended per event: an episode started
  (what its record needs), an episode ended. Rewritten with only the episodes whose records are not yet
  on disk when it passes :data:`COMPACT_BYTES`; removed when the worker stops cleanly.
- ``<tag>.lost/<episode_id>.json``: an episode of a worker that died, as the worker that found it dead
  recorded it: ``not_scored`` with cause ``worker`` (unless its record had been written).

A worker that dies (killed, out of memory) takes its open episodes with it; every survivor checks the
others every housekeeping tick, and the first to find one dead records each episode of its journal
(under a file lock: once) and marks it ``died``; a request for one of them then answers ``410`` with
the cause. Liveness is known only on the same host (a pid and its start time).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI
from filelock import FileLock

from .._atomic import write_atomic
from ..episodes import Session
from ._ids import EPISODE_ID

SERVING, STOPPED, DIED = "serving", "stopped", "died"
COMPACT_BYTES = 1 << 20
"""A journal longer than this is rewritten with only the episodes whose records are not yet on disk."""

HOST = socket.gethostname()


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command (Linux), or None where it cannot be read."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return None


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux ``/proc``), or None where it cannot be read."""
    stat = _stat(pid)
    return stat[19] if stat is not None else None


def alive(entry: dict[str, Any]) -> bool:
    """Whether the worker ``entry`` describes still runs (a worker on another host is taken to run)."""
    if entry.get("host") != HOST:
        return True
    pid = int(entry["pid"])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    stat = _stat(pid)
    if stat is None:
        return True
    if stat[0] in ("Z", "X"):  # killed, not yet reaped by its parent
        return False
    return entry.get("started") in (None, stat[19])  # a reused pid is another process


class Peers:
    """This worker's entry and journal in ``folder``, and what it knows of the other workers."""

    def __init__(self, folder: str | Path, tag: str) -> None:
        self.folder, self.tag = Path(folder), tag
        self.folder.mkdir(parents=True, exist_ok=True)
        self.journal = self.folder / f"{tag}.journal"
        self._log = self.journal.open("a", encoding="utf-8", buffering=1)  # a line reaches the file as written
        self.url: str | None = None
        self._open: dict[str, str] = {}  # episode id: its journal line, until its record is on disk
        self._closed: set[str] = set()  # of those, the ones that ended
        self._ended: list[str] = []
        self._urls: dict[str, str] = {}
        self._final: set[str] = set()  # workers known to have stopped or died
        self._lock = threading.Lock()

    # -- the registry ------------------------------------------------------------
    def entry(self, tag: str) -> dict[str, Any] | None:
        """Worker ``tag``'s entry (None: no such worker wrote one here)."""
        try:
            return dict(json.loads((self.folder / f"{tag}.json").read_text()))
        except (OSError, ValueError):
            return None

    def _write(self, tag: str, body: dict[str, Any]) -> None:
        write_atomic(self.folder / f"{tag}.json", json.dumps(body, sort_keys=True) + "\n")

    def register(self, url: str) -> None:
        """This worker serves: its private ``url`` is where the others reach its episodes."""
        self.url = url
        self._write(self.tag, {"tag": self.tag, "pid": os.getpid(), "host": HOST, "started": _start_time(os.getpid()),
                               "url": url, "state": SERVING, "since": time.time()})

    def stopped(self) -> None:
        """This worker stopped cleanly: every episode it held was ended and recorded."""
        with self._lock:
            self._log.close()
            self.journal.unlink(missing_ok=True)
        entry = self.entry(self.tag)
        if entry is not None:
            self._write(self.tag, {**entry, "state": STOPPED, "until": time.time()})

    def url_of(self, tag: str) -> str | None:
        """The private URL of serving worker ``tag`` (None: it is not serving)."""
        url = self._urls.get(tag)
        if url is None:
            entry = self.entry(tag)
            if entry is None or entry.get("state") != SERVING:
                return None
            url = self._urls[tag] = str(entry["url"])
        return url

    def forget_url(self, tag: str) -> None:
        self._urls.pop(tag, None)

    # -- the journal ---------------------------------------------------------------
    def opened(self, session: Session) -> None:
        """``session`` started here: journal what its record needs if this process dies."""
        line = json.dumps({"episode_id": session.id, "world": session.world.name, "scenario": session.scenario.id,
                           "seed": session.seed, "profile": session.profile, "agent": session.agent,
                           "agent_version": session.agent_version, "key_id": session.owner}) + "\n"
        with self._lock:
            self._open[session.id] = line
            self._log.write(line)

    def ended(self, session: Session) -> None:
        """``session`` ended and its record is buffered: it leaves the journal once the record is flushed."""
        with self._lock:
            self._log.write(json.dumps({"ended": session.id}) + "\n")
            self._closed.add(session.id)
            self._ended.append(session.id)

    def take_ended(self) -> list[str]:
        """The episodes ended so far (call before flushing the records, then :meth:`forget` them)."""
        with self._lock:
            ended, self._ended = self._ended, []
        return ended

    def forget(self, episode_ids: list[str]) -> None:
        """Episodes whose records are on disk leave the journal (rewritten once it has grown past
        :data:`COMPACT_BYTES`)."""
        with self._lock:
            for episode_id in episode_ids:
                self._open.pop(episode_id, None)
                self._closed.discard(episode_id)
            if self._log.closed or self._log.tell() < COMPACT_BYTES:
                return
            ended = "".join(json.dumps({"ended": i}) + "\n" for i in self._closed)
            write_atomic(self.journal, "".join(self._open.values()) + ended)
            self._log.close()
            self._log = self.journal.open("a", encoding="utf-8", buffering=1)

    @staticmethod
    def read_journal(path: Path) -> list[dict[str, Any]]:
        """The episodes a journal holds (each with ``ended``: whether it had ended); a line cut short by the
        process's death is skipped."""
        started: dict[str, dict[str, Any]] = {}
        ended: set[str] = set()
        with contextlib.suppress(OSError), path.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                with contextlib.suppress(ValueError, TypeError, KeyError):
                    item = json.loads(line)
                    if "ended" in item:
                        ended.add(str(item["ended"]))
                    else:
                        started[str(item["episode_id"])] = item
        return [{**item, "ended": episode_id in ended} for episode_id, item in started.items()]

    # -- dead workers -----------------------------------------------------------------
    def sweep(self, record: Callable[[dict[str, Any], str], str | None]) -> int:
        """Find workers that died without stopping and adopt their journals (see :meth:`adopt`); how many died."""
        died = 0
        for path in self.folder.glob("*.json"):
            tag = path.stem
            entry = self.entry(tag) if tag != self.tag and tag not in self._final else None
            if entry is not None and entry.get("state") != SERVING:
                self._final.add(tag)  # stopped or died: never read again (a folder of many past runs stays cheap)
            elif entry is not None and not alive(entry):
                died += self.adopt(tag, record)
        return died

    def adopt(self, tag: str, record: Callable[[dict[str, Any], str], str | None]) -> int:
        """Worker ``tag`` died: ``record(journal_entry, reason)`` each episode of its journal (it returns the run
        directory recorded in, or None when the episode's record was already written), keep it under
        ``<tag>.lost/`` and mark the worker ``died``. Once only, whichever worker gets here first; 1 if this
        call adopted it."""
        with FileLock(str(self.folder / f"{tag}.lock")):
            entry = self.entry(tag)
            if entry is None or entry.get("state") != SERVING or alive(entry):
                return 0
            lost = self.folder / f"{tag}.lost"
            lost.mkdir(exist_ok=True)
            reason = (f"the server process holding the episode (worker {tag}, pid {entry['pid']}) died while the "
                      f"episode was open; its turns were lost with it")
            for item in self.read_journal(self.folder / f"{tag}.journal"):
                item["reason"] = reason if not item["ended"] else (
                    f"the episode had ended, but the server process holding it (worker {tag}, pid {entry['pid']}) died "
                    f"before its record was written; its verdict was lost with it")
                try:
                    item["recorded_in"] = record(item, item["reason"])
                except Exception as exc:  # noqa: BLE001 (a journal of another world version): keep the others going
                    item["recorded_in"], item["record_error"] = None, f"{type(exc).__name__}: {str(exc)[:200]}"
                if EPISODE_ID.fullmatch(str(item["episode_id"])):  # a file name is never taken on trust
                    write_atomic(lost / f"{item['episode_id']}.json", json.dumps(item, sort_keys=True) + "\n")
            (self.folder / f"{tag}.journal").unlink(missing_ok=True)
            self._write(tag, {**entry, "state": DIED, "until": time.time(), "found_by": self.tag})
            self.forget_url(tag)
            return 1

    def lost(self, tag: str, episode_id: str) -> dict[str, Any] | None:
        """What was recorded of episode ``episode_id`` of dead worker ``tag`` (None: not in its journal)."""
        with contextlib.suppress(OSError, ValueError):
            return dict(json.loads((self.folder / f"{tag}.lost" / f"{episode_id}.json").read_text()))
        return None


class PrivateListener:
    """This worker's own address (127.0.0.1, a free port): the same app, without a second lifespan."""

    def __init__(self, app: FastAPI, **options: Any) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY, as _server
        self.sock.bind(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, lifespan="off", log_level="warning", timeout_graceful_shutdown=5, **options)
        config.load()
        self.server = uvicorn.Server(config)
        self.server.lifespan = config.lifespan_class(config)  # what Server.serve sets; serve() would take signals

    async def start(self) -> str:
        await self.server.startup(sockets=[self.sock])
        return self.url

    async def stop(self) -> None:
        await self.server.shutdown(sockets=[self.sock])

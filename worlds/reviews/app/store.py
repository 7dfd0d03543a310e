"""The reviews service's data access: every operation one short transaction on its PostgreSQL database.

The service keeps no state outside its database (the connection pool holds
none), so restoring the database restores the service.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from datetime import datetime
from typing import Any

import psycopg2
import psycopg2.pool


class Refused(Exception):
    """The request is not allowed or names something that does not exist (a 4xx answer)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Unavailable(Exception):
    """A service the app depends on failed (a 502 answer)."""


def clock() -> str:
    """The service's clock: ``REVIEWS_CLOCK`` when set (a frozen instant), else the OS clock."""
    fixed = os.environ.get("REVIEWS_CLOCK")
    return fixed or datetime.now().isoformat(timespec="seconds")


class Store:
    """The service's database and its outgoing mail."""

    def __init__(self, dsn: str, email_url: str) -> None:
        self.pool = psycopg2.pool.ThreadedConnectionPool(1, 8, dsn)
        self.email_url = email_url.rstrip("/")

    # -- plumbing --------------------------------------------------------------
    def run(self, fn: Any, *args: Any) -> Any:
        conn = self.pool.getconn()
        try:
            with conn:
                with conn.cursor() as cur:
                    return fn(cur, *args)
        finally:
            self.pool.putconn(conn)

    def send_email(self, to: str, subject: str, text: str, key: str) -> str:
        """Send one email through the mail service; returns its reference."""
        payload = json.dumps({"to": to, "subject": subject, "text": text}).encode()
        request = urllib.request.Request(f"{self.email_url}/email/send", data=payload, method="POST",
                                         headers={"Content-Type": "application/json", "Idempotency-Key": key})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return str(json.loads(response.read())["request_ref"])
        except (urllib.error.URLError, OSError, ValueError, KeyError) as exc:
            raise Unavailable(f"the mail service failed: {exc}") from exc


# -- lookups ---------------------------------------------------------------------
def user(cur: Any, login: str) -> tuple[int, str, str]:
    cur.execute("SELECT id, name, email FROM users WHERE login = %s", (login,))
    row = cur.fetchone()
    if row is None:
        raise Refused(404, f"no user {login!r}")
    return row


def repository(cur: Any, name: str) -> int:
    cur.execute("SELECT id FROM repositories WHERE name = %s", (name,))
    row = cur.fetchone()
    if row is None:
        raise Refused(404, f"no repository {name!r}")
    return int(row[0])


def member_role(cur: Any, repo_id: int, user_id: int) -> str | None:
    cur.execute("SELECT role FROM memberships WHERE repository_id = %s AND user_id = %s", (repo_id, user_id))
    row = cur.fetchone()
    return None if row is None else str(row[0])


def pull(cur: Any, repo: str, number: int) -> tuple[int, int, str, int]:
    """(pull request id, repository id, state, author id)."""
    repo_id = repository(cur, repo)
    cur.execute("SELECT id, state, author_id FROM pull_requests WHERE repository_id = %s AND number = %s",
                (repo_id, number))
    row = cur.fetchone()
    if row is None:
        raise Refused(404, f"repository {repo!r} has no pull request #{number}")
    return int(row[0]), repo_id, str(row[1]), int(row[2])


def login_of(cur: Any, user_id: int | None) -> str | None:
    if user_id is None:
        return None
    cur.execute("SELECT login FROM users WHERE id = %s", (user_id,))
    row = cur.fetchone()
    return None if row is None else str(row[0])


def labels_of(cur: Any, pr_id: int) -> list[str]:
    cur.execute("SELECT name FROM labels WHERE pull_request_id = %s ORDER BY name", (pr_id,))
    return [r[0] for r in cur.fetchall()]

"""Fictional data of the compiled helpdesk world (ours; helpdesk is the registry's): its site, six staff
accounts, three queues, eighteen tickets and their follow-ups.

``rows(seed, anchor)`` is deterministic. Values are stored as helpdesk stores them through Django on
SQLite (flags 0/1, times ``YYYY-MM-DD HH:MM:SS`` in UTC), which is how the world's tables hold them.
Passwords use Django's MD5 hasher (the host project's only hasher): ``md5$salt$md5(salt + password)``.
"""

from __future__ import annotations

import hashlib
import random
from datetime import date, timedelta
from typing import Any

STAFF = (("admin", "Ada", "Mensah", 1), ("agent", "Ben", "Ortiz", 0), ("cleo", "Cleo", "Varga", 0),
         ("dario", "Dario", "Laine", 0), ("esme", "Esme", "Quinn", 0), ("farid", "Farid", "Nolan", 0))
"""login, first name, last name, superuser: the first two are the agent's accounts (see app.toml)."""
PASSWORDS = {"admin": "admin-pass-1", "agent": "agent-pass-1"}
QUEUES = (("Billing", "billing"), ("Technical support", "tech"), ("Accounts", "accounts"))
SUBJECTS = ("Invoice shows the wrong VAT rate", "Cannot reset my password", "Export to CSV times out",
            "Charged twice this month", "Two-factor codes never arrive", "Dashboard loads blank",
            "Refund for cancelled plan", "Email address change", "API returns 500 on upload",
            "Update company billing address", "Locked out after too many attempts", "Slow search results",
            "Need a copy of last year's invoices", "Mobile app crashes at login", "Merge two accounts",
            "Webhook deliveries failing", "Discount code not applied", "Delete my old workspace")
CUSTOMERS = ("mara@example.test", "tomas@example.test", "ines@example.test", "olu@example.test",
             "kenji@example.test", "rosa@example.test")


def _password(login: str) -> str:
    salt = hashlib.sha256(login.encode()).hexdigest()[:32]  # enough entropy that no login rewrites the hash
    return f"md5${salt}${hashlib.md5((salt + PASSWORDS.get(login, login + '-locked')).encode()).hexdigest()}"


def rows(seed: int, anchor: date) -> dict[str, list[tuple[Any, ...]]]:
    rng = random.Random(seed)

    def stamp(days_ago: int) -> str:
        day = (anchor - timedelta(days=days_ago)).isoformat()
        return f"{day} {rng.randrange(8, 18):02d}:{rng.randrange(60):02d}:00"

    users = [(i + 1, _password(login), None, superuser, login, last, f"{login}@helpdesk.example.test", 1, 1,
              stamp(200), first) for i, (login, first, last, superuser) in enumerate(STAFF)]
    settings = [(i + 1, None, user[0], 0, 0, 1, 25, 1, "default") for i, user in enumerate(users)]
    queues = [(i + 1, title, slug, None, None, 1, 0, None, None, None, None, None, None, 0, None, None, None, None,
               None, None, None, None, f"helpdesk.queue_access_{slug}", None, None, None, None, 0, None)
              for i, (title, slug) in enumerate(QUEUES)]
    tickets: list[tuple[Any, ...]] = []
    followups: list[tuple[Any, ...]] = []
    for i, subject in enumerate(SUBJECTS):
        ticket_id = i + 1
        created = stamp(30 - i)
        status = (1, 1, 2, 3, 4, 1)[i % 6]
        assigned = None if i % 3 == 0 else 2 + i % 5
        secret = hashlib.sha256(f"{seed}:ticket:{ticket_id}".encode()).hexdigest()[:32]
        tickets.append((ticket_id, subject, created, CUSTOMERS[i % len(CUSTOMERS)], status, 0,
                        f"{subject}. Reported by the customer on {created[:10]}.", None, 1 + rng.randrange(5),
                        None, None, assigned, 1 + i % len(QUEUES), secret, None, created, None))
        followups.append((len(followups) + 1, created, "Ticket Opened", f"{subject}.", 1, None, ticket_id, None,
                          None, None, None))
        if status != 1:
            followups.append((len(followups) + 1, stamp(10 - i % 5), "Status changed", "Worked on this.", 1,
                              status, ticket_id, assigned, None, None, None))
    return {"django_site": [(1, "helpdesk.example.test", "helpdesk.example.test")], "auth_user": users,
            "helpdesk_usersettings": settings, "helpdesk_queue": queues, "helpdesk_ticket": tickets,
            "helpdesk_followup": followups}

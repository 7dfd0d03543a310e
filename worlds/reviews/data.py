"""Seed data of the reviews world: four repositories, their people, and twelve pull requests each.

``rows(seed, anchor)`` is deterministic. Every repository's pull requests follow
one pattern (so scenarios can name them), with seeded titles, authors,
comments and dates, all before the anchor day:

====  ====================================================================
 #    state
====  ====================================================================
 1    open, approved by a maintainer (ready to merge)
 2    open, approved by a contributor only (not ready)
 3    open, changes requested by a maintainer
 4    open, no reviews
 5    open, approved by a maintainer, labelled ``do-not-merge``
 6    merged (approved by a maintainer)
 7    closed
 8    open, commented by contributors, no reviews
 9    open, approved by a maintainer
 10   open, no reviews
 11   open, no reviews (superseded by #12)
 12   open, no reviews, from a first-time contributor
====  ====================================================================
"""

from __future__ import annotations

import random
from datetime import date, timedelta
from typing import Any

REPOSITORIES = (("atlas", "Maps and geocoding library"), ("beacon", "Service health dashboard"),
                ("cobalt", "Build cache daemon"), ("dune", "Terminal file manager"))
PEOPLE = (("ana", "Ana Lima"), ("bo", "Bo Chen"), ("cy", "Cy Okafor"), ("dee", "Dee Patel"),
          ("eli", "Eli Novak"), ("fay", "Fay Moreau"), ("gus", "Gus Haddad"), ("hana", "Hana Sato"),
          ("ivo", "Ivo Petrov"), ("jun", "Jun Park"), ("kai", "Kai Weber"), ("lea", "Lea Rossi"),
          ("max", "Max Berg"), ("nia", "Nia Obi"))
BOTS = (("review-bot", "Review Bot"), ("triage-bot", "Triage Bot"))
TOPICS = ("retry on timeout", "cache invalidation", "dark mode", "config loader", "CLI flags", "logging",
          "memory leak", "unicode paths", "parallel build", "docs typo", "error messages", "metrics export",
          "token refresh", "schema migration", "rate limits", "test flakiness")
VERBS = ("Fix", "Add", "Refactor", "Speed up", "Document", "Simplify")
COMMENTS = ("Looks reasonable to me.", "Could you rebase on main?", "Is there a test for this?",
            "Nice catch!", "This conflicts with the cache rewrite.", "Works on my machine.")


def rows(seed: int, anchor: date) -> dict[str, list[tuple[Any, ...]]]:
    rng = random.Random(seed)
    users = [(i + 1, login, name, f"{login}@example.test") for i, (login, name) in enumerate(BOTS + PEOPLE)]
    by_login = {u[1]: u[0] for u in users}
    repositories = [(i + 1, name, desc) for i, (name, desc) in enumerate(REPOSITORIES)]
    memberships: list[tuple[Any, ...]] = []
    pulls: list[tuple[Any, ...]] = []
    comments: list[tuple[Any, ...]] = []
    reviews: list[tuple[Any, ...]] = []
    labels: list[tuple[Any, ...]] = []
    humans = [p[0] for p in PEOPLE]

    def stamp(days_ago: int, hour: int) -> str:
        return f"{(anchor - timedelta(days=days_ago)).isoformat()}T{hour:02d}:{rng.randrange(60):02d}:00"

    for repo_id, _, _ in repositories:
        people = rng.sample(humans, 7)
        maintainers, contributors = people[:2], people[2:]
        for login in ("review-bot", *maintainers):
            memberships.append((len(memberships) + 1, repo_id, by_login[login], "maintainer"))
        for login in ("triage-bot", *contributors):
            memberships.append((len(memberships) + 1, repo_id, by_login[login], "contributor"))
        for number in range(1, 13):
            pr_id = len(pulls) + 1
            author = by_login[contributors[(number - 1) % len(contributors)] if number != 12 else contributors[-1]]
            created = stamp(40 - 2 * number, 9)
            state, merged_at, merged_by, closed_at = "open", None, None, None
            title = f"{rng.choice(VERBS)} {rng.choice(TOPICS)}"
            if number == 6:
                state, merged_at, merged_by = "merged", stamp(5, 15), by_login[maintainers[0]]
            if number == 7:
                state, closed_at = "closed", stamp(4, 16)
            if number == 12:
                title = f"{title} (first contribution)"
            pulls.append((pr_id, repo_id, number, title, f"This pull request: {title.lower()}.", author, state,
                          created, merged_at, merged_by, closed_at))

            def review(reviewer: str, verdict: str, body: str, pr_id: int = pr_id) -> None:
                reviews.append((len(reviews) + 1, pr_id, by_login[reviewer], verdict, body, stamp(10, 11)))

            other = [c for c in contributors if by_login[c] != author]
            if number in (1, 5, 6, 9):
                review(maintainers[number % 2], "approved", "LGTM.")
            if number == 2:
                review(other[0], "approved", "Looks good to me.")
            if number == 3:
                review(maintainers[0], "changes_requested", "Please split this into two commits.")
            if number == 5:
                labels.append((len(labels) + 1, pr_id, "do-not-merge"))
            if number in (3, 9):
                labels.append((len(labels) + 1, pr_id, rng.choice(("bug", "enhancement"))))
            if number in (2, 8):
                for commenter in other[:2]:
                    comments.append((len(comments) + 1, pr_id, by_login[commenter], rng.choice(COMMENTS),
                                     stamp(8, 14)))
    return {"users": users, "repositories": repositories, "memberships": memberships, "pull_requests": pulls,
            "comments": comments, "reviews": reviews, "labels": labels, "review_requests": [],
            "notifications": []}

"""The reviews service's operations: what each endpoint reads and writes.

Every function takes ``(store, actor, args, key)``: the caller's login (header
``X-Actor``), the path, query and body arguments merged, and the request's
``Idempotency-Key`` (forwarded to the mail service). Writes notify people by
email through the mail service and record the notification.
"""

from __future__ import annotations

from typing import Any

from store import Refused, Store, clock, labels_of, login_of, member_role, pull, repository, user

STATES = ("open", "closed", "merged")
VERDICTS = {"approve": "approved", "request_changes": "changes_requested", "comment": "commented"}


def _actor(cur: Any, actor: str, repo_id: int) -> tuple[int, str]:
    if not actor:
        raise Refused(401, "send the X-Actor header: the login you act as")
    actor_id, _, _ = user(cur, actor)
    role = member_role(cur, repo_id, actor_id)
    if role is None:
        raise Refused(403, f"{actor!r} is not a member of this repository")
    return actor_id, role


def _notify(store: Store, cur: Any, user_id: int, pr_id: int, kind: str, subject: str, text: str,
            key: str) -> None:
    cur.execute("SELECT email FROM users WHERE id = %s", (user_id,))
    (email,) = cur.fetchone()
    ref = store.send_email(email, subject, text, f"{key}:{kind}:{user_id}")
    cur.execute("INSERT INTO notifications (user_id, pull_request_id, kind, email_ref, created_at) "
                "VALUES (%s, %s, %s, %s, %s)", (user_id, pr_id, kind, ref, clock()))


# -- reads -------------------------------------------------------------------------
def list_repositories(store: Store, actor: str, args: dict[str, Any], key: str) -> Any:
    def go(cur: Any) -> Any:
        cur.execute("SELECT r.name, r.description, (SELECT COUNT(*) FROM pull_requests p WHERE "
                    "p.repository_id = r.id AND p.state = 'open') FROM repositories r ORDER BY r.name")
        return [{"name": n, "description": d, "open_pull_requests": c} for n, d, c in cur.fetchall()]
    return store.run(go)


def list_members(store: Store, actor: str, args: dict[str, Any], key: str) -> Any:
    def go(cur: Any) -> Any:
        repo_id = repository(cur, args["repo"])
        cur.execute("SELECT u.login, u.name, m.role FROM memberships m JOIN users u ON u.id = m.user_id "
                    "WHERE m.repository_id = %s ORDER BY m.role DESC, u.login", (repo_id,))
        return [{"login": lg, "name": n, "role": r} for lg, n, r in cur.fetchall()]
    return store.run(go)


def list_pulls(store: Store, actor: str, args: dict[str, Any], key: str) -> Any:
    state = args.get("state") or "open"
    if state not in (*STATES, "all"):
        raise Refused(400, f"state must be one of open, closed, merged, all; got {state!r}")

    def go(cur: Any) -> Any:
        repo_id = repository(cur, args["repo"])
        cur.execute("SELECT p.id, p.number, p.title, u.login, p.state FROM pull_requests p JOIN users u "
                    "ON u.id = p.author_id WHERE p.repository_id = %s AND (%s = 'all' OR p.state = %s) "
                    "ORDER BY p.number", (repo_id, state, state))
        return [{"number": num, "title": t, "author": a, "state": s, "labels": labels_of(cur, pid)}
                for pid, num, t, a, s in cur.fetchall()]
    return store.run(go)


def get_pull(store: Store, actor: str, args: dict[str, Any], key: str) -> Any:
    def go(cur: Any) -> Any:
        pr_id, _, _, _ = pull(cur, args["repo"], int(args["number"]))
        cur.execute("SELECT number, title, body, author_id, state, created_at, merged_at, merged_by, closed_at "
                    "FROM pull_requests WHERE id = %s", (pr_id,))
        num, title, body, author, state, created, merged_at, merged_by, closed_at = cur.fetchone()
        cur.execute("SELECT u.login, r.verdict, r.body FROM reviews r JOIN users u ON u.id = r.reviewer_id "
                    "WHERE r.pull_request_id = %s ORDER BY r.id", (pr_id,))
        reviews = [{"reviewer": lg, "verdict": v, "body": b} for lg, v, b in cur.fetchall()]
        cur.execute("SELECT DISTINCT u.login FROM review_requests q JOIN users u ON u.id = q.reviewer_id "
                    "WHERE q.pull_request_id = %s ORDER BY u.login", (pr_id,))
        requested = [r[0] for r in cur.fetchall()]
        cur.execute("SELECT COUNT(*) FROM comments WHERE pull_request_id = %s", (pr_id,))
        (comments,) = cur.fetchone()
        return {"number": num, "title": title, "body": body, "author": login_of(cur, author), "state": state,
                "created_at": created, "merged_at": merged_at, "merged_by": login_of(cur, merged_by),
                "closed_at": closed_at, "labels": labels_of(cur, pr_id), "reviews": reviews,
                "requested_reviewers": requested, "comments": comments}
    return store.run(go)


def list_comments(store: Store, actor: str, args: dict[str, Any], key: str) -> Any:
    def go(cur: Any) -> Any:
        pr_id, _, _, _ = pull(cur, args["repo"], int(args["number"]))
        cur.execute("SELECT c.id, u.login, c.body, c.created_at FROM comments c JOIN users u "
                    "ON u.id = c.author_id WHERE c.pull_request_id = %s ORDER BY c.id", (pr_id,))
        return [{"id": i, "author": a, "body": b, "created_at": t} for i, a, b, t in cur.fetchall()]
    return store.run(go)


# -- writes ------------------------------------------------------------------------
def _text(args: dict[str, Any], name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str) or not value.strip():
        raise Refused(400, f"{name!r} must be non-empty text")
    return value.strip()


def post_comment(store: Store, actor: str, args: dict[str, Any], key: str) -> Any:
    body = _text(args, "body")

    def go(cur: Any) -> Any:
        pr_id, repo_id, _, author = pull(cur, args["repo"], int(args["number"]))
        actor_id, _ = _actor(cur, actor, repo_id)
        now = clock()
        cur.execute("INSERT INTO comments (pull_request_id, author_id, body, created_at) "
                    "VALUES (%s, %s, %s, %s) RETURNING id", (pr_id, actor_id, body, now))
        (comment_id,) = cur.fetchone()
        if author != actor_id:
            _notify(store, cur, author, pr_id, "comment", f"New comment on #{args['number']}",
                    f"{actor} commented: {body}", key)
        return {"id": comment_id, "created_at": now}
    return store.run(go)


def submit_review(store: Store, actor: str, args: dict[str, Any], key: str) -> Any:
    verdict = VERDICTS.get(str(args.get("verdict")))
    if verdict is None:
        raise Refused(400, f"verdict must be one of {', '.join(VERDICTS)}; got {args.get('verdict')!r}")
    body = str(args.get("body") or "")

    def go(cur: Any) -> Any:
        pr_id, repo_id, state, author = pull(cur, args["repo"], int(args["number"]))
        actor_id, _ = _actor(cur, actor, repo_id)
        if state != "open":
            raise Refused(409, f"pull request #{args['number']} is {state}; only open pull requests are reviewed")
        if author == actor_id:
            raise Refused(409, "authors cannot review their own pull request")
        cur.execute("INSERT INTO reviews (pull_request_id, reviewer_id, verdict, body, created_at) "
                    "VALUES (%s, %s, %s, %s, %s) RETURNING id", (pr_id, actor_id, verdict, body, clock()))
        (review_id,) = cur.fetchone()
        _notify(store, cur, author, pr_id, "review", f"Review on #{args['number']}: {verdict}",
                f"{actor} reviewed: {verdict}. {body}".strip(), key)
        return {"id": review_id, "verdict": verdict}
    return store.run(go)


def merge(store: Store, actor: str, args: dict[str, Any], key: str) -> Any:
    def go(cur: Any) -> Any:
        pr_id, repo_id, state, author = pull(cur, args["repo"], int(args["number"]))
        actor_id, role = _actor(cur, actor, repo_id)
        if role != "maintainer":
            raise Refused(403, "only maintainers merge pull requests")
        if state != "open":
            raise Refused(409, f"pull request #{args['number']} is {state}; only open pull requests merge")
        now = clock()
        cur.execute("UPDATE pull_requests SET state = 'merged', merged_at = %s, merged_by = %s WHERE id = %s",
                    (now, actor_id, pr_id))
        _notify(store, cur, author, pr_id, "merged", f"#{args['number']} was merged",
                f"{actor} merged your pull request #{args['number']}.", key)
        return {"number": int(args["number"]), "state": "merged", "merged_at": now}
    return store.run(go)


def close(store: Store, actor: str, args: dict[str, Any], key: str) -> Any:
    def go(cur: Any) -> Any:
        pr_id, repo_id, state, author = pull(cur, args["repo"], int(args["number"]))
        _, role = _actor(cur, actor, repo_id)
        if role != "maintainer":
            raise Refused(403, "only maintainers close pull requests")
        if state != "open":
            raise Refused(409, f"pull request #{args['number']} is {state}; only open pull requests close")
        now = clock()
        cur.execute("UPDATE pull_requests SET state = 'closed', closed_at = %s WHERE id = %s", (now, pr_id))
        _notify(store, cur, author, pr_id, "closed", f"#{args['number']} was closed",
                f"{actor} closed your pull request #{args['number']}.", key)
        return {"number": int(args["number"]), "state": "closed", "closed_at": now}
    return store.run(go)


def reopen(store: Store, actor: str, args: dict[str, Any], key: str) -> Any:
    def go(cur: Any) -> Any:
        pr_id, repo_id, state, _ = pull(cur, args["repo"], int(args["number"]))
        _, role = _actor(cur, actor, repo_id)
        if role != "maintainer":
            raise Refused(403, "only maintainers reopen pull requests")
        if state != "closed":
            raise Refused(409, f"pull request #{args['number']} is {state}; only closed pull requests reopen")
        cur.execute("UPDATE pull_requests SET state = 'open', closed_at = NULL WHERE id = %s", (pr_id,))
        return {"number": int(args["number"]), "state": "open"}
    return store.run(go)


def add_label(store: Store, actor: str, args: dict[str, Any], key: str) -> Any:
    label = _text(args, "label")

    def go(cur: Any) -> Any:
        pr_id, repo_id, _, _ = pull(cur, args["repo"], int(args["number"]))
        _actor(cur, actor, repo_id)
        if label in labels_of(cur, pr_id):
            raise Refused(409, f"pull request #{args['number']} already has the label {label!r}")
        cur.execute("INSERT INTO labels (pull_request_id, name) VALUES (%s, %s)", (pr_id, label))
        return {"number": int(args["number"]), "labels": labels_of(cur, pr_id)}
    return store.run(go)


def remove_label(store: Store, actor: str, args: dict[str, Any], key: str) -> Any:
    def go(cur: Any) -> Any:
        pr_id, repo_id, _, _ = pull(cur, args["repo"], int(args["number"]))
        _actor(cur, actor, repo_id)
        cur.execute("DELETE FROM labels WHERE pull_request_id = %s AND name = %s RETURNING id",
                    (pr_id, args["label"]))
        if cur.fetchone() is None:
            raise Refused(404, f"pull request #{args['number']} has no label {args['label']!r}")
        return {"number": int(args["number"]), "labels": labels_of(cur, pr_id)}
    return store.run(go)


def request_review(store: Store, actor: str, args: dict[str, Any], key: str) -> Any:
    def go(cur: Any) -> Any:
        pr_id, repo_id, state, author = pull(cur, args["repo"], int(args["number"]))
        actor_id, _ = _actor(cur, actor, repo_id)
        if state != "open":
            raise Refused(409, f"pull request #{args['number']} is {state}; reviews are requested on open ones")
        reviewer_id, _, _ = user(cur, str(args["reviewer"]))
        if member_role(cur, repo_id, reviewer_id) is None:
            raise Refused(409, f"{args['reviewer']!r} is not a member of {args['repo']!r}")
        cur.execute("INSERT INTO review_requests (pull_request_id, reviewer_id, requested_by, created_at) "
                    "VALUES (%s, %s, %s, %s) RETURNING id", (pr_id, reviewer_id, actor_id, clock()))
        (request_id,) = cur.fetchone()
        _notify(store, cur, reviewer_id, pr_id, "review_requested", f"Review requested on #{args['number']}",
                f"{actor} asked you to review #{args['number']} in {args['repo']}.", key)
        return {"id": request_id, "reviewer": args["reviewer"], "number": int(args["number"])}
    return store.run(go)


ROUTES: list[tuple[str, str, Any]] = [
    ("GET", "/repos", list_repositories),
    ("GET", "/repos/{repo}/members", list_members),
    ("GET", "/repos/{repo}/pulls", list_pulls),
    ("GET", "/repos/{repo}/pulls/{number}", get_pull),
    ("GET", "/repos/{repo}/pulls/{number}/comments", list_comments),
    ("POST", "/repos/{repo}/pulls/{number}/comments", post_comment),
    ("POST", "/repos/{repo}/pulls/{number}/reviews", submit_review),
    ("POST", "/repos/{repo}/pulls/{number}/merge", merge),
    ("POST", "/repos/{repo}/pulls/{number}/close", close),
    ("POST", "/repos/{repo}/pulls/{number}/reopen", reopen),
    ("POST", "/repos/{repo}/pulls/{number}/labels", add_label),
    ("DELETE", "/repos/{repo}/pulls/{number}/labels/{label}", remove_label),
    ("POST", "/repos/{repo}/pulls/{number}/requested_reviewers", request_review),
]

"""The world page of a published version, in HTML and Markdown.

Sections, in order: the summary, **Validation** (one row per scenario: the five
checks and whether the scenario is in use, kept out or withdrawn), **Kept out**
(with the reasons), **Withdrawn** (reason, the world's date, the recheck's own
time), **Reset and isolation** (the measured facts) and **Content** (the hash of
each part the ``wv_`` id covers). Both renderers read the same :func:`page_rows`.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from ..agents import DEFAULT_INSTRUCTIONS, prompt_size
from ..worlds import load_world
from ._crashes import tool_crash_counts
from ._live import describe_attempt, latest_by_scenario, load_attempts
from ._manifest import CHECK_LABELS, Fact, Manifest

SHORT = {"null_fails": "Null fails", "reference_passes": "Reference passes", "wrong_fail": "Wrong fail",
         "replay_same": "Replay same", "facts_reachable": "Facts reachable"}
"""Column headings of the validation table (the full wording is in the legend)."""


@dataclass(frozen=True)
class Row:
    """One scenario's line of the validation table."""

    scenario: str
    """The scenario id."""
    split: str
    """train / dev / holdout."""
    category: str
    """What kind of work."""
    marks: tuple[tuple[bool, str], ...]
    """(passed, detail) per check, in :data:`CHECK_LABELS` order."""
    status: str
    """``in use``, ``kept out`` or ``withdrawn``."""
    live: str | None = None
    """The latest live attempt (``--live-agent``): outcome and the facts not found; None: none recorded."""


def page_rows(manifest: Manifest) -> list[Row]:
    withdrawn = manifest.withdrawn_ids
    live = latest_by_scenario(load_attempts(manifest.path)) if manifest.path is not None else {}
    rows = []
    for v in manifest.version.validation:
        status = "kept out" if not v.fair else "withdrawn" if v.scenario in withdrawn else "in use"
        rows.append(Row(v.scenario, v.split, v.category,
                        tuple((f.passed, f.detail) for f in v.findings.values()), status,
                        describe_attempt(live[v.scenario]) if v.scenario in live else None))
    return rows


def _holds(fact: Fact) -> str:
    return "not applicable" if fact.holds is None else "yes" if fact.holds else "NO"


def summary_line(manifest: Manifest) -> str:
    v = manifest.version
    return (f"{len(v.validation)} scenarios validated: {len(v.scenarios)} in the version, "
            f"{len(v.kept_out)} kept out, {len(manifest.withdrawn)} withdrawn since; "
            f"{len(manifest.in_use)} in use")


def prompt_lines(manifest: Manifest) -> list[str]:
    """What a model agent is given here, per role, for the largest scenario: the ``openai`` agent's system
    message (default instructions), the role's tool schemas, and the estimated prompt tokens of the first
    request (:func:`~rehearsal_env.agents.prompt_tokens`, erring high; compare with the model's context).
    Empty when the world is not installed here."""
    try:
        world = load_world(manifest.version.world)
    except (KeyError, ValueError, OSError):
        return []
    largest: dict[str, dict[str, int]] = {}
    for v in manifest.version.validation:
        try:
            scenario = world.scenario(v.scenario)
        except KeyError:
            continue
        size = prompt_size(world, scenario, DEFAULT_INSTRUCTIONS)
        if size["tokens"] > largest.get(scenario.role, {}).get("tokens", -1):
            largest[scenario.role] = size
    return [f"Prompt for a model agent, role {role}: system message {s['system_chars']:,} characters, "
            f"{s['tools']} tool schemas {s['tools_chars']:,} characters; about {s['tokens']:,} tokens with the "
            "opening message (largest scenario; estimated, erring high: a model's context must hold this plus "
            "the conversation)" for role, s in sorted(largest.items())]


def render_markdown(manifest: Manifest) -> str:
    """The world page as Markdown."""
    v = manifest.version
    out = [f"# World {v.world}: version `{v.id}`", "",
           f"Clock frozen at **{v.clock}** (data anchor {v.data_anchor}); validated on {v.backend}, "
           f"rules v{v.validator}.", "", summary_line(manifest) + ".", "",
           *[line for text in prompt_lines(manifest) for line in (text + ".", "")], "## Validation", ""]
    rows = page_rows(manifest)
    live = any(r.live for r in rows)
    out.append("| Scenario | Split | Category | " + " | ".join(SHORT.values()) + " | Status |"
               + (" Live attempt |" if live else ""))
    out.append("|---|---|---|" + "---|" * len(SHORT) + "---|" + ("---|" if live else ""))
    for r in rows:
        marks = " | ".join("pass" if ok else "**FAIL**" for ok, _ in r.marks)
        out.append(f"| {r.scenario} | {r.split} | {r.category} | {marks} | {r.status} |"
                   + (f" {_md(r.live or '-')} |" if live else ""))
    out += ["", *[f"- **{SHORT[k]}**: {label}." for k, label in CHECK_LABELS.items()]]
    if live:
        out.append(f"- **Live attempt**: {LIVE_LEGEND}")
    out += ["", "## Kept out", ""]
    out += [f"- **{k.scenario}**: " + "; ".join(_md(r) for r in k.reasons) for k in v.kept_out] or ["None."]
    out += ["", "## Withdrawn", ""]
    out += [f"- **{w.scenario}** ({w.by}), world date {w.world_clock[:10]}, recorded at {w.recorded_at} "
            f"(wall clock): {_md(w.reason)}" for w in manifest.withdrawn] or ["None."]
    out += ["", "## Tool crashes", "", CRASH_LEGEND, ""]
    crashes = tool_crash_counts(manifest.path)
    out += ["| Tool | Crashes | Runs |", "|---|---|---|", *[f"| {tool} | {n} | {runs} |" for tool, (n, runs)
                                                        in crashes.items()]] if crashes else ["None recorded."]
    out += ["", "## Reset and isolation", "", "| Fact | Holds | What was measured |", "|---|---|---|"]
    out += [f"| {f.name} | {_holds(f)} | {_md(f.detail)} |" for f in v.isolation]
    out += ["", "## Content", "", "| Part | SHA-256 |", "|---|---|"]
    out += [f"| {part} | `{digest[:16]}` |" for part, digest in sorted(v.part_hashes.items())]
    return "\n".join(out) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;color:#1d2433;margin:32px;
max-width:1180px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d9dee8;
padding-bottom:4px}
code{font:12px ui-monospace,Menlo,Consolas,monospace;background:#f2f4f8;padding:1px 4px;border-radius:3px}
.sub{color:#55607a;margin:0 0 14px}.summary{font-size:15px;margin:10px 0}
table{border-collapse:collapse;width:100%;margin:6px 0}th,td{border:1px solid #d9dee8;padding:5px 8px;
text-align:left;vertical-align:top}th{background:#f2f4f8;font-weight:600}
td.ok{color:#17693a;text-align:center}td.bad{color:#fff;background:#b42318;text-align:center;font-weight:600}
td.na{color:#55607a;text-align:center}
.status-in{color:#17693a}.status-out{color:#b42318;font-weight:600}.status-withdrawn{color:#9a5b00;
font-weight:600}
ul.reasons li{margin:4px 0}td.nowrap{white-space:nowrap}.legend{color:#55607a;font-size:13px}
"""


def _td(text: str, cls: str | None = None, title: str | None = None, code: bool = False) -> str:
    attrs = (f" class={cls}" if cls else "") + (f' title="{escape(title)}"' if title else "")
    body = f"<code>{escape(text)}</code>" if code else escape(text)
    return f"<td{attrs}>{body}</td>"


def _table(headers: list[str], rows: list[str]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    return f"<table><tr>{head}</tr>" + "".join(f"<tr>{r}</tr>" for r in rows) + "</table>"


LIVE_LEGEND = ("the latest attempt by a live agent (--live-agent): its outcome, and the keys the reference uses "
               "that it never saw; evidence for people, never a reason to withdraw (fairness decides that)")

CRASH_LEGEND = ("Exceptions the world's tools raised while handling agents' calls in runs of this version: "
                "defects of the world (each was returned to the agent as an error and its episode went on).")

STATUS_CLASS = {"in use": "status-in", "kept out": "status-out", "withdrawn": "status-withdrawn"}


def render_html(manifest: Manifest) -> str:
    """The world page as one self-contained HTML document."""
    v = manifest.version
    h = [f"<!doctype html><html lang=en><head><meta charset=utf-8><title>World {escape(v.world)} "
         f"{escape(v.id)}</title><style>{CSS}</style></head><body>",
         f"<h1>World {escape(v.world)}: version <code>{escape(v.id)}</code></h1>",
         f"<p class=sub>Clock frozen at <b>{escape(v.clock)}</b> (data anchor {escape(v.data_anchor)}); "
         f"validated on {escape(v.backend)}, rules v{v.validator}.</p>",
         f"<p class=summary>{escape(summary_line(manifest))}.</p>",
         *[f"<p class=sub>{escape(text)}.</p>" for text in prompt_lines(manifest)], "<h2>Validation</h2>"]
    page = page_rows(manifest)
    live = any(r.live for r in page)
    rows = [_td(r.scenario, code=True) + _td(r.split) + _td(r.category)
            + "".join(_td("✓" if ok else "✗", "ok" if ok else "bad", detail) for ok, detail in r.marks)
            + _td(r.status, STATUS_CLASS[r.status]) + (_td(r.live or "-") if live else "") for r in page]
    h.append(_table(["Scenario", "Split", "Category", *SHORT.values(), "Status", *(["Live attempt"] if live else [])],
                    rows))
    legend = " · ".join(f"<b>{escape(SHORT[k])}</b>: {escape(label)}" for k, label in CHECK_LABELS.items())
    if live:
        legend += f" · <b>Live attempt</b>: {escape(LIVE_LEGEND)}"
    h.append(f"<p class=legend>{legend}. Hover a mark for what was measured.</p><h2>Kept out</h2>")
    if v.kept_out:
        h.append("<ul class=reasons>" + "".join(
            f"<li><code>{escape(k.scenario)}</code>: {escape('; '.join(k.reasons))}</li>" for k in v.kept_out)
            + "</ul>")
    else:
        h.append("<p>None: every scenario passed every check.</p>")
    h.append("<h2>Withdrawn</h2>")
    withdrawn = [_td(w.scenario, code=True) + _td(w.reason) + _td(w.world_clock[:10], "nowrap")
                 + _td(w.recorded_at, "nowrap") + _td(w.by) for w in manifest.withdrawn]
    h.append(_table(["Scenario", "Reason", "World date", "Recorded at (wall clock)", "By"], withdrawn)
             if withdrawn else "<p>None.</p>")
    h.append(f"<h2>Tool crashes</h2><p class=legend>{escape(CRASH_LEGEND)}</p>")
    crashes = tool_crash_counts(manifest.path)
    h.append(_table(["Tool", "Crashes", "Runs"], [_td(tool, code=True) + _td(str(n), "bad") + _td(str(runs))
                                                  for tool, (n, runs) in crashes.items()])
             if crashes else "<p>None recorded.</p>")
    h.append("<h2>Reset and isolation</h2>")
    facts = [_td(f.name) + _td(_holds(f), "na" if f.holds is None else "ok" if f.holds else "bad")
             + _td(f.detail) for f in v.isolation]
    h.append(_table(["Fact", "Holds", "What was measured"], facts))
    h.append("<h2>Content</h2>")
    parts = [_td(part) + _td(sha, code=True) for part, sha in sorted(v.part_hashes.items())]
    h.append(_table(["Part", "SHA-256"], parts))
    h.append("</body></html>")
    return "\n".join(h) + "\n"

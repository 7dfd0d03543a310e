"""The customer's own voice: tau2's user-simulator brief rendered as what the customer says, in the first person.

tau2 briefs its simulated user in the second person ("You received your order #W2378156 and wish to
exchange ... You are Yusuf Rossi in zip code 19122. You do not remember your email address.").
An agent must never read that brief: it includes what the user does not know and how the simulator
should behave. The scripted customer of an imported scenario says instead:

- **opening** (:func:`opening`): the reason for the call, in the first person, less the sentences that
  direct the simulator (conditions, "mention ...", "halfway through ...");
- **answers** (:func:`answers`): to any question, what the user knows and does not know
  (``known_info``, ``unknown_info``) and the statements of ``task_instructions``, in the first person;
  the simulator's directives are never said.

The rendering is checked against the brief (:func:`check`): no second-person word is left, and every
number, id and name of the brief's spoken sentences is still there; a brief that cannot be rendered so
fails the import, naming the task.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_DIRECTIVE = re.compile(
    r"^(if|when|whenever|unless|once|after|before|halfway|don'?t|do not|never|try|first|then|only|make sure|"
    r"mention|say|ask|tell|insist|be |keep|if the|in case|at the end|you will never|you are willing|you want to "
    r"be|this is|it is ok|it may be|remember|note|act|pretend|prefer|always|however)\b",
    re.IGNORECASE)
"""How a sentence that directs the simulator (rather than states a fact or a wish) starts."""
_SUBJECT_BEFORE = re.compile(
    r"(^|[.!?;:,(\"]\s*|\b(and|but|or|that|if|because|so|when|as|since|unless|then|where|while|until|though|"
    r"although|once|whether|what|which|how|whom|why)\s+)$", re.IGNORECASE)
_VERB_AFTER = re.compile(
    r"^\s+(want|wants|need|needs|have|has|had|do|did|don't|didn't|think|wonder|can|cannot|can't|could|will|won't|"
    r"would|should|may|might|must|know|remember|live|recently|just|also|only|still|already|never|always|prefer|"
    r"like|decide|contact|realize|believe|hope|plan|feel|get|go|see|try|wish|own|am|really|then|now|use|order|"
    r"bought|paid|got|made|sent|gave|spent|took|found|saw|told|said|put|\w+ed)\b",
    re.IGNORECASE)
"""A word after "you" that makes it the subject ("you want" -> "I want"; "tell you the" -> "tell me the")."""
_RULES: tuple[tuple[str, str], ...] = (
    (r"\byou are\b", "I am"), (r"\byou're\b", "I'm"), (r"\byou were\b", "I was"), (r"\byou've\b", "I've"),
    (r"\byou'd\b", "I'd"), (r"\byou'll\b", "I'll"), (r"\byourself\b", "myself"), (r"\byours\b", "mine"),
    (r"\byour\b", "my"),
)
SECOND_PERSON = re.compile(r"\b(you|your|yours|yourself|you're|you've|you'd|you'll)\b", re.IGNORECASE)
"""A second-person word (what a rendering may not hold)."""
_FACT = re.compile(r"#?\b[A-Za-z]*\d[\w-]*\b|\b[\w.+-]+@[\w-]+\.[\w.]+\b|\b[A-Z][a-z]+\b")
"""Numbers, ids, emails and capitalised words (names) that a rendering must keep (a sentence's first word
and the second person aside)."""


def _case(template: str, original: str) -> str:
    return template[0].upper() + template[1:] if original[0].isupper() else template


def _replacer(word: str) -> Callable[[re.Match[str]], str]:
    return lambda m: word if word.startswith("I") else _case(word, m.group())


def first_person(text: str) -> str:
    """``text`` with its second person turned into the first ("you are" -> "I am", "your" -> "my",
    "told you" -> "told me", "you want" -> "I want")."""
    out = text
    for pattern, word in _RULES:
        out = re.sub(pattern, _replacer(word), out, flags=re.IGNORECASE)

    def you(m: re.Match[str]) -> str:
        before, after = out[:m.start()], out[m.end():]
        subject = not before.strip() or _SUBJECT_BEFORE.search(before) or _VERB_AFTER.match(after)
        return "I" if subject else "me"

    return re.sub(r"\byou\b", you, out, flags=re.IGNORECASE)


def sentences(text: str | None) -> list[str]:
    """The sentences of ``text`` (empty ones and lone punctuation dropped)."""
    return [s.strip() for s in _SENTENCE.split(text or "") if s.strip().strip(".") and len(s.strip()) > 1]


def spoken(text: str | None) -> list[str]:
    """The sentences of ``text`` a customer would say (not the simulator's directives)."""
    return [s for s in sentences(text) if not _DIRECTIVE.match(s)]


def render(parts: Iterable[str | None]) -> tuple[str, str]:
    """(The source sentences a customer would say, joined; their first-person rendering.)"""
    said = [s for part in parts for s in spoken(part)]
    return " ".join(said), " ".join(_sentence_end(first_person(s)) for s in said)


def _sentence_end(text: str) -> str:
    return text if text[-1] in ".!?" else text + "."


def check(task: str, source: str, rendered: str) -> None:
    """Raise when ``rendered`` still speaks in the second person or lost a number, id or name of ``source``."""
    left = SECOND_PERSON.search(rendered)
    if left:
        raise ValueError(f"tau2 task {task}: the customer's words still hold {left.group()!r} after rendering "
                         f"the brief in the first person: {rendered[:200]!r}")
    facts = {f for sentence in sentences(source) for f in _FACT.findall(sentence.split(" ", 1)[-1])}
    lost = sorted(f for f in facts if not SECOND_PERSON.fullmatch(f) and f not in rendered)
    if lost:
        raise ValueError(f"tau2 task {task}: rendering the brief in the first person lost {lost}: {rendered[:200]!r}")


def opening(task: str, reason: str | None, fallback: str = "Hi, I need help with an order.") -> str:
    """What the customer says first: the reason for the call in the first person (checked)."""
    source, text = render([reason])
    check(task, source, text)
    return text or fallback


def answers(task: str, known: str | None, unknown: str | None, instructions: str | None) -> str:
    """What the customer says when asked: what they know and do not know, and the statements of the task
    instructions, in the first person (checked)."""
    source, text = render([known, unknown, instructions])
    check(task, source, text)
    return text or "That is all I know."

"""The episode record: everything one episode was, as one row with nested lists.

Records are what runs store (Parquet, :mod:`._parquet`), what ``measure.py``
reads and what rescoring starts from. The Arrow schema is derived from these
dataclasses (:mod:`._schema`): a scalar field is a column, a tuple of a
dataclass is a ``list<struct>`` column, a dataclass is a ``struct`` column, and
every field's docstring travels as the Arrow field's ``doc`` metadata.

Values whose type varies (a check's wanted and held value, its parameters, a
database row) are JSON text, so that ``1``, ``1.0``, ``"1"`` and ``null`` stay
distinct and read back exactly.

Version history (:data:`RECORD_VERSION`):
    1. Flat row; turns, checks and service requests as JSON strings.
    2. Nested ``list<struct>`` columns (``trace``, ``checks``, ``service_requests``,
       ``changes``, ``reward_components``), the provenance struct, world version,
       agent version, category, stress, customer contacts, the check's SQL.
    3. ``not_scored_cause``: which part failed when an episode is not scored (``world``, ``database``,
       ``provider``, ``sandbox``, ``worker``; never the agent). Version 2 parts still read (the cause
       reads as null there; their ``record_version`` stays 2).
    4. ``tool_crashes``: every exception a world's tool raised while handling the agent's calls (returned
       to the agent as ``status: error``; the episode went on), with its traceback. Version 2 and 3 parts
       still read (the newer fields read as null).
    5. ``input_tokens`` and ``output_tokens``: ``tokens`` split into the prompt and completion tokens the
       agent reported, so a profile with different input and output prices is costed. Versions 2 to 4 still
       read (the split reads as null: such episodes are costed only where the two prices are equal).
    6. ``turn_rewards``: under a profile that pays a reward at every turn (``rl_turns``), each step's reward,
       in step order (they sum to ``reward``); null under other profiles and in records of version 5 and older.
    7. ``model_held_ms`` and ``model_drained_ms``: the time a model agent's calls waited on a shared server
       because of cut-off replies (another episode's being drained, or its own), never part of
       ``model_latency_ms``. Versions 2 to 6 still read (the two read as null).
    8. ``attempt``, ``retry_of`` and ``retry_replayed``: a not-scored episode played again by the runner is a new
       record of the same scenario, repeat and seed, linked to the attempt it retries (which attempt counts where:
       :mod:`._attempts`). Versions 2 to 7 still read (the three read as null: no retries).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..provenance import Provenance

RECORD_VERSION = 8
"""Version of the record schema; readers refuse other versions with a message that says what to do."""
ROOT_EPISODE = "root"
"""What :func:`episode_kind` calls an episode that began at ``reset``: the only kind that is evidence."""


def episode_kind(parent_episode: str | None, parent_kind: str | None) -> str:
    """What an episode is, from its record's lineage fields: :data:`ROOT_EPISODE` when it began at ``reset``
    (no parent); ``fork`` or ``restore`` when it parted from a parent that way; ``unknown parent kind`` for a
    record that names a parent in any other way.

    The one rule of what counts: readiness, ``measure.py``, compare and improve count root episodes only and
    report the others apart. A fork or restore is a training and search tool (its actions after the cut may be
    anyone's, its state another episode's), never more evidence about the agent."""
    if parent_episode is None and parent_kind is None:
        return ROOT_EPISODE
    return parent_kind if parent_kind in ("fork", "restore") else "unknown parent kind"


@dataclass(frozen=True)
class Turn:
    """One step of the episode."""

    turn: int
    """1-based turn number."""
    action: str
    """The action text exactly as the agent sent it (a JSON tool call, or whatever arrived)."""
    tool: str | None
    """The tool called; null when the action was malformed."""
    status: str
    """``ok``, ``error``, ``unknown`` (outcome unknown after a fault) or ``rejected``."""
    observation: str
    """The observation returned to the agent (JSON text)."""
    fault: str | None
    """The fault or event injected on this call (``refuse``, ``unknown_outcome``, ``stress_refusal``,
    ``held``); null when none."""
    rejected: bool
    """Whether the action was not carried out (malformed, unknown tool, bad arguments, outside the role)."""
    latency_ms: float
    """Wall time to execute the step, in milliseconds (diagnostic; never part of an observation)."""
    rejected_kind: str | None = None
    """Why a model agent's attempt was rejected (null: not rejected, or not a model agent): ``cut_off_length``
    (the provider ended the reply at max_tokens), ``cut_off_tokens`` / ``cut_off_time`` (the agent cut off a
    reply running past the profile's max_tokens / max_call_s), ``malformed_json`` (call arguments not JSON),
    ``unknown_tool``, ``empty_reply`` (no text, no call), ``invalid_action`` (the env refused the call: the
    observation says why)."""


@dataclass(frozen=True)
class ToolCrashRecord:
    """One exception a world's tool raised while handling an agent's call: the world's defect, not the
    agent's, returned to the agent as an error while the episode went on."""

    turn: int
    """The turn of the call (see ``trace``)."""
    tool: str
    """The tool that raised."""
    error: str
    """The exception's type and message, short (what the agent was shown)."""
    traceback: str
    """The full Python traceback (its innermost frames kept when longer than 16,000 characters)."""


@dataclass(frozen=True)
class CheckRecord:
    """One check's question and what the database answered at the end of the episode."""

    name: str
    """What the check asserts, in words."""
    kind: str
    """``goal`` (the request was done) or ``hard_rule`` (something that must never happen)."""
    sql: str | None
    """The check's single read-only SELECT (null if the scenario no longer names this check)."""
    params: str | None
    """JSON list of the values bound to the query's ``?`` placeholders (null with ``sql``)."""
    op: str
    """How the held value is compared with the wanted one: eq ne gt ge lt le."""
    want: str
    """JSON of the wanted value."""
    held: str
    """JSON of the value the database held (``null`` when the check errored)."""
    passed: bool
    """Whether ``held <op> want``; false when the check errored."""
    error: str | None
    """Why the check could not be evaluated; null when it was."""


@dataclass(frozen=True)
class ServiceRequest:
    """One request the application sent to an emulated outside service (payments, email)."""

    service: str
    """The service, e.g. ``payments`` or ``email``."""
    operation: str
    """The operation, e.g. ``refund``."""
    payload: str
    """The request body as canonical JSON text."""
    idempotency_key: str
    """The key it was sent under (a retry of the same operation reuses it)."""
    requested_at: str
    """The world's clock when it was sent (ISO-8601)."""


@dataclass(frozen=True)
class RowChange:
    """One row the episode inserted, updated or deleted, against the world's snapshot."""

    table: str
    """The table the row belongs to."""
    change: str
    """``inserted``, ``updated`` or ``deleted``."""
    key: str
    """JSON of the row's primary key."""
    row: str
    """JSON object of the row, column by column: the new values for ``inserted`` and ``updated``,
    the snapshot's values for ``deleted``. Snapshot plus changes rebuild the end state."""


@dataclass(frozen=True)
class RewardComponent:
    """One profile-independent ingredient of the reward, as stored for rescoring."""

    name: str
    """The component's name (e.g. ``correctness``, ``efficiency``)."""
    value: float | None
    """Its value in [0, 1]; null when it was not measured (e.g. efficiency without reported tokens)."""
    note: str | None
    """Why it has that value, for people reading a result (null when none was given)."""


@dataclass(frozen=True)
class EpisodeRecord:
    """One episode of a run."""

    record_version: int
    """The schema version this record was written with (:data:`RECORD_VERSION`)."""
    run_id: str
    """The run this episode belongs to."""
    world: str
    """The world's registered name."""
    world_version: str
    """The world version id (``wv_...``) the episode ran on."""
    scenario: str
    """The scenario id."""
    split: str
    """``train``, ``dev`` or ``holdout``."""
    category: str
    """What kind of work the scenario is (refund, cancellation, question, ...)."""
    agent: str
    """The agent's name (``reference``, ``null``, ``wrong:...`` or a user agent's label)."""
    agent_version: str
    """The agent's version (a profile version or checkpoint label; ``builtin-<package version>`` for
    the built-in agents; ``unversioned`` when none was given)."""
    repeat: int
    """Which repeat of this scenario (0-based)."""
    seed: int
    """The seed passed to ``reset``."""
    backend: str
    """The database backend: ``sqlite`` or ``postgres``."""
    stress: bool
    """Whether the stress layer was on."""
    outcome: str
    """``verified``, ``not_achieved``, ``rule_violated`` or ``not_scored``."""
    ending: str
    """How the episode stopped: ``done``, ``gave_up``, ``turn_limit`` or ``error``."""
    outcome_reward: float | None
    """The outcome reward: 1, 0, -1; null when not scored."""
    reward: float | None
    """The reward under the run's profile (``provenance.reward_profile``), computed from ``reward_components``;
    null when not scored, or when the profile measured none of its weighted components."""
    reason: str | None
    """Why the episode was not scored; null when it was."""
    not_scored_cause: str | None
    """The part whose failure made the episode not scored: ``world`` (a check that cannot be evaluated on the
    untouched snapshot, or the world's customer script; a tool that raises on an agent's call is a tool
    crash instead, see ``tool_crashes``), ``database``, ``provider`` (the model provider, after its
    retries), ``sandbox`` or ``worker`` (the worker process died on every try); null when scored. Never the
    agent: whatever an agent sends is validated on its side and a malformed action is a rejected attempt."""
    false_completion: bool
    """The agent said it was done while a goal check failed."""
    duplicate_effects: int
    """Requests to an outside service that repeated an earlier identical request."""
    recovered: bool
    """A fault happened and the episode still verified, with no hard rule broken and no duplicate."""
    unnecessary_interruptions: int
    """Customer contacts beyond what the scenario allows."""
    rejected_attempts: int
    """Actions not carried out (malformed, unknown tool, invalid arguments, outside the role)."""
    faults_injected: int
    """Scenario faults injected (refusals and unknown outcomes)."""
    stress_events: int
    """Stress-layer refusals."""
    customer_contacts: int
    """``ask_customer`` calls made."""
    turns: int
    """Steps taken (rejected attempts included); ``trace`` has one entry per step."""
    tool_calls: int
    """Tool calls carried out or attempted against the application."""
    tokens: int | None
    """Tokens the agent reported with its actions; null when it reported none (external mode)."""
    reward_components: tuple[RewardComponent, ...]
    """The reward's profile-independent components; rescoring recombines them under any profile."""
    checks: tuple[CheckRecord, ...]
    """Every goal check's and hard rule's question and result, in scenario order."""
    trace: tuple[Turn, ...]
    """Every turn, in order."""
    service_requests: tuple[ServiceRequest, ...]
    """Every request to an outside service, oldest first."""
    changes: tuple[RowChange, ...]
    """Every row inserted, updated or deleted against the world's snapshot (the end state, offline)."""
    capture_error: str | None
    """Why ``service_requests`` or ``changes`` could not be read (then they are empty); null otherwise."""
    provenance: Provenance
    """The run's provenance blob: world, scoring contract, clock and build (see ``provenance.json``)."""
    model: str | None = None
    """The model the agent profile names (null: a scripted agent, or a user agent without a profile)."""
    temperature: float | None = None
    """The profile's sampling temperature, sent with every model call (null: the provider's default)."""
    top_p: float | None = None
    """The profile's nucleus-sampling mass (null: the provider's default)."""
    sampling_seed: int | None = None
    """The profile's sampling seed sent to the provider (null: none); not the reset ``seed``."""
    max_tokens: int | None = None
    """The most tokens one model reply may have; a reply cut off there is a rejected attempt (null: the
    provider's default)."""
    model_calls: int | None = None
    """Completed calls to the agent's model in this episode (null: the agent is not a model)."""
    model_latency_ms: float | None = None
    """Wall time of those calls, retries and their waits included, in milliseconds (null: not a model)."""
    model_held_ms: float | None = None
    """Time this episode's model calls waited, before they were sent, while a cut-off reply of another episode
    was drained from the same server (its queue was not this episode's); never part of ``model_latency_ms``
    (null: not a model, or a record of version 6 and older)."""
    model_drained_ms: float | None = None
    """Time spent after this episode's own cut-off replies waiting for the server to be idle again, so that the
    next episode's calls do not queue behind them; never part of ``model_latency_ms`` (null: as above)."""
    customer_model: str | None = None
    """The model that played the customer (null: the scripted customer)."""
    key_id: str | None = None
    """The id of the API key that played this episode over ``rehearsal serve`` (never the key itself;
    ``local`` for a server without keys, which accepts loopback clients only); null for an episode not
    played over ``rehearsal serve``."""
    episode_id: str | None = None
    """The env's id of this episode (``Episode.id``): given when the episode was first forked or checkpointed,
    or by whoever ran it; null when it never was."""
    parent_episode: str | None = None
    """The ``episode_id`` of the episode this one was forked from (``env.fork()``) or restored from
    (``rehearsal_env.restore`` of a checkpoint); null when it began at ``reset``."""
    parent_turn: int | None = None
    """The parent's turn when it was forked or checkpointed (0: right after ``reset``); this episode's ``trace``
    holds the parent's turns up to it. Null when ``parent_episode`` is."""
    parent_kind: str | None = None
    """``fork`` or ``restore``: how this episode parted from its parent; null when ``parent_episode`` is."""
    tool_crashes: tuple[ToolCrashRecord, ...] | None = None
    """Every exception a world's tool raised while handling the agent's calls, in order (each was returned to
    the agent as ``status: error`` and the episode went on; counted per tool in ``summary.json`` and on the
    world page); empty when none; null in records of version 3 and older."""
    world_tool_calls: int | None = None
    """Calls of the world's own tools carried out (not ``finish``, ``give_up``, ``ask_customer`` or
    ``retry_operation``; rejected attempts not counted); null for an episode not played."""
    system_prompt_sha: str | None = None
    """A model agent's system message, by content hash: its text is ``prompts/<hash>.txt`` in the run
    directory (null: not a model agent)."""
    tools_sha: str | None = None
    """The tools offered to a model agent, by content hash: their JSON is ``prompts/<hash>.json`` in the run
    directory (null: not a model agent)."""
    input_tokens: int | None = None
    """Of ``tokens``, the input (prompt) tokens the agent reported (``usage.prompt_tokens`` summed); null when it
    did not split them, and in records of version 4 and older."""
    output_tokens: int | None = None
    """Of ``tokens``, the output (completion) tokens the agent reported; null when it did not split them."""
    turn_rewards: tuple[float, ...] | None = None
    """Each step's reward, in step order, under a profile that pays one at every turn (``rl_turns``: the change
    in the share of goal checks passing, the last step the rest of ``reward``); null under other profiles."""
    attempt: int | None = None
    """Which attempt of its planned episode this is: null (or 0) the episode as planned, ``k`` its ``k``-th retry
    after an attempt not scored for a part other than the agent and the world (same scenario, repeat and seed)."""
    retry_of: str | None = None
    """The attempt this one retries, as ``scenario#repeat@attempt`` in this run (null: not a retry)."""
    retry_replayed: bool | None = None
    """Whether this retry played the attempt it retries exactly, turn for turn, up to where that one failed (then
    it stands for that attempt in the not-scored bounds; otherwise that attempt stays open there); null: not a
    retry."""

    @property
    def is_root(self) -> bool:
        """Whether this episode began at ``reset`` (not a fork or restore): only root episodes are evidence about
        the agent (:func:`episode_kind`)."""
        return episode_kind(self.parent_episode, self.parent_kind) == ROOT_EPISODE

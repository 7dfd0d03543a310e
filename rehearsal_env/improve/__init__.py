"""The improvement step: the next version of an agent profile, from failed train and dev episodes only.

It never reads holdout: :class:`LearningRecords` is the only reader it uses, it takes its
splits as :data:`LearnableSplit` (no holdout in the type), and the split is a filter of the
Parquet scan, so a holdout row never becomes a value here. The new version's
:class:`Lineage` (parent version, run ids, episode keys read) marks it improved, and
readiness then counts only its holdout episodes.
"""

from ._holdout import HoldoutIndex, Identity, held_out, holdout_index, identity, learned_prints, scenario_identities
from ._improve import Improvement, improve
from ._lessons import (
    HEADING,
    MAX_LESSONS,
    Finding,
    LessonWriter,
    ModelWriter,
    RuleWriter,
    failure_brief,
    findings,
    general,
    rule_lesson,
    with_lessons,
)
from ._lineage import LINEAGE_DIR, Lineage, is_improved, lineage_of, lineage_path, write_lineage
from ._reader import (
    COLUMNS,
    FAILED_OUTCOMES,
    LEARNABLE_SPLITS,
    FailedEpisode,
    HoldoutLeak,
    HoldoutRefused,
    LearnableSplit,
    LearningRecords,
)

__all__ = ["COLUMNS", "FAILED_OUTCOMES", "HEADING", "LEARNABLE_SPLITS", "LINEAGE_DIR", "MAX_LESSONS",
           "FailedEpisode", "Finding", "HoldoutLeak", "HoldoutRefused", "Improvement", "LearnableSplit",
           "LearningRecords", "LessonWriter", "Lineage", "ModelWriter", "RuleWriter", "failure_brief", "findings",
           "general", "improve", "is_improved", "lineage_of", "lineage_path", "rule_lesson", "with_lessons",
           "write_lineage", "HoldoutIndex", "Identity", "held_out", "holdout_index", "identity", "learned_prints",
           "scenario_identities"]

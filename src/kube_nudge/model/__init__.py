"""Pure model: the annotation contract, reference discovery, digests, hashing, projections,
visibility and the decision of what to do. No I/O, no clock of its own."""

from kube_nudge.model.annotations import BASELINE_HASH, CONFIG_HASH, ROLLED_AT
from kube_nudge.model.decide import (
    Adopt,
    Apply,
    Assessment,
    Decision,
    Hold,
    Noop,
    assess,
    changes_field,
    decide,
    describe_apply,
    describe_changes,
    describe_versions,
    input_warnings,
)
from kube_nudge.model.digests import Digest, key_digests
from kube_nudge.model.hashing import (
    ABSENT,
    HASH_VERSION,
    SourceState,
    changed_keys,
    config_hash,
    consumed_digests,
    missing_requirements,
    source_state,
)
from kube_nudge.model.memory import WorkloadMemory
from kube_nudge.model.parsing import parse_duration
from kube_nudge.model.podtemplate import (
    TemplatePath,
    annotation_patch,
    get_pod_spec,
    get_template,
    parse_path,
    template_annotation,
)
from kube_nudge.model.projection import SourceView, WorkloadView, project_source, project_workload
from kube_nudge.model.references import (
    Consumption,
    SourceKind,
    SourceRef,
    consume_all,
    discover,
    merge,
)
from kube_nudge.model.settings import cross_namespace_allowed, parse_source, parse_workload
from kube_nudge.model.shapes import SourceSettings, WorkloadDefaults, WorkloadSettings
from kube_nudge.model.visibility import Visibility, visible_sources, without_excluded

__all__ = [
    "ABSENT",
    "BASELINE_HASH",
    "CONFIG_HASH",
    "HASH_VERSION",
    "ROLLED_AT",
    "Adopt",
    "Apply",
    "Assessment",
    "Consumption",
    "Decision",
    "Digest",
    "Hold",
    "Noop",
    "SourceKind",
    "SourceRef",
    "SourceSettings",
    "SourceState",
    "SourceView",
    "TemplatePath",
    "Visibility",
    "WorkloadDefaults",
    "WorkloadMemory",
    "WorkloadSettings",
    "WorkloadView",
    "annotation_patch",
    "assess",
    "changed_keys",
    "changes_field",
    "config_hash",
    "consume_all",
    "consumed_digests",
    "cross_namespace_allowed",
    "decide",
    "describe_apply",
    "describe_changes",
    "describe_versions",
    "discover",
    "get_pod_spec",
    "get_template",
    "input_warnings",
    "key_digests",
    "merge",
    "missing_requirements",
    "parse_duration",
    "parse_path",
    "parse_source",
    "parse_workload",
    "project_source",
    "project_workload",
    "source_state",
    "template_annotation",
    "visible_sources",
    "without_excluded",
]

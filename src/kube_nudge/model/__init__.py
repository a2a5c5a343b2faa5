"""Pure model: reference discovery, digests, hashing, annotation contract, pod-template paths. No I/O."""  # noqa: E501

from kube_nudge.model.annotations import (
    CONFIG_HASH,
    SourceSettings,
    WorkloadSettings,
    cross_namespace_allowed,
    parse_duration,
    parse_source,
    parse_workload,
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
from kube_nudge.model.podtemplate import (
    BUILTIN_PATHS,
    TemplatePath,
    annotation_patch,
    get_pod_spec,
    get_template,
    parse_path,
    template_annotation,
)
from kube_nudge.model.references import (
    Consumption,
    SourceKind,
    SourceRef,
    consume_all,
    discover,
    merge,
)

__all__ = [
    "ABSENT",
    "BUILTIN_PATHS",
    "CONFIG_HASH",
    "HASH_VERSION",
    "Consumption",
    "Digest",
    "SourceKind",
    "SourceRef",
    "SourceSettings",
    "SourceState",
    "TemplatePath",
    "WorkloadSettings",
    "annotation_patch",
    "changed_keys",
    "config_hash",
    "consume_all",
    "consumed_digests",
    "cross_namespace_allowed",
    "discover",
    "get_pod_spec",
    "get_template",
    "key_digests",
    "merge",
    "missing_requirements",
    "parse_duration",
    "parse_path",
    "parse_source",
    "parse_workload",
    "source_state",
    "template_annotation",
]

"""The rule the API server checks an object's ``metadata.name`` with, per kind, as
k8s.io/kubernetes' ``pkg/apis/*/validation`` picks it (the ``nameFn`` each kind's
``ValidateObjectMeta`` is called with), for the kinds ``plan`` reads and those manifests
beside them most often hold. Another kind's name is left to the API server: its rule is its
own (an IPAddress is named by its address, a CRD ``PLURAL.GROUP``).

- a DNS-1123 subdomain (``NameIsDNSSubdomain``): most objects;
- a DNS-1123 label (``NameIsDNSLabel``): a Namespace, a StatefulSet, a Service (the relaxed
  rule of Kubernetes 1.36 on, ``RelaxedServiceNameValidation``; 1.34 and 1.35 also want a
  letter first);
- a path segment (``IsPathSegmentName``): RBAC's Roles and bindings, e.g.
  ``system:aggregate-to-view``;
- a CronJob: a subdomain of at most 52 characters (its Jobs add 11);
- a Job: a subdomain of at most 63 characters, since the API server labels its pods with
  its name (``batch.kubernetes.io/job-name``, a label value); unless its ``manualSelector``,
  which manifests rarely set.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

__all__ = ["dns1123_subdomain", "name_problem"]

# k8s.io/apimachinery/pkg/util/validation: validation.go.
_DNS1123_LABEL: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_RE: Final = re.compile(_DNS1123_LABEL)
_DNS1123_LABEL_MAX: Final = 63
_DNS1123_SUBDOMAIN: Final = re.compile(rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*")
_DNS1123_SUBDOMAIN_MAX: Final = 253
# k8s.io/kubernetes/pkg/apis/batch/validation: ValidateCronJobCreate.
_CRONJOB_NAME_MAX: Final = _DNS1123_LABEL_MAX - 11
_RBAC: Final = "rbac.authorization.k8s.io"

_SUBDOMAIN_WHY: Final = (
    "lower case letters, digits, '-' and '.', starting and ending with a letter or digit, "
    f"at most {_DNS1123_SUBDOMAIN_MAX} characters"
)
_LABEL_WHY: Final = (
    "lower case letters, digits and '-' (no '.'), starting and ending with a letter or digit, "
    f"at most {_DNS1123_LABEL_MAX} characters"
)


def dns1123_subdomain(value: str) -> bool:
    """IsDNS1123Subdomain."""
    return len(value) <= _DNS1123_SUBDOMAIN_MAX and bool(_DNS1123_SUBDOMAIN.fullmatch(value))


def _subdomain(name: str) -> str | None:
    return None if dns1123_subdomain(name) else _SUBDOMAIN_WHY


def _label(name: str) -> str | None:
    """IsDNS1123Label."""
    fits = len(name) <= _DNS1123_LABEL_MAX and _DNS1123_LABEL_RE.fullmatch(name)
    return None if fits else _LABEL_WHY


def _path_segment(name: str) -> str | None:
    """IsPathSegmentName: not '.' or '..', no '/' or '%' (anything else, ':' and capitals
    included)."""
    if name in (".", "..") or "/" in name or "%" in name:
        return "anything but '.' or '..', with no '/' or '%'"
    return None


def _job(name: str) -> str | None:
    if len(name) > _DNS1123_LABEL_MAX:
        return f"at most {_DNS1123_LABEL_MAX} characters (its pods get a job-name label)"
    return _subdomain(name)


def _cronjob(name: str) -> str | None:
    if len(name) > _CRONJOB_NAME_MAX:
        return f"at most {_CRONJOB_NAME_MAX} characters (each Job's name adds 11)"
    return _subdomain(name)


#: The rule of each kind, by (API group, kind).
_RULES: Final[dict[tuple[str, str], Callable[[str], str | None]]] = {
    ("", "ConfigMap"): _subdomain,
    ("", "Secret"): _subdomain,
    ("", "ServiceAccount"): _subdomain,
    ("", "Namespace"): _label,
    ("", "Service"): _label,
    ("apps", "Deployment"): _subdomain,
    ("apps", "DaemonSet"): _subdomain,
    ("apps", "ReplicaSet"): _subdomain,
    ("apps", "StatefulSet"): _label,
    ("batch", "Job"): _job,
    ("batch", "CronJob"): _cronjob,
    ("argoproj.io", "Rollout"): _subdomain,  # a custom resource: NameIsDNSSubdomain
    (_RBAC, "Role"): _path_segment,
    (_RBAC, "ClusterRole"): _path_segment,
    (_RBAC, "RoleBinding"): _path_segment,
    (_RBAC, "ClusterRoleBinding"): _path_segment,
}


def name_problem(api_version: str, kind: str, name: str) -> str | None:
    """Why the API server refuses ``name`` for a ``kind`` (one line: the field and what a
    name may be), or None, also for a kind whose rule is not known here."""
    group = api_version.rpartition("/")[0]
    rule = _RULES.get((group, kind))
    why = rule(name) if rule is not None else None
    return None if why is None else f"metadata.name: not a valid name for a {kind} ({why})"

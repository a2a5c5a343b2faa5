"""API resources by group/version/plural, and the URL paths that address them."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from kube_nudge.model.source_kinds import SourceKind, source_row


@dataclass(frozen=True, slots=True)
class Resource:
    """One API resource type, e.g. apps/v1 deployments."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """``v1`` for the core group, else ``group/version``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The REST path of the collection, or of one object when ``name`` is given."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
        if subresource:
            base += f"/{subresource}"
        return base

    @property
    def group_kind(self) -> str:
        """``Kind.group`` (``Deployment.apps``, ``Rollout.argoproj.io``; ``Pod`` in the core
        group): what tells how to read a workload's status, so that a custom kind that
        happens to share a Kind name (a ``Rollout`` of another group) is never read as
        Argo's."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


def source_resource(kind: SourceKind) -> Resource:
    """The API resource a source of ``kind`` is (its row in ``model/source_kinds.py``)."""
    row = source_row(kind)
    return Resource(row.group, row.version, row.plural, row.api_kind)


def mount_resource(kind: SourceKind) -> Resource | None:
    """The API resource holding the per-pod mount statuses of a ``kind`` known only once
    mounted (its row's ``mounts``), None for a kind whose own objects hold its data."""
    mounts = source_row(kind).mounts
    if mounts is None:
        return None
    return Resource(mounts.group, mounts.version, mounts.plural, mounts.api_kind)


CONFIGMAPS = source_resource(SourceKind.CONFIGMAP)
SECRETS = source_resource(SourceKind.SECRET)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
PODS = Resource("", "v1", "pods", "Pod")
SERVICEACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
CORE_EVENTS = Resource("", "v1", "events", "Event")
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet")
STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet")
DAEMONSETS = Resource("apps", "v1", "daemonsets", "DaemonSet")
CONTROLLERREVISIONS = Resource("apps", "v1", "controllerrevisions", "ControllerRevision")
CRONJOBS = Resource("batch", "v1", "cronjobs", "CronJob")
JOBS = Resource("batch", "v1", "jobs", "Job")
PODDISRUPTIONBUDGETS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
ROLLOUTS = Resource("argoproj.io", "v1alpha1", "rollouts", "Rollout")  # Argo Rollouts' CRD
# Analysis templates: kube-nudge's own CRD (the chart's crds/), and Argo Rollouts', read as
# they are where Argo is installed.
ANALYSISTEMPLATES = Resource("kube-nudge.io", "v1alpha1", "analysistemplates", "AnalysisTemplate")
ARGO_ANALYSISTEMPLATES = Resource(
    "argoproj.io", "v1alpha1", "analysistemplates", "AnalysisTemplate"
)
ARGO_CLUSTERANALYSISTEMPLATES = Resource(
    "argoproj.io", "v1alpha1", "clusteranalysistemplates", "ClusterAnalysisTemplate",
    namespaced=False,
)  # fmt: skip
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
SECRETPROVIDERCLASSPODSTATUSES = Resource(
    "secrets-store.csi.x-k8s.io", "v1", "secretproviderclasspodstatuses",
    "SecretProviderClassPodStatus",
)  # fmt: skip
"""The Secrets Store CSI driver's record of what it mounted for one pod (docs/csi-secrets.md):
``mount_resource(SourceKind.CSI)``, named for ``--csi-secrets``'s check that it is served."""

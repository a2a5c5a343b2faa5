"""The snapshot strategy's mutating admission webhook: a re-applied manifest keeps pointing
at the current snapshot copies, so a GitOps sync that changes no data rolls nothing.

Served over TLS on every replica (not only the leader: the API server calls whichever
replica the Service picks) from the caches every replica keeps. It only ever allows, so
register it with ``failurePolicy: Ignore`` and a short timeout: when kube-nudge is down an
apply still succeeds, and the controller points the template back at the copies itself.
The decision is ``admission.restore_snapshot_template`` (pure, beside it).
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable
from typing import Any

from kube_nudge.kube.workloads import WorkloadKind
from kube_nudge.model import SourceRef, SourceState
from kube_nudge.runtime.http import HttpServer, Request, Response
from kube_nudge.strategies.base import Host
from kube_nudge.strategies.snapshot.admission import restore_snapshot_template

__all__ = ["REVIEW_RESULTS", "WEBHOOK_PATH", "SnapshotWebhook"]

log = logging.getLogger(__name__)

#: Where the MutatingWebhookConfiguration points (``clientConfig.service.path``).
WEBHOOK_PATH = "/mutate/snapshot"
#: The ``result`` of each review (``kube_nudge_admission_reviews_total``).
REVIEW_RESULTS = ("restored", "unchanged", "not-ready", "error")


class SnapshotWebhook:
    """Answers AdmissionReviews for the workload kinds the controller watches, from its
    caches; ``hmac_key`` gives the installation key the snapshot copies are named with."""

    def __init__(self, controller: Host, hmac_key: Callable[[], bytes]) -> None:
        self._controller = controller
        self._hmac_key = hmac_key

    def register(self, server: HttpServer) -> None:
        """Serve the webhook on ``server`` at ``WEBHOOK_PATH``."""
        server.add_route(WEBHOOK_PATH, self.handle, methods=("POST",))

    async def handle(self, request: Request) -> Response:
        """One AdmissionReview in, one out; always allowed, maybe with a JSON patch."""
        try:
            review = json.loads(request.body)
            admission = review["request"]
            uid = str(admission["uid"])
        except (ValueError, KeyError, TypeError):
            return Response.text("not an AdmissionReview\n", 400)
        answer: dict[str, Any] = {"uid": uid, "allowed": True}
        try:
            patch = self._patch(admission)
        except Exception:  # fail open: never block a deploy on our bug
            log.exception("snapshot webhook: could not review %s", _subject(admission))
            self._controller.metrics.admission.labels(result="error").inc()
            patch = None
        if patch is not None:
            answer["patchType"] = "JSONPatch"
            answer["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
        document = {
            "apiVersion": review.get("apiVersion", "admission.k8s.io/v1"),
            "kind": "AdmissionReview",
            "response": answer,
        }
        return Response.json(document)

    def _patch(self, admission: dict[str, Any]) -> list[dict[str, Any]] | None:
        controller = self._controller
        kind = self._kind(admission.get("resource") or {})
        new = admission.get("object")
        if (
            kind is None
            or not isinstance(new, dict)
            or admission.get("operation") not in ("CREATE", "UPDATE")
        ):
            return None
        if not controller.ready:
            controller.metrics.admission.labels(result="not-ready").inc()
            return None  # the caches aren't filled: the controller catches up after
        namespace = str(admission.get("namespace") or "")
        new.setdefault("metadata", {}).setdefault("namespace", namespace)
        old = admission.get("oldObject") if isinstance(admission.get("oldObject"), dict) else None

        def state_of(ref: SourceRef) -> SourceState | None:
            view = controller.source(ref)
            return view.state if view is not None else None

        template = restore_snapshot_template(
            new, old, kind.template_path, controller.options.defaults, state_of, self._hmac_key()
        )
        if template is None:
            controller.metrics.admission.labels(result="unchanged").inc()
            return None
        controller.metrics.admission.labels(result="restored").inc()
        log.info("snapshot webhook: %s keeps its snapshot copies", _subject(admission))
        return [{"op": "replace", "path": "/" + "/".join(kind.template_path), "value": template}]

    def _kind(self, resource: dict[str, Any]) -> WorkloadKind | None:
        wanted = (resource.get("group", ""), resource.get("version"), resource.get("resource"))
        for kind in self._controller.options.kinds:
            r = kind.resource
            if wanted == (r.group, r.version, r.plural):
                return kind
        return None


def _subject(admission: dict[str, Any]) -> str:
    kind = (admission.get("kind") or {}).get("kind", "?")
    return f"{kind} {admission.get('namespace', '')}/{admission.get('name', '')}"

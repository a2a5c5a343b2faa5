"""The caches' runners (``controller/runner_cache.py``): which Rollout runs which Deployment's
template, kept through every change an informer hands on (added, re-pointed, deleted)."""

from __future__ import annotations

from typing import Any, cast

from kube_nudge.controller.runner_cache import Runners
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.informer import Informer, InformerConfig
from kube_nudge.kube.workloads import ARGO_ROLLOUTS
from kube_nudge.model.runners import Runner

WEB, API = "Deployment.apps/web", "Deployment.apps/api"


def rollout(name: str, runs: str | None, *, phase: str = "Healthy") -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": 1}
    if runs is not None:
        spec["workloadRef"] = {"apiVersion": "apps/v1", "kind": "Deployment", "name": runs}
    else:
        spec["template"] = {"spec": {"containers": [{"name": "app", "image": "x"}]}}
    return {"metadata": {"name": name, "namespace": "shop", "generation": 1},
            "spec": spec, "status": {"observedGeneration": "1", "phase": phase}}  # fmt: skip


class Recorded:
    def __init__(self) -> None:
        self.changed: list[tuple[str, str]] = []
        self.runners = Runners(
            cast(KubeClient, None), ARGO_ROLLOUTS, [InformerConfig()], self._owner, None
        )
        [self.informer] = self.runners.informers

    def _owner(self, namespace: str, owner: str) -> None:
        self.changed.append((namespace, owner))

    def see(self, obj: dict[str, Any]) -> None:
        """What the informer does with a listed or watched object."""
        informer: Informer[Runner] = self.informer
        informer._apply(("shop", obj["metadata"]["name"]), informer.project(obj))

    def delete(self, name: str) -> None:
        self.informer._apply(("shop", name), None)

    def running(self, owner: str) -> str | None:
        runner = self.runners.running("shop", owner)
        return runner.name if runner is not None else None


def test_a_rollout_runs_the_deployment_its_workload_ref_names_until_it_goes() -> None:
    kept = Recorded()
    kept.see(rollout("web-ro", "web"))
    kept.see(rollout("own", None))  # its own template: not a runner
    assert kept.running(WEB) == "web-ro"
    assert kept.running("Deployment.example.com/web") is None  # another group's kind
    kept.see(rollout("web-ro", "web", phase="Degraded"))
    assert kept.changed == [("shop", WEB), ("shop", WEB)]
    kept.delete("web-ro")
    assert kept.running(WEB) is None
    assert kept.changed[-1] == ("shop", WEB)


def test_a_re_pointed_rollout_leaves_the_old_deployment_and_tells_both() -> None:
    kept = Recorded()
    kept.see(rollout("web-ro", "web"))
    kept.see(rollout("web-ro", "api"))
    assert (kept.running(WEB), kept.running(API)) == (None, "web-ro")
    assert kept.changed[-2:] == [("shop", WEB), ("shop", API)]
    kept.see(rollout("web-ro", None))  # a template of its own again
    assert kept.running(API) is None


def test_a_second_runner_of_one_deployment_is_not_dropped_when_the_first_leaves() -> None:
    kept = Recorded()
    kept.see(rollout("first", "web"))
    kept.see(rollout("second", "web"))
    kept.delete("first")
    assert kept.running(WEB) == "second"

"""The compatibility suite ``make test-matrix`` runs on every supported Kubernetes minor: each
check is a selection of existing integration tests (never a copy of one), and what differs
between minors is written down here, each difference backed by a check.

docs/compatibility.md is generated from this table and the committed results
(``tests/integration/compat_report.py``); tests/unit/test_compat_report.py keeps the page,
the results and the test ids in step.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CHECKS", "DIFFERENCES", "Check", "Difference", "node_ids"]


def _t(module: str, test: str = "") -> str:
    """The node id of ``test`` in ``tests/integration/MODULE.py`` (a whole module without)."""
    path = f"tests/integration/{module}.py"
    return f"{path}::{test}" if test else path


@dataclass(frozen=True, slots=True)
class Check:
    """One row of the suite: what it proves, and the pytest node ids that prove it."""

    name: str
    tests: tuple[str, ...]
    real_node: bool = False  # needs the machine-wide real node (root, containerd)


@dataclass(frozen=True, slots=True)
class Difference:
    """A behaviour that differs between minors (or between clusters of one minor), how
    kube-nudge handles it, and the check that shows it handled on every minor."""

    behaviour: str
    handling: str
    check: str


CHECKS: tuple[Check, ...] = (
    Check(
        "the server's version logged at start, inside the window",
        (_t("test_run_cli", "test_two_replicas_one_leader_failover_and_clean_logs"),),
    ),
    Check(
        "rollouts of every built-in kind",
        (_t("test_controller_rollouts", "test_every_reference_form_rolls_every_kind"),),
    ),
    Check(
        "initial state by streaming list (sendInitialEvents)",
        (_t("test_informer", "test_streaming_list_sends_no_list_request"),),
    ),
    Check(
        "initial state by pages (the fallback, forced)",
        (_t("test_informer", "test_paginated_list_then_watch_events"),),
    ),
    Check(
        "leader election: Lease handover and failover",
        (
            _t("test_leader_election", "test_two_electors_one_leader_then_handover"),
            _t("test_leader_election", "test_leader_that_cannot_renew_steps_down_before_expiry"),
            _t("test_run_cli", "test_two_replicas_one_leader_failover_and_clean_logs"),
        ),
    ),
    Check(
        "a restart writes nothing",
        (
            _t(
                "test_controller_behaviour",
                "test_restarts_write_nothing_and_offline_changes_roll_once",
            ),
        ),
    ),
    Check(
        "the chart installed with the real helm",
        (
            _t(
                "test_chart_policies",
                "test_a_missing_watched_namespace_fails_the_install_before_anything_is_applied",
            ),
            _t("test_chart_without_policies_api"),
        ),
    ),
    Check(
        "the admission policies enforced",
        (
            _t(
                "test_chart_policies",
                "test_every_admission_policy_type_checks_for_every_kind_it_matches",
            ),
            _t("test_deploy_rbac", "test_controller_runs_with_exactly_the_charts_rbac"),
            _t("test_agent_rbac", "test_the_agent_may_record_only_on_its_own_pod"),
        ),
    ),
    Check(
        "eviction by selector with a PodDisruptionBudget",
        (
            _t(
                "test_pod_replacement",
                "test_a_changed_configmap_replaces_its_pods_one_budget_at_a_time",
            ),
        ),
    ),
    Check(
        "real node: a pod's volumes, env, probes and the kubernetes Service",
        (
            _t(
                "test_real_node",
                "test_a_pod_runs_with_real_volumes_env_probes_and_the_kubernetes_service",
            ),
        ),
        real_node=True,
    ),
    Check(
        "real node: a rollout",
        (
            _t(
                "test_chart_real_node",
                "test_two_real_replicas_elect_a_leader_and_roll_a_workload_onto_its_new_config",
            ),
        ),
        real_node=True,
    ),
    Check(
        "real node: a hot reload confirmed by hash",
        (
            _t(
                "test_hot_reload_real_node",
                "test_a_change_reaches_the_running_app_by_signal_and_by_http_without_a_rollout",
            ),
        ),
        real_node=True,
    ),
)

DIFFERENCES: tuple[Difference, ...] = (
    Difference(
        "Streaming lists (`sendInitialEvents`, KEP-3157) are served where the API server's "
        "WatchList feature is on: by default in every supported minor (1.33 had it off by "
        "default and answers 422); a cluster can turn it off.",
        "The informer falls back to paginated lists for its lifetime and logs one line; the "
        "fallback is checked on every minor by forcing it.",
        "initial state by pages (the fallback, forced)",
    ),
    Difference(
        "ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1) is GA since 1.30, but a "
        "cluster can turn the API off.",
        "The chart leaves its policies out where the cluster does not serve them and says so "
        "in one NOTES line, instead of failing the install.",
        "the chart installed with the real helm",
    ),
    Difference(
        "Clusters older or newer than the window.",
        "The chart refuses a cluster older than the oldest supported minor (`kubeVersion`); "
        "`kube-nudge run` logs the server's version at start and one Warning line outside "
        "the window, and runs.",
        "the server's version logged at start, inside the window",
    ),
)


def node_ids(*, real_node: bool = True) -> list[str]:
    """Every test id of the suite, once each, in the order of the checks."""
    seen: dict[str, None] = {}
    for check in CHECKS:
        if check.real_node and not real_node:
            continue
        seen.update(dict.fromkeys(check.tests))
    return list(seen)

"""The manifests ``plan`` takes or refuses as the API server would, with its verdict: data
that the unit test (``tests/unit/test_app_manifest_files.py``: what ``plan`` says) and the
integration test (``tests/integration/test_plan_verdicts.py``: what the real API server
says to ``kubectl create --dry-run=server``) both read, so every verdict written here is
held to the API server's.

Each case is one manifest (YAML as a person writes it), and ``refused``: a part of ``plan``'s
one-line refusal, or None where ``plan`` and the API server take it.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

__all__ = ["CASES", "Case"]


@dataclass(frozen=True, slots=True)
class Case:
    """One manifest and the verdict on it."""

    id: str
    text: str
    refused: str | None
    """What ``plan``'s refusal says (a part of it); None: taken."""


CM = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n"
SECRET = "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\n"
_TEMPLATE = (
    "    metadata: {labels: {app: web}}\n"
    "    spec: {containers: [{name: app, image: registry.invalid/app:1}]}\n"
)


def workload(kind: str, name: str, *, metadata: str = "", spec: str = "") -> str:
    """A Deployment, StatefulSet or DaemonSet the API server takes, but for what is given."""
    return (
        f"apiVersion: apps/v1\nkind: {kind}\nmetadata:\n  name: {name}\n{metadata}"
        f"spec:\n  selector: {{matchLabels: {{app: web}}}}\n{spec}  template:\n{_TEMPLATE}"
    )


def cronjob(name: str) -> str:
    return (
        f"apiVersion: batch/v1\nkind: CronJob\nmetadata: {{name: {name}}}\nspec:\n"
        "  schedule: '* * * * *'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n"
        "          restartPolicy: OnFailure\n"
        "          containers: [{name: app, image: registry.invalid/app:1}]\n"
    )


def job(name: str) -> str:
    return (
        f"apiVersion: batch/v1\nkind: Job\nmetadata: {{name: {name}}}\nspec:\n  template:\n"
        "    spec:\n      restartPolicy: Never\n"
        "      containers: [{name: app, image: registry.invalid/app:1}]\n"
    )


def rbac(kind: str, name: str) -> str:
    """A Role, ClusterRole, RoleBinding or ClusterRoleBinding named ``name``."""
    text = f"apiVersion: rbac.authorization.k8s.io/v1\nkind: {kind}\n"
    text += f"metadata:\n  name: {json.dumps(name)}\n"
    if kind.endswith("Binding"):
        text += (
            "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}\n"
            "subjects: [{kind: ServiceAccount, name: default, namespace: default}]\n"
        )
    return text


def core(kind: str, name: str, spec: str = "") -> str:
    return f"apiVersion: v1\nkind: {kind}\nmetadata: {{name: {json.dumps(name)}}}\n{spec}"


def data(value: str, *, field: str = "data", head: str = CM) -> str:
    """A ConfigMap (or ``head``) whose ``field`` holds key A: ``value``, written plain."""
    return f"{head}{field}:\n  A: {value}\n"


def big(field: str, value: str, *, head: str = CM, key: str = "A") -> str:
    return f"{head}{field}:\n  {key}: {json.dumps(value)}\n"


def annotated(value: str) -> str:
    """A ConfigMap with one annotation, ``a``: ``value``."""
    return f"{CM[:-2]}, annotations: {{a: {json.dumps(value)}}}}}\n"


_WANT_STRING = "data.A: want a string, got a"
_KIB = 1024
_MIB = 1024 * _KIB
_ANNOTATIONS = 256 * _KIB
_NAME_253 = f"{'a' * 63}.{'b' * 63}.{'c' * 63}.{'d' * 61}"

#: What go-yaml v2 (kubectl's reader) reads as a boolean: every spelling of resolve.go.
_BOOLEANS = ("y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON",
             "off", "Off", "OFF", "true", "True", "TRUE", "false", "False", "FALSE")  # fmt: skip
#: What it reads as a number (an int or a float), where PyYAML's own rules read a string
#: for some (1e3, 0o17, 0X1F, 08, 1.0e3).
_NUMBERS = ("10", "+1", "-1", "1_000", "0755", "0o17", "0O17", "0x1F", "0X1F", "0b101",
            "0B101", "08", "1e3", "1E3", "1e+3", "1.0e3", "1.5", ".5", "1.", "-.5e-3",
            "99999999999999999999")  # fmt: skip
#: What it reads as a string, where PyYAML's own rules read something else or fail
#: (a timestamp, a base-60 number, '=') or where a number would be out of range.
_STRINGS = ("2024-01-02", "2001-12-14t21:59:43.10-05:00", "12:30", "190:20:30.15", "=",
            "1e999", "+.nan", ".Nan", "0x", "0b", "1e", "yes_please", "'y'", '"on"',
            "<<")  # fmt: skip

CASES: tuple[Case, ...] = (
    # -- Go's YAML 1.1 scalars, in a ConfigMap's data --------------------------------------
    *(Case(f"bool-{word}", data(word), f"{_WANT_STRING} boolean") for word in _BOOLEANS),
    *(Case(f"number-{word}", data(word), f"{_WANT_STRING} number") for word in _NUMBERS),
    *(Case(f"string-{word}", data(word), None) for word in _STRINGS),
    Case("null-tilde", data("~"), None),  # null: unset, as the API server decodes it
    Case("null-empty", data(""), None),
    Case("inf", data(".inf"), "data.A: .inf or .nan, which JSON can't hold"),
    Case("minus-inf", data("-.Inf"), "data.A: .inf or .nan"),
    Case("nan", data(".NAN"), "data.A: .inf or .nan"),
    Case(
        "inf-in-a-spec",
        workload("Deployment", "web", spec="  minReadySeconds: .inf\n"),
        "spec.minReadySeconds: .inf or .nan",
    ),
    Case("key-on", f"{CM}data: {{on: x}}\n", None),  # the key "true"
    Case("key-bool-valued", f"{CM}data: {{on: true}}\n", "data.true: want a string, got a boolean"),
    Case("key-float", f"{CM}data: {{1.5: a, 1.0: b}}\n", None),  # keys "1.5" and "1"
    Case("key-float-exponent", f"{CM}data: {{1e6: x}}\n", 'data["1e+06"]: not a valid key'),
    Case("key-hex", f"{CM}data: {{0x1F: x}}\n", None),  # the key "31"
    Case("key-null", f"{CM}data: {{~: x}}\n", "YAML or JSON (line 4): a key that is null"),
    Case(
        "key-a-list", f"{CM}data:\n  ? [a, b]\n  : x\n", "(line 5): a key that is null (~), a list"
    ),
    Case(
        "label-value-y",
        f"{CM[:-2]}, labels: {{tier: y}}}}\n",
        "metadata.labels.tier: want a string, got a boolean",
    ),
    Case(
        "annotation-yes",
        workload("Deployment", "web", metadata="  annotations:\n    kube-nudge.io/enabled: yes\n"),
        'metadata.annotations["kube-nudge.io/enabled"]: want a string, got a boolean',
    ),
    # -- what the schema and ValidateConfigMap / ValidateSecret refuse ---------------------
    Case("data-a-list", f"{CM}data: [a, b]\n", "ConfigMap app: data: want a mapping, got a list"),
    Case(
        "secret-not-base64",
        f"{SECRET}data: {{password: 'hunter2!'}}\n",
        "Secret db: data.password: not base64",
    ),
    Case("secret-base64-lines", f"{SECRET}data:\n  tls.crt: |\n    aGVsbG8g\n    d29ybGQ=\n", None),
    Case(
        "secret-stringdata-number",
        f"{SECRET}stringData: {{port: 5432}}\n",
        "Secret db: stringData.port: want a string, got a number",
    ),
    Case(
        "binarydata-not-base64",
        f"{CM}binaryData: {{blob: '%%%'}}\n",
        "ConfigMap app: binaryData.blob: not base64",
    ),
    Case(
        "key-space",
        f"{CM}data: {{'my key': a}}\n",
        'ConfigMap app: data["my key"]: not a valid key',
    ),
    Case(
        "key-dots",
        f"{CM}data: {{'..x': a}}\n",
        "data[\"..x\"]: not a valid key: must not start with '..'",
    ),
    Case("keys-fine", f"{CM}data: {{app.conf: x, LOG-level_1: 'y', empty: ''}}\n", None),
    Case(
        "key-in-both",
        f"{CM}data: {{a: x}}\nbinaryData: {{a: eA==}}\n",
        "binaryData.a: also in data (a key may be in only one)",
    ),
    Case("labels-null", f"{CM[:-2]}, labels: null}}\n", None),
    Case(
        "label-value",
        workload("Deployment", "w", metadata="  labels: {a: 'b c'}\n"),
        "metadata.labels.a: not a valid label value",
    ),
    Case(
        "annotation-key",
        workload("Deployment", "w", metadata="  annotations: {'a b': x}\n"),
        'metadata.annotations["a b"]: not a valid key',
    ),
    Case(
        "annotation-keys-fine",
        workload(
            "Deployment",
            "web.v2",
            metadata=("  annotations: {kube-nudge.io/strategy: hot, example.com/x: ''}\n"),
        ),
        None,
    ),
    # -- names, by the kind's rule ---------------------------------------------------------
    Case("clusterrole-colons", rbac("ClusterRole", "system:aggregate-to-view-extra"), None),
    Case("clusterrole-capitals", rbac("ClusterRole", "Team:Admins_1"), None),
    Case("clusterrole-slash", rbac("ClusterRole", "a/b"), "not a valid name for a ClusterRole"),
    Case("role-dotdot", rbac("Role", ".."), "not a valid name for a Role"),
    Case("rolebinding-percent", rbac("RoleBinding", "a%b"), "not a valid name for a RoleBinding"),
    Case("rolebinding-colons", rbac("RoleBinding", "team:a"), None),
    Case("clusterrolebinding-colons", rbac("ClusterRoleBinding", "x.y:Z_1"), None),
    Case("namespace-dot", core("Namespace", "team.a"), "not a valid name for a Namespace"),
    Case("namespace-label", core("Namespace", "team-a"), None),
    Case(
        "service-dot",
        core("Service", "web.v2", "spec: {ports: [{port: 80}]}\n"),
        "not a valid name for a Service",
    ),
    # 1.36 on (RelaxedServiceNameValidation); 1.34 and 1.35 would refuse it.
    Case("service-digit-first", core("Service", "1web", "spec: {ports: [{port: 80}]}\n"), None),
    Case("serviceaccount-dot", core("ServiceAccount", "ci.bot"), None),
    Case("statefulset-dot", workload("StatefulSet", "db.v2"), "not a valid name for a StatefulSet"),
    Case("statefulset-label", workload("StatefulSet", "db-2"), None),
    Case("deployment-dot", workload("Deployment", "web.v2"), None),
    Case(
        "deployment-capitals", workload("Deployment", "Web_1"), "not a valid name for a Deployment"
    ),
    Case("deployment-253", workload("Deployment", _NAME_253), None),
    Case(
        "deployment-254",
        workload("Deployment", f"{_NAME_253}d"),
        "not a valid name for a Deployment",
    ),
    Case("daemonset-dot", workload("DaemonSet", "agent.v1"), None),
    Case("cronjob-52", cronjob("c" * 52), None),
    Case("cronjob-53", cronjob("c" * 53), "at most 52 characters"),
    Case("job-63", job("j" * 63), None),
    Case("job-64", job("j" * 64), "at most 63 characters (its pods get a job-name label)"),
    # Read as kubectl reads them (kubectl v1.37.2, `kubectl label --local -o json`).
    Case("tag-binary", data("!!binary aGk="), None),
    Case("tag-timestamp", data("!!timestamp 2001-12-14"), None),
    Case("tag-unknown", data("!custom 12"), None),
    Case("float-dot-underscore", data(".1_2"), f"{_WANT_STRING} number"),
    Case("string-dot-underscore", data("._1"), None),
    Case("configmap-capital", core("ConfigMap", "App"), "not a valid name for a ConfigMap"),
    Case("secret-colon", core("Secret", "db:1"), "not a valid name for a Secret"),
    # -- sizes, in bytes -------------------------------------------------------------------
    Case("annotations-limit", annotated("x" * (_ANNOTATIONS - 1)), None),
    Case("annotations-over", annotated("x" * _ANNOTATIONS), "metadata.annotations: 262145 bytes"),
    # 131,073 characters but 262,145 bytes with the key's 1: over by a byte.
    Case(
        "annotations-over-in-bytes",
        annotated("é" * (_ANNOTATIONS // 2)),
        "metadata.annotations: 262145 bytes",
    ),
    Case("data-limit", big("data", "x" * _MIB), None),
    Case("data-over-in-bytes", big("data", "é" * (_MIB // 2) + "x"), "data: 1048577 bytes"),
    # 1,200,000 characters of base64, 900,000 bytes stored: taken.
    Case(
        "binarydata-counted-decoded",
        big("binaryData", base64.b64encode(b"\0" * 900_000).decode()),
        None,
    ),
    Case(
        "secret-data-limit", big("data", base64.b64encode(b"\0" * _MIB).decode(), head=SECRET), None
    ),
    Case(
        "secret-data-over",
        big("data", base64.b64encode(b"\0" * (_MIB + 1)).decode(), head=SECRET),
        "data: 1048577 bytes",
    ),
    Case(
        "secret-stringdata-over-in-bytes",
        big("stringData", "é" * (_MIB // 2) + "x", head=SECRET),
        "data: 1048577 bytes",
    ),
    # stringData replaces the data of its key: 1 byte stored, not 1 MiB and more.
    Case(
        "secret-stringdata-replaces-data",
        big("data", base64.b64encode(b"\0" * _MIB).decode(), head=SECRET) + "stringData: {A: x}\n",
        None,
    ),
    # -- YAML kubectl can't read ------------------------------------------------------------
    Case("yaml-unclosed", "kind: [unclosed\n", "not valid YAML or JSON (line 2)"),
)

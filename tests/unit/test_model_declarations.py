"""The declarations of the annotation contract: complete (every `kube-nudge.io/` name the
code uses is declared), consistent with the settings they fill, and each declared once."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path
from typing import Any

from kube_nudge import agentwire
from kube_nudge.model import annotations as a
from kube_nudge.model.settings import parse_workload
from kube_nudge.model.shapes import Annotation, By, On
from kube_nudge.strategies import registry
from kube_nudge.strategies.snapshot import copies

#: The whole contract: the model's declarations and every strategy's.
CONTRACT = registry.contract()

SRC = Path(__file__).resolve().parents[2] / "src" / "kube_nudge"
#: `kube-nudge.io/...` strings in the code that are not annotations or labels.
NOT_ANNOTATIONS = {
    "kube-nudge.io/status",  # the JSON schema of `kube-nudge status -o json`
    "kube-nudge.io/plan",  # ... of `kube-nudge plan -o json`
    "kube-nudge.io/migrate",  # ... of `kube-nudge migrate -o json`
    "kube-nudge.io/agent-key",  # a directory the agent's key Secret is mounted at
    "kube-nudge.io/v1alpha1",  # the API version of kube-nudge's AnalysisTemplate
}
#: Parsed into settings, then merged by `parse_workload` into `WorkloadSettings.extra`.
MERGED_INTO_EXTRA = {"configmaps", "secrets"}


def _fields(annotation: Annotation) -> tuple[str, ...]:
    field = annotation.field
    return field if isinstance(field, tuple) else (field,)


def test_every_name_the_code_uses_is_declared() -> None:
    used = set()
    for path in SRC.rglob("*.py"):
        used |= set(re.findall(r"kube-nudge\.io/[a-z0-9-]*[a-z0-9]", path.read_text()))
    declared = {annotation.name for annotation in CONTRACT}
    assert used - NOT_ANNOTATIONS - declared == set()


def test_each_name_is_declared_once_and_is_a_module_constant() -> None:
    names = [annotation.name for annotation in CONTRACT]
    assert len(names) == len(set(names))
    modules = [a] + [
        module for name, module in sys.modules.items() if name.startswith("kube_nudge.strategies.")
    ]
    constants = {
        v for m in modules for k, v in vars(m).items() if k.isupper() and isinstance(v, str)
    }
    assert set(names) <= constants
    assert copies.SNAPSHOT_FOR == "kube-nudge.io/snapshot-for"
    assert agentwire.LOADED_HASH == "kube-nudge.io/loaded-hash"


def test_parsed_declarations_fill_the_settings_fields() -> None:
    workload = {f.name for f in dataclasses.fields(a.WorkloadSettings)}
    filled = {f for d in a.WORKLOAD_ANNOTATIONS for f in _fields(d)}
    assert filled - MERGED_INTO_EXTRA <= workload
    source = {f.name for f in dataclasses.fields(a.SourceSettings)}
    assert {f for d in a.SOURCE_ANNOTATIONS for f in _fields(d)} <= source
    for annotation in a.WORKLOAD_ANNOTATIONS + a.SOURCE_ANNOTATIONS:
        assert annotation.by is By.USER and annotation.values and annotation.shown_default


def test_a_strategys_declarations_fill_its_own_settings_fields() -> None:
    for model in registry.model_extensions():
        parsed = [d for d in model.annotations if d.field]
        if not parsed:
            continue
        settings: Any = model.settings
        assert dataclasses.is_dataclass(settings)
        own = {f.name for f in dataclasses.fields(settings)}
        assert {f for d in parsed for f in _fields(d)} <= own
        for annotation in parsed:
            assert annotation.on is On.WORKLOAD and annotation.by is By.USER


def test_only_what_users_set_is_parsed() -> None:
    for annotation in CONTRACT:
        assert annotation.doc and annotation.doc == annotation.doc.strip()
        if annotation.by is not By.USER:
            assert not annotation.field and annotation.parse is None
        if annotation.label:
            assert annotation.on is On.COPY


def test_the_agents_copies_are_declared_as_the_agents() -> None:
    agents = {annotation.name for annotation in CONTRACT if annotation.by is By.AGENT}
    assert agents == {agentwire.LOADED_AT, agentwire.LOADED_HASH, agentwire.RELOAD_FAILED_AT}


def test_the_debounce_declaration_reads_the_flag_default() -> None:
    [debounce] = [d for d in a.WORKLOAD_ANNOTATIONS if d.name == a.DEBOUNCE]
    settings, _ = parse_workload({}, "ns", a.WorkloadDefaults(debounce=7.0))
    assert settings.debounce == 7.0
    assert "--debounce" in debounce.shown_default

"""The documented JSON Schemas, as validators for the unit and the integration tests."""

from __future__ import annotations

import json
from pathlib import Path

from jsonschema import Draft202012Validator

SCHEMAS = Path(__file__).parents[1] / "docs" / "schemas"
SCHEMA_FILE = SCHEMAS / "status-v1.json"


def status_validator() -> Draft202012Validator:
    """A validator of ``kube-nudge status -o json`` documents (docs/schemas/status-v1.json),
    the schema itself checked first."""
    schema = json.loads(SCHEMA_FILE.read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def plan_validator() -> Draft202012Validator:
    """A validator of ``kube-nudge plan -o json`` documents (docs/schemas/plan-v2.json), the
    schema itself checked first."""
    schema = json.loads((SCHEMAS / "plan-v2.json").read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def migrate_validator() -> Draft202012Validator:
    """A validator of ``kube-nudge migrate -o json`` documents (docs/schemas/migrate-v1.json)."""
    schema = json.loads((SCHEMAS / "migrate-v1.json").read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)

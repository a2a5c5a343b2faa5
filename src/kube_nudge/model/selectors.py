"""Label selectors: the text form checked before it reaches the API server, and the
structured form (a PodDisruptionBudget's ``spec.selector``) matched against labels.

An invalid ``--source-selector`` used to be discovered by the first list call, which then
failed forever: readiness stayed at 503 and nothing rolled. The grammar is Kubernetes'
(``labels.Parse``): comma-separated requirements ``key``, ``!key``, ``key=value``,
``key==value``, ``key!=value``, ``key in (a,b)``, ``key notin (a,b)``, ``key>1``, ``key<1``.
The same check guards `kube-nudge.io/pod-selector` on a ConfigMap or Secret.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["check_label_selector", "selector_matches"]

_DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY = rf"(?:{_DNS_LABEL}(?:\.{_DNS_LABEL})*/)?{_NAME}"
_VALUE = rf"(?:{_NAME})?"
_SET = rf"\(\s*{_VALUE}(?:\s*,\s*{_VALUE})*\s*\)"
_REQUIREMENT = (
    rf"\s*(?:!\s*{_KEY}"
    rf"|{_KEY}(?:\s*(?:==|=|!=)\s*{_VALUE}|\s+(?:in|notin)\s*{_SET}|\s*[<>]\s*-?[0-9]+)?)\s*"
)
_SELECTOR = re.compile(rf"{_REQUIREMENT}(?:,{_REQUIREMENT})*")


def check_label_selector(flag: str, text: str) -> str:
    """``text`` if it is a valid label selector, else ValueError naming ``flag`` (a flag or
    an annotation) and the value."""
    if not text.strip():
        raise ValueError(f"{flag} '': give a label selector such as app=web, or omit it")
    if len(text) > 4096 or _SELECTOR.fullmatch(text) is None:
        shown = text if len(text) <= 100 else text[:100] + "..."
        raise ValueError(
            f"{flag} {shown!r}: not a label selector; want requirements such as "
            "'app=web', 'tier in (a,b)', '!legacy', joined by commas"
        )
    return text


def selector_matches(selector: object, labels: Mapping[str, str]) -> bool:
    """Whether a structured label selector (``matchLabels`` and ``matchExpressions`` with
    In, NotIn, Exists, DoesNotExist) selects an object with ``labels``.

    As the API reads a PodDisruptionBudget's: an empty selector selects everything, a
    missing one (None) nothing. Anything unreadable (an unknown operator) selects nothing.
    """
    if not isinstance(selector, Mapping):
        return False
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or ()
    if not isinstance(match_labels, Mapping) or not isinstance(expressions, list | tuple):
        return False
    if any(labels.get(key) != value for key, value in match_labels.items()):
        return False
    return all(_expression_matches(expression, labels) for expression in expressions)


def _expression_matches(expression: Any, labels: Mapping[str, str]) -> bool:
    if not isinstance(expression, Mapping):
        return False
    key, operator = expression.get("key"), expression.get("operator")
    values = expression.get("values") or ()
    if not isinstance(key, str) or not isinstance(values, list | tuple):
        return False
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    return False

"""Label selectors checked before they reach the API server.

An invalid ``--source-selector`` used to be discovered by the first list call, which then
failed forever: readiness stayed at 503 and nothing rolled. The grammar is Kubernetes'
(``labels.Parse``): comma-separated requirements ``key``, ``!key``, ``key=value``,
``key==value``, ``key!=value``, ``key in (a,b)``, ``key notin (a,b)``, ``key>1``, ``key<1``.
"""

from __future__ import annotations

import re

__all__ = ["check_label_selector"]

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
    """``text`` if it is a valid label selector, else ValueError naming ``flag``."""
    if not text.strip():
        raise ValueError(f"{flag} '': give a label selector such as app=web, or omit the flag")
    if len(text) > 4096 or _SELECTOR.fullmatch(text) is None:
        shown = text if len(text) <= 100 else text[:100] + "..."
        raise ValueError(
            f"{flag} {shown!r}: not a label selector; want requirements such as "
            "'app=web', 'tier in (a,b)', '!legacy', joined by commas"
        )
    return text

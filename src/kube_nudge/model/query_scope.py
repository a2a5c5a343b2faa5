"""Whether an analysis query reads only its own namespace's series
(``--analysis-namespace-label``), pure.

Without it, whoever may write an analysis template in one namespace may query any series
the allowed Prometheus servers hold (other namespaces', kube-state-metrics' labels), and
the values come back in the Events of their namespace. With it, as prom-label-proxy
enforces a tenant's label, every series selector of the query must carry the matcher
``LABEL="<the workload's namespace>"`` (exactly: ``=``, not a regular expression), in
each branch of an ``or`` of matchers; a query that can't be proven so is refused, never
rewritten. The query is parsed by promql-parser (GreptimeDB's parser, written in Rust; no
parser of ours), so a selector inside a subquery, a function or an aggregation is seen as
Prometheus sees it. ``info()`` reads ``target_info`` series that no selector names: it
is refused.
"""

from __future__ import annotations

import re
from typing import Final

import promql_parser

__all__ = ["LABEL_NAME", "QueryScopeError", "unscoped_selectors"]

#: A Prometheus label name (the data model's rule).
LABEL_NAME: Final = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
#: Functions that read series no selector of the query names.
_IMPLICIT_READS: Final = frozenset({"info"})


class QueryScopeError(ValueError):
    """A query that does not parse as PromQL (one line)."""


def unscoped_selectors(query: str, label: str, namespace: str) -> list[str]:
    """The parts of ``query`` that may read series outside ``namespace``: each selector
    without ``label="namespace"`` (as PromQL writes it), and each call of a function that
    reads series implicitly; empty when the query is scoped. ``QueryScopeError`` when it
    does not parse."""
    try:
        expression = promql_parser.parse(query)
    except ValueError as exc:
        raise QueryScopeError(f"not PromQL: {str(exc).splitlines()[0][:200]}") from None
    found: list[str] = []

    def visit(node: promql_parser.Expr) -> bool:
        if isinstance(node, promql_parser.VectorSelector) and not _scoped(node, label, namespace):
            found.append(_shown(node))
        elif isinstance(node, promql_parser.Call) and node.func.name in _IMPLICIT_READS:
            found.append(f"{node.func.name}(…), which reads series no selector names")
        return True

    promql_parser.walk(expression, visit)
    return found


def _shown(selector: promql_parser.VectorSelector) -> str:
    """``selector`` as PromQL writes it: ``up``, ``up{job="a"}``, ``{a="1" or b="2"}``."""
    matchers = selector.matchers
    branches = matchers.or_matchers or [matchers.matchers]
    inside = " or ".join(",".join(str(m) for m in branch) for branch in branches if branch)
    return f"{selector.name or ''}{{{inside}}}" if inside else selector.name or "{}"


def _scoped(selector: promql_parser.VectorSelector, label: str, namespace: str) -> bool:
    """Whether every branch of ``selector``'s matchers requires ``label="namespace"``."""
    matchers = selector.matchers
    branches = matchers.or_matchers or [matchers.matchers]
    return all(
        any(
            m.op == promql_parser.MatchOp.Equal and m.name == label and m.value == namespace
            for m in branch
        )
        for branch in branches
    )

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
is refused. (The parser also takes ``or`` between label matchers, which Prometheus 3.16
refuses; and it refuses a few newer forms that Prometheus takes, such as ``1_000``: such a
query is refused as not PromQL.)

A template author chooses the query, so checking it must stay cheap whatever they write:
reading the parsed tree from Python costs about the square of its size, so a query longer
than ``MAX_QUERY_LENGTH`` characters or nested deeper than ``MAX_NESTING`` brackets is
refused before it is parsed (a few milliseconds at the limits, where an 8 KB query once
took 25 s of the event loop).
"""

from __future__ import annotations

import re
from typing import Final

import promql_parser

__all__ = ["LABEL_NAME", "MAX_NESTING", "MAX_QUERY_LENGTH", "QueryScopeError", "unscoped_selectors"]

#: A Prometheus label name (the data model's rule).
LABEL_NAME: Final = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
#: The longest query checked, in characters.
MAX_QUERY_LENGTH: Final = 4096
#: The deepest nesting of brackets (``(``, ``[``, ``{``) checked, outside strings.
MAX_NESTING: Final = 32
#: Functions that read series no selector of the query names.
_IMPLICIT_READS: Final = frozenset({"info"})


class QueryScopeError(ValueError):
    """A query that does not parse as PromQL (one line)."""


def unscoped_selectors(query: str, label: str, namespace: str) -> list[str]:
    """The parts of ``query`` that may read series outside ``namespace``: each selector
    without ``label="namespace"`` (as PromQL writes it), and each call of a function that
    reads series implicitly; empty when the query is scoped. ``QueryScopeError`` when it
    does not parse."""
    if len(query) > MAX_QUERY_LENGTH:
        raise QueryScopeError(
            f"{len(query)} characters, more than the {MAX_QUERY_LENGTH} a query may have"
        )
    if (depth := _nesting(query)) > MAX_NESTING:
        raise QueryScopeError(f"nested {depth} brackets deep, more than {MAX_NESTING}")
    try:
        expression = promql_parser.parse(query)
    except ValueError as exc:
        raise QueryScopeError(f"not PromQL: {str(exc).splitlines()[0][:200]}") from None
    found: list[str] = []
    stack = [expression]
    while stack:  # our own walk: the library's costs the cube of the depth
        node = stack.pop()
        if isinstance(node, promql_parser.VectorSelector) and not _scoped(node, label, namespace):
            found.append(_shown(node))
        elif isinstance(node, promql_parser.Call) and node.func.name in _IMPLICIT_READS:
            found.append(f"{node.func.name}(…), which reads series no selector names")
        stack.extend(reversed(_children(node)))
    return found


def _children(node: promql_parser.Expr) -> list[promql_parser.Expr]:
    """The expressions ``node`` holds, in the order PromQL writes them."""
    if isinstance(node, promql_parser.BinaryExpr):
        return [node.lhs, node.rhs]
    if isinstance(node, promql_parser.AggregateExpr):
        return [node.expr] if node.param is None else [node.param, node.expr]
    if isinstance(
        node, promql_parser.UnaryExpr | promql_parser.ParenExpr | promql_parser.SubqueryExpr
    ):
        return [node.expr]
    if isinstance(node, promql_parser.Call):
        return [arg for arg in node.args if isinstance(arg, promql_parser.Expr)]
    if isinstance(node, promql_parser.MatrixSelector):
        return [node.vector_selector]
    return []  # selectors' matchers, numbers and strings: nothing nested


def _nesting(query: str) -> int:
    """The deepest nesting of brackets in ``query``, outside quoted strings."""
    depth = deepest = 0
    quote: str | None = None
    escaped = False
    for char in query:
        if quote is not None:
            if escaped:
                escaped = False
            elif char == "\\" and quote != "`":
                escaped = True
            elif char == quote:
                quote = None
            continue
        if char in "\"'`":
            quote = char
        elif char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}":
            depth -= 1
    return deepest


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

"""Results files, read back; and the scenarios rerun alone beside the full run.

The reload agent's scenario needs no cluster, the real node's needs root, and the scale
scenario takes its own quarter of an hour, so each is rerun alone when what it measures
changes (``BENCH_OUTPUT=agent``, ``BENCH_OUTPUT=agent-node``, ``BENCH_OUTPUT=scale``; kept
in bench/results/); so is ``writers`` when kube-nudge's quiet windows change
(``BENCH_OUTPUT=writers``), and ``analysis`` when the analysis gate changes
(``BENCH_OUTPUT=analysis``). On the latest page a companion run newer than the full run
stands in for that scenario, and so does an older one when the full run didn't run it, said
so where it appears, instead of figures copied in by hand: for the tools it ran; the
others keep the full run's figures.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

COMPANIONS = ("agent", "agent-node", "scale", "writers", "analysis")


def unclean(value: Any) -> Any:
    """null → NaN in summaries read back, so figures compare as numbers."""
    if value is None:
        return math.nan
    if isinstance(value, dict):
        return {k: unclean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unclean(v) for v in value]
    return value


def load(path: Path) -> dict[str, Any]:
    """A results file with its summaries' nulls read back as NaN."""
    document: dict[str, Any] = json.loads(path.read_text())
    for scenarios in document.get("results", {}).values():
        for data in scenarios.values():
            if "summary" in data:
                data["summary"] = unclean(data["summary"])
    return document


def dirty(document: dict[str, Any]) -> bool:
    """Whether a results file was measured on a tree that was not its commit: uncommitted
    changes (``tree.dirty``), a tree that changed during the run (``tree.end``), or, in
    files from before ``tree`` was recorded, a ``+dirty`` commit or a commit that moved."""
    tree, machine = document.get("tree") or {}, document.get("machine") or {}
    marks = f"{machine.get('git_commit', '')} {machine.get('git_commit_end') or ''}"
    return bool(tree.get("dirty") or tree.get("end") or "+dirty" in marks
                or machine.get("git_commit_end"))  # fmt: skip


def with_companions(document: dict[str, Any], results_dir: Path) -> dict[str, Any]:
    """``document`` with each companion run in ``results_dir`` standing in for its scenario
    when it is newer, or the full run didn't run that scenario; ``companions`` says which,
    from when, at which commit and where."""
    merged = copy.deepcopy(document)
    merged["companions"] = {}
    for name in COMPANIONS:
        path = results_dir / f"{name}.json"
        if not path.exists():
            continue
        other = load(path)
        newer = other["generated"] > document["generated"]
        if not newer and _ran(document, name):
            continue  # the full run measured it since
        for tool, scenarios in other["results"].items():
            if name in scenarios:
                merged["results"].setdefault(tool, {})[name] = scenarios[name]
        merged["companions"][name] = {
            "kept": sorted(
                tool
                for tool, scenarios in document["results"].items()
                if _measured(scenarios, name) and name not in other["results"].get(tool, {})
            ),
            "generated": other["generated"],
            "newer": newer,
            "commit": other["machine"]["git_commit"],
            "kubernetes": other["machine"].get("kubernetes"),
            "dirty": dirty(other),
            "repeat": other["sizes"]["repeat"],
            "command": other["command"],
            "sizes": other["sizes"],
            "plots": [f"{name}-{plot}" for plot in other.get("plots", [])],
        }
    return merged


def _measured(scenarios: dict[str, Any], name: str) -> bool:
    """Whether a tool's ``scenarios`` hold runs of ``name`` (a skip is none)."""
    return name in scenarios and "skipped" not in scenarios[name]


def _ran(document: dict[str, Any], name: str) -> bool:
    """Whether ``document`` has runs of scenario ``name`` for any tool."""
    return any(_measured(scenarios, name) for scenarios in document["results"].values())


def stands_in(document: dict[str, Any], scenario: str) -> dict[str, Any] | None:
    """The companion run standing in for ``scenario`` in a merged ``document``, if any."""
    return (document.get("companions") or {}).get(scenario)


def which_run(name: str, companion: dict[str, Any]) -> str:
    """The companion run of scenario ``name``, as a table names it beside its figures: when,
    at which commit, on which control plane, and whose rows it left to the full run."""
    on = f" on Kubernetes {companion['kubernetes']}" if companion.get("kubernetes") else ""
    kept = companion.get("kept")
    others = f" ({', '.join(kept)}: the full run)" if kept else ""
    return f"`{name}` run {companion['generated']}, commit {companion['commit']}{on}{others}"


def runs_of(document: dict[str, Any], scenarios: tuple[str, ...]) -> str:
    """The runs other than ``document``'s own that ``scenarios``' figures come from, "; "
    between them; "" when they all come from the document's run."""
    found = [(name, stands_in(document, name)) for name in scenarios]
    return "; ".join(which_run(name, companion) for name, companion in found if companion)


def intro(name: str, companion: dict[str, Any]) -> str:
    """The line that says a section comes from its own run."""
    warning = (" **Measured on a dirty tree**: these figures belong to no commit; measure "
               "them again on a committed tree before quoting them.")  # fmt: skip
    dirty = warning if companion["dirty"] else ""
    kept = companion.get("kept")
    others = f" The rows of {', '.join(kept)} are the full run's." if kept else ""
    when = (
        "newer than the full run above"
        if companion.get("newer", True)
        else "the full run above did not run this scenario"
    )
    on = f" on Kubernetes {companion['kubernetes']}" if companion.get("kubernetes") else ""
    return (
        f"From its own run ({companion['generated']}, {companion['repeat']} repetition(s), "
        f"kube-nudge at commit {companion['commit']}{on}; {when}): "
        f"`{companion['command']}`, in [bench/results/{name}.md](bench/results/{name}.md)."
        f"{others}{dirty}"
    )

"""Benchmark figures quoted in README.md and docs/, generated from the committed results.

A figure outside BENCHMARKS.md stands between markers that name the results file it comes
from::

    <!-- bench:NAME bench/results/FILE.json -->
    ...generated...
    <!-- /bench:NAME -->

``make bench`` rewrites every block after writing its results (a block whose file did not
change comes out the same); ``python -m bench.docfigures`` does it alone, and
``python -m bench.docfigures --check`` (and a unit test) fails when a block differs from what
its file gives, so no figure is copied by hand. A results file measured on a dirty tree (or
a dirty companion run standing in for a scenario of the latest run) is refused: its figures
belong to no commit (docs/contributing.md, "Figures"). Each block ends with how many commits
since its figures' commit changed src/ (``bench.gitstate.src_changes_since``, as the
compatibility page says of its proof), so a block is regenerated after every such commit.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import companions, targets
from bench.companions import dirty, with_companions
from bench.config import ROOT
from bench.gitstate import src_changes_since, src_lag
from bench.profile import HTTP, LABELS, category_names
from bench.report import fmt, provenance
from bench.targets import KUBE_NUDGE

Render = Callable[[dict[str, Any]], str]
BLOCK = re.compile(
    r"(?P<open><!-- bench:(?P<name>[\w-]+) (?P<source>\S+\.json) -->\n)"
    r"(?P<body>.*?)(?P<close><!-- /bench:(?P=name) -->)",
    re.DOTALL,
)
DOCUMENTS = ("README.md", "CHANGELOG.md", "docs/*.md")


def _median(document: dict[str, Any], tool: str, scenario: str, metric: str) -> float | None:
    summary = ((document["results"].get(tool) or {}).get(scenario) or {}).get("summary") or {}
    value = (summary.get(metric) or {}).get("median")
    return None if value is None else float(value)


def _figure(document: dict[str, Any], tool: str, scenario: str, metric: str, unit: str = "",
            projected: str = "") -> str:  # fmt: skip
    """The median as the page gives it, ≈ when a run of it was projected; "" if missing."""
    value = _median(document, tool, scenario, metric)
    if value is None:
        return ""
    runs = ((document["results"].get(tool) or {}).get(scenario) or {}).get("runs") or []
    approx = "≈ " if projected and any(run.get(projected) for run in runs) else ""
    return approx + fmt(value, unit)


#: The benchmarks page's summary rows: label, scenario, metrics joined by " / ", their unit.
SUMMARY_ROWS: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("Reaction latency p50 / p99, `--debounce 0` (ms)", "latency", ("p50_ms", "p99_ms"), ""),
    ("Reaction latency p50 / p99, kube-nudge's defaults (ms)", "latency-debounce",
     ("p50_ms", "p99_ms"), ""),
    ("Fan-out: 1 ConfigMap -> many Deployments, all rolled (s)", "fanout", ("fanout_s",), ""),
    ("Burst: many ConfigMaps changed at once, all rolled (s)", "burst", ("fanout_s",), ""),
    ("Tool CPU per write, fan-out (ms)", "fanout", ("tool_cpu_ms_per_write",), ""),
    ("Memory at scale: steady / peak RSS (MiB)", "memory",
     ("steady_rss_mib", "peak_rss_total_mib"), ""),
    ("API requests per change (of which reads)", "api-cost",
     ("requests_per_change", "reads_per_change"), ""),
    ("API requests per restart, Leases aside", "api-cost", ("restart_requests",), ""),
    ("Writes on restarts with nothing changed", "api-cost", ("restart_writes",), ""),
    ("Rollouts from a flapping Secret", "flapping", ("rollouts",), ""),
)  # fmt: skip
PROJECTED = {"fanout_s": "fanout_projected"}


def _summary_cell(document: dict[str, Any], tool: str, scenario: str,
                  metrics: tuple[str, ...]) -> str:  # fmt: skip
    values = [_figure(document, tool, scenario, m, projected=PROJECTED.get(m, "")) for m in metrics]
    if not any(values):
        return ""
    if len(values) == 2 and metrics[1] == "reads_per_change":
        return f"{values[0]} ({values[1]})"
    return " / ".join(v or "n/a" for v in values)


def latest_summary(document: dict[str, Any]) -> str:
    """The benchmarks page's table of the latest full run, and the targets."""
    tools = [label for label, info in document["tools"].items()
             if any(_median(document, label, s, m[0]) is not None
                    for _, s, m, _ in SUMMARY_ROWS)]  # fmt: skip
    sizes, machine = document["sizes"], document["machine"]
    lines = [
        *provenance(document),
        f"Run {document['generated']} ({document['mode']} sizes, "
        f"{document['duration_min']:.1f} min, {machine['nproc']} cores shared by the whole "
        f"control plane), kube-nudge at commit {_commit(document)} on "
        f"Kubernetes {machine.get('kubernetes', 'unknown')}; "
        f"median of {sizes['repeat']} repetition(s); a tool still rolling after "
        f"{sizes['roll_timeout']:g} s is projected from its rate (≈), and so is any ratio "
        "resting on such a time. The spreads, the ratios and the method are in "
        "`BENCHMARKS.md` at the repository's root.",
        "",
        "| Scenario | " + " | ".join(tools) + " |",
        "|---|" + "---|" * len(tools),
    ]
    for label, scenario, metrics, _ in SUMMARY_ROWS:
        cells = [_summary_cell(document, tool, scenario, metrics) for tool in tools]
        other = companions.runs_of(document, (scenario,))
        if any(cells):
            lines.append(f"| {label}{f' ({other})' if other else ''} | " + " | ".join(cells)
                         + " |")  # fmt: skip
    lines += ["", "kube-nudge's targets in that run; a row whose figures come from a run of "
              f"its own names that run, its commit and control plane (\"{targets.OTHER_RUN}\"):",
              "", *targets.table(document)]  # fmt: skip
    return "\n".join(lines) + "\n"


def snapshot_cost(document: dict[str, Any]) -> str:
    """Strategy snapshot against rollout, from the same run."""
    snap = "kube-nudge (snapshot)"

    def both(scenario: str, metric: str, unit: str) -> str:
        return (f"{_figure(document, snap, scenario, metric, unit) or 'n/a'} vs "
                f"{_figure(document, KUBE_NUDGE, scenario, metric, unit) or 'n/a'}")  # fmt: skip

    workloads = document["sizes"]["fanout_workloads"]
    return (
        f"reaction latency p50 {both('latency', 'p50_ms', 'ms')} for `rollout`, p99 "
        f"{both('latency', 'p99_ms', 'ms')}; a change reaching {workloads:,} Deployments "
        f"{both('fanout', 'fanout_s', 's')} (BENCHMARKS.md, run {document['generated']}, "
        f"commit {_commit(document)}).\n"
    )


def _commit(document: dict[str, Any]) -> str:
    """The commit a bench run measured (its ``+dirty`` mark aside: dirty runs are refused)."""
    return str(document["machine"]["git_commit"]).split("+")[0]


def _getter(document: dict[str, Any], scenario: str) -> Callable[..., str]:
    """``get(metric, unit="")``: kube-nudge's median in ``scenario`` as the page gives it."""

    def get(metric: str, unit: str = "") -> str:
        return _figure(document, KUBE_NUDGE, scenario, metric, unit) or "n/a"

    return get


def agent(document: dict[str, Any]) -> str:
    """The reload agent's latency, reloads and memory."""
    get = _getter(document, "agent")

    rss = _median(document, KUBE_NUDGE, "agent", "idle_rss_mib")
    mb = f" ({fmt(round(rss * 2**20 / 1e6, 1), 'MB')})" if rss is not None else ""
    return (
        f"p50 {get('default_p50_ms', 'ms')}, p99 {get('default_p99_ms', 'ms')} at the defaults, "
        f"and p50 {get('polling_p50_ms', 'ms')}, p99 {get('polling_p99_ms', 'ms')} with "
        f"`--watch-mode poll`; {get('reloads')} reloads for {get('swaps')} swaps. Idle at its "
        f"defaults the agent used {get('default_idle_cpu_pct')} % of a core and "
        f"{get('idle_rss_mib', 'MiB')} RSS{mb}; {get('rss_mib', 'MiB')} after the swaps and "
        f"scrapes, peak (VmHWM) {get('peak_rss_any_mib', 'MiB')} (run {_run(document, 'agent')}).\n"
    )


def _run(document: dict[str, Any], scenario: str) -> str:
    """When the figures of ``scenario`` were measured: the run's time, and a companion's
    commit and control plane too when one stands in for the run's own."""
    companion = companions.stands_in(document, scenario)
    if companion is None:
        return str(document["generated"])
    return companions.which_run(scenario, companion)


def agent_node(document: dict[str, Any]) -> str:
    """Hot reload on the real node, with and without the nudge."""
    get, ms = _getter(document, "agent-node"), "ms"
    return (
        f"with the nudge (`--debounce 0`) p50 {get('nudge_p50_ms', ms)}, p99 "
        f"{get('nudge_p99_ms', ms)} ({get('nudge_samples')} changes per run, "
        f"{get('nudge_min_ms')}-{get('nudge_max_ms', ms)}); at kube-nudge's defaults p50 "
        f"{get('debounced_p50_ms', ms)}; without any nudge, waiting for the kubelet's sync, p50 "
        f"{get('sync_p50_ms', ms)}, p99 {get('sync_p99_ms', ms)} ({get('sync_samples')} per "
        f"run, {get('sync_min_ms')}-{get('sync_max_ms', ms)}); medians of "
        f"{document['sizes']['repeat']} runs, {document['generated']}.\n"
    )


def analysis(document: dict[str, Any]) -> str:
    """The analysis gate at a fleet's size: its delay beyond the schedule and its parts, the
    queries it sent, kube-nudge's CPU and memory meanwhile."""
    get, ms = _getter(document, "analysis"), "ms"
    runs = targets.Figures(document["results"], document["tools"]).runs(KUBE_NUDGE, "analysis")
    if not runs:
        return "Not measured yet.\n"
    run = runs[0]
    timing = (f"`initialDelay: {run['initial_delay_ms'] / 1000:g}s`, `interval: "
              f"{run['interval_ms'] / 1000:g}s`, `count: {run['count']:g}`")  # fmt: skip
    return (
        f"{get('workloads')} Deployments gated in one wave by one template ({timing}: "
        f"{fmt(run['nominal_ms'] / 1000, 's')} at least), after one ConfigMap change rolled "
        f"them all: the gate added p50 {get('delay_p50_ms', ms)}, p99 "
        f"{get('delay_p99_ms', ms)}, max {get('delay_max_ms', ms)} beyond that schedule (one "
        f"interval: {fmt(run['interval_ms'], ms)}); of which the analysis's start after the "
        f"rollout completed p50 {get('start_lag_p50_ms', ms)}, p99 {get('start_lag_p99_ms', ms)}"
        f", and the last measurement's lateness against the schedule p50 "
        f"{get('late_p50_ms', ms)}, p99 {get('late_p99_ms', ms)}. {get('analyses_passed')} "
        f"analyses passed. Prometheus answered {get('queries')} queries, {get('qps_mean')} a "
        f"second on average during the analyses and {get('qps_peak')} at most over a second; "
        f"kube-nudge used {get('cpu_pct')} % of a core on average meanwhile "
        f"({get('cpu_peak_pct')} % at most over a second, the machine's CPUs "
        f"{get('machine_busy_pct')} % busy), its RSS {get('rss_before_mib', 'MiB')} before the "
        f"change and at most {get('rss_peak_mib', 'MiB')} during the analyses. Medians of "
        f"{len(runs)} runs, {document['machine']['nproc']} cores shared by the whole control "
        f"plane ({_run(document, 'analysis')}, commit {_commit(document)} on Kubernetes "
        f"{document['machine'].get('kubernetes')}, `{document['command']}`).\n"
    )


def cpu_profile(document: dict[str, Any]) -> str:
    """Where kube-nudge's CPU went in the fan-out and burst windows (``BENCH_PROFILE=1``),
    and what it would be per write if its HTTP and TLS work cost nothing."""
    columns = (("fanout", "fan-out"), ("burst", "burst"))
    lines = ["| Share of kube-nudge's busy CPU samples | " + " | ".join(c for _, c in columns)
             + " |", "|---|" + "---:|" * len(columns)]  # fmt: skip
    for category in category_names():
        shares = [_median(document, KUBE_NUDGE, scenario, f"cpu_pct_{category}")
                  for scenario, _ in columns]  # fmt: skip
        cells = ["n/a" if share is None else f"{share:.1f} %" for share in shares]
        lines.append(f"| {LABELS[category]} | " + " | ".join(cells) + " |")
    figures = targets.Figures(document["results"], document["tools"])
    minimal = figures.minimal()
    rest = []
    for scenario, name in columns:
        ours = _median(document, KUBE_NUDGE, scenario, "tool_cpu_ms_per_write")
        floor = _median(document, minimal, scenario, "tool_cpu_ms_per_write") if minimal else None
        http = [_median(document, KUBE_NUDGE, scenario, f"cpu_pct_{c}") for c in HTTP]
        if ours is None or not floor or None in http:
            continue
        without = ours * (1 - sum(h or 0.0 for h in http) / 100)
        ratio = f"{without / floor:,.1f}x the minimal client's {fmt(floor, 'ms')}"
        rest.append(f"{name} {fmt(ours, 'ms')} per write, {fmt(without, 'ms')} without them "
                    f"({ratio})")  # fmt: skip
    runs = len(figures.runs(KUBE_NUDGE, "fanout"))
    return (
        "\n".join(lines) + f"\n\nMedians of {runs} runs ({document['generated']}, kube-nudge "
        f"at commit {_commit(document)} on Kubernetes {document['machine'].get('kubernetes')}, "
        f"`{document['command']}`; py-spy's own CPU shares the machine, so these runs' times "
        "are not the page's). The HTTP and TLS rows (the write's request; the event loop, TLS "
        "and aiohttp's callbacks) are what another HTTP client could make cheaper: "
        + "; ".join(rest)
        + ".\n"
    )


#: How make bench-http's candidates are named on the pages.
HTTP_NAMES = {
    "raw asyncio": "the minimal client's hand-written HTTP/1.1",
    "kube-nudge KubeClient": "kube-nudge's client (KubeClient on aiohttp)",
}


def http_cost(document: dict[str, Any]) -> str:
    """CPU per request of each HTTP client ``make bench-http`` measured, cheapest first."""
    ranked = sorted(document["candidates"].items(), key=lambda item: item[1]["cpu_ms_median"])

    def label(name: str, version: str) -> str:
        return HTTP_NAMES.get(name) or f"{name} {version}".strip()

    figures = ", ".join(
        f"{label(name, entry['version'])} {entry['cpu_ms_median']:.3f} ms" for name, entry in ranked
    )
    return (
        f"CPU per request, median of {document['rounds']} rounds of {document['requests']:,} "
        f"merge patches, {document['concurrency']} in flight ({document['generated']}, "
        f"commit {(document.get('tree') or {}).get('commit', 'unknown')}, `make bench-http`): "
        f"{figures}.\n"
    )


RENDERERS: dict[str, Render] = {
    "latest-summary": latest_summary,
    "snapshot-cost": snapshot_cost,
    "agent": agent,
    "agent-node": agent_node,
    "analysis": analysis,
    "cpu-profile": cpu_profile,
    "http-cost": http_cost,
}


#: What measures a block's figures again, when the product has moved on since.
REMEASURE = {"http-cost": "make bench-http"}


def figures_commit(name: str, document: dict[str, Any]) -> str:
    """The commit a block's figures were measured at: the companion run's when one stands
    in for the block's scenario, else the results file's (its ``tree``, else its machine's)."""
    companion = companions.stands_in(document, name)
    if companion is not None:
        return str(companion["commit"])
    return str((document.get("tree") or {}).get("commit") or _commit(document))


def lag(name: str, commit: str, behind: int) -> str:
    """The sentence ending block ``name``: how far its figures are behind src/ at HEAD."""
    again = REMEASURE.get(name, "make bench")
    return src_lag(
        commit, behind, current="these figures measure the product as it is", what="this block",
        stale=f"these figures are that far behind the product; `{again}` measures them again",
    )  # fmt: skip


def documents(root: Path = ROOT) -> list[Path]:
    """The files whose figures come from results: README.md, CHANGELOG.md and docs/*.md."""
    return sorted(path for pattern in DOCUMENTS for path in root.glob(pattern))


class DirtySource(ValueError):
    """A block names results measured on a tree that was not a commit."""


def _refuse_dirty(source: str, document: dict[str, Any]) -> None:
    runs = [source] if dirty(document) else []
    runs += [f"its companion bench/results/{name}.json" for name, companion
             in (document.get("companions") or {}).items() if companion["dirty"]]  # fmt: skip
    if runs:
        raise DirtySource(
            f"{' and '.join(runs)} measured on a dirty tree, so its figures belong "
            "to no commit; measure again on a committed tree, or quote the figures as "
            "historical with their commit (docs/contributing.md, Figures)"
        )


def render(text: str, root: Path = ROOT, behind: Callable[[str], int] = src_changes_since) -> str:
    """``text`` with every block generated again from its results file, ending with how many
    commits since its figures' commit changed src/ (``behind``)."""

    def block(match: re.Match[str]) -> str:
        name, source = match["name"], match["source"]
        if name not in RENDERERS:
            raise ValueError(f"unknown figures block {name!r}; known: {', '.join(RENDERERS)}")
        path = root / source
        document = json.loads(path.read_text())
        if path.stem == "latest":
            document = with_companions(document, path.parent)
        _refuse_dirty(source, document)
        commit = figures_commit(name, document)
        figures = RENDERERS[name](document)
        gap = "\n" if figures.splitlines()[-1].startswith("|") else ""  # a table ends first
        figures += gap + lag(name, commit, behind(commit)) + "\n"
        return match["open"] + figures + match["close"]

    return BLOCK.sub(block, text)


def stale(root: Path = ROOT) -> list[str]:
    """The documents whose blocks differ from their results files."""
    return [str(p.relative_to(root)) for p in documents(root) if render(p.read_text(), root)
            != p.read_text()]  # fmt: skip


def update(root: Path = ROOT) -> list[Path]:
    """Rewrite every block; return the documents changed. Renders all of them before writing
    any, so a refused (dirty) source leaves every page as it was."""
    texts = {path: path.read_text() for path in documents(root)}
    fresh = {path: render(text, root) for path, text in texts.items()}
    changed = [path for path in texts if fresh[path] != texts[path]]
    for path in changed:
        path.write_text(fresh[path])
    return changed


def main(argv: list[str]) -> int:
    """``--check``: exit 1 naming the stale documents; else rewrite them. Exit 1 with one
    line when a block names a dirty results file."""
    try:
        return _main(argv)
    except DirtySource as refused:
        print(f"bench.docfigures: {refused}", file=sys.stderr)
        return 1


def _main(argv: list[str]) -> int:
    if argv == ["--check"]:
        found = stale()
        for name in found:
            fix = "PYTHONPATH=. .venv/bin/python -m bench.docfigures"
            print(f"{name}: benchmark figures differ from their results file; run `{fix}`",
                  file=sys.stderr)  # fmt: skip
        return 1 if found else 0
    for path in update():
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

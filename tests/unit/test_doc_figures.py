"""Every measured figure in README.md, CHANGELOG.md and docs/*.md is generated from a committed
results file or labelled historical with its commit (docs/contributing.md, "Figures"): the
whole of every page, not one section.

A figure is a number with a unit of time, size, share or ratio, or a count of tests. Outside
code, it may stand only
- inside a generated block: ``<!-- bench:NAME FILE -->`` (bench/docfigures.py, from a
  committed results file of a clean tree), the fault and sabotage tables of
  docs/reliability.md (tests/integration/reliability_tables.py, from their committed
  records) or the annotation table's markers;
- inside a historical block, ``<!-- historical: COMMIT -->`` … ``<!-- /historical -->``,
  whose text says "commit COMMIT" where a reader sees it, COMMIT being in the history;
- as a setting, not a measurement: a duration written Go's way (``15s``, ``100ms``), or one
  of the SETTINGS phrases below, each what the code or chart sets.
"""

from __future__ import annotations

import re
import shutil
import subprocess  # nosec B404 # git cat-file, read-only
from pathlib import Path

import pytest
from bench import docfigures

from tests.integration import reliability_tables

REPO = Path(__file__).resolve().parents[2]

#: A number and its unit; durations with no space are Go-style settings (``15s``, ``2m``).
FIGURE = re.compile(
    r"(?<![\w.\-/])[~+]?\d[\d,]*(?:\.\d+)?"
    r"(?: ?(?:%|x|MiB|MB|KiB|kB|GiB|GB|tests?)| (?:ms|s|min|minutes?|seconds?|h|hours?))(?!\w)"
)
HISTORICAL = re.compile(
    r"<!-- historical: (?P<commit>[0-9a-f]{7,40}) -->\n(?P<body>.*?)<!-- /historical -->",
    re.DOTALL,
)
ANNOTATION_TABLE = re.compile(
    r"<!-- annotation-table:begin .*?<!-- annotation-table:end -->", re.DOTALL
)
CODE = (re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE), re.compile(r"`[^`\n]*`"),
        re.compile(r"<!--.*?-->", re.DOTALL), re.compile(r"\]\([^)\s]*\)"))  # fmt: skip

#: Settings written in prose, with what sets them: what the product, chart, tests or bench are
#: configured to do, not what was measured. Each phrase must still occur (none outlives its
#: sentence) and hold a figure.
SETTINGS: dict[str, str] = {
    "3 rollouts per 5 minutes": "the default flap cap, 3/5m",
    "with\nup to 20% jitter": "the leader election's retry jitter (runtime/leader.py)",
    "at most 3 times in 5 minutes": "the default flap cap, 3/5m",
    "changed for 50 ms": "--quiet-window's default",
    "quiet for 50 ms": "--quiet-window's default",
    "rolls within about 50 ms": "--quiet-window's default",
    "never later than 2 s": "the auto window's cap (model/pacing.py)",
    "at most 2 s;": "the auto window's cap (model/pacing.py)",
    "a controller, a script) | 50 ms |": "model/pacing.py, per writer",
    ") | 500 ms |": "model/pacing.py, per writer",
    ") | 1 s |": "model/pacing.py, per writer",
    "between its writes) | 1.5 s |": "model/pacing.py, per writer",
    "changes 1.5 s apart inside a 3 s window": "a test's scenario",
    "API server 100 ms away": "the round trip the writer windows assume (ASSUMED_RTT), which "
    "tests/integration/test_coalescing_writers.py puts between kubectl or helm and the API server",
    "further away than 100 ms": "the round trip the writer windows assume (ASSUMED_RTT)",
    "(lease 3 s)": "the failover scenario's lease (docs/reliability.md)",
    "kept down 8 s": "the API server scenario's outage",
    "the 10 s renew deadline": "the leader election's default renew deadline",
    "(here 3 s, default 90 s)": "the silent-watch scenario's watchdog, and the default",
    "for 6.5 s": "the throttle scenario's length",
    "(at most 5 s)": "an Event's wait for template writes in flight",
    "no byte for 90 s": "the watchdog's silence limit",
    "at most every 60 s": "API discovery's backoff cap",
    "an interval under 10 s is": "--audit-interval's floor",
    "5 s per attempt and 60 s in all": "the notifications' retry budget",
    "loaded within 30 s": "runtime/http.py, TLS_CHECK_SECONDS",
    "within 30 s of the": "runtime/http.py, TLS_CHECK_SECONDS",
    "(every 2 s while": "the pod-selector replacement pass",
    "(at most 60 s)": "the pod-selector wait for replacements",
    "a wait that lasts 5 minutes": "PodReplacementStalled's threshold",
    "pods every 2 s": "strategy hot's look at the pods",
    "(default 1 s:": "the agent's --poll-interval",
    "the next 1 s poll": "the agent's --poll-interval",
    "(default 20 ms)": "the agent's --debounce",
    "waits its 20 ms debounce": "the agent's --debounce",
    "with a 20 ms debounce": "the agent's --debounce",
    "backoff (1 s\n  doubling to 60 s)": "runtime/backoff.py",
    "backoff (1 s, doubling up to 60 s)": "runtime/backoff.py",
    "600 s if unset": "Argo Rollouts' default spec.progressDeadlineSeconds",
    "a quiet window of 1 s": "the CSI driver's quiet window in model/pacing.py",
    "(2 minutes by default)": "the CSI driver's default --rotation-poll-interval",
    "in the pool 60 s (aiohttp's default is\n15 s; client-go keeps them 90 s": "the idle pool",
    "with 15 s, the pool": "aiohttp's default idle time",
    "every 10 s hands": "runtime/heap.py",
    "every 10 s (glibc's": "runtime/heap.py, TRIM_INTERVAL",
    "read buffers of 64 KiB instead of 256 KiB": "runtime/tlsbuffers.py, and asyncio's default",
    "at most 2 s after the first change": "the auto window's cap (model/pacing.py)",
    "always 2 s later": "the fixed window kube-nudge had by default before (AUTO_CAP)",
    "bodies up to 4 MiB": "runtime/http.py",
    "in flight 5 s when": "runtime/http.py",
    "over 8 KiB gets 431, one not complete within 10 s gets 408": "runtime/httpconn.py",
    "re-applied every 2 s": "the GitOps test's re-apply loop",
    "re-applies the manifest every 2 s": "the GitOps test's re-apply loop",
    "down for 8 s": "a fault scenario's outage",
    "a 1 MiB ConfigMap": "a bad-input test's object",
    "256 KiB of annotations": "the API server's TotalAnnotationSizeLimitB (plan's check)",
    "1 MiB of a ConfigMap's": "the API server's MaxSecretSize (plan's check)",
    "a second for 15 minutes": "an alert rule's duration (alerts.yaml)",
    "not been served for 30 minutes": "an alert rule's duration (alerts.yaml)",
    "No replica scraped for 5 minutes": "an alert rule's duration (alerts.yaml)",
    "bench run with the 300 s roll": "the bench's roll limit",
    "the latest run uses 60 s": "the bench's roll limit",
}


def _blank(text: str, pattern: re.Pattern[str]) -> str:
    """``text`` with ``pattern``'s matches blanked, newlines kept (so line numbers hold)."""
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)


def unlabelled(text: str) -> list[tuple[int, str]]:
    """(line, figure) of every figure of ``text`` that is neither generated, historical nor
    a setting."""
    for pattern in (docfigures.BLOCK, reliability_tables.BLOCK, ANNOTATION_TABLE, HISTORICAL,
                    *CODE):  # fmt: skip
        text = _blank(text, pattern)
    for phrase in SETTINGS:
        text = text.replace(phrase, re.sub(r"[^\n]", " ", phrase))
    return [(text.count("\n", 0, m.start()) + 1, m.group()) for m in FIGURE.finditer(text)]


#: Pages generated whole from a committed results file that records its commit and a clean
#: tree, each with the test that holds the page to its results.
GENERATED_PAGES: dict[str, str] = {
    "docs/compatibility.md": "tests/unit/test_compat_report.py (docs/compatibility.json)",
}


def test_every_measured_figure_is_generated_or_labelled_historical() -> None:
    found = [f"{path.relative_to(REPO)}:{line}: {figure}"
             for path in docfigures.documents(REPO)
             if str(path.relative_to(REPO)) not in GENERATED_PAGES
             for line, figure in unlabelled(path.read_text())]  # fmt: skip
    assert found == [], (
        "figures typed by hand: generate them from a committed results file, or wrap them in "
        "<!-- historical: COMMIT --> with 'commit COMMIT' in the text (docs/contributing.md)"
    )


def test_every_historical_block_names_a_commit_of_the_history_where_a_reader_sees_it() -> None:
    git = shutil.which("git")
    if git is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    blocks = [(path, block) for path in docfigures.documents(REPO)
              for block in HISTORICAL.finditer(path.read_text())]  # fmt: skip
    assert blocks, "the parse found no historical block"
    for path, block in blocks:
        commit = block["commit"]
        assert f"commit {commit}" in " ".join(block["body"].split()), (path.name, commit)
        known = subprocess.run([git, "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"],  # nosec
                               capture_output=True, check=False)  # fmt: skip
        assert known.returncode == 0, f"{path.name}: {commit} is not a commit of the history"


def test_every_settings_phrase_still_stands_and_holds_a_figure() -> None:
    texts = [path.read_text() for path in docfigures.documents(REPO)]
    for phrase in SETTINGS:
        assert FIGURE.search(phrase), phrase
        assert any(phrase in text for text in texts), f"no page says {phrase!r} any more"


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("The image is **143 MB**, 54 MB as an archive.\n", [(1, "143 MB"), (1, "54 MB")]),
        ("ok\n\nran 1,678 tests in 699 s; 13% in TLS, 1.5x\n",
         [(3, "1,678 tests"), (3, "699 s"), (3, "13%"), (3, "1.5x")]),
        ("<!-- historical: abc1234 -->\nFrom commit abc1234: 143 MB.\n<!-- /historical -->\n", []),
        ("<!-- bench:agent bench/results/latest.json -->\np50 21.5 ms\n<!-- /bench:agent -->", []),
        ("<!-- fault-table:begin bench/results/faults.jsonl -->\n| 0.42 s |\n"
         "<!-- fault-table:end -->", []),
        ("`--lease-duration 15 s` and 15s, 100ms, 2m; ```\n```\n", []),
        ("the quiet window: one edit rolls within about 50 ms, at most 2 s;", []),
        ("one edit rolls within about 51 ms", [(1, "51 ms")]),
    ],
)  # fmt: skip
def test_a_figure_typed_by_hand_is_found(text: str, found: list[tuple[int, str]]) -> None:
    assert unlabelled(text) == found


def test_the_changelog_is_held_to_the_rule() -> None:
    """CHANGELOG.md is read by the people who install kube-nudge: its figures follow the rule
    too, and the ones it once gave from no recorded run (issue 42) stay gone."""
    assert REPO / "CHANGELOG.md" in docfigures.documents(REPO)
    text = " ".join((REPO / "CHANGELOG.md").read_text().split())
    for figure in ("about 22 ms", "about a third", "about 8 MiB", "about half the memory"):
        assert figure not in text

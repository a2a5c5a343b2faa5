"""The words of BENCHMARKS.md: what each scenario measures, and how the peers are given."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from bench import minimal
from bench.config import Sizes
from bench.scenarios import analysis

BUILDING = [
    "## The peers",
    "",
    "Reloader and Wave are inputs to the benchmark, never part of this repository: neither "
    "their code, nor a binary, nor a recipe to make one is kept here. Hand the benchmark the "
    "binaries to compare as "
    "`BENCH_PEERS=reloader=/path/to/reloader@VERSION,wave=/path/to/wave@VERSION` "
    "(the version is printed in the tables; the benchmark cannot read it from Reloader, whose "
    "every command needs a cluster). How a binary was built (its path, its source's commit, "
    "build flags) is not recorded here. "
    "`PYTHONPATH=. .venv/bin/python -m bench.peers.check` with the same `BENCH_PEERS` "
    "proves each binary rolls a Deployment on a local cluster before a long run.",
]


def scenario_intro(scenario: str, recorded: dict[str, Any]) -> str:
    """One paragraph: what the scenario does and what its figures mean. Sizes a results
    file predates (a scenario added since) read as today's defaults."""
    sizes = {**asdict(Sizes()), **recorded}
    return {
        "latency": (
            f"1 ConfigMap, 1 opted-in Deployment (0 replicas) reading one key through "
            f"`configMapKeyRef`; after the tool took it in, {sizes['latency_changes']} "
            "sequential changes of that key. Latency: from the PATCH response to the arrival, "
            "on a watch opened beforehand, of the Deployment event carrying the tool's new "
            "marker. kube-nudge runs with `--debounce 0 --max-rollouts 1000/1m` (its window "
            "is a deliberate delay; the peers have none); the peers at their defaults."
        ),
        "latency-debounce": (
            f"kube-nudge at its defaults, no flag at all (its default debounce window, which "
            "it waits on purpose to coalesce edits, and its default rollout budget): "
            f"{sizes['debounce_changes']} ConfigMap/Deployment pairs, each ConfigMap changed "
            "once, one at a time (the budget allows few rollouts of one workload in a row). "
            "Latency as above."
        ),
        "writers": (
            f"Each tool at its defaults. One opted-in Deployment reads a ConfigMap key and a "
            f"Secret key; {sizes['writer_commands']} times, one command changes both: "
            "`kubectl apply -f` of a two-document file (client-side apply), then, for a second "
            "Deployment, `helm upgrade` of a chart holding the two (the project's pinned "
            "kubectl and helm). Gap: between the two writes' events on a watch of ConfigMaps "
            "and Secrets (what a controller sees). Rollouts per command: the Deployment's "
            "revisions once nothing more rolled for 3 s (1 means the two writes coalesced). "
            "Latency: from the later write's event to the command's last rollout, the one "
            "carrying both writes (a tool rolling at each write rolls first before it)."
        ),
        "fanout": (
            f"1 ConfigMap consumed by {sizes['fanout_workloads']:,} opted-in Deployments. Set-up: "
            "the tool takes them in with its write throttle lifted, then the measured instance "
            "starts at its defaults (kube-nudge: `--debounce 0`). One change; time from the "
            "PATCH response until every template carries a new marker (one collection watch); "
            f"a tool still rolling after {sizes['roll_timeout']:g} s is stopped there and "
            "its finish projected (≈) from the rate of its second half."
        ),
        "burst": (
            f"{sizes['burst_workloads']:,} ConfigMaps, each consumed by one opted-in "
            "Deployment, all changed at once (50 concurrent PATCHes); time from the first "
            "PATCH sent until every template carries a new marker. Set-up and limit as in the "
            "fan-out."
        ),
        "memory": (
            f"{sizes['memory_secrets']:,} Secrets of {sizes['secret_bytes'] // 1024} KiB and "
            f"{sizes['memory_configmaps']:,} ConfigMaps of {sizes['configmap_bytes'] // 1024} "
            f"KiB of random data over {sizes['memory_namespaces']} namespaces, "
            f"{sizes['memory_workloads']:,} opted-in Deployments each reading one Secret and "
            "one ConfigMap; the tool at its defaults. Ready: each tool's own signal (see *What "
            "is measured*). Peak RSS: VmHWM the moment it is ready; steady: VmRSS "
            f"{sizes['steady_after']:g} s later; RSS sampled every 100 ms for the plot."
        ),
        "api-cost": (
            f"{sizes['api_workloads']:,} ConfigMap/Deployment pairs; "
            f"{sizes['api_changes']} ConfigMaps change one at a time, each waited for. "
            "Requests from the API server's own `apiserver_request_total` (Leases, WATCH and "
            "non-resource URLs left out), read before and after; a control window with no tool "
            "running, where the benchmark changes as many ConfigMaps and writes each template "
            "once itself, is subtracted, and that one ideal write added back. Then "
            f"{sizes['restarts']} restarts with nothing changed ({sizes['restart_pause']:g} s "
            "each after ready): writes from the audit log, requests per restart."
        ),
        "scale": (
            f"kube-nudge alone, at its defaults: {sizes['scale_secrets']:,} Secrets "
            f"of {sizes['scale_secret_bytes']} bytes and "
            f"{sizes['scale_workloads']:,} opted-in Deployments over "
            f"{sizes['scale_namespaces']:,} namespaces; each Deployment reads "
            "its own Secret and its namespace's shared one. Peak RSS: VmHWM the moment it is "
            "ready; steady: VmRSS once every Deployment is taken in and the tool is quiet. One "
            "typical change: a namespace's shared Secret, timed until each Deployment of that "
            "namespace rolled. Run only when named (`BENCH_SCENARIOS=scale`); "
            "`BENCH_SCALE_SECRETS`, `BENCH_SCALE_WORKLOADS`, `BENCH_SCALE_NAMESPACES` size it."
        ),
        "flapping": (
            f"One Secret rewritten every {sizes['flap_interval'] * 1000:g} ms for "
            f"{sizes['flap_seconds']:g} s, one opted-in Deployment reading it; every tool at "
            "its defaults (kube-nudge: its default debounce and `--max-rollouts 3/5m`). Rollouts: "
            "increments of the Deployment's `deployment.kubernetes.io/revision` (one per new "
            "ReplicaSet) until no rollout came for 5 s after the last write (at most 60 s)."
        ),
        "agent": (
            "No cluster: `kube-nudge agent` started as a sidecar starts it (the `kube-nudge` "
            "console script), watching a temporary directory the benchmark updates as the "
            "kubelet's AtomicWriter does (a new `..<timestamp>` directory, `..data_tmp` renamed "
            "over `..data`), and reloading by POST (`--http-url`) to a local HTTP server of the "
            "benchmark's that timestamps each request on arrival. Two settings, a fresh agent "
            "each: its defaults (woken by inotify, debounce 20 ms, a 1 s poll as the safety "
            "net: what a user gets) and `--watch-mode poll` (the fallback where there is no "
            "inotify: a `readlink` per second). Each agent first idles for 30 s (its idle CPU, "
            "from /proc/PID/stat), then takes "
            f"{sizes.get('agent_swaps', 50)} swaps one at a time, each waited for, after a "
            "random (seeded) fraction of the poll interval, so that swaps land anywhere in the "
            "poll cycle. Latency: from right after the rename to the request's arrival, one "
            "monotonic clock in one process. Reloads: the requests received (after a window of "
            "two polls plus the debounce past the last swap) against the swaps, and the "
            "agents' own count. Memory of the agent at its defaults from /proc/PID/status: "
            "VmRSS at ready, after idling and after the swaps (each followed by a `/metrics` "
            "scrape), VmHWM then. No API server here, so the agents record nothing on a Pod."
        ),
        "agent-node": (
            "On the real node (kubelet, containerd, runc; the kubelet's default settings: "
            f"`syncFrequency` 1 m): {sizes.get('node_pods', 24)} Deployments of one pod, "
            "each with its own ConfigMap mounted whole: the app of the real-node tests (it "
            "prints `loaded <content>` when it loads) and the `kube-nudge agent` sidecar of "
            "the chart's NOTES snippet (its grant and own-pod-only policy, the projected token, "
            "the namespace's agent key) at its defaults, reloading the app by HTTP. **With the "
            "nudge**: kube-nudge (`--debounce 0`; its default window would add itself) runs "
            f"with the Deployments on strategy `hot`; {sizes.get('node_rounds', 2)} rounds "
            "change each ConfigMap once, one at a time, each waited for; every hot change is "
            "confirmed by its keyed hash, with no rollout; then one more round with kube-nudge "
            "at its defaults, what a user gets. **Without**: kube-nudge stopped, "
            "each ConfigMap changes once at a random (seeded) moment of a 90 s window (the "
            "kubelet resyncs a pod every 60-90 s), so changes land anywhere in their pod's "
            "sync cycle. Latency: from the wall clock when the PATCH returned to the "
            "runtime's timestamp of the app's `loaded <new>` line (containerd stamps each "
            "line as it reads it; one machine, one clock); the agent's `loaded-at` "
            "(taken after the app answered the reload call, ms) is given beside it as a check."
        ),
        "analysis": _analysis(sizes),
    }[scenario]


def _analysis(sizes: dict[str, Any]) -> str:
    """The analysis scenario's paragraph, its timing the scenario's own."""
    delay, interval, count = analysis.INITIAL_DELAY, analysis.INTERVAL, analysis.COUNT
    return (
        "kube-nudge alone (no peer gates a release on metrics): "
        f"{sizes.get('analysis_workloads', 1000):,} opted-in Deployments (0 replicas) consume "
        "one ConfigMap and name one AnalysisTemplate (`kube-nudge.io/analysis`; no "
        "`rollout-order`: one wave); one change rolls them all, and each is judged once its "
        "rollout completed. The template is kube-nudge's own (the chart's CRD): the "
        f"error-ratio metric of docs/analysis.md, its query over a `{analysis.WINDOW}` rate "
        f"window, with `initialDelay: {delay:g}s`, `interval: {interval:g}s`, `count: {count}`, "
        f"so an analysis takes at least {analysis.NOMINAL:g} s (`initialDelay + (count - 1) "
        "x interval`: the first measurement after `initialDelay`, each next one `interval` "
        "after the last, as Argo schedules them). Its Prometheus is the dev tools' pinned "
        f"server, scraping every `{analysis.SCRAPE}` an exporter of each Deployment's "
        "requests (1 % failing: every analysis passes). kube-nudge runs at its defaults with "
        "`--prometheus-url` naming it. Sampled every "
        f"{analysis.SAMPLE_EVERY:g} s from the change to the last verdict: Prometheus's own "
        '`prometheus_http_requests_total{handler="/api/v1/query"}` (nothing else queries it '
        "meanwhile), kube-nudge's CPU time (/proc/PID/stat) and VmRSS. *During the "
        "analyses*: from the first analysis's start to the last verdict (the wave's last "
        "rollouts complete inside it). Gate delay, per workload: from its rollout completing "
        "(its Deployment's status, on a watch opened beforehand) to its last measurement (its "
        "`kube-nudge.io/analysis-run` record), less the schedule's "
        f"{analysis.NOMINAL:g} s (issue 44 counts `count x interval`, one interval more than "
        "the schedule takes: this is the stricter bound); of which the analysis's start after "
        "the rollout completed, "
        "and its last measurement's lateness against the schedule from that start. The "
        "verdict rows count to the record with the verdict arriving on the watch instead."
    )


def method(sizes: dict[str, Any]) -> list[str]:
    """The general notes at the end of the page."""
    return [
        "## What is measured",
        "",
        "- **Clusters**: each tool gets its own fresh control plane in every scenario and "
        "repetition. The tools write to the same objects (adoption annotations, hashes on "
        "templates, new ReplicaSets, Events), so a cluster handed from one tool to the next "
        "would give the second a different start; a fresh one costs a few seconds. Within a "
        "repetition the tools take turns, so drift of the machine hits them alike.",
        "- **Ready** is each tool's own signal that its caches are filled: kube-nudge's "
        '`/readyz`; for Wave, every controller having logged "Starting workers" '
        "(controller-runtime does so once their caches synced); Reloader has no such signal "
        "(its `/metrics` answers before its informers list anything), so: its "
        '`reloader_events_received_total{event_type="add"}` counts every ConfigMap and '
        "Secret in the cluster.",
        "- **Markers**: what each tool changes on the pod template to roll a workload (see "
        "*Tools*). Wrong or missing: kube-nudge's hash is checked against the hash recomputed "
        "from the API; the peers' markers can only be checked for being present and changed.",
        "- **Writes** are counted from the API server's audit log by the tool's user agent "
        "(workload writes; Events and Leases are not audited). **Requests** come from "
        "`apiserver_request_total`.",
        "- **Throttles**: the peers run at their defaults. Wave's global token bucket (1 "
        "update/s after a burst of 100) dominates fan-out, burst and latency, so a second "
        "Wave column raises it (`--update-rate=10000 --update-burst=10000`, its chart's "
        "documented knob). Reloader's client has client-go's default rate limit (5 requests/s, "
        "burst 10) and no flag to change it. Set-up phases (taking 1,000 workloads in) run "
        "with the throttle lifted so that they don't take 15 minutes per run.",
        "- **Minimal client** (fan-out and burst only): the physical limit beside the tools, "
        "bench/minimal.py as a subprocess. It watches nothing and computes nothing: the "
        "benchmark tells it on a pipe of each workload whose ConfigMap PATCH has just been "
        "answered (sooner than any watch delivers it), and it sends the one merge patch per "
        "workload a perfect controller would send (a pod-template annotation), "
        f"{minimal.CONCURRENCY} at a time over connections opened beforehand, with a lean "
        "HTTP/1.1 client. kube-nudge's target is to stay within 1.5x of its time.",
        f"- **Projection** (≈): a fan-out or burst still rolling after {sizes['roll_timeout']:g}"
        " s is stopped; its finish is the limit plus the workloads left divided by the rate "
        "of the second half of the window.",
    ]

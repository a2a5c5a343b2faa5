"""bench/profile.py: py-spy's collapsed stacks charged to categories, idle left out."""

from __future__ import annotations

import pytest
from bench.profile import OTHER, OUTSIDE_TASKS, Sampler, category_names, classify, shares

ENTRY = "<module> (kube-nudge:6);main (kube_nudge/launch.py:25);run (asyncio/runners.py:118)"
LOOP = f"{ENTRY};_run_once (asyncio/base_events.py:1922)"
TASK = f"{LOOP};_run (asyncio/events.py:80)"


def stack(*frames: str, base: str = TASK) -> list[str]:
    return [*base.split(";"), *frames]


@pytest.mark.parametrize(
    ("frames", "category"),
    [
        (stack("Workers._work (kube_nudge/controller/controller.py:535)",
               "KubeClient._request (kube_nudge/kube/client.py:273)"),
         "reconcile_write_request"),
        # First category wins: a log line written while rolling is logging.
        (stack("Workers._work (kube_nudge/controller/controller.py:535)",
               "roll (kube_nudge/strategies/writes.py:176)",
               "Logger.info (logging/__init__.py:1489)"), "logging"),
        (stack("Informer.run (kube_nudge/kube/informer.py:214)",
               "project_workload (kube_nudge/model/projection.py:243)"), "watch_projection"),
        (stack("Informer.run (kube_nudge/kube/informer.py:214)"), "watch_stream"),
        (stack("GcFreezer.run (kube_nudge/runtime/gcfreeze.py:40)"), OTHER),
        # The entry point's kube-nudge frames are in every sample: not what the loop runs.
        (stack("data_received (aiohttp/client_proto.py:359)"), OUTSIDE_TASKS),
        (stack("read (ssl.py:921)", base=LOOP), OUTSIDE_TASKS),
    ],
)  # fmt: skip
def test_a_sample_is_charged_to_the_first_category_in_its_stack(
    frames: list[str], category: str
) -> None:
    assert classify(frames) == category


def test_idle_samples_are_left_out_and_shares_are_of_the_busy_ones() -> None:
    lines = [
        f"{LOOP};select (selectors.py:468) 50",
        ";".join(stack("Informer.run (kube_nudge/kube/informer.py:214)")) + " 30",
        ";".join(stack("Workers._work (kube_nudge/controller/controller.py:535)")) + " 10",
        "not a sample line",
    ]
    figures = shares(lines)
    assert list(figures) == list(category_names())
    assert figures["watch_stream"] == 75.0 and figures["reconcile_other"] == 25.0
    assert sum(figures.values()) == 100.0


def test_nothing_sampled_gives_no_figures() -> None:
    assert set(shares([]).values()) == {0.0}
    sampler = Sampler(enabled=False)
    sampler.start(1)
    assert sampler.stop() == {}

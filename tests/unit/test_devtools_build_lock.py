"""Go builds of the dev tools run one at a time per cache: a second session asking for the
same missing tool waits for the first's build, then finds the binary (two pytest sessions
side by side each ran a promtool build, beside the control plane's, and filled the RAM)."""

from __future__ import annotations

import threading
from pathlib import Path

from kube_nudge_dev.build import _one_build_at_a_time


def test_a_second_build_waits_for_the_first(tmp_path: Path) -> None:
    lock, said, order = tmp_path / "tool" / ".build.lock", list[str](), list[str]()
    second_asked = threading.Event()

    def second() -> None:
        def say(line: str) -> None:
            said.append(line)
            second_asked.set()

        with _one_build_at_a_time(lock, "promtool", say):
            order.append("second")

    with _one_build_at_a_time(lock, "promtool", said.append):
        waiter = threading.Thread(target=second)
        waiter.start()
        assert second_asked.wait(10), "the second build did not wait"
        order.append("first")
    waiter.join(10)
    assert order == ["first", "second"]
    assert said == [f"waiting for another build of promtool ({lock})"]

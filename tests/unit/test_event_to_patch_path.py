"""The path of a ConfigMap change from the watch event to the workload's PATCH (default
strategy), walked by the interpreter rather than by hand: every product file the walk is in,
and how often it comes back to one (docs/design.md, "A ConfigMap change").

The walk is the one the workers make, in the same steps: the source informer applies the
MODIFIED event (``Informer._apply``), the handlers queue the key, a worker takes it once its
debounce window ended (the clock is moved past it) and reconciles it, and the reconcile's
outcome arranges the next look. Each call and each return into another product file is a
move; a *stay* is a stretch in one file. Pure helpers count too (a dataclass's generated
methods and the standard library do not: they are not ours to split).

Issue 43's measure is narrower: the files crossed *to the PATCH request*, and how often
each is *entered*, i.e. called into (a return to a caller continues what the reader was
already reading), the pure model's functions read on their own as in docs/design.md.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import httpx2 as httpx

from kube_nudge.controller.controller import Controller, ControllerOptions
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.events import EventRecorder
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model import BASELINE_HASH, SourceKind, project_workload
from kube_nudge.runtime.metrics import Metrics
from kube_nudge_dev import manifests
from tests.unit.fakes import APP, KEY, NS, PATH, FakeClock, configmap, desired, stored
from tests.unit.httpx_support import HttpxTransport

SRC = Path(__file__).resolve().parents[2] / "src" / "kube_nudge"
DEPLOYMENT = BUILTIN_KINDS[0]
KEY_OF_WEB = (DEPLOYMENT, NS, "web")


@dataclass(frozen=True, slots=True)
class Stay:
    """A stretch of the walk in one product file."""

    file: str
    entered: bool
    """Begun by a call into the file (not by a return to it). The profiler reports a
    coroutine resumed after a suspension as a call too: nothing suspends on the way to the
    PATCH today (the fake API answers at once), but an await that did would count."""


@contextmanager
def walked() -> Iterator[list[Stay]]:
    """The product file execution is in, each time it changes (calls and returns)."""
    walk: list[Stay] = []

    def profile(frame: FrameType, event: str, _: Any) -> None:
        if event not in ("call", "return"):
            return
        where = frame if event == "call" else frame.f_back
        while where is not None and not where.f_code.co_filename.startswith(str(SRC)):
            where = where.f_back
        if where is None:
            return
        name = str(Path(where.f_code.co_filename).relative_to(SRC))
        if not walk or walk[-1].file != name:
            walk.append(Stay(name, event == "call"))

    sys.setprofile(profile)
    try:
        yield walk
    finally:
        sys.setprofile(None)


def stays(files: list[str]) -> dict[str, int]:
    """How many stays each file has in the walk."""
    counted: dict[str, int] = {}
    for name in files:
        counted[name] = counted.get(name, 0) + 1
    return counted


def without_pure(files: list[str]) -> list[str]:
    """The walk as docs/design.md draws it: the pure model's functions (in brackets there)
    return at once, so a call into model/ is read as a stay in its caller."""
    walk: list[str] = []
    for name in files:
        if not name.startswith("model/") and (not walk or walk[-1] != name):
            walk.append(name)
    return walk


def entries(walk: list[Stay]) -> dict[str, int]:
    """How often each product file outside the pure model is entered (called into)."""
    return stays([s.file for s in walk if s.entered and not s.file.startswith("model/")])


@dataclass(frozen=True, slots=True)
class Walk:
    """One ConfigMap change walked: the stays, the requests sent, and how many of the stays
    came before the PATCH request went out."""

    stays: list[Stay]
    sent: list[tuple[str, str]]
    to_patch: int

    @property
    def files(self) -> list[str]:
        """The file of each stay."""
        return [stay.file for stay in self.stays]


async def walk() -> Walk:
    """The walk of one ConfigMap change to the PATCH it causes, and past it to the end of
    the pass."""
    sent: list[tuple[str, str]] = []
    to_patch: list[int] = []
    rolled = web(rolled=True)  # made before the walk: the API server's work is not walked

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append((request.method, request.url.path))
        if request.method == "PATCH":
            to_patch.append(len(stays_so_far))
            return httpx.Response(200, json=rolled)
        if request.method == "POST" and request.url.path.endswith("/events"):
            return httpx.Response(201, content=request.content)  # the Rolling Event
        return httpx.Response(404, json={"kind": "Status", "code": 404, "reason": "NotFound"})

    http = httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="https://api.invalid")
    client = KubeClient(HttpxTransport(http))
    clock = FakeClock()
    controller = Controller(
        client, ControllerOptions(namespaces=(NS,)), hmac_key=KEY, metrics=Metrics(),
        recorder=EventRecorder(client), clock=clock,
    )  # fmt: skip
    cache = controller.cache
    cm_informer = cache._sources[SourceKind.CONFIGMAP][0]
    workload_informer = cache._workloads[DEPLOYMENT][0]
    cm_informer._apply(
        (NS, "app"), cm_informer.project(stored(manifests.configmap("app", {"LEVEL": "info"})))
    )
    workload_informer._apply((NS, "web"), workload_informer.project(web(rolled=False)))
    controller.synced.set()
    queue, reconciler, looks = controller.queue, controller.reconciler, controller.looks
    changed = cm_informer.project(stored(manifests.configmap("app", {"LEVEL": "debug"})))
    stays_so_far: list[Stay] = []
    try:
        with walked() as stays_so_far:
            cm_informer._apply((NS, "app"), changed)  # the MODIFIED event, projected
            clock.advance(3600)  # past any debounce window
            key = await queue.get()
            outcome = await reconciler.reconcile(key)
            queue.done(key)
            looks.after(key, outcome)
        assert (key, outcome.action) == (KEY_OF_WEB, "rolled")
        assert len(to_patch) == 1
        return Walk(stays_so_far, sent, to_patch[0])
    finally:
        await controller.events.flush()  # its Events, posted in the background: not walked
        await http.aclose()


def web(*, rolled: bool) -> dict[str, Any]:
    """Deployment ``web`` reading LEVEL of ConfigMap ``app`` by env, adopted at ``info``
    (``rolled``: as the PATCH answers, a later resourceVersion)."""
    view = project_workload(_web({}), PATH, ControllerOptions().defaults)
    assert view is not None
    obj = _web({BASELINE_HASH: desired(view, {APP: configmap(LEVEL="info")})})
    obj["metadata"]["resourceVersion"] = "2" if rolled else "1"
    return obj


def _web(annotations: dict[str, str]) -> dict[str, Any]:
    obj = manifests.deployment("web", spec=manifests.env_consumer("LEVEL"),
                     annotations={"kube-nudge.io/enabled": "true", **annotations})  # fmt: skip
    return stored(obj, uid="u1")


DESIGN = SRC.parents[1] / "docs" / "design.md"


async def test_design_md_gives_the_path_as_walked() -> None:
    """docs/design.md says how long the walk is, as the interpreter walks it today: a change
    that lengthens or shortens the path changes the page."""
    walked = await walk()
    assert [path for method, path in walked.sent if method == "PATCH"] == [
        f"/apis/apps/v1/namespaces/{NS}/deployments/web"
    ]
    files = walked.files
    drawn = without_pure(files)
    measured = (
        f"{len(stays(drawn))} files and {len(drawn)} stays as drawn here, "
        f"{len(stays(files))} files and {len(files)} stays counting the pure model's too"
    )
    assert measured in DESIGN.read_text(), f"docs/design.md should say: {measured}"


async def test_design_md_gives_the_files_entered_to_the_patch() -> None:
    """Issue 43's measure, up to the PATCH request: how many files, entered how often."""
    walked = await walk()
    entered = entries(walked.stays[: walked.to_patch])
    most = max(entered.values())
    measured = (
        f"{len(entered)} files, entered {sum(entered.values())} times in all and none more "
        f"than {most} ({', '.join(f'`{f}`' for f, n in sorted(entered.items()) if n == most)})"
    )
    assert measured in DESIGN.read_text(), f"docs/design.md should say: {measured}"


def test_an_entry_is_a_call_and_a_return_is_none() -> None:
    """The count this measure rests on: a call into a file enters it, returning doesn't."""
    walk = [Stay("a.py", True), Stay("b.py", True), Stay("a.py", False), Stay("model/m.py", True),
            Stay("a.py", False), Stay("b.py", True)]  # fmt: skip
    assert entries(walk) == {"a.py": 1, "b.py": 2}

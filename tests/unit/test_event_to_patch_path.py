"""The path of a ConfigMap change from the watch event to the workload's PATCH (default
strategy), walked by the interpreter rather than by hand: every product file the walk is in,
and how often it comes back to one (docs/design.md, "A ConfigMap change").

The walk is the one the workers make, in the same steps: the source informer applies the
MODIFIED event (``Informer._apply``), the handlers queue the key, a worker takes it once its
debounce window ended (the clock is moved past it) and reconciles it, and the reconcile's
outcome arranges the next look. Each call and each return into another product file is a
move; a *stay* is a stretch in one file. Pure helpers count too (a dataclass's generated
methods and the standard library do not: they are not ours to split).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def walked() -> Iterator[list[str]]:
    """The product file execution is in, each time it changes (calls and returns)."""
    files: list[str] = []

    def profile(frame: FrameType, event: str, _: Any) -> None:
        if event not in ("call", "return"):
            return
        where = frame if event == "call" else frame.f_back
        while where is not None and not where.f_code.co_filename.startswith(str(SRC)):
            where = where.f_back
        if where is None:
            return
        name = str(Path(where.f_code.co_filename).relative_to(SRC))
        if not files or files[-1] != name:
            files.append(name)

    sys.setprofile(profile)
    try:
        yield files
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


async def walk() -> tuple[list[str], list[tuple[str, str]]]:
    """The walk of one ConfigMap change to the PATCH it causes, and the requests sent."""
    sent: list[tuple[str, str]] = []
    rolled = web(rolled=True)  # made before the walk: the API server's work is not walked

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append((request.method, request.url.path))
        if request.method == "PATCH":
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
    try:
        with walked() as files:
            cm_informer._apply((NS, "app"), changed)  # the MODIFIED event, projected
            clock.advance(3600)  # past any debounce window
            key = await queue.get()
            outcome = await reconciler.reconcile(key)
            queue.done(key)
            looks.after(key, outcome)
        assert (key, outcome.action) == (KEY_OF_WEB, "rolled")
        return files, sent
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
    files, sent = await walk()
    assert [path for method, path in sent if method == "PATCH"] == [
        f"/apis/apps/v1/namespaces/{NS}/deployments/web"
    ]
    drawn = without_pure(files)
    measured = (
        f"{len(stays(drawn))} files and {len(drawn)} stays as drawn here, "
        f"{len(stays(files))} files and {len(files)} stays counting the pure model's too"
    )
    assert measured in DESIGN.read_text(), f"docs/design.md should say: {measured}"

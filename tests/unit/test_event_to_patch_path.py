"""The path of a ConfigMap change from the watch event to the workload's PATCH (default
strategy), walked by the interpreter rather than by hand, on the production path: every
product file the walk is in, how often it comes back to one, and the forms the workload's
key takes on the way (docs/design.md, "A ConfigMap change").

The walk is the one the controller makes, through its own tasks. A fake API server (an
``httpx.MockTransport`` under the real ``KubeClient``) answers each informer's streaming
list (its objects as ADDED events, then the bookmark that ends them) and keeps the watch
open; the caches and the workers run as the manager starts them (``Cache.run``,
``Workers.run``; leader election, which only says whether the workers run, is left out).
The initial lists and the workers' first pass over every workload are set up before the
walk, and not walked. The walk begins when the ConfigMap's MODIFIED event, as the raw bytes
of a watch line, is handed to the informer's open stream: the informer reads and decodes it
(``KubeClient.watch``) and applies it, the handlers queue the key for its debounce window,
and the queue arms its timer. When the informer asks for its next line (it is done with
this one) the server moves the fake clock past the window, before the loop can run the
timer; the queue's own timer (a callback of the loop's) then finds the key due and wakes one
waiting worker task, which reconciles it, sends the PATCH and arranges the next look
(``NextLooks.after``): the walk ends when that returns.

Each call and each return into another product file is a move; a *stay* is a stretch in
one file. Pure helpers count too (a dataclass's generated methods and the standard library
do not: they are not ours to split). The profiler reports a coroutine resumed after an
await as a call, and its suspension as a return: a task that wakes up (the informer on its
stream, the worker woken by the timer) enters each file on its stack again, from its
outermost coroutine, as a reader following it does.

Which frames: ``sys.setprofile`` is per thread and sees every task on the loop. The walk
keeps those of the ConfigMap informer's task and of the worker tasks (each task told by
the coroutine it runs: ``Informer.run`` of that informer, ``Workers._work``) and the loop's
callbacks run outside any task (the queue's timer); the other informers' tasks (idle on
their open watches), the Events a pass posts in the background (their own task) and the
test's task are left out.

Issue 43's measure is narrower: the files crossed *to the PATCH request*, and how often
each is *entered*, i.e. called into (a return to a caller continues what the reader was
already reading), the pure model's functions read on their own as in docs/design.md.
Issue 54 also counts the forms of the key from the queue to the writer: from the worker's
first stay to the PATCH request, the type of the argument that names the workload in each
call into ``controller/`` or ``strategies/`` (its parameter ``key`` or ``target``) and into
the writer (``kube/patches.py``: its ``patch``).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import httpx2 as httpx
import orjson

from kube_nudge.controller.controller import Controller, ControllerOptions
from kube_nudge.controller.workers import NextLooks, Workers
from kube_nudge.kube.client import JSON, KubeClient
from kube_nudge.kube.events import EventRecorder
from kube_nudge.kube.informer import INITIAL_EVENTS_END, Informer
from kube_nudge.kube.resources import CONFIGMAPS
from kube_nudge.kube.workloads import BUILTIN_KINDS, WorkloadKind
from kube_nudge.model import BASELINE_HASH, SourceKind, project_workload
from kube_nudge.runtime.metrics import Metrics
from kube_nudge_dev import manifests
from tests.unit.fakes import APP, KEY, NS, PATH, FakeClock, configmap, desired, stored
from tests.unit.httpx_support import HttpxTransport

SRC = Path(__file__).resolve().parents[2] / "src" / "kube_nudge"
DEPLOYMENT = BUILTIN_KINDS[0]
KEY_OF_WEB = (DEPLOYMENT, NS, "web")
WAIT = 10.0  # seconds any one step of the walk may take before the test fails
#: The parameters naming the workload in a call, by where the function is (issue 54's key).
KEY_PARAMETERS = (
    ("kube/patches.py", ("patch",)),
    ("controller/", ("key", "target")),
    ("strategies/", ("key", "target")),
)


@dataclass(frozen=True, slots=True)
class Stay:
    """A stretch of the walk in one product file."""

    file: str
    entered: bool
    """Begun by a call into the file (not by a return to it). The profiler reports a
    coroutine resumed after a suspension as a call too: a task woken (the informer by its
    stream, a worker by the queue's timer) enters each file on its stack again."""


@dataclass(slots=True)
class Walking:
    """What ``walked`` records: the stays; the key as each call that hands it on receives
    it, as (the index of the stay it is in, its form); and whether the walk has ended."""

    stays: list[Stay] = field(default_factory=list)
    keys: list[tuple[int, str]] = field(default_factory=list)
    ended: asyncio.Event = field(default_factory=asyncio.Event)


Followed = Callable[["asyncio.Task[Any] | None"], bool]


@contextmanager
def walked(followed: Followed, until: CodeType) -> Iterator[Walking]:
    """The product file execution is in, each time it changes (calls and returns), in the
    tasks ``followed`` accepts (None: a callback of the loop's), up to the first return
    from ``until``."""
    walking = Walking()
    verdicts: dict[asyncio.Task[Any] | None, bool] = {}

    def profile(frame: FrameType, event: str, _: Any) -> None:
        if event not in ("call", "return") or walking.ended.is_set():
            return
        task = asyncio.current_task()
        if task not in verdicts:
            verdicts[task] = followed(task)
        if not verdicts[task]:
            return
        where = frame if event == "call" else frame.f_back
        while where is not None and not where.f_code.co_filename.startswith(str(SRC)):
            where = where.f_back
        if where is not None:
            name = str(Path(where.f_code.co_filename).relative_to(SRC))
            if not walking.stays or walking.stays[-1].file != name:
                walking.stays.append(Stay(name, event == "call"))
            if where is frame and (key := named_key(name, frame)) is not None:
                walking.keys.append((len(walking.stays) - 1, form(key)))
        if event == "return" and frame.f_code is until:
            walking.ended.set()

    sys.setprofile(profile)
    try:
        yield walking
    finally:
        sys.setprofile(None)


def named_key(file: str, frame: FrameType) -> object | None:
    """The argument naming the workload in a call into ``file`` (``KEY_PARAMETERS``)."""
    code = frame.f_code
    parameters = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    for where, names in KEY_PARAMETERS:
        if file.startswith(where):
            for name in names:
                value: object = frame.f_locals.get(name) if name in parameters else None
                if value is not None:
                    return value
    return None


def form(key: object) -> str:
    """The name of a key's form: a workload's ``(kind, namespace, name)`` is a
    ``WorkloadKey``, an informer's ``(namespace, name)`` a ``Key``; else its type's name."""
    if isinstance(key, tuple):
        if len(key) == 3 and isinstance(key[0], WorkloadKind):
            return "WorkloadKey"
        if len(key) == 2 and all(isinstance(part, str) for part in key):
            return "Key"
    return type(key).__name__


def key_forms(keys: list[tuple[int, str]], start: int, end: int) -> list[str]:
    """The distinct forms of the key in the stays from ``start`` up to ``end``, in the order
    they first appear."""
    forms: list[str] = []
    for stay, name in keys:
        if start <= stay < end and name not in forms:
            forms.append(name)
    return forms


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
    """One ConfigMap change walked: the stays, the key's forms along them, the requests
    sent, and how many of the stays came before the PATCH request went out."""

    stays: list[Stay]
    keys: list[tuple[int, str]]
    sent: list[tuple[str, str]]
    to_patch: int

    @property
    def files(self) -> list[str]:
        """The file of each stay."""
        return [stay.file for stay in self.stays]

    @property
    def handed(self) -> int:
        """The first stay in a worker: where the queue has handed the key on."""
        return self.files.index("controller/workers.py")


def watch_line(kind: str, obj: JSON) -> bytes:
    """One watch event as the API server streams it: a line of JSON."""
    return orjson.dumps({"type": kind, "object": obj}) + b"\n"


class ApiServer:
    """The API server behind an ``httpx.MockTransport``: each watch streams its
    collection's ``objects`` as ADDED events and the bookmark that ends them, then stays
    open for the lines handed to its ``stream``; a PATCH answers ``patched``; an Event is
    created; anything else is not found."""

    def __init__(self, objects: dict[str, list[JSON]], patched: JSON) -> None:
        self.objects = objects
        self.patched = patched
        self.sent: list[tuple[str, str]] = []
        self._streams: dict[str, asyncio.Queue[bytes]] = {}
        self.taken_in: Callable[[], None] = lambda: None
        """Called when a watch asks for the line after one handed to it: it took that in."""
        self.on_patch: Callable[[], None] = lambda: None

    def stream(self, path: str) -> asyncio.Queue[bytes]:
        """Where the lines the watch of collection ``path`` is still to read wait."""
        return self._streams.setdefault(path, asyncio.Queue())

    def answer(self, request: httpx.Request) -> httpx.Response:
        """The API server's answer to ``request``."""
        self.sent.append((request.method, request.url.path))
        if request.method == "GET" and request.url.params.get("watch") == "1":
            return httpx.Response(200, content=self._watch(request.url.path))
        if request.method == "PATCH":
            self.on_patch()
            return httpx.Response(200, json=self.patched)
        if request.method == "POST" and request.url.path.endswith("/events"):
            return httpx.Response(201, content=request.content)  # the Rolling Event
        return httpx.Response(404, json={"kind": "Status", "code": 404, "reason": "NotFound"})

    async def _watch(self, path: str) -> AsyncIterator[bytes]:
        for obj in self.objects.get(path, []):
            yield watch_line("ADDED", obj)
        end = {"resourceVersion": "1", "annotations": {INITIAL_EVENTS_END: "true"}}
        yield watch_line("BOOKMARK", {"metadata": end})
        lines = self.stream(path)
        while True:
            yield await lines.get()
            self.taken_in()


async def walk() -> Walk:
    """The walk of one ConfigMap change to the PATCH it causes, and past it to the end of
    the pass, through the controller's running caches and workers."""
    clock = FakeClock()
    server = ApiServer(
        {CONFIGMAPS.path(NS): [app("info")], DEPLOYMENT.resource.path(NS): [web(rolled=False)]},
        patched=web(rolled=True),  # made before the walk: the API server's work is not walked
    )
    http = httpx.AsyncClient(
        transport=httpx.MockTransport(server.answer), base_url="https://api.invalid"
    )
    client = KubeClient(HttpxTransport(http))
    controller = Controller(
        client, ControllerOptions(namespaces=(NS,)), hmac_key=KEY, metrics=Metrics(),
        recorder=EventRecorder(client), clock=clock,
    )  # fmt: skip
    # The workers first: they wait for the caches ahead of this test, so once the caches are
    # in, every workload is queued before ``settled`` looks at the queue (the book's memory
    # of ``web`` then says its first pass ran).
    running = [asyncio.create_task(r.run()) for r in (controller.workers, controller.cache)]
    try:
        await asyncio.wait_for(controller.synced.wait(), WAIT)
        await controller.settled(WAIT)  # the first pass over every workload: not walked
        first = controller.book.memory(KEY_OF_WEB)
        assert first is not None and first.state == "current", first
        return await _walk_change(controller, server, clock)
    finally:
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        await controller.events.flush()  # its Events, posted in the background: not walked
        await http.aclose()


async def _walk_change(controller: Controller, server: ApiServer, clock: FakeClock) -> Walk:
    """Hand the informer the MODIFIED event of ConfigMap ``app`` and walk to the pass's end."""
    informer = controller.cache._sources[SourceKind.CONFIGMAP].informers[0]
    raw = watch_line("MODIFIED", app("debug"))  # its bytes, made before the walk
    patched = asyncio.Event()
    to_patch: list[int] = []
    server.taken_in = lambda: clock.advance(3600)  # past any debounce window
    with walked(following(informer), NextLooks.after.__code__) as walking:

        def patch_sent() -> None:
            to_patch.append(len(walking.stays))
            patched.set()

        server.on_patch = patch_sent
        server.stream(CONFIGMAPS.path(NS)).put_nowait(raw)
        await asyncio.wait_for(patched.wait(), WAIT)
        await asyncio.wait_for(walking.ended.wait(), WAIT)
    assert len(to_patch) == 1
    after = controller.book.memory(KEY_OF_WEB)
    assert after is not None and after.state == "applied", after
    return Walk(walking.stays, walking.keys, server.sent, to_patch[0])


def following(informer: Informer[Any]) -> Followed:
    """The tasks the walk follows: ``informer``'s, the workers', and the loop's callbacks
    run outside any task (the queue's timer)."""

    def followed(task: asyncio.Task[Any] | None) -> bool:
        if task is None:
            return True
        coro = task.get_coro()
        code, frame = getattr(coro, "cr_code", None), getattr(coro, "cr_frame", None)
        if code is Workers._work.__code__:
            return True
        owner = frame.f_locals.get("self") if frame is not None else None
        return code is Informer.run.__code__ and owner is informer

    return followed


def app(level: str) -> JSON:
    """ConfigMap ``app`` as the API server stores it, LEVEL at ``level``."""
    obj = stored(manifests.configmap("app", {"LEVEL": level}))
    obj["metadata"]["resourceVersion"] = "1" if level == "info" else "2"
    return obj


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


async def test_design_md_gives_the_key_forms_from_the_queue_to_the_writer() -> None:
    """Issue 54's measure of the key: how many forms it takes from the queue to the writer."""
    walked = await walk()
    forms = key_forms(walked.keys, walked.handed, walked.to_patch)
    measured = (
        f"{len(forms)} forms from the queue to the writer "
        f"({' → '.join(f'`{name}`' for name in forms)})"
    )
    assert measured in DESIGN.read_text(), f"docs/design.md should say: {measured}"


def test_an_entry_is_a_call_and_a_return_is_none() -> None:
    """The count this measure rests on: a call into a file enters it, returning doesn't."""
    walk = [Stay("a.py", True), Stay("b.py", True), Stay("a.py", False), Stay("model/m.py", True),
            Stay("a.py", False), Stay("b.py", True)]  # fmt: skip
    assert entries(walk) == {"a.py": 1, "b.py": 2}


def test_a_key_form_counts_once_from_where_the_queue_hands_it_to_the_patch() -> None:
    """The key's forms: each named once, in the order it first appears, within the stretch;
    a tuple named by what it holds."""
    keys = [(0, "Key"), (2, "WorkloadKey"), (3, "Target"), (4, "WorkloadKey"), (5, "Patch"),
            (6, "Outcome")]  # fmt: skip
    assert key_forms(keys, 2, 6) == ["WorkloadKey", "Target", "Patch"]
    assert [form(KEY_OF_WEB), form((NS, "app")), form(APP)] == ["WorkloadKey", "Key", "SourceRef"]

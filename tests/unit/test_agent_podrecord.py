"""The Pod annotation patch, as a unit test of the request: a local HTTPS server with its own
CA stands in for the API server (method, path, content type, token, body, TLS trust). What a
real API server makes of the patch is for an integration test against the local cluster."""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from kube_nudge.agent.config import ApiSpec
from kube_nudge.agent.metrics import AgentMetrics
from kube_nudge.agent.podrecord import (
    PodRecorder,
    PodRef,
    RecordFailed,
    RecordWorker,
    loaded_annotations,
    pod_from_env,
)
from kube_nudge.agentwire import LOADED_AT, LOADED_HASH, RELOAD_FAILED_AT
from tests.agent_support import Recorder, serve, stop
from tests.tls_support import certificate_pair

POD = PodRef("team-a", "web-7f9c-abcde")
HASH = "ab" * 32


def _ca(directory: Path) -> tuple[Path, Path]:
    return certificate_pair(directory, certfile="ca.crt", keyfile="tls.key")


class Api:
    def __init__(self, tmp_path: Path, recorder: Recorder) -> None:
        self.ca, key = _ca(tmp_path)
        self.token = tmp_path / "token"
        self.token.write_text("token-1\n")
        self.recorder = recorder

        def tls(server: ThreadingHTTPServer) -> None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(self.ca, key)
            server.socket = context.wrap_socket(server.socket, server_side=True)

        self.url = serve(recorder, tls)
        self.spec = ApiSpec(self.url, str(self.token), str(self.ca))

    def recorder_for(self, retries: int = 2, **changes: str) -> PodRecorder:
        spec = ApiSpec(**{**self.spec.__dict__, **changes})
        assert spec.server is not None
        return PodRecorder(spec, spec.server, POD, lambda d: False, retries=retries, timeout=5)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    server = Api(tmp_path, Recorder())
    yield server
    stop(server.url)


def test_the_patch_request(api: Api) -> None:
    api.recorder_for().record(loaded_annotations(HASH, 1_763_892_000.1234))
    (hit,) = api.recorder.hits
    assert hit.method == "PATCH"
    assert hit.path == f"/api/v1/namespaces/team-a/pods/{POD.name}?fieldManager=kube-nudge-agent"
    assert hit.headers["Content-Type"] == "application/merge-patch+json"
    assert hit.headers["Authorization"] == "Bearer token-1"
    assert hit.headers["User-Agent"].startswith("kube-nudge-agent/")
    assert json.loads(hit.body) == {
        "metadata": {"annotations": {LOADED_HASH: HASH, LOADED_AT: "1763892000.123"}}
    }


def test_the_token_is_read_again_for_each_request(api: Api) -> None:
    recorder = api.recorder_for()
    recorder.record(loaded_annotations(HASH, 1.0))
    api.token.write_text("token-2")  # the kubelet rotated the projected token
    recorder.record(loaded_annotations(HASH, 2.0))
    assert [h.headers["Authorization"] for h in api.recorder.hits] == [
        "Bearer token-1",
        "Bearer token-2",
    ]


def test_a_refusal_is_not_retried_and_says_what_to_do(api: Api) -> None:
    api.recorder.statuses = [403]
    api.recorder.body = json.dumps(
        {"kind": "Status", "message": 'pods "web-7f9c-abcde" is forbidden: no patch'}
    ).encode()
    with pytest.raises(RecordFailed) as failed:
        api.recorder_for().record(loaded_annotations(HASH, 1.0))
    assert "403; pods \"web-7f9c-abcde\" is forbidden: no patch; the pod's service account " \
        "needs 'patch' on 'pods' in team-a" in str(failed.value)  # fmt: skip
    assert api.recorder.count() == 1


def test_server_errors_are_retried_a_bounded_number_of_times(api: Api) -> None:
    api.recorder.statuses = [500, 500, 500, 500]
    with pytest.raises(RecordFailed, match=r"500.*giving up"):
        api.recorder_for(retries=2).record(loaded_annotations(HASH, 1.0))
    assert api.recorder.count() == 3


def test_an_untrusted_server_is_refused(api: Api, tmp_path: Path) -> None:
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    other_ca, _ = _ca(other_dir)
    with pytest.raises(RecordFailed, match="CERTIFICATE_VERIFY_FAILED"):
        api.recorder_for(retries=0, ca_file=str(other_ca)).record(loaded_annotations(HASH, 1.0))
    assert api.recorder.count() == 0


def test_a_missing_token_says_how_to_get_one(api: Api) -> None:
    with pytest.raises(RecordFailed, match="cannot read token file /nonexistent/token"):
        api.recorder_for(token_file="/nonexistent/token").record(loaded_annotations(HASH, 1.0))


def test_the_worker_counts_failures_and_carries_on(api: Api) -> None:
    metrics = AgentMetrics()
    worker = RecordWorker(api.recorder_for(retries=0), metrics)
    worker.start()
    try:
        api.recorder.statuses = [403]
        worker.submit("1" * 64, 1.0)
        assert worker.idle(20)
        assert metrics.record_failures == 1
        worker.submit(HASH, 2.0)
        assert worker.idle(20)
    finally:
        worker.stop()
    assert metrics.record_failures == 1
    assert [json.loads(h.body)["metadata"]["annotations"][LOADED_HASH]
            for h in api.recorder.hits] == ["1" * 64, HASH]  # fmt: skip


def test_a_failed_reload_is_recorded_beside_the_last_load(api: Api) -> None:
    worker = RecordWorker(api.recorder_for(retries=0), AgentMetrics())
    worker.start()
    try:
        worker.submit(HASH, 2.0)
        assert worker.idle(20)
        worker.submit_failure(3.25)
        assert worker.idle(20)
    finally:
        worker.stop()
    bodies = [json.loads(h.body)["metadata"]["annotations"] for h in api.recorder.hits]
    assert bodies == [{LOADED_HASH: HASH, LOADED_AT: "2.000"}, {RELOAD_FAILED_AT: "3.250"}]


def test_the_pod_comes_from_the_downward_api(tmp_path: Path) -> None:
    namespace_file = tmp_path / "namespace"
    assert pod_from_env({"POD_NAME": "p", "POD_NAMESPACE": "n"}, str(namespace_file)) == PodRef(
        "n", "p"
    )
    assert pod_from_env({"POD_NAME": "p"}, str(namespace_file)) is None
    namespace_file.write_text("from-sa\n")
    assert pod_from_env({"POD_NAME": "p"}, str(namespace_file)) == PodRef("from-sa", "p")
    assert pod_from_env({}, str(namespace_file)) is None

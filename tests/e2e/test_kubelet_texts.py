"""The kubelet's status texts on its two gRPC contracts, against a real `pods-api serve`: what
v1.37.2's `pkg/kubelet/apis/pods/server.go` (and the rate limit of `pkg/kubelet/apis/grpc`)
answers, and what its `server_unit_test.go` expects (TestInitializationCheck,
TestInterceptorsAndMetrics: each outcome counted by the Go name of its code). Our own surfaces
(PodLookup, HTTP) keep our texts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from builders import make_pod
from kubeletpodsserver import kubelet_pods_server
from serve import TIMEOUT, Served, serving

from pods_api.core.api.pb import (
    pods_doc_pb2_grpc,
    pods_v1alpha1_pb2,
    pods_v1alpha1_pb2_grpc,
    podsapi_v1_pb2,
    podsapi_v1_pb2_grpc,
)

KUBELET_STUBS = (pods_v1alpha1_pb2_grpc.PodsStub, pods_doc_pb2_grpc.PodsStub)


@pytest.fixture
def fixtures(tmp_path: Path) -> Path:
    directory = tmp_path / "fixtures"
    directory.mkdir()
    pod = make_pod("web", "uid-web", typed=True)
    (directory / "web.json").write_text(json.dumps(pod))
    return directory


@pytest.fixture
async def not_ready(tmp_path: Path, fixtures: Path) -> AsyncIterator[Served]:
    with serving(
        tmp_path / "run", "--fixtures", str(fixtures), "--ready-delay", "3600", ready=False
    ) as served:
        yield served


async def status_of(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await asyncio.wait_for(call, TIMEOUT)
    return err.value.code(), err.value.details() or ""


def http(served: Served, path: str) -> httpx.Response:
    transport = httpx.HTTPTransport(uds=str(served.http_socket))
    with httpx.Client(transport=transport, timeout=TIMEOUT) as client:
        return client.get("http://localhost" + path)


async def test_before_the_sources_sync_every_method_is_kubelet_is_initializing(not_ready: Served) -> None:
    initializing = (grpc.StatusCode.FAILED_PRECONDITION, "Kubelet is initializing")
    async with grpc.aio.insecure_channel(not_ready.target) as ch:
        for stub_type in KUBELET_STUBS:
            stub = stub_type(ch)
            assert await status_of(stub.ListPods(pods_v1alpha1_pb2.ListPodsRequest())) == initializing
            assert (
                await status_of(stub.GetPod(pods_v1alpha1_pb2.GetPodRequest(podUID="uid-web")))
                == initializing
            )
            watch = stub.WatchPods(pods_v1alpha1_pb2.WatchPodsRequest())
            assert await status_of(watch.read()) == initializing
        # Ours keeps ours, which says what is waited for.
        lookup = podsapi_v1_pb2_grpc.PodLookupStub(ch).ListPods(podsapi_v1_pb2.ListPodsRequest())
        ours = (grpc.StatusCode.FAILED_PRECONDITION, "pod sources have not finished their initial sync")
        assert await status_of(lookup) == ours
    assert http(not_ready, "/v1/pods").json()["error"]["message"] == ours[1]
    # Counted by the Go name of the code, as the kubelet's interceptor counts it.
    body = http(not_ready, "/metrics").text
    assert counted("list", "FailedPrecondition") in body and counted("watch", "FailedPrecondition") in body


async def test_an_unknown_uid_and_the_rate_limit_say_what_the_kubelet_says(
    tmp_path: Path, fixtures: Path
) -> None:
    args = ("--fixtures", str(fixtures), "--qps", "0.001", "--burst", "5")
    with serving(tmp_path / "run", *args) as served:
        # HTTP keeps ours (the README's cookbook shows it); it spends a token of the shared bucket.
        assert (
            http(served, "/v1/pods/no-such-uid").json()["error"]["message"] == "pod 'no-such-uid' not found"
        )
        async with grpc.aio.insecure_channel(served.target) as ch:
            for stub_type in KUBELET_STUBS:
                missing = stub_type(ch).GetPod(pods_v1alpha1_pb2.GetPodRequest(podUID="no-such-uid"))
                not_found = (grpc.StatusCode.NOT_FOUND, "pod with UID no-such-uid not found")
                assert await status_of(missing) == not_found
            # Two tokens left, then refusals on every contract.
            lookup = podsapi_v1_pb2_grpc.PodLookupStub(ch)
            await lookup.ListPods(podsapi_v1_pb2.ListPodsRequest())
            await pods_v1alpha1_pb2_grpc.PodsStub(ch).ListPods(pods_v1alpha1_pb2.ListPodsRequest())
            limited = (grpc.StatusCode.RESOURCE_EXHAUSTED, "rejected by rate limit")
            for stub_type in KUBELET_STUBS:
                assert await status_of(stub_type(ch).ListPods(pods_v1alpha1_pb2.ListPodsRequest())) == limited
            ours = (grpc.StatusCode.RESOURCE_EXHAUSTED, "rate limit exceeded; retry later")
            assert await status_of(lookup.ListPods(podsapi_v1_pb2.ListPodsRequest())) == ours
        body = http(served, "/metrics").text
        assert counted("get", "NotFound") in body and counted("list", "ResourceExhausted") in body


def counted(method: str, code: str) -> str:
    """The series of one request counted on `v1alpha1.Pods`, as /metrics writes it."""
    return f'kubelet_pod_requests_{method}_total{{server_api_version="v1alpha1",status_code="{code}"}} 1.0'


async def refusals(target: str) -> dict[str, tuple[grpc.StatusCode, str]]:
    """What a server answers that is not a pod: before its sources are ready, each method's
    refusal; once ready, an unknown UID, and a List past the rate limit."""
    answers = {}
    async with grpc.aio.insecure_channel(target) as ch:
        stub = pods_v1alpha1_pb2_grpc.PodsStub(ch)
        try:
            await stub.ListPods(pods_v1alpha1_pb2.ListPodsRequest())
        except grpc.aio.AioRpcError:
            answers["list"] = await status_of(stub.ListPods(pods_v1alpha1_pb2.ListPodsRequest()))
            answers["get"] = await status_of(stub.GetPod(pods_v1alpha1_pb2.GetPodRequest(podUID="uid-web")))
            answers["watch"] = await status_of(stub.WatchPods(pods_v1alpha1_pb2.WatchPodsRequest()).read())
            return answers
        answers["missing"] = await status_of(
            stub.GetPod(pods_v1alpha1_pb2.GetPodRequest(podUID="no-such-uid"))
        )
        for _ in range(RATE_PROBES):  # the burst is 10, refilled at 100 a second: a few more than 10
            try:
                await stub.ListPods(pods_v1alpha1_pb2.ListPodsRequest())
            except grpc.aio.AioRpcError as err:
                answers["limited"] = (err.code(), err.details() or "")
                break
    return answers


# Lists sent back to back to get past a burst of 10 at 100 a second, with room for a slow machine.
RATE_PROBES = 200


async def test_the_texts_are_the_kubelets_own_servers(
    go_build: Callable[[str, str], Path], tmp_path: Path, fixtures: Path, not_ready: Served
) -> None:
    """Against v1.37.2's own server code (tests/go/node/cmd/podsserver), with its default rate
    limit: the same code and text for each refusal, on the same calls."""
    binary = go_build("node", "./cmd/podsserver")
    with kubelet_pods_server(binary, tmp_path / "kubelet.sock") as kubelet:
        theirs = await refusals(kubelet.target)
        kubelet.command("ready")
        kubelet.command("pods 1 0")
        theirs |= await refusals(kubelet.target)
    ours = await refusals(not_ready.target)
    with serving(tmp_path / "ready", "--fixtures", str(fixtures)) as served:
        ours |= await refusals(served.target)
    assert set(theirs) == {"list", "get", "watch", "missing", "limited"}
    assert ours == theirs

"""Clients that ask for a big List and never read it: a List response whose client
takes nothing for --send-timeout is dropped, and the List bytes on their way to clients are
budgeted per surface (--list-budget), with a clear refusal past it. Before, 30 such HTTP
clients over 10,000 pods took the server from 188 MiB to 1.1 GiB for as long as they stayed."""

from __future__ import annotations

import json
import os
import select
import socket
import time
from collections.abc import Iterator

import grpc
import h2.config
import h2.connection
import httpx
import pytest
from builders import make_pod
from serve import TIMEOUT, Served, serving

from pods_api.core.api.pb import pods_v1alpha1_pb2, pods_v1alpha1_pb2_grpc

PODS = 40
PADDING = 300_000  # bytes of annotation per pod: a whole List of ~12 MB (sent in slices)
SEND_TIMEOUT = 2.0
BUDGET_MIB = 30  # two whole Lists fit, a third distinct one does not
MASK = "x-kubernetes-fieldmask"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server for the module (decoding 12 MB of pods takes a while): each test lets go of
    whatever it held before it ends."""
    tmp_path = tmp_path_factory.mktemp("unread")
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    for i in range(PODS):
        pod = {"apiVersion": "v1", "kind": "Pod", **make_pod(f"big-{i}", f"uid-big-{i}", group=f"g{i % 4}")}
        pod["metadata"]["annotations"] = {"example.com/padding": os.urandom(PADDING // 2).hex()}
        (fixtures / f"big-{i}.yaml").write_text(json.dumps(pod))  # JSON is YAML, and quick to read
    args = ("--fixtures", str(fixtures), "--qps", "0", "--send-timeout", str(SEND_TIMEOUT))
    with serving(tmp_path / "run", *args, "--list-budget", str(BUDGET_MIB)) as server:
        yield server


def _unread_http(served: Served, query: str) -> socket.socket:
    """A client that asks for `GET /v1/pods?query`, and reads nothing once its answer begins."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(str(served.http_socket))
    sock.sendall(f"GET /v1/pods?{query} HTTP/1.1\r\nhost: localhost\r\n\r\n".encode())
    readable, _, _ = select.select([sock], [], [], TIMEOUT)  # the answer has begun: its body is held
    assert readable, "no answer began"
    return sock


def _hung_up(sock: socket.socket) -> None:
    """Returns once the server has ended the connection, without reading from it."""
    poller = select.poll()
    poller.register(sock, select.POLLHUP | select.POLLRDHUP)
    assert poller.poll(TIMEOUT * 1000), "the server kept the connection"


def _rest(sock: socket.socket) -> int:
    """Read what the server still sends until it ends the connection; the bytes read."""
    sock.settimeout(TIMEOUT)
    total = 0
    try:
        while chunk := sock.recv(1 << 20):
            total += len(chunk)
    except ConnectionResetError:
        pass
    sock.close()
    return total


def _get(served: Served, query: str) -> httpx.Response:
    transport = httpx.HTTPTransport(uds=str(served.http_socket))
    with httpx.Client(transport=transport, timeout=TIMEOUT) as client:
        return client.get(f"http://localhost/v1/pods?{query}")


def test_unread_http_lists_are_budgeted_then_dropped_after_the_send_timeout(served: Served) -> None:
    whole = len(_get(served, "").content)
    assert whole > 2 * 4 * 1024 * 1024  # sent in slices, not whole
    stuck = [_unread_http(served, f"labelSelector=app!=none-{i}") for i in range(2)]  # two distinct views
    refused = _get(served, "labelSelector=app!=none-2")
    assert refused.status_code == 429, refused.text[:300]
    assert refused.headers["retry-after"] == "1"
    message = refused.json()["error"]["message"]
    assert f"budget of {BUDGET_MIB} MiB" in message and "HTTP clients" in message
    # A body already on its way counts once, however many clients it goes to.
    assert _get(served, "labelSelector=app!=none-0").status_code == 200
    for sock in stuck:
        _hung_up(sock)
    served.wait_for_line("dropped a List response whose client took nothing for 2 s")
    assert all(_rest(sock) < whole for sock in stuck)  # cut off, not sent whole
    assert _get(served, "labelSelector=app!=none-2").status_code == 200  # freed


def test_an_unread_list_small_enough_to_go_whole_is_dropped_too(served: Served) -> None:
    """Under 4 MB a List is written at once: what the client leaves unread sits in the
    connection's buffer, which is dropped once it has not shrunk for the send timeout."""
    query = "labelSelector=group%3Dg0"  # 10 of the pods: ~3 MB
    size = len(_get(served, query).content)
    assert 1024 * 1024 < size < 4 * 1024 * 1024
    sock = _unread_http(served, query)
    _hung_up(sock)
    served.wait_for_line("dropped an HTTP connection whose client took nothing of a response for 2 s")
    assert _rest(sock) < size


def _unread_grpc(served: Served, mask: str) -> socket.socket:
    """A gRPC client (HTTP/2 by hand) that calls ListPods and never reads its answer: no
    WINDOW_UPDATE, nothing taken off the socket once the answer begins."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(str(served.socket))
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    headers = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/v1alpha1.Pods/ListPods"),
        (":authority", "localhost"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        (MASK, mask),
    ]
    conn.send_headers(1, headers)
    conn.send_data(1, b"\x00\x00\x00\x00\x00", end_stream=True)  # an empty ListPodsRequest
    sock.sendall(conn.data_to_send())
    readable, _, _ = select.select([sock], [], [], TIMEOUT)
    assert readable, "no answer began"
    return sock


def _list(served: Served, mask: str) -> pods_v1alpha1_pb2.ListPodsResponse:
    options = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]
    with grpc.insecure_channel(served.target, options=options) as channel:
        reply: pods_v1alpha1_pb2.ListPodsResponse = pods_v1alpha1_pb2_grpc.PodsStub(channel).ListPods(
            pods_v1alpha1_pb2.ListPodsRequest(), metadata=[(MASK, mask)], timeout=TIMEOUT
        )
        return reply


def test_unread_grpc_lists_are_budgeted_and_freed_when_their_clients_go(served: Served) -> None:
    masks = [f"metadata.annotations,metadata.{field}" for field in ("name", "uid", "namespace")]
    stuck = [_unread_grpc(served, mask) for mask in masks[:2]]  # two distinct views, ~12 MB each
    with pytest.raises(grpc.RpcError) as err:
        _list(served, masks[2])
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert f"budget of {BUDGET_MIB} MiB" in (err.value.details() or "")
    assert len(_list(served, masks[0]).pods) == PODS  # the same body as one on its way: admitted
    for sock in stuck:
        sock.close()
    # The calls end when their clients go (grpc reports it on its own thread: polled, bounded).
    deadline = time.monotonic() + TIMEOUT
    while True:
        try:
            assert len(_list(served, masks[2]).pods) == PODS
            break
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or time.monotonic() > deadline:
                raise
            time.sleep(0.05)

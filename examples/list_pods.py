"""List and watch pods over the Pods API socket with grpcio: what a node agent does.

    python examples/list_pods.py run/pods-api.sock [status.phase,status.podIPs]

Works unchanged against the kubelet's own socket (/var/lib/kubelet/pods-api/pods-api.sock).
"""

import argparse

import grpc

from pods_api.core.api.codec import pod_from_bytes
from pods_api.core.api.pb import pods_v1alpha1_pb2 as pods_api
from pods_api.core.api.pb import pods_v1alpha1_pb2_grpc as pods_grpc

parser = argparse.ArgumentParser(description="List, then watch, the pods of a Pods API socket.")
parser.add_argument("socket", help="the socket, e.g. run/pods-api.sock")
parser.add_argument("fields", nargs="?", help="a field mask, e.g. status.phase,status.podIPs")
args = parser.parse_args()  # a usage message and exit code 2 when they are wrong
socket_path = args.socket
metadata = [("x-kubernetes-fieldmask", args.fields)] if args.fields else []

with grpc.insecure_channel(f"unix:{socket_path}") as channel:
    stub = pods_grpc.PodsStub(channel)
    for data in stub.ListPods(pods_api.ListPodsRequest(), metadata=metadata).pods:
        pod = pod_from_bytes(data)  # Kubernetes JSON, as kubectl prints it
        print(pod["metadata"]["namespace"], pod["metadata"]["name"], pod.get("status", {}).get("phase", ""))
    for event in stub.WatchPods(pods_api.WatchPodsRequest(), metadata=metadata):
        kind = pods_api.EventType.Name(event.type)
        if event.type == pods_api.INITIAL_SYNC_COMPLETE:
            print(kind)
            break  # a real agent keeps reading; this example stops after the snapshot
        print(kind, pod_from_bytes(event.pod)["metadata"]["name"])

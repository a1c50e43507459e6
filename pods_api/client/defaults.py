"""Where a client finds a Pods API, apart from the client itself (client.py), so that the
command line can name it without loading gRPC stubs and the codec."""

# Where the kubelet (v1.36+) serves its Pods API.
KUBELET_SOCKET = "/var/lib/kubelet/pods-api/pods-api.sock"

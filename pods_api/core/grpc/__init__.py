"""The authoritative gRPC Pods API: handlers, interceptors and the server that hosts them."""

# syntax=docker/dockerfile:1
# pods-api as a node agent image: `docker build -t pods-api:0.2.0 .`
# Needs BuildKit (`RUN --mount` keeps the wheels out of every layer): the default builder since
# Docker Engine 23 and in buildx, podman and buildah; on an older engine set DOCKER_BUILDKIT=1.
# Not built in this repository's CI (the build machines have no container engine); hadolint
# checks it in tests/test_deploy.py.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY pods_api pods_api
# Every dependency ships manylinux wheels: nothing is compiled, and no compiler is in either stage.
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
# The project's own wheel by its file, so the version installed is exactly the one built above;
# its dependencies resolve from the same directory only (--no-index).
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels /wheels/pods_api-*.whl
# Root: the sockets live in a root-only host directory, as the kubelet's does, and static pod
# manifests are root-owned. The DaemonSet drops every capability and makes the root fs read-only.
ENTRYPOINT ["pods-api"]
CMD ["serve", "--manifests", "/etc/kubernetes/manifests"]
# Healthy once every pod source has synced (gRPC health SERVING), answered within 2 s by the
# server itself (a wedged process accepts the connection but never answers). The socket is the
# default one CMD serves on; with other flags, override the check (`--health-cmd`) or set
# PODS_API_SOCKET. Exit codes: `pods-api check --help`.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["pods-api", "check", "--quiet", "--timeout=2"]

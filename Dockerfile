# pods-api as a node agent image. Not built in this repository's CI (the build machines have no
# container engine); `docker build -t pods-api .` is the intended use.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY core core
COPY gateway gateway
COPY pods_api pods_api
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels pods-api
# Root: the sockets live in a root-only host directory, as the kubelet's does, and static pod
# manifests are root-owned. The DaemonSet drops every capability and makes the root fs read-only.
ENTRYPOINT ["pods-api"]
CMD ["serve", "--manifests", "/etc/kubernetes/manifests"]

# syntax=docker/dockerfile:1
# pods-api as a node agent image: `docker build -t pods-api:0.2.0 .`
# Behind a TLS-intercepting proxy pip needs the proxy's CA: pass your CA bundle as a build secret,
#   docker build --secret id=ca-bundle,src=/etc/ssl/certs/ca-certificates.crt -t pods-api:0.2.0 .
# (buildah and podman: the same --secret). A secret is mounted for the one RUN that installs and
# is in no layer; without it pip trusts its own CA bundle, as always.
# Needs BuildKit (`RUN --mount`): the default builder since Docker Engine 23 and in buildx, podman
# and buildah; on an older engine set DOCKER_BUILDKIT=1.
#
# BASE is both stages' image: any with python3 (3.11 or newer) and its venv module. The venv made
# in the first is copied into the second, and its bin/python links to the base's interpreter, so
# the two must be the same image. Docker Hub's python:3.11-slim by default; this repository's
# tests, with no registry to pull from, build FROM a Debian bookworm root made by mmdebstrap
# (tests/support/image.py, docs/deploying.md).
ARG BASE=python:3.11-slim

FROM ${BASE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY pods_api pods_api
# Every dependency ships manylinux wheels: nothing is compiled, and no compiler is in either
# stage. pip writes each module's bytecode as it installs (the DaemonSet's root filesystem is
# read-only: nothing can be compiled at run time); pip and setuptools leave the venv after, as
# nothing runs them there.
RUN --mount=type=secret,id=ca-bundle \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi \
    && python3 -m venv /opt/pods-api \
    && /opt/pods-api/bin/pip install --no-cache-dir --disable-pip-version-check . \
    && /opt/pods-api/bin/pip uninstall --yes --disable-pip-version-check pip setuptools

FROM ${BASE}
COPY --from=build /opt/pods-api /opt/pods-api
# PYTHONDONTWRITEBYTECODE: every module is compiled above, and the root filesystem is read-only.
ENV PATH=/opt/pods-api/bin:$PATH PYTHONDONTWRITEBYTECODE=1
# Root: the sockets live in a root-only host directory, as the kubelet's does, and static pod
# manifests are root-owned. The DaemonSet drops every capability and makes the root fs read-only.
ENTRYPOINT ["pods-api"]
CMD ["serve", "--manifests", "/etc/kubernetes/manifests"]
# Healthy once every pod source has synced (gRPC health SERVING), answered within 2 s by the
# server itself (a wedged process accepts the connection but never answers). The socket is the
# default one CMD serves on; with other flags, override the check (`--health-cmd`) or set
# PODS_API_SOCKET. Exit codes: `pods-api check --help`. Docker's image format only: an OCI image
# (buildah's default) has no HEALTHCHECK, and Kubernetes runs the DaemonSet's probes instead.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["pods-api", "check", "--quiet", "--timeout=2"]

"""The API's v1 defaulting for a Pod (pkg/apis/core/v1/defaults.go and the defaults declared on the
k8s.io/api/core/v1 types), as the kubelet's defaulting decoder applies it to every static pod it
reads: without it, a manifest's pod is served as written, and `spec.restartPolicy=Always`
selects none of them, QoS cannot be derived, and the uid hashes another pod than the one run.

`apply_pod_defaults(pod)` changes the decoded message in place, as v1.37.2 does it (checked
against its SetDefaults_* and SetObjectDefaults_Pod, with the feature gates at their defaults).
Covered: SetDefaults_Pod (a negative grace period made 1, requests from limits per container,
enableServiceLinks, hostNetwork host ports), SetDefaults_PodSpec (serviceAccount kept equal to
serviceAccountName, dnsPolicy, restartPolicy, securityContext, terminationGracePeriodSeconds,
schedulerName), SetDefaults_Container for every kind of container (imagePullPolicy by tag,
terminationMessagePath and -Policy), container ports' protocol, env's fileKeyRef `optional`,
probes and their HTTP and gRPC handlers, lifecycle HTTP handlers, the downward API's field
selectors, SetDefaults_Volume and each volume source's own defaults (an ephemeral volume's claim
template's volumeMode too), and SetDefaults_ResourceList: every ResourceList of the spec rounded
up to milli precision.

Not added, as v1.37.2 adds none: a `resizePolicy` (no defaulting function writes one), pod-level
requests from pod-level limits (PodLevelResourcesFixDefaulting, Beta and on, moves
defaultPodRequests out of defaulting into the API server's PrepareForCreate, which a static pod
never meets) and an HTTP probe's `protocol` (H2CContainerProbe, alpha and off).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, MutableMapping

from pods_api.core.api.pb import k8s_core_v1_pb2 as core
from pods_api.core.api.pb import k8s_resource_pb2 as resource
from pods_api.core.api.quantity import round_up_to_milli

# v1.DefaultTerminationGracePeriodSeconds, v1.DefaultSchedulerName, v1.TerminationMessagePathDefault.
TERMINATION_GRACE_PERIOD = 30
SCHEDULER_NAME = "default-scheduler"
TERMINATION_MESSAGE_PATH = "/dev/termination-log"
# Secret, ConfigMap, DownwardAPI and Projected volumes' default file mode: 0644.
VOLUME_FILE_MODE = 0o644
# A projected service account token's lifetime when unset: an hour.
TOKEN_EXPIRATION_SECONDS = 3600
# What SetDefaults_Pod makes of a negative terminationGracePeriodSeconds: the shortest grace.
MIN_GRACE_PERIOD = 1


def apply_pod_defaults(pod: core.Pod) -> None:
    """Default `pod` as the API's v1 defaulting does (SetObjectDefaults_Pod)."""
    spec = pod.spec
    _pod(spec)
    _pod_spec(spec)
    for volume in spec.volumes:
        _volume(volume.volumeSource)
    for container in _all_containers(spec):
        _container(container)
    for resources in _resource_lists(spec):
        _round_up(resources)


def _resource_lists(spec: core.PodSpec) -> Iterable[MutableMapping[str, resource.Quantity]]:
    """Every ResourceList of a pod spec that SetObjectDefaults_Pod rounds."""
    for container in _all_containers(spec):
        yield container.resources.limits
        yield container.resources.requests
    yield spec.overhead
    if spec.HasField("resources"):
        yield spec.resources.limits
        yield spec.resources.requests
    for volume in spec.volumes:
        if volume.volumeSource.HasField("ephemeral"):
            claim = volume.volumeSource.ephemeral.volumeClaimTemplate.spec.resources
            yield claim.limits
            yield claim.requests


# Quantities whose rounding is remembered: a node's pods repeat the same few ("100m", "128Mi"),
# and each rounding is Decimal parsing and formatting, ~15 µs: half of the defaults' CPU and 6%
# of a manifest's decode at start-up (BENCHMARKS.md, W6). The answer depends on the text alone;
# the bound keeps the memo a few hundred KiB whatever the files hold.
_ROUNDED_MAX = 4096


def _round_up(resources: MutableMapping[str, resource.Quantity]) -> None:
    """SetDefaults_ResourceList: each quantity rounded up to milli precision (`0.0001` is `1m`)."""
    for quantity in resources.values():
        quantity.string = _rounded(quantity.string)


@functools.lru_cache(maxsize=_ROUNDED_MAX)
def _rounded(text: str) -> str:
    return round_up_to_milli(text)  # raises for a bad quantity: lru_cache remembers no exception


def _pod(spec: core.PodSpec) -> None:
    """SetDefaults_Pod."""
    if spec.HasField("terminationGracePeriodSeconds") and spec.terminationGracePeriodSeconds < 0:
        spec.terminationGracePeriodSeconds = MIN_GRACE_PERIOD
    for group in (spec.containers, spec.initContainers):
        for container in group:
            resources = container.resources
            for name, quantity in resources.limits.items():
                if name not in resources.requests:
                    resources.requests[name].CopyFrom(quantity)
    if not spec.HasField("enableServiceLinks"):
        spec.enableServiceLinks = True
    if spec.hostNetwork:
        for group in (spec.containers, spec.initContainers):
            for container in group:
                for port in container.ports:
                    if not port.hostPort:
                        port.hostPort = port.containerPort


def _pod_spec(spec: core.PodSpec) -> None:
    """SetDefaults_PodSpec."""
    # The deprecated alias follows serviceAccountName, which wins when both are written.
    if not spec.serviceAccountName:
        spec.serviceAccountName = spec.serviceAccount
    spec.serviceAccount = spec.serviceAccountName
    if not spec.dnsPolicy:
        spec.dnsPolicy = "ClusterFirst"
    if not spec.restartPolicy:
        spec.restartPolicy = "Always"
    if not spec.HasField("securityContext"):
        spec.securityContext.SetInParent()
    if not spec.HasField("terminationGracePeriodSeconds"):
        spec.terminationGracePeriodSeconds = TERMINATION_GRACE_PERIOD
    if not spec.schedulerName:
        spec.schedulerName = SCHEDULER_NAME


def _all_containers(spec: core.PodSpec) -> Iterable[core.Container | core.EphemeralContainerCommon]:
    yield from spec.initContainers
    yield from spec.containers
    for ephemeral in spec.ephemeralContainers:
        yield ephemeral.ephemeralContainerCommon


def _container(container: core.Container | core.EphemeralContainerCommon) -> None:
    """SetDefaults_Container, and the defaults of what a container holds."""
    if not container.imagePullPolicy:
        container.imagePullPolicy = pull_policy(container.image)
    if not container.terminationMessagePath:
        container.terminationMessagePath = TERMINATION_MESSAGE_PATH
    if not container.terminationMessagePolicy:
        container.terminationMessagePolicy = "File"
    for port in container.ports:
        if not port.protocol:
            port.protocol = "TCP"
    for env in container.env:
        if env.HasField("valueFrom") and env.valueFrom.HasField("fieldRef"):
            _field_ref(env.valueFrom.fieldRef)
        if env.HasField("valueFrom") and env.valueFrom.HasField("fileKeyRef"):
            file_key = env.valueFrom.fileKeyRef
            if not file_key.HasField("optional"):
                file_key.optional = False  # declared `+default=false` on FileKeySelector
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        if container.HasField(probe):
            _probe(getattr(container, probe))
    if container.HasField("lifecycle"):
        for hook in ("postStart", "preStop"):
            if container.lifecycle.HasField(hook):
                handler = getattr(container.lifecycle, hook)
                if handler.HasField("httpGet"):
                    _http_get(handler.httpGet)


def pull_policy(image: str) -> str:
    """An unset imagePullPolicy: Always for the tag latest (said or implied), else IfNotPresent."""
    return "Always" if image_tag(image) == "latest" else "IfNotPresent"


def image_tag(image: str) -> str:
    """The tag ParseImageName (pkg/util/parsers) finds: the one written, "" when only a digest
    is, "latest" when neither is."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = last.rpartition(":")[2] if ":" in last else ""
    return tag or ("" if digest else "latest")


def _probe(probe: core.Probe) -> None:
    """SetDefaults_Probe, and its handler's."""
    if not probe.timeoutSeconds:
        probe.timeoutSeconds = 1
    if not probe.periodSeconds:
        probe.periodSeconds = 10
    if not probe.successThreshold:
        probe.successThreshold = 1
    if not probe.failureThreshold:
        probe.failureThreshold = 3
    if probe.HasField("handler"):
        if probe.handler.HasField("httpGet"):
            _http_get(probe.handler.httpGet)
        if probe.handler.HasField("grpc") and not probe.handler.grpc.HasField("service"):
            probe.handler.grpc.service = ""  # declared `+default=""` on GRPCAction


def _http_get(action: core.HTTPGetAction) -> None:
    """SetDefaults_HTTPGetAction."""
    if not action.path:
        action.path = "/"
    if not action.scheme:
        action.scheme = "HTTP"


def _field_ref(selector: core.ObjectFieldSelector) -> None:
    """SetDefaults_ObjectFieldSelector."""
    if not selector.apiVersion:
        selector.apiVersion = "v1"


def _volume(source: core.VolumeSource) -> None:
    """SetDefaults_Volume (a volume of no source is an emptyDir) and each source's defaults."""
    if not any(source.HasField(f.name) for f in core.VolumeSource.DESCRIPTOR.fields):
        source.emptyDir.SetInParent()
    if source.HasField("hostPath") and not source.hostPath.HasField("type"):
        source.hostPath.type = ""
    for mode_holder in ("secret", "configMap", "downwardAPI", "projected"):
        if source.HasField(mode_holder):
            held = getattr(source, mode_holder)
            if not held.HasField("defaultMode"):
                held.defaultMode = VOLUME_FILE_MODE
    if source.HasField("downwardAPI"):
        for item in source.downwardAPI.items:
            if item.HasField("fieldRef"):
                _field_ref(item.fieldRef)
    if source.HasField("projected"):
        for projection in source.projected.sources:
            if projection.HasField("downwardAPI"):
                for item in projection.downwardAPI.items:
                    if item.HasField("fieldRef"):
                        _field_ref(item.fieldRef)
            if projection.HasField("serviceAccountToken"):
                token = projection.serviceAccountToken
                if not token.HasField("expirationSeconds"):
                    token.expirationSeconds = TOKEN_EXPIRATION_SECONDS
    if source.HasField("ephemeral") and source.ephemeral.HasField("volumeClaimTemplate"):
        claim = source.ephemeral.volumeClaimTemplate.spec
        if not claim.HasField("volumeMode"):
            claim.volumeMode = "Filesystem"  # SetDefaults_PersistentVolumeClaimSpec
    if source.HasField("image") and not source.image.pullPolicy:
        source.image.pullPolicy = (
            "Always" if image_tag(source.image.reference) == "latest" else "IfNotPresent"
        )
    _legacy_sources(source)


def _legacy_sources(source: core.VolumeSource) -> None:
    """The in-tree volume plugins' defaults (SetDefaults_ISCSIVolumeSource, _RBD..., _AzureDisk...,
    _ScaleIO...)."""
    if source.HasField("iscsi") and not source.iscsi.iscsiInterface:
        source.iscsi.iscsiInterface = "default"
    if source.HasField("rbd"):
        rbd = source.rbd
        rbd.pool = rbd.pool or "rbd"
        rbd.user = rbd.user or "admin"
        rbd.keyring = rbd.keyring or "/etc/ceph/keyring"
    if source.HasField("azureDisk"):
        disk = source.azureDisk
        if not disk.HasField("cachingMode"):
            disk.cachingMode = "ReadWrite"
        if not disk.HasField("kind"):
            disk.kind = "Shared"
        if not disk.HasField("fsType"):
            disk.fsType = "ext4"
        if not disk.HasField("readOnly"):
            disk.readOnly = False
    if source.HasField("scaleIO"):
        scale = source.scaleIO
        scale.storageMode = scale.storageMode or "ThinProvisioned"
        scale.fsType = scale.fsType or "xfs"

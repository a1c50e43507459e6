"""The kubelet's static-pod rules (pkg/kubelet/config/common.go, config.go): what a config source
("file" for --manifests, "http" for --manifest-url) checks and changes in every pod it reads.

  - reject what it would not admit: no name, no containers, bad or duplicate container names,
    a container without an image, a name that is not a DNS subdomain with the node name appended;
  - a missing metadata.uid becomes a hash of the pod, the node name and the file (or URL), so it
    is stable across restarts and changes when the pod does (an edit is a new pod);
  - name `<name>-<node name>`, namespace `default` if empty, spec.nodeName;
  - annotations kubernetes.io/config.hash (the uid), config.source (file or http) and
    config.seen (`firstseen.PLACEHOLDER` here: decoding keeps no state, and the source's
    process stamps when the uid was first seen, as the kubelet's merge does: firstseen.py);
  - files only: a toleration of every NoExecute taint, so node problems do not evict it;
  - status.phase Pending: the config source sets it, overriding any status in the file.
Before any of that, the API's v1 defaulting (defaults.py), as the kubelet's decoder applies it.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from pods_api.core.api.codec import CodecError, pod_to_message
from pods_api.core.api.pb import k8s_core_v1_pb2
from pods_api.core.store.version import PodVersion
from pods_api.sources import ManifestError
from pods_api.sources.defaults import apply_pod_defaults
from pods_api.sources.firstseen import CONFIG_SEEN as CONFIG_SEEN
from pods_api.sources.firstseen import PLACEHOLDER
from pods_api.sources.parsing import locate

CONFIG_HASH = "kubernetes.io/config.hash"
CONFIG_SOURCE = "kubernetes.io/config.source"

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS_LABEL_MAX = 63
_DNS_SUBDOMAIN_MAX = 253

# Static pods must survive node problems: the kubelet adds this toleration to every file pod.
_NO_EXECUTE_TOLERATION = k8s_core_v1_pb2.Toleration(operator="Exists", effect="NoExecute")


class StaticPodRules:
    """The kubelet's checks and changes for pods from one config source ("file" or "http"):
    configuration only, so the same pod always gives the same bytes, in any process."""

    def __init__(self, node_name: str, *, config_source: str) -> None:
        self.node_name = node_name
        self.config_source = config_source

    def build(
        self, obj: dict[str, Any], where: str, origin: str, source_id: str, warnings: list[str]
    ) -> PodVersion:
        """The pod as the kubelet would run it; raises ManifestError. `source_id` (a file's path
        or the URL) goes into a generated uid. The object is decoded once, the rules change the
        message, and it is encoded once."""
        try:
            decoded = pod_to_message(obj)
        except CodecError as exc:
            raise ManifestError(origin, locate(where, str(exc))) from None
        warnings += [f"{origin}: {locate(where, w)}" for w in decoded.warnings]
        pod = decoded.message
        apply_pod_defaults(pod)  # the kubelet's decoder defaults before anything else looks
        problems = validate_static_pod(pod, self.node_name)
        if problems:
            raise ManifestError(origin, locate(where, "invalid pod: " + "; ".join(problems)))
        resource = api_reference(pod)
        if resource:
            rule = "static pods may not reference " + resource + " (PreventStaticPodAPIReferences)"
            raise ManifestError(origin, locate(where, rule))
        uid = pod.metadata.uid or self._generate_uid(pod, source_id)
        self._apply_defaults(pod, uid)
        return PodVersion.from_message(pod)

    def _generate_uid(self, pod: k8s_core_v1_pb2.Pod, source_id: str) -> str:
        # The kubelet: a hash of the decoded pod, then "host:<node>file:<path>" or "url:<url>".
        # Its hash is over Go's in-memory dump of the pod, which cannot be reproduced here; this
        # is over the pod's deterministic protobuf encoding, so it is as stable and as sensitive
        # to changes. Where the kubelet's uid is known (a mirror, the kubelet's /pods), the
        # cache's identity policy matches the pods by name and serves the kubelet's.
        hasher = hashlib.md5(usedforsecurity=False)
        hasher.update(pod.SerializeToString(deterministic=True))
        if self.config_source == "file":
            hasher.update(f"host:{self.node_name}file:{source_id}".encode())
        else:
            hasher.update(f"url:{source_id}".encode())
        return hasher.hexdigest()

    def _apply_defaults(self, pod: k8s_core_v1_pb2.Pod, uid: str) -> None:
        meta, spec = pod.metadata, pod.spec
        meta.uid = uid
        meta.name = static_pod_name(meta.name, self.node_name)
        if not meta.namespace:
            meta.namespace = "default"
        spec.nodeName = self.node_name
        meta.annotations[CONFIG_HASH] = uid
        meta.annotations[CONFIG_SOURCE] = self.config_source
        meta.annotations[CONFIG_SEEN] = PLACEHOLDER  # the source stamps it (firstseen.py)
        if self.config_source == "file":
            _add_or_update_toleration(spec, _NO_EXECUTE_TOLERATION)
        pod.status.phase = "Pending"


def static_pod_name(name: str, node_name: str) -> str:
    """The kubelet's generatePodName: unique among nodes."""
    return f"{name}-{node_name.lower()}"


def validate_static_pod(pod: k8s_core_v1_pb2.Pod, node_name: str) -> list[str]:
    """What kubelet admission (ValidatePodCreate) would reject, for the mistakes people make in a
    manifest; `pod` is decoded (types already checked by the codec)."""
    spec = pod.spec
    problems = _name_problems(pod.metadata.name, pod.metadata.namespace, node_name)
    if not spec.containers:
        problems.append("spec.containers: at least one container is required")
    if spec.ephemeralContainers:
        problems.append("spec.ephemeralContainers: cannot be set on create")
    names: set[str] = set()
    for group, containers in (("initContainers", spec.initContainers), ("containers", spec.containers)):
        for i, container in enumerate(containers):
            at = f"spec.{group}[{i}]"
            problems += _container_problems(container.name, container.image, at, names)
            problems += _container_spec_problems(container, at)
    problems += _unsupported("spec.restartPolicy", spec.restartPolicy, RESTART_POLICIES)
    problems += _unsupported("spec.dnsPolicy", spec.dnsPolicy, DNS_POLICIES)
    return problems


# The values ValidatePodSpec and validateContainers accept (pkg/apis/core/validation).
RESTART_POLICIES = ("Always", "OnFailure", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
PROTOCOLS = ("SCTP", "TCP", "UDP")
TERMINATION_MESSAGE_POLICIES = ("FallbackToLogsOnError", "File")
_PORT_MAX = 65535
_PORT_RANGE = "must be between 1 and 65535, inclusive"


def _unsupported(at: str, value: str, supported: tuple[str, ...]) -> list[str]:
    """field.NotSupported's message, as the API server words it."""
    if value in supported:
        return []
    allowed = ", ".join(f'"{v}"' for v in supported)
    return [f'{at}: Unsupported value: "{value}": supported values: {allowed}']


def _container_spec_problems(container: k8s_core_v1_pb2.Container, at: str) -> list[str]:
    """validateContainers' checks of what a manifest most often gets wrong (defaults applied)."""
    problems = _unsupported(f"{at}.imagePullPolicy", container.imagePullPolicy, PULL_POLICIES)
    problems += _unsupported(
        f"{at}.terminationMessagePolicy", container.terminationMessagePolicy, TERMINATION_MESSAGE_POLICIES
    )
    for j, port in enumerate(container.ports):
        where = f"{at}.ports[{j}]"
        if not 1 <= port.containerPort <= _PORT_MAX:
            problems.append(f"{where}.containerPort: Invalid value: {port.containerPort}: {_PORT_RANGE}")
        if not 0 <= port.hostPort <= _PORT_MAX:
            problems.append(f"{where}.hostPort: Invalid value: {port.hostPort}: {_PORT_RANGE}")
        problems += _unsupported(f"{where}.protocol", port.protocol, PROTOCOLS)
    return problems


# Volume sources that need nothing from the API (HasAPIObjectReference lets them through).
_LOCAL_VOLUMES = frozenset(
    {
        "awsElasticBlockStore", "azureDisk", "cephfs", "cinder", "downwardAPI", "emptyDir", "fc",
        "flexVolume", "flocker", "gcePersistentDisk", "gitRepo", "hostPath", "image", "iscsi", "nfs",
        "photonPersistentDisk", "portworxVolume", "quobyte", "rbd", "scaleIO", "storageos",
        "vsphereVolume",
    }
)  # fmt: skip
# Volume sources that do, and what the kubelet says they reference.
_API_VOLUMES = {
    "configMap": "configmaps (via configmap volumes)",
    "secret": "secrets (via secret volumes)",
    "csi": "csidrivers (via CSI volumes)",
    "glusterfs": "endpoints (via glusterFS volumes)",
    "persistentVolumeClaim": "persistentvolumeclaims",
    "ephemeral": "persistentvolumeclaims (via ephemeral volumes)",
    "azureFile": "secrets (via azureFile volumes)",
}
_API_PROJECTIONS = {
    "configMap": "configmaps (via projected volumes)",
    "secret": "secrets (via projected volumes)",
    "serviceAccountToken": "serviceaccounts (via projected volumes)",
    "clusterTrustBundle": "clustertrustbundles",
    "podCertificate": "podcertificates",
}
# Volume sources holding a secret reference (podutil.VisitPodSecretNames).
_SECRET_REFS = (
    ("cephfs", "secretRef"),
    ("cinder", "secretRef"),
    ("flexVolume", "secretRef"),
    ("iscsi", "secretRef"),
    ("rbd", "secretRef"),
    ("scaleIO", "secretRef"),
    ("storageos", "secretRef"),
    ("csi", "nodePublishSecretRef"),
)


def api_reference(pod: k8s_core_v1_pb2.Pod) -> str | None:
    """The API resource a pod references, as podutil.HasAPIObjectReference names it (checked in
    its order), or None: the kubelet refuses a static pod that references any."""
    spec = pod.spec
    if spec.serviceAccountName:
        return "serviceaccounts"
    containers: list[k8s_core_v1_pb2.Container | k8s_core_v1_pb2.EphemeralContainerCommon] = [
        *spec.initContainers,
        *spec.containers,
        *(e.ephemeralContainerCommon for e in spec.ephemeralContainers),
    ]
    sources = [v.volumeSource for v in spec.volumes]
    env_refs = [
        (e.valueFrom.HasField("secretKeyRef"), e.valueFrom.HasField("configMapKeyRef"))
        for c in containers
        for e in c.env
        if e.HasField("valueFrom")
    ]
    env_from = [(f.HasField("secretRef"), f.HasField("configMapRef")) for c in containers for f in c.envFrom]
    projections = [p for v in sources if v.HasField("projected") for p in v.projected.sources]
    secrets = (
        bool(spec.imagePullSecrets)
        or any(secret for secret, _ in [*env_refs, *env_from])
        or any(v.HasField("secret") or (v.HasField("azureFile") and v.azureFile.secretName) for v in sources)
        or any(
            v.HasField(kind) and getattr(v, kind).HasField(ref) for v in sources for kind, ref in _SECRET_REFS
        )
        or any(p.HasField("secret") for p in projections)
    )
    if secrets:
        return "secrets"
    configmaps = (
        any(configmap for _, configmap in [*env_refs, *env_from])
        or any(v.HasField("configMap") for v in sources)
        or any(p.HasField("configMap") for p in projections)
    )
    if configmaps:
        return "configmaps"
    if spec.resourceClaims:
        return "resourceclaims"
    for volume in spec.volumes:
        kinds = [f.name for f, _ in volume.volumeSource.ListFields()]
        if any(k in _LOCAL_VOLUMES for k in kinds):
            continue
        for kind in kinds:
            if kind in _API_VOLUMES:
                return _API_VOLUMES[kind]
        if "projected" in kinds:
            for projection in volume.volumeSource.projected.sources:
                named = [f.name for f, _ in projection.ListFields()]
                found = next((_API_PROJECTIONS[n] for n in named if n in _API_PROJECTIONS), None)
                if found:
                    return found
    return None


def _name_problems(name: str, namespace: str, node_name: str) -> list[str]:
    problems = []
    if not name:
        problems.append("metadata.name is required")
    else:
        full = static_pod_name(name, node_name)
        if len(full) > _DNS_SUBDOMAIN_MAX or not _DNS_SUBDOMAIN.fullmatch(full):
            problems.append(
                f"metadata.name: {full!r} (with the node name appended) is not a DNS-1123 subdomain"
            )
    if namespace and (len(namespace) > _DNS_LABEL_MAX or not _DNS_LABEL.fullmatch(namespace)):
        problems.append(f"metadata.namespace: {namespace!r} is not a DNS-1123 label")
    return problems


def _container_problems(name: str, image: str, at: str, names: set[str]) -> list[str]:
    problems = []
    if not name:
        problems.append(f"{at}.name is required")
    elif len(name) > _DNS_LABEL_MAX or not _DNS_LABEL.fullmatch(name):
        problems.append(f"{at}.name: {name!r} is not a DNS-1123 label")
    elif name in names:
        problems.append(f"{at}.name: duplicate container name {name!r}")
    names.add(name)
    if not image:
        problems.append(f"{at}.image is required")
    return problems


_TOLERATION_IDENTITY = ("key", "operator", "value", "effect")


def _add_or_update_toleration(spec: k8s_core_v1_pb2.PodSpec, toleration: k8s_core_v1_pb2.Toleration) -> None:
    """The kubelet's AddOrUpdateTolerationInPod: one with the same key, operator, value and effect
    is replaced; otherwise it is appended."""
    found = False
    for existing in spec.tolerations:
        if all(getattr(existing, k) == getattr(toleration, k) for k in _TOLERATION_IDENTITY):
            existing.CopyFrom(toleration)
            found = True
    if not found:
        spec.tolerations.append(toleration)

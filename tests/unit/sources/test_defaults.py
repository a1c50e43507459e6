"""The API's v1 defaulting of a Pod, case by case as pkg/apis/core/v1/defaults_test.go has them
(TestSetDefaultPodSpec*, TestSetDefaultContainer*, TestSetDefaultProbe, TestSetDefaultHostPort*,
TestSetDefaultRequestsPod, TestSetDefaultVolume*, the pull policy cases)."""

from __future__ import annotations

from typing import Any

import pytest

from pods_api.core.api.codec import pod_from_message, pod_to_message
from pods_api.sources.defaults import apply_pod_defaults


def defaulted(spec: dict[str, Any]) -> dict[str, Any]:
    message = pod_to_message({"metadata": {"name": "p"}, "spec": spec}).message
    apply_pod_defaults(message)
    result: dict[str, Any] = pod_from_message(message)["spec"]
    return result


def container(**fields: Any) -> dict[str, Any]:
    return {"name": "c", "image": "nginx:1.27", **fields}


def test_an_empty_pod_spec_gets_every_default() -> None:
    """SetDefaults_PodSpec, SetDefaults_Pod, SetDefaults_Container."""
    spec = defaulted({"containers": [{"name": "c", "image": "nginx"}]})
    assert spec["restartPolicy"] == "Always"
    assert spec["dnsPolicy"] == "ClusterFirst"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["securityContext"] == {}
    assert spec["enableServiceLinks"] is True
    (c,) = spec["containers"]
    assert c["imagePullPolicy"] == "Always"  # no tag: latest
    assert c["terminationMessagePath"] == "/dev/termination-log"
    assert c["terminationMessagePolicy"] == "File"


def test_values_written_are_kept_even_zero() -> None:
    """Pointer fields: only nil is defaulted (a grace period of 0 means "kill at once")."""
    spec = defaulted(
        {
            "restartPolicy": "Never",
            "dnsPolicy": "Default",
            "terminationGracePeriodSeconds": 0,
            "schedulerName": "mine",
            "enableServiceLinks": False,
            "securityContext": {"runAsUser": 1000},
            "containers": [
                container(
                    imagePullPolicy="Never",
                    terminationMessagePath="/tmp/msg",
                    terminationMessagePolicy="FallbackToLogsOnError",
                )
            ],
        }
    )
    assert (spec["restartPolicy"], spec["dnsPolicy"], spec["schedulerName"]) == ("Never", "Default", "mine")
    assert spec["terminationGracePeriodSeconds"] == 0 and spec["enableServiceLinks"] is False
    assert spec["securityContext"] == {"runAsUser": 1000}
    (c,) = spec["containers"]
    assert (c["imagePullPolicy"], c["terminationMessagePath"]) == ("Never", "/tmp/msg")
    assert c["terminationMessagePolicy"] == "FallbackToLogsOnError"


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("nginx", "Always"),
        ("nginx:latest", "Always"),
        ("nginx:1.27", "IfNotPresent"),
        ("registry.k8s.io:5000/etcd", "Always"),  # a port is not a tag
        ("registry.k8s.io:5000/etcd:3.5", "IfNotPresent"),
        ("nginx@sha256:" + "a" * 64, "IfNotPresent"),  # a digest and no tag: no "latest"
        ("nginx:latest@sha256:" + "a" * 64, "Always"),
    ],
)
def test_image_pull_policy_follows_the_tag(image: str, policy: str) -> None:
    """SetDefaults_Container with parsers.ParseImageName's tag."""
    (c,) = defaulted({"containers": [{"name": "c", "image": image}]})["containers"]
    assert c["imagePullPolicy"] == policy


def test_init_and_ephemeral_containers_are_defaulted_too() -> None:
    spec = defaulted(
        {
            "initContainers": [{"name": "i", "image": "busybox:1"}],
            "containers": [container()],
            "ephemeralContainers": [{"name": "e", "image": "busybox"}],
        }
    )
    assert spec["initContainers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert spec["initContainers"][0]["terminationMessagePolicy"] == "File"
    assert spec["ephemeralContainers"][0]["imagePullPolicy"] == "Always"
    assert spec["ephemeralContainers"][0]["terminationMessagePath"] == "/dev/termination-log"


def test_requests_default_to_limits_and_no_resize_policy_is_added() -> None:
    """TestSetDefaultRequestsPod. v1.37.2 writes no resizePolicy: no defaulting function has one."""
    limits = {"cpu": "100m", "memory": "64Mi"}
    spec = defaulted(
        {
            "initContainers": [{"name": "i", "image": "busybox:1", "resources": {"limits": limits}}],
            "containers": [container(resources={"limits": limits, "requests": {"memory": "32Mi"}})],
        }
    )
    (c,) = spec["containers"]
    assert c["resources"]["requests"] == {"cpu": "100m", "memory": "32Mi"}  # a request written stays
    assert "resizePolicy" not in c
    assert spec["initContainers"][0]["resources"]["requests"] == limits
    assert "resizePolicy" not in spec["initContainers"][0]


def test_pod_level_limits_give_no_pod_level_requests() -> None:
    """PodLevelResourcesFixDefaulting (on in v1.37.2) leaves defaultPodRequests to the API server."""
    spec = defaulted({"resources": {"limits": {"cpu": "1"}}, "containers": [container()]})
    assert spec["resources"] == {"limits": {"cpu": "1"}}


def test_a_negative_grace_period_becomes_one_second() -> None:
    """SetDefaults_Pod: a negative terminationGracePeriodSeconds is made 1."""
    spec = defaulted({"terminationGracePeriodSeconds": -5, "containers": [container()]})
    assert spec["terminationGracePeriodSeconds"] == 1


@pytest.mark.parametrize(
    ("written", "name", "alias"),
    [
        ({"serviceAccountName": "a"}, "a", "a"),
        ({"serviceAccount": "b"}, "b", "b"),
        ({"serviceAccountName": "a", "serviceAccount": "b"}, "a", "a"),  # the name wins
    ],
)
def test_the_deprecated_service_account_follows_the_name(
    written: dict[str, str], name: str, alias: str
) -> None:
    """SetDefaults_PodSpec keeps serviceAccount equal to serviceAccountName."""
    spec = defaulted({**written, "containers": [container()]})
    assert (spec["serviceAccountName"], spec["serviceAccount"]) == (name, alias)


def test_file_key_refs_are_not_optional_and_ephemeral_claims_are_filesystems() -> None:
    """Declared defaults: FileKeySelector.optional false; SetDefaults_PersistentVolumeClaimSpec."""
    env = [{"name": "E", "valueFrom": {"fileKeyRef": {"volumeName": "v", "path": "p", "key": "k"}}}]
    template = {"spec": {"accessModes": ["ReadWriteOnce"]}}
    spec = defaulted(
        {
            "containers": [container(env=env)],
            "volumes": [{"name": "v", "ephemeral": {"volumeClaimTemplate": template}}],
        }
    )
    assert spec["containers"][0]["env"][0]["valueFrom"]["fileKeyRef"]["optional"] is False
    assert spec["volumes"][0]["ephemeral"]["volumeClaimTemplate"]["spec"]["volumeMode"] == "Filesystem"


def test_host_network_ports_get_host_ports_and_every_port_tcp() -> None:
    """TestSetDefaultHostPort*: with hostNetwork, hostPort = containerPort where unset."""
    ports = [{"containerPort": 80}, {"containerPort": 53, "hostPort": 5353, "protocol": "UDP"}]
    spec = defaulted({"hostNetwork": True, "containers": [container(ports=ports)]})
    assert spec["containers"][0]["ports"] == [
        {"containerPort": 80, "hostPort": 80, "protocol": "TCP"},
        {"containerPort": 53, "hostPort": 5353, "protocol": "UDP"},
    ]
    spec = defaulted({"containers": [container(ports=[{"containerPort": 80}])]})
    assert spec["containers"][0]["ports"] == [{"containerPort": 80, "protocol": "TCP"}]


def test_probes_and_http_handlers() -> None:
    """TestSetDefaultProbe, SetDefaults_HTTPGetAction, GRPCAction's service."""
    spec = defaulted(
        {
            "containers": [
                container(
                    livenessProbe={"httpGet": {"port": 8080}},
                    readinessProbe={"grpc": {"port": 9000}, "periodSeconds": 5},
                    lifecycle={"preStop": {"httpGet": {"port": 8080, "path": "/quit"}}},
                )
            ]
        }
    )
    c = spec["containers"][0]
    assert c["livenessProbe"] == {
        "httpGet": {"path": "/", "port": 8080, "scheme": "HTTP"},
        "timeoutSeconds": 1,
        "periodSeconds": 10,
        "successThreshold": 1,
        "failureThreshold": 3,
    }
    assert c["readinessProbe"]["grpc"] == {"port": 9000, "service": ""}
    assert c["readinessProbe"]["periodSeconds"] == 5
    assert c["lifecycle"]["preStop"]["httpGet"] == {"path": "/quit", "port": 8080, "scheme": "HTTP"}


def test_volumes_and_field_selectors() -> None:
    """SetDefaults_Volume (no source: emptyDir), HostPath's type, the modes, fieldRef's apiVersion."""
    spec = defaulted(
        {
            "volumes": [
                {"name": "scratch"},
                {"name": "etc", "hostPath": {"path": "/etc/kubernetes"}},
                {
                    "name": "info",
                    "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]},
                },
            ],
            "containers": [
                container(env=[{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}])
            ],
        }
    )
    scratch, etc, info = spec["volumes"]
    assert scratch == {"name": "scratch", "emptyDir": {}}
    assert etc == {"name": "etc", "hostPath": {"path": "/etc/kubernetes", "type": ""}}
    assert info["downwardAPI"]["defaultMode"] == 0o644
    assert info["downwardAPI"]["items"][0]["fieldRef"] == {"apiVersion": "v1", "fieldPath": "metadata.name"}
    env = spec["containers"][0]["env"][0]
    assert env["valueFrom"]["fieldRef"] == {"apiVersion": "v1", "fieldPath": "spec.nodeName"}


def test_defaulting_twice_changes_nothing() -> None:
    """The API server defaults again what a client sends back: a fixed point."""
    message = pod_to_message({"metadata": {"name": "p"}, "spec": {"containers": [container()]}}).message
    apply_pod_defaults(message)
    once = message.SerializeToString(deterministic=True)
    apply_pod_defaults(message)
    assert message.SerializeToString(deterministic=True) == once


def test_quantities_are_rounded_up_to_milli_precision() -> None:
    """SetDefaults_ResourceList on every ResourceList of the spec (TestSetDefaultRequestsPod's
    rounding): finer than 1m goes up to the next 1m; coarser values are left as they are."""
    fine = {"cpu": "0.0001", "memory": "64Mi"}
    template = {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1.00001"}}}}
    spec = defaulted(
        {
            "containers": [container(resources={"limits": fine})],
            "initContainers": [container(name="i", resources={"requests": {"cpu": "250u"}})],
            "overhead": {"cpu": "0.0005"},
            "resources": {"limits": {"cpu": "1.0001"}},
            "volumes": [{"name": "v", "ephemeral": {"volumeClaimTemplate": template}}],
        }
    )
    assert spec["containers"][0]["resources"] == {
        "limits": {"cpu": "1m", "memory": "64Mi"},
        "requests": {"cpu": "1m", "memory": "64Mi"},
    }
    assert spec["initContainers"][0]["resources"] == {"requests": {"cpu": "1m"}}
    assert spec["overhead"] == {"cpu": "1m"}
    assert spec["resources"] == {"limits": {"cpu": "1001m"}}
    claim = spec["volumes"][0]["ephemeral"]["volumeClaimTemplate"]["spec"]["resources"]
    assert claim == {"requests": {"storage": "1001m"}}

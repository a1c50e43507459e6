"""How the gateway's JSON is compared: type meta, canonical form, decoding."""

from __future__ import annotations

import inspect
from typing import Any

from kubernetes.client import ApiClient

from pods_api.core.api.codec import pod_from_message, pod_to_message

TYPE_META = {"kind": "Pod", "apiVersion": "v1"}


def canonical(pod: dict[str, Any]) -> dict[str, Any]:
    """A pod as Kubernetes prints it, with the TypeMeta the gateway adds."""
    return {**TYPE_META, **pod_from_message(pod_to_message(pod).message)}


def deserialize(body: str, kind: str) -> Any:
    """With the official Python client, as a client generated from Kubernetes' OpenAPI reads it.
    (kubernetes < 34 takes a response object with .data; newer ones take the text.)"""
    api = ApiClient()
    if "response_text" in inspect.signature(api.deserialize).parameters:
        return api.deserialize(body, kind, "application/json")

    class FakeResponse:
        data = body

    return api.deserialize(FakeResponse(), kind)

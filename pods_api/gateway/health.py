"""Probes: `/healthz` and `/livez` (the process answers) and `/readyz` (every pod source has synced).

A ready server whose sources warn (one stale: nothing applied from its upstream for longer than
its resync) stays ready, as the kubelet keeps serving its last state while its upstream is away:
its 200 says "ok" and then a line per warning, as gRPC's trailing metadata and `pods-api check`
say them. Probes read the status only.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends
from starlette.responses import PlainTextResponse, Response

from pods_api.core.assembly import Core
from pods_api.core.policy.calls import NOT_SYNCED_RETRY_AFTER
from pods_api.gateway import openapi
from pods_api.gateway.http.errors import Code, error_response
from pods_api.gateway.http.params import no_parameters


def warning_lines(warnings: dict[str, str]) -> str:
    """A line per source with a warning: `warning: <source>: <text>`, in the order of names."""
    return "".join(f"warning: {source}: {text}\n" for source, text in sorted(warnings.items()))


def router(core: Core) -> APIRouter:
    probes = APIRouter(tags=["probes"], dependencies=[Depends(no_parameters)])

    @probes.get(
        "/healthz",
        operation_id="Healthz",
        summary="The process is alive",
        response_class=PlainTextResponse,
        responses=openapi.probe_responses(ready=False),
    )
    async def healthz() -> Response:
        return PlainTextResponse("ok\n")

    @probes.get(
        "/livez",
        operation_id="Livez",
        summary="The process is alive (the API server's name for /healthz)",
        response_class=PlainTextResponse,
        responses=openapi.probe_responses(ready=False),
    )
    async def livez() -> Response:
        return PlainTextResponse("ok\n")

    @probes.get(
        "/readyz",
        operation_id="Readyz",
        summary="Every pod source has synced: List, Get and Watch answer",
        response_class=PlainTextResponse,
        responses=openapi.probe_responses(ready=True),
    )
    async def readyz() -> Response:
        if core.cache.ready:
            return PlainTextResponse("ok\n" + warning_lines(core.cache.warnings))
        waiting = [gate.name for gate in core.cache.gates if not gate.open]
        message = "not ready: waiting for " + (", ".join(waiting) if waiting else "a pod source")
        return error_response(Code.UNAVAILABLE, message, retry_after=NOT_SYNCED_RETRY_AFTER)

    return probes

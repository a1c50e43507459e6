"""Server reflection under both names clients ask for: `grpc.reflection.v1` (grpcurl from 1.8.7,
grpc-go's and grpc-java's current clients) and `grpc.reflection.v1alpha` (older clients).

grpcio-reflection implements only v1alpha. The v1 protocol is the same messages under another
package, so one servicer answers both: v1's descriptors are v1alpha's file renamed (so that
`describe` works on it too), and the wire bytes are identical.
"""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection, reflection_pb2

V1ALPHA = "grpc.reflection.v1alpha"
V1 = "grpc.reflection.v1"
SERVICE_NAMES = (f"{V1}.ServerReflection", f"{V1ALPHA}.ServerReflection")


def _v1_file(pool: Any) -> None:
    """Add grpc/reflection/v1/reflection.proto to pool, made from the v1alpha file."""
    name = "grpc/reflection/v1/reflection.proto"
    try:
        pool.FindFileByName(name)
        return  # already there (another library registered the real one)
    except KeyError:
        pass
    proto = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(proto)
    proto.name, proto.package = name, V1
    proto.options.Clear()
    old, new = f".{V1ALPHA}.", f".{V1}."
    for message in proto.message_type:
        for field in message.field:
            if field.type_name.startswith(old):
                field.type_name = new + field.type_name[len(old) :]
    for service in proto.service:
        for method in service.method:
            method.input_type = new + method.input_type[len(old) :]
            method.output_type = new + method.output_type[len(old) :]
    pool.Add(proto)


def enable(service_names: list[str], server: grpc.aio.Server) -> None:
    """Serve reflection for service_names (the reflection services themselves are added)."""
    pool = descriptor_pool.Default()
    _v1_file(pool)
    servicer = reflection.aio.ReflectionServicer([*service_names, *SERVICE_NAMES], pool=pool)
    method = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    handlers = {"ServerReflectionInfo": method}
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler(name, handlers) for name in SERVICE_NAMES]
    )

from pods_api.core.api.pb import pods_v1alpha1_pb2 as _pods_v1alpha1_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ContainerKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONTAINER_KIND_UNSPECIFIED: _ClassVar[ContainerKind]
    CONTAINER: _ClassVar[ContainerKind]
    INIT_CONTAINER: _ClassVar[ContainerKind]
    EPHEMERAL_CONTAINER: _ClassVar[ContainerKind]
CONTAINER_KIND_UNSPECIFIED: ContainerKind
CONTAINER: ContainerKind
INIT_CONTAINER: ContainerKind
EPHEMERAL_CONTAINER: ContainerKind

class PodName(_message.Message):
    __slots__ = ("namespace", "name")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class LookupRequest(_message.Message):
    __slots__ = ("container_id", "pod_ip", "name", "label_selector", "field_selector")
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    POD_IP_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    FIELD_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    container_id: str
    pod_ip: str
    name: PodName
    label_selector: str
    field_selector: str
    def __init__(self, container_id: _Optional[str] = ..., pod_ip: _Optional[str] = ..., name: _Optional[_Union[PodName, _Mapping]] = ..., label_selector: _Optional[str] = ..., field_selector: _Optional[str] = ...) -> None: ...

class Container(_message.Message):
    __slots__ = ("name", "kind", "container_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: ContainerKind
    container_id: str
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[_Union[ContainerKind, str]] = ..., container_id: _Optional[str] = ...) -> None: ...

class Match(_message.Message):
    __slots__ = ("pod", "container")
    POD_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    pod: bytes
    container: Container
    def __init__(self, pod: _Optional[bytes] = ..., container: _Optional[_Union[Container, _Mapping]] = ...) -> None: ...

class LookupResponse(_message.Message):
    __slots__ = ("matches",)
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    matches: _containers.RepeatedCompositeFieldContainer[Match]
    def __init__(self, matches: _Optional[_Iterable[_Union[Match, _Mapping]]] = ...) -> None: ...

class ListPodsRequest(_message.Message):
    __slots__ = ("label_selector", "field_selector")
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    FIELD_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    label_selector: str
    field_selector: str
    def __init__(self, label_selector: _Optional[str] = ..., field_selector: _Optional[str] = ...) -> None: ...

class WatchPodsRequest(_message.Message):
    __slots__ = ("label_selector", "field_selector")
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    FIELD_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    label_selector: str
    field_selector: str
    def __init__(self, label_selector: _Optional[str] = ..., field_selector: _Optional[str] = ...) -> None: ...

class WatchPodsBatch(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_pods_v1alpha1_pb2.WatchPodsEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[_pods_v1alpha1_pb2.WatchPodsEvent, _Mapping]]] = ...) -> None: ...

from pods_api.core.api.pb import k8s_core_v1_pb2 as _k8s_core_v1_pb2
from pods_api.core.api.pb import pods_v1alpha1_pb2 as _pods_v1alpha1_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PodListRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PodListResponse(_message.Message):
    __slots__ = ("pods",)
    PODS_FIELD_NUMBER: _ClassVar[int]
    pods: _containers.RepeatedCompositeFieldContainer[_k8s_core_v1_pb2.Pod]
    def __init__(self, pods: _Optional[_Iterable[_Union[_k8s_core_v1_pb2.Pod, _Mapping]]] = ...) -> None: ...

class PodGetRequest(_message.Message):
    __slots__ = ("podUID",)
    PODUID_FIELD_NUMBER: _ClassVar[int]
    podUID: str
    def __init__(self, podUID: _Optional[str] = ...) -> None: ...

class PodGetResponse(_message.Message):
    __slots__ = ("pod",)
    POD_FIELD_NUMBER: _ClassVar[int]
    pod: _k8s_core_v1_pb2.Pod
    def __init__(self, pod: _Optional[_Union[_k8s_core_v1_pb2.Pod, _Mapping]] = ...) -> None: ...

class PodWatchRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PodWatchResponse(_message.Message):
    __slots__ = ("pod", "type")
    POD_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    pod: _k8s_core_v1_pb2.Pod
    type: _pods_v1alpha1_pb2.EventType
    def __init__(self, pod: _Optional[_Union[_k8s_core_v1_pb2.Pod, _Mapping]] = ..., type: _Optional[_Union[_pods_v1alpha1_pb2.EventType, str]] = ...) -> None: ...

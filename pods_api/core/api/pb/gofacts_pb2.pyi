from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor
OMITEMPTY_FIELD_NUMBER: _ClassVar[int]
omitempty: _descriptor.FieldDescriptor
POINTER_FIELD_NUMBER: _ClassVar[int]
pointer: _descriptor.FieldDescriptor
INLINE_FIELD_NUMBER: _ClassVar[int]
inline: _descriptor.FieldDescriptor

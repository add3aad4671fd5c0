"""TFRecord files of `tf.train.Example` protos, written and read without TensorFlow.

A TFRecord file is a sequence of records: uint64 length (little endian), the masked CRC-32C of those 8 bytes, the
payload, the masked CRC-32C of the payload. An Example is `Features { map<string, Feature> feature = 1 }` where a
Feature holds one of BytesList (1), FloatList (2, packed float32) or Int64List (3, packed varints). That is all the
protobuf wire format RLDS needs, so it is encoded here by hand; `tests/datasets_io/test_formats.py` and the real reader
(tools/check_readers.py) check it against TensorFlow's own parser.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import google_crc32c
import numpy as np

Feature = bytes | list[bytes] | np.ndarray  # bytes lists, or float32 / int64 / bool arrays (flattened)


class TFRecordError(ValueError):
    """A record is truncated or its checksum does not match."""


def _masked_crc(data: bytes) -> int:
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64 as ten bytes of two's complement, as protobuf does
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _feature(value: Feature) -> bytes:
    if isinstance(value, bytes):
        value = [value]
    if isinstance(value, list):
        return _field(1, b"".join(_field(1, item) for item in value))
    array = np.asarray(value).reshape(-1)
    if array.dtype.kind == "f":
        return _field(2, _field(1, array.astype("<f4").tobytes()))
    return _field(3, _field(1, b"".join(_varint(int(v)) for v in array.astype(np.int64))))


def encode_example(features: dict[str, Feature]) -> bytes:
    """A serialized tf.train.Example; floats are stored as float32, ints and bools as int64."""
    entries = b"".join(_field(1, _field(1, key.encode()) + _field(2, _feature(value)))
                       for key, value in features.items())
    return _field(1, entries)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise TFRecordError("a varint runs past the end of the record")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(field number, payload) of every length-delimited field; other wire types do not occur in an Example."""
    pos = 0
    while pos < len(data):
        tag, pos = _read_varint(data, pos)
        if tag & 7 != 2:
            raise TFRecordError(f"unexpected wire type {tag & 7} in an Example")
        size, pos = _read_varint(data, pos)
        if pos + size > len(data):
            raise TFRecordError("a field runs past the end of the record")
        yield tag >> 3, data[pos:pos + size]
        pos += size


def _decode_feature(data: bytes) -> list[bytes] | np.ndarray:
    for kind, payload in _fields(data):
        values = [item for _, item in _fields(payload)]
        if kind == 1:
            return values
        if kind == 2:
            return np.frombuffer(b"".join(values), dtype="<f4")
        ints, raw = [], b"".join(values)
        pos = 0
        while pos < len(raw):
            value, pos = _read_varint(raw, pos)
            ints.append(value - (1 << 64) if value >= 1 << 63 else value)
        return np.array(ints, dtype=np.int64)
    return np.zeros(0, dtype=np.float32)  # an empty Feature


def decode_example(data: bytes) -> dict[str, list[bytes] | np.ndarray]:
    """The features of a serialized tf.train.Example: bytes lists, float32 or int64 arrays."""
    out: dict[str, list[bytes] | np.ndarray] = {}
    for _, entries in _fields(data):
        for _, entry in _fields(entries):
            parts = dict(_fields(entry))
            out[parts.get(1, b"").decode()] = _decode_feature(parts.get(2, b""))
    return out


def write_record(handle: BinaryIO, payload: bytes) -> int:
    """Append one record; returns the bytes written."""
    length = struct.pack("<Q", len(payload))
    handle.write(length + struct.pack("<I", _masked_crc(length)) + payload + struct.pack("<I", _masked_crc(payload)))
    return len(payload) + 16


def read_records(path: Path) -> Iterator[bytes]:
    """Every record's payload, checksums checked; TFRecordError names what is wrong."""
    with open(path, "rb") as handle:
        while header := handle.read(12):
            if len(header) < 12:
                raise TFRecordError(f"{path.name}: truncated record header")
            (length,) = struct.unpack("<Q", header[:8])
            if struct.unpack("<I", header[8:])[0] != _masked_crc(header[:8]):
                raise TFRecordError(f"{path.name}: corrupt record length")
            payload, footer = handle.read(length), handle.read(4)
            if len(payload) < length or len(footer) < 4:
                raise TFRecordError(f"{path.name}: truncated record (file cut short)")
            if struct.unpack("<I", footer)[0] != _masked_crc(payload):
                raise TFRecordError(f"{path.name}: record checksum mismatch (corrupt data)")
            yield payload

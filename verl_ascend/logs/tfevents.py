"""Scalars from TensorBoard event files (``events.out.tfevents.*``), read offline with the standard library.

verl's ``trainer.logger=[...,'tensorboard']`` writes each step's metrics with torch's ``SummaryWriter.add_scalar(key,
value, step)`` (``_TensorboardAdapter`` in verl/utils/tracking.py) into ``$TENSORBOARD_DIR`` (default
``tensorboard_log/<project>/<experiment>``). Reading them needs neither TensorFlow nor the ``tensorboard`` package:

- The file is a sequence of TFRecords, each ``uint64 length | uint32 masked crc32c(length) | data | uint32 masked
  crc32c(data)``, little-endian (tensorflow/core/lib/io/record_writer.cc,
  https://github.com/tensorflow/tensorboard/blob/master/tensorboard/summary/writer/record_writer.py).
- ``data`` is an ``Event`` protobuf: ``wall_time`` = 1 (double), ``step`` = 2 (int64), ``summary`` = 5; a ``Summary``
  holds repeated ``value`` = 1, each with ``tag`` = 1 and either ``simple_value`` = 2 (float; torch's default
  ``new_style=False``) or ``tensor`` = 8, a ``TensorProto`` with ``dtype`` = 1, ``tensor_content`` = 4,
  ``float_val`` = 5, ``double_val`` = 6, ``int_val`` = 7, ``int64_val`` = 10 (tensorboard/compat/proto/event.proto,
  summary.proto, tensor.proto; tests/unit/test_logs_compare.py checks these numbers against the installed
  ``tensorboard`` package's descriptors and reads files torch's writer made).

The length's CRC is checked (8 bytes: cheap, and it is what tells a torn record from a good one); the data's is not
(crc32c is not in the standard library and a pure-Python one would cost more than the rest of the read). A record
cut short at the end of the file (a run still writing, or killed) ends the read and is counted.
"""

import struct

_DT_FLOAT, _DT_DOUBLE, _DT_INT32, _DT_INT64 = 1, 2, 3, 9
_CRC_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected
_MASK_DELTA = 0xA282EAD8


def _crc_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _CRC_POLY if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc_table()


def masked_crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def _varint(buf, pos):
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def fields(buf):
    """(field number, wire type, value) of one protobuf message: ints for varints, bytes for the rest."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"protobuf wire type {wire} (field {number}) is not one an Event holds")
        yield number, wire, value


def _tensor_value(buf):
    """The first element of a scalar TensorProto, or None for a dtype that is not a number."""
    dtype, values = _DT_FLOAT, {}
    for number, wire, value in fields(buf):
        if number == 1:
            dtype = value
        else:
            values.setdefault(number, (wire, value))
    if dtype not in (_DT_FLOAT, _DT_DOUBLE, _DT_INT32, _DT_INT64):
        return None
    if 4 in values:  # tensor_content: the raw little-endian array
        raw = values[4][1]
        fmt = {_DT_FLOAT: "<f", _DT_DOUBLE: "<d", _DT_INT32: "<i", _DT_INT64: "<q"}[dtype]
        return float(struct.unpack_from(fmt, raw)[0]) if len(raw) >= struct.calcsize(fmt) else None
    for number, fmt in ((5, "<f"), (6, "<d")):  # packed (wire 2) or one element (wire 5 / 1)
        if number in values:
            return float(struct.unpack_from(fmt, values[number][1])[0])
    for number in (7, 10):
        if number in values:
            wire, raw = values[number]
            value = _varint(raw, 0)[0] if wire == 2 else raw
            return float(value - (1 << 64) if value >= 1 << 63 else value)
    return None


def _scalars(summary):
    for number, _, value in fields(summary):
        if number != 1:
            continue
        tag, number_value = None, None
        for vnum, _, v in fields(value):
            if vnum == 1:
                tag = v.decode("utf-8", "replace")
            elif vnum == 2:
                number_value = struct.unpack("<f", v)[0]
            elif vnum == 8:
                number_value = _tensor_value(v)
        if tag is not None and number_value is not None:
            yield tag, number_value


def records(fh):
    """(data, problem) for each record; problem is a reason string for the torn or bad record that ends the read."""
    while True:
        header = fh.read(12)
        if not header:
            return
        if len(header) < 12:
            yield None, "file ends inside a record header"
            return
        (length,) = struct.unpack("<Q", header[:8])
        if struct.unpack("<I", header[8:])[0] != masked_crc32c(header[:8]):
            yield None, "a record's length fails its CRC (not an event file, or damaged)"
            return
        data = fh.read(length)
        footer = fh.read(4)
        if len(data) < length or len(footer) < 4:
            yield None, "file ends inside a record (still being written, or cut)"
            return
        yield data, None


def read(path):
    """Yields (wall_time, step, {tag: value}) for each event carrying scalars, then raises nothing: a torn tail
    is returned as the second item of the last tuple (``None, None, reason``)."""
    with open(path, "rb") as fh:
        for data, problem in records(fh):
            if problem:
                yield None, None, problem
                return
            wall, step, values = 0.0, 0, {}
            for number, _, value in fields(data):
                if number == 1:
                    wall = struct.unpack("<d", value)[0]
                elif number == 2:
                    step = value - (1 << 64) if value >= 1 << 63 else value
                elif number == 5:
                    values.update(_scalars(value))
            if values:
                yield wall, step, values

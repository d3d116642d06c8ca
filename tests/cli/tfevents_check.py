#!/usr/bin/python3
"""Decodes TensorBoard event files written by `vexp run` without TensorBoard:
checks every TFRecord's masked CRC32C (length and data), parses the Event and
Summary protobuf wire format, and prints JSON {tag: [(step, value), ...]}.
Usage: tfevents_check.py FILE [REQUIRED_TAG ...] (exit 1 on any problem)."""
import json
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(buf, i):
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, i


def fields(buf):
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 1:
            v = buf[i:i + 8]; i += 8
        elif wt == 5:
            v = buf[i:i + 4]; i += 4
        elif wt == 2:
            n, i = varint(buf, i)
            v = buf[i:i + n]; i += n
        else:
            raise ValueError("unexpected wire type %d" % wt)
        yield num, wt, v


def main():
    data = open(sys.argv[1], "rb").read()
    i, events, scalars, version = 0, 0, {}, None
    while i < len(data):
        header = data[i:i + 8]
        (n,) = struct.unpack("<Q", header)
        (hcrc,) = struct.unpack("<I", data[i + 8:i + 12])
        assert hcrc == masked(header), "bad length CRC at offset %d" % i
        body = data[i + 12:i + 12 + n]
        (bcrc,) = struct.unpack("<I", data[i + 12 + n:i + 16 + n])
        assert len(body) == n and bcrc == masked(body), "bad data CRC at offset %d" % i
        i += 16 + n
        events += 1
        step, wall = 0, None
        for num, wt, v in fields(body):
            if num == 1 and wt == 1:
                (wall,) = struct.unpack("<d", v)
            elif num == 2 and wt == 0:
                step = v
            elif num == 3 and wt == 2:
                version = v.decode()
            elif num == 5 and wt == 2:
                for snum, swt, sv in fields(v):
                    assert snum == 1 and swt == 2
                    tag, val = None, None
                    for vnum, vwt, vv in fields(sv):
                        if vnum == 1:
                            tag = vv.decode()
                        elif vnum == 2 and vwt == 5:
                            (val,) = struct.unpack("<f", vv)
                    assert tag is not None and val is not None
                    scalars.setdefault(tag, []).append((step, val))
        assert wall is not None and wall > 1.5e9, "event without a plausible wall_time"
    assert version == "brain.Event:2", "no file_version record"
    missing = [t for t in sys.argv[2:] if t not in scalars]
    assert not missing, "missing tags: %s" % missing
    print(json.dumps({"events": events, "scalars": scalars}))


if __name__ == "__main__":
    try:
        main()
    except (AssertionError, ValueError, IndexError, struct.error) as e:
        print("tfevents_check: %s: %s" % (sys.argv[1], e), file=sys.stderr)
        sys.exit(1)

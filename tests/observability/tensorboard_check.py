#!/usr/bin/env python3
"""Decodes a job's TensorBoard event files and metrics.csv independently of
the writer, and checks them against metrics.jsonl.

  tensorboard_check.py WORKDIR

TensorBoard is not packaged in Debian, so this reads the public format
itself: TFRecord framing (uint64 length, masked CRC32C of it, data, masked
CRC32C of the data) around tensorflow.Event protobufs (wall_time = 1,
step = 2, file_version = 3, summary = 5 { value = 1 { tag = 1,
simple_value = 2 } }). Every framing CRC is verified; the first event of a
file must be file_version "brain.Event:2"; every train and eval line of
metrics.jsonl must appear, in order, as an event at its step whose scalars
are exactly its numbers (as float32), tagged with the field names; and
metrics.csv must hold the same records. With --self-test, also proves the
CRC check catches a flipped byte.
"""
import csv
import glob
import json
import math
import os
import struct
import sys

_POLY = 0x82F63B78  # CRC32C (Castagnoli), reflected
_TABLE = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ _POLY if c & 1 else c >> 1
    _TABLE.append(c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def records(blob, path):
    at = 0
    while at < len(blob):
        if at + 12 > len(blob):
            raise ValueError(f"{path}: truncated header at byte {at}")
        header = blob[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", blob[at + 8:at + 12])
        if masked(header) != length_crc:
            raise ValueError(f"{path}: length CRC mismatch at byte {at}")
        data = blob[at + 12:at + 12 + length]
        if len(data) != length or at + 16 + length > len(blob):
            raise ValueError(f"{path}: truncated record at byte {at}")
        (data_crc,) = struct.unpack("<I", blob[at + 12 + length:at + 16 + length])
        if masked(data) != data_crc:
            raise ValueError(f"{path}: data CRC mismatch at byte {at}")
        yield data
        at += 16 + length


def fields(msg):
    """(number, wire type, value) of a protobuf message's fields."""
    at = 0
    while at < len(msg):
        key, at = varint(msg, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = varint(msg, at)
        elif wire == 1:
            value, at = msg[at:at + 8], at + 8
        elif wire == 2:
            n, at = varint(msg, at)
            value, at = msg[at:at + n], at + n
        elif wire == 5:
            value, at = msg[at:at + 4], at + 4
        else:
            raise ValueError(f"wire type {wire}")
        yield number, wire, value


def varint(b, at):
    shift = result = 0
    while True:
        byte = b[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, at
        shift += 7


def event(data):
    e = {"step": 0, "scalars": {}}
    for number, wire, value in fields(data):
        if number == 1 and wire == 1:
            e["wall_time"] = struct.unpack("<d", value)[0]
        elif number == 2 and wire == 0:
            e["step"] = value
        elif number == 3 and wire == 2:
            e["file_version"] = value.decode()
        elif number == 5 and wire == 2:
            for vn, vw, v in fields(value):
                if vn != 1:
                    continue
                tag, simple = None, None
                for n, w, x in fields(v):
                    if n == 1:
                        tag = x.decode()
                    elif n == 2 and w == 5:
                        simple = struct.unpack("<f", x)[0]
                e["scalars"][tag] = simple
    return e


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def same(jsonl_value, got):
    if jsonl_value is None:  # metrics.jsonl writes non-finite values as null
        return got is not None and not math.isfinite(got)
    return got is not None and f32(jsonl_value) == got


def events_of(workdir, split):
    files = sorted(glob.glob(os.path.join(workdir, "tensorboard", split, "events.out.tfevents.*")))
    if not files:
        raise ValueError(f"no event files in {workdir}/tensorboard/{split}")
    out = []
    for path in files:
        evs = [event(d) for d in records(open(path, "rb").read(), path)]
        if not evs or evs[0].get("file_version") != "brain.Event:2":
            raise ValueError(f"{path}: the first event is not file_version brain.Event:2")
        if any(e.get("wall_time", 0) < 1.5e9 for e in evs):
            raise ValueError(f"{path}: an event without a plausible wall_time")
        out += [e for e in evs[1:]]
    return out


def check(workdir):
    lines = [json.loads(l) for l in open(os.path.join(workdir, "metrics.jsonl")) if l.strip()]
    counts = {}
    for split in ("train", "eval"):
        want = [l for l in lines if l.get("split") == split]
        got = events_of(workdir, split)
        if len(want) != len(got):
            raise ValueError(f"{split}: {len(want)} lines in metrics.jsonl but {len(got)} events")
        for w, g in zip(want, got):
            if g["step"] != w["step"]:
                raise ValueError(f"{split}: event at step {g['step']} where metrics.jsonl has step {w['step']}")
            tags = {k for k in w if k not in ("step", "split")}
            if set(g["scalars"]) != tags:
                raise ValueError(f"{split} step {w['step']}: tags {sorted(g['scalars'])}, want {sorted(tags)}")
            for k in tags:
                if not same(w[k], g["scalars"][k]):
                    raise ValueError(f"{split} step {w['step']} {k}: event {g['scalars'][k]}, metrics.jsonl {w[k]}")
        counts[split] = len(got)
    with open(os.path.join(workdir, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    if len(rows) != len(lines):
        raise ValueError(f"metrics.csv has {len(rows)} rows, metrics.jsonl {len(lines)} lines")
    for row, line in zip(rows, lines):
        for k, cell in row.items():
            v = line.get(k)
            if k == "split":
                ok = cell == v
            elif k == "step":
                ok = int(cell) == v
            elif k not in line:
                ok = cell == ""
            elif isinstance(v, bool):  # before numbers: a bool is an int here
                ok = cell == ("true" if v else "false")
            elif isinstance(v, str):
                ok = cell == v
            elif v is None:
                ok = not math.isfinite(float(cell))
            else:
                ok = f32(float(cell)) == f32(v)
            if not ok:
                raise ValueError(f"metrics.csv step {line.get('step')} {k}: '{cell}', metrics.jsonl {v}")
    return counts


def self_test(workdir):
    path = sorted(glob.glob(os.path.join(workdir, "tensorboard", "train", "events.out.tfevents.*")))[0]
    blob = bytearray(open(path, "rb").read())
    blob[len(blob) // 2] ^= 0x01
    try:
        list(records(bytes(blob), path))
    except ValueError:
        return
    raise ValueError("a flipped byte was not caught by the CRC check")


if __name__ == "__main__":
    try:
        counts = check(sys.argv[1])
        if "--self-test" in sys.argv:
            self_test(sys.argv[1])
    except (ValueError, OSError, KeyError) as e:
        print(f"FAILED: {e}")
        sys.exit(1)
    print(f"TensorBoard events match metrics.jsonl: {counts['train']} train, {counts['eval']} eval; metrics.csv too")

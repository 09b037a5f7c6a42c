#!/usr/bin/env python3
"""Writes the seed inputs of worker_messages_fuzzer (fuzz/corpus/worker_messages_fuzzer/).

An input is chunks of (length byte, action byte, body); see worker_messages_fuzzer.cc for the
actions. Protobuf bytes are written by hand so that this needs nothing but Python.
"""
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker_messages_fuzzer")
CONNECT, END, MESSAGE, RESULT, PROGRESS, HEARTBEAT, TICK, STOP = range(8)
COMPLETED, FAILED, CANCELLED = 3, 4, 5


def chunk(action, body=b""):
    data = bytes([action]) + body
    assert len(data) < 256
    return bytes([len(data)]) + data


def field(number, payload):  # length-delimited field
    return bytes([number << 3 | 2, len(payload)]) + payload


def hello(worker_id, slots, models=(4,)):  # Model.FUNCTION = 4
    capabilities = bytes([0x08, 1])  # device_kind CPU
    capabilities += b"".join(bytes([0x18, m]) for m in models) + bytes([0x20, slots])
    return field(1, field(1, worker_id.encode()) + field(2, capabilities))


def result(which, state, value, attempt_shift=0, no_value=False, error=False):
    how = state | (0x10 if attempt_shift else 0) | (0x20 if attempt_shift > 0 else 0)
    how |= (0x40 if no_value else 0) | (0x80 if error else 0)
    return chunk(RESULT, bytes([0, which, how]) + struct.pack("<d", value))


seeds = {
    # A worker finishes every trial it is given.
    "complete_all": chunk(CONNECT, b"\x00") + b"".join(
        result(i, COMPLETED, float(i)) for i in range(12)),
    # Two workers; one fails trials, one goes silent and loses its lease.
    "fail_and_expire": chunk(CONNECT, b"\x01") + chunk(CONNECT, b"\x02")
    + result(0, FAILED, 0.0, error=True) + chunk(PROGRESS, b"\x01\x00\x03" + struct.pack("<d", 1.5))
    + chunk(HEARTBEAT, b"\x00") + chunk(TICK, b"\xff") + chunk(TICK, b"\xff")
    + result(1, COMPLETED, 2.0),
    # A parsed hello, a duplicate worker id, a stale attempt, a disconnect and a reconnect.
    "reconnect": chunk(CONNECT, hello("alpha", 2)) + chunk(CONNECT, hello("alpha", 1))
    + result(0, COMPLETED, 1.0, attempt_shift=-1) + chunk(END, b"\x00")
    + chunk(CONNECT, hello("alpha", 2)) + result(0, COMPLETED, float("nan")),
    # Raw messages on a stream: a heartbeat (field 4) and a result with no trial.
    "raw_messages": chunk(CONNECT, b"\x00") + chunk(MESSAGE, b"\x00" + field(4, b""))
    + chunk(MESSAGE, b"\x00" + field(3, bytes([0x18, COMPLETED])))
    + result(0, CANCELLED, 0.0, no_value=True) + chunk(STOP, b"\xff") + result(0, COMPLETED, 1.0),
    # A stream whose first message is not a hello, and a worker that runs no FUNCTION.
    "bad_first": chunk(CONNECT, hello("xgb", 4, models=(1,))) + chunk(MESSAGE, b"\x00" + field(4, b""))
    + chunk(TICK, b"\x80") + chunk(END, b"\x00"),
}

os.makedirs(HERE, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)

"""The wire: frames written by one side come back whole and unchanged, however the stream cuts them."""

from __future__ import annotations

import os
import socket
import threading
import time

import numpy as np

from rlbench_vec.wire.protocol import OK, RECORD, read_plain, reply, reply_reader, send_plain, send_reply


def _records(count: int, value: float) -> np.ndarray:
    return np.full(count, value, RECORD)


def test_large_and_small_replies_arrive_whole_in_order():
    main_end, worker_end = socket.socketpair()
    payloads = [{"demo": os.urandom(6_000_000)}, None, {"small": 1}, {"demo": os.urandom(3_000_000)}]

    def worker() -> None:
        for seq, payload in enumerate(payloads):
            send_reply(worker_end.fileno(), seq, OK, _records(seq, float(seq)), payload)

    writer = threading.Thread(target=worker)
    writer.start()
    reader = reply_reader(main_end.fileno())
    received = []
    while len(received) < len(payloads):
        received += [reply(frame) for frame in reader.read_available()]
    writer.join()
    assert [answer.seq for answer in received] == [0, 1, 2, 3]
    assert [answer.payload for answer in received] == payloads
    assert [len(answer.records) for answer in received] == [0, 1, 2, 3]
    assert all((answer.records.view(np.float64) == answer.seq).all() for answer in received)
    assert not reader.parts and reader.offset == len(reader.data)  # nothing held back


def test_a_frame_cut_inside_its_header_waits_for_the_rest():
    main_end, worker_end = socket.socketpair()
    other_end, sender = socket.socketpair()
    send_reply(sender.fileno(), 7, OK, _records(2, 1.5), {"x": 1})
    frame = other_end.recv(1 << 16)
    reader = reply_reader(main_end.fileno())
    worker_end.sendall(frame[:5])
    assert reader.read_available() == []
    worker_end.sendall(frame[5:] + frame)
    answers = [reply(f) for f in reader.read_available()]
    assert [(a.seq, a.payload) for a in answers] == [(7, {"x": 1}), (7, {"x": 1})]


def test_plain_replies_of_many_writers_arrive_whole_in_one_read_each():
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    writers, per_writer = 8, 500

    def worker(number: int) -> None:
        for seq in range(per_writer):
            send_plain(write_end, number, 3, seq, seq % 2, number * 1000 + seq, seq * 0.5, number + 0.25)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    received: list = []
    deadline = time.monotonic() + 30.0
    while len(received) < writers * per_writer and time.monotonic() < deadline:
        received += read_plain(read_end)
    for thread in threads:
        thread.join()
    assert read_plain(read_end) == []  # nothing waiting: an empty list, not a blocked read
    assert len(received) == writers * per_writer
    for number, generation, seq, page, first, exec_s, write_s in received:
        assert (generation, page, first, exec_s, write_s) == (3, seq % 2, number * 1000 + seq, seq * 0.5, number + 0.25)
    by_writer = {n: [r[2] for r in received if r[0] == n] for n in range(writers)}
    assert all(seqs == list(range(per_writer)) for seqs in by_writer.values())  # each writer's in its order

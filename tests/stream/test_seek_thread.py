"""Faust seeks a partition from the event loop's thread, but aiokafka's seek drops the records its
consumer thread may be reading at that moment: a worker taking partitions over crashed its fetcher
on a KeyError of the partition it was seeking back to its state. Every seek of a worker's consumer
is handed to the consumer's own thread."""

import asyncio

import pytest
from faust.types import TP

from wevent.stream.runtime.faust_patches import StatePositionedApp


def test_a_seek_runs_in_the_consumer_thread():
    app = StatePositionedApp("seek-thread", broker="kafka://127.0.0.1:1")
    consumer = app._new_consumer()
    thread = consumer._thread
    handed = []

    async def call_thread(fun, *args):
        handed.append((fun, args))

    def seek_from_the_event_loop(*args):
        pytest.fail("aiokafka's seek called outside the consumer thread")

    thread.call_thread = call_thread
    thread.seek = seek_from_the_event_loop
    asyncio.run(consumer.seek(TP("reports", 0), 11))
    assert handed == [(seek_from_the_event_loop, (TP("reports", 0), 11))]
    assert consumer._read_offset[TP("reports", 0)] == 11

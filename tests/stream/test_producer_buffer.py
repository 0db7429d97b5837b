"""The worker's producer buffer: a flush hands over what was queued before it, all of it, however
slow the broker; and an agent waits, before its next input, while the buffer is over its bound.

Faust's own buffer gave a flush up after 0.1 s without a message handed over, and waited for the
buffer to be empty (which other agents' writes could put off for as long as a backlog lasted); its
bound gave way after 0.1 s the same way. The broker here is a channel that takes 0.3 s per
message, as a loaded embedded broker did.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

pytest.importorskip("faust")

from wevent.stream.runtime.faust_patches import DrainingProducerBuffer  # noqa: E402

SEND_SECONDS = 0.3  # per message: longer than the 0.1 s after which Faust's buffer gave up


class SlowChannel:
    """Takes one message at a time, each after :data:`SEND_SECONDS`, and records their order."""

    def __init__(self) -> None:
        self.sent: list[int] = []

    async def publish_message(self, fut, wait: bool = False) -> None:
        await asyncio.sleep(SEND_SECONDS)
        self.sent.append(fut.number)


def message(channel: SlowChannel, number: int):
    return SimpleNamespace(message=SimpleNamespace(channel=channel), number=number)


async def started_buffer() -> DrainingProducerBuffer:
    buffer = DrainingProducerBuffer()
    buffer.app = SimpleNamespace(conf=SimpleNamespace(producer_threaded=False))
    await buffer.start()
    return buffer


def test_a_flush_hands_over_everything_queued_before_it_and_nothing_after():
    async def scenario() -> tuple[list[int], list[int]]:
        channel = SlowChannel()
        buffer = await started_buffer()
        for n in range(3):
            buffer.put(message(channel, n))
        flush = asyncio.ensure_future(buffer.flush())
        await asyncio.sleep(0)
        for n in range(3, 6):  # queued after the flush began: not its business
            buffer.put(message(channel, n))
        await flush
        at_flush = list(channel.sent)
        await buffer.flush()
        everything = list(channel.sent)
        await buffer.stop()
        return at_flush, everything

    at_flush, everything = asyncio.run(scenario())
    assert at_flush == [0, 1, 2]  # every message queued before it, though each took 0.3 s
    assert everything == list(range(6))


def test_an_agent_waits_while_the_buffer_is_over_its_bound():
    async def scenario() -> tuple[int, int]:
        channel = SlowChannel()
        buffer = await started_buffer()
        buffer.max_messages = 2
        for n in range(5):
            buffer.put(message(channel, n))
        await buffer.wait_until_ebb()
        waiting = buffer.queued - buffer.handed
        await buffer.flush()
        await buffer.stop()
        return waiting, len(channel.sent)

    waiting, sent = asyncio.run(scenario())
    assert waiting <= 2  # the bound holds, however long the broker takes
    assert sent == 5

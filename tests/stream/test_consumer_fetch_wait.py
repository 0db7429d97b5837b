"""Consumers of the embedded broker ask for short fetch waits: tansu holds an idle fetch for its
whole max wait even when data arrives, so librdkafka's 500 ms default delayed every release a
subscriber waited for, and every request a device fleet waited for, by 250 ms on average."""

from wevent.stream.runtime.kafka import TANSU_FETCH_WAIT_MS, consumer_config


def test_tansu_consumers_wait_as_briefly_as_the_workers():
    assert consumer_config("127.0.0.1:9092", "g", tansu_compat=True)["fetch.wait.max.ms"] == TANSU_FETCH_WAIT_MS
    assert TANSU_FETCH_WAIT_MS <= 50


def test_real_kafka_consumers_keep_the_default_wait():
    # a real broker answers a fetch as soon as data arrives: a short wait would only add idle fetches
    assert "fetch.wait.max.ms" not in consumer_config("127.0.0.1:9092", "g")

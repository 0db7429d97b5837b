"""Creating a stream's topics on a real broker rides out the client's transient failures (a
request on a bootstrap connection the client drops, as on a three-node Apache Kafka: the
metadata request or the creation itself) and still refuses, in one line, what no retry can fix."""

from __future__ import annotations

from concurrent.futures import Future

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from wevent.errors import UsageError
from wevent.stream.runtime.broker import EmbeddedBroker, create_topics

pytestmark = [pytest.mark.integration]


def failing_first(monkeypatch, code: int) -> list[list[str]]:
    """Make the first CreateTopics answer ``code`` for every topic, as librdkafka does; the topic
    names of every request, in order."""
    requests, real = [], AdminClient.create_topics

    def create(self, topics, **kwargs):
        requests.append([t.topic for t in topics])
        if len(requests) > 1:
            return real(self, topics, **kwargs)
        answers = {}
        for topic in topics:
            answers[topic.topic] = Future()
            answers[topic.topic].set_exception(KafkaException(KafkaError(code)))
        return answers

    monkeypatch.setattr(AdminClient, "create_topics", create)
    return requests


def partitions(bootstrap: str) -> dict[str, int]:
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics
    return {name: len(topic.partitions) for name, topic in topics.items() if not name.startswith("__")}


def test_a_dropped_bootstrap_connection_is_asked_again(monkeypatch):
    with EmbeddedBroker() as broker:
        requests = failing_first(monkeypatch, KafkaError._DESTROY_BROKER)
        create_topics(broker.bootstrap, {"reports": 4, "releases": 1})
        assert requests == [["reports", "releases"], ["reports", "releases"]]
        assert partitions(broker.bootstrap) == {"reports": 4, "releases": 1}


def test_a_refusal_no_retry_fixes_is_one_line(monkeypatch):
    with EmbeddedBroker() as broker:
        requests = failing_first(monkeypatch, KafkaError.POLICY_VIOLATION)
        with pytest.raises(UsageError, match=r"^cannot create topic 'reports': .*[Pp]olicy") as refused:
            create_topics(broker.bootstrap, {"reports": 4})
        assert "\n" not in str(refused.value)
        assert requests == [["reports"]]


def test_a_lost_first_metadata_request_is_asked_again(monkeypatch):
    calls, real = [], AdminClient.list_topics

    def list_topics(self, *args, **kwargs):
        calls.append(kwargs.get("timeout"))
        if len(calls) == 1:
            raise KafkaException(KafkaError(KafkaError._DESTROY_BROKER))
        return real(self, *args, **kwargs)

    with EmbeddedBroker() as broker:
        monkeypatch.setattr(AdminClient, "list_topics", list_topics)
        create_topics(broker.bootstrap, {"reports": 2})
        monkeypatch.undo()
        assert len(calls) == 2
        assert partitions(broker.bootstrap) == {"reports": 2}

"""The four processors a worker runs, built together for a config, and the logic of each stream's model."""

from __future__ import annotations

from dataclasses import dataclass

from ...core.randomness import DerivedRandomness
from ...core.registry import mechanisms
from ..config import AppConfig, ConfigError, StreamConfig
from ..settings import Settings
from .assemble import Assembler
from .base import MAX_MESSAGE_BYTES, ServerKeys
from .central import CentralLogic
from .collect import Collector
from .local import LocalLogic
from .logic import StreamLogic
from .measure import DissimilarityProcessor
from .personalized import PersonalizedLogic, load_requirements
from .publish import PublicationProcessor

__all__ = ["Processors", "logic_for"]


@dataclass
class Processors:
    assembler: Assembler
    dissimilarity: DissimilarityProcessor
    publication: PublicationProcessor
    collector: Collector

    @classmethod
    def build(cls, config: AppConfig, settings: Settings) -> "Processors":
        """The processors of ``config``'s streams, with the keys ``settings`` give
        (:meth:`ServerKeys.from_settings`)."""
        logics = {s.name: logic_for(config, s, settings) for s in config.streams}
        keys = ServerKeys.from_settings(config, settings)
        built = cls(Assembler(config, logics, keys), DissimilarityProcessor(config, logics, keys),
                    PublicationProcessor(config, logics, keys), Collector(config, logics, keys))
        for stream in config.streams:
            largest = {"its release": built.publication.max_release_bytes(stream),
                       "its mechanism's state and window of charges": built.publication.max_head_bytes(stream),
                       "its dissimilarity's state (the last release, the partition of grouped bins)":
                           built.dissimilarity.max_state_bytes(stream)}
            if stream.model != "local":
                largest["one slot's state (a count per value and group, a bit per user of a reports partition)"] = \
                    built.assembler.max_slot_bytes(stream)
            what, size = max(largest.items(), key=lambda item: item[1])
            if size > MAX_MESSAGE_BYTES:
                raise ConfigError(f"stream {stream.name!r}: {what} can reach {size} bytes, above the "
                                  f"{MAX_MESSAGE_BYTES} bytes of a message: use a smaller domain, window or population"
                                  f"{', or more report_partitions' if what.startswith('one slot') else ''}")
        return built


def logic_for(config: AppConfig, stream: StreamConfig, settings: Settings) -> StreamLogic:
    """The logic of ``stream``'s model, drawing its noise from the server's key as ``settings`` give it."""
    randomness = DerivedRandomness(settings.noise_key(config), stream.name)
    model = mechanisms()[stream.mechanism].model
    if model != stream.model:
        raise ConfigError(f"stream {stream.name!r}: {stream.mechanism} is not a {stream.model}-model mechanism: "
                          f"it belongs to the {model} model")
    if model == "local":
        return LocalLogic(stream, randomness)
    if model == "personalized":
        return PersonalizedLogic(stream, randomness, load_requirements(stream))
    return CentralLogic(stream, randomness)

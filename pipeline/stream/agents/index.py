"""The range-query service: decayed sliding-window range queries over a stream (Sun et al. 2019).

A stream opts in with a ``query`` table in its config::

    query = { mode = "A", window = 1024, decay = 0.999 }            # over the releases: free
    query = { mode = "B", window = 1024, decay = 0.999, epsilon = 0.2 }  # RTP_DMM on raw counts
    query = { mode = "C", window = 1024, decay = 0.999, epsilon = 0.2 }  # both, inverse-variance combined

Mode A indexes the released histograms (post-processing, no budget), with the noise variance of
each fresh release: the variance of the stream's noise at ``eps2`` per bin for the central
mechanisms (``1 / (2 sinh^2(eps2 / 2))`` for discrete Laplace, ``2 / eps2^2`` for continuous), at
``theta`` for the personalized ones, and the frequency oracle's ``V(eps2, n2)`` for a local-model estimate
from ``n2`` reports. A repeated release shares the noise of the one it repeats. Streams whose
releases have no noise variance of their own (LP-RescueDP filters each estimate into the previous
release) are refused, with the reason, when queried. Mode B runs RTP_DMM on the
slot's raw counts, with the stream's noise kind, and its own budget ``epsilon`` calibrated to
w-event neighbours; the stream's
mechanism then gets ``epsilon_total - epsilon`` (sequential composition), and the audit checks
the sum. Mode C answers with both, combined by inverse variance.

State: what each slot contributed (the release for A, the counts for B) is logged in a Faust
table under ``stream/slot``, O(d) per slot, and pruned by whole blocks beyond the window. The
O(1)-query index itself lives in memory and is rebuilt from the log after a restart, starting at a
block boundary, so the rebuilt Mode B index recomputes exactly the nodes it released before with
exactly the same noise (never a slot's draw at another scale).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...core import packing
from ...core.decayed import RTPDMM, CombinedIndex, ReleaseIndex
from ...core.local.oracles import make_oracle
from ...core.noise import noise_variance
from ...core.randomness import DerivedRandomness
from ...core.validation import ParameterError
from ..query_settings import QuerySettings, unindexable
from ..wire.keys import QueryEntryKey, QueryHeadKey
from ..wire.messages import MeasuredMessage, decode_message
from ..wire.records import ReleaseRecord
from ..wire.topics import RELEASES
from .local import answer_categories

def release_variance(record: ReleaseRecord, bound: float | None = None, noise: str = "discrete") -> float | None:
    """Per-bin noise variance of a fresh release (None for a repeat), from what the record says.

    A local-model release is its oracle's estimate from the ``n2`` reports at ``eps2`` the record
    names, the oracle answering in the release's bins and the devices' "absent" category: the
    oracle's variance, in its exact average over the categories whatever form the mechanism
    decides with (``bound``: the range of a mean estimate, oracle ``hm``; its variance is the
    worst case over the users' values). A central or personalized release has the variance of the
    stream's ``noise`` (its option, the mechanisms' default ``"discrete"``) at the release's budget.
    """
    if record.strategy != "publish":
        return None
    if "oracle2" in record.extras:  # the local model
        reason = unindexable(record.mechanism)
        if reason:
            raise ParameterError(f"{record.mechanism} releases have no noise variance of their own: {reason}")
        name = record.extras["oracle2"]
        oracle = make_oracle(name, record.eps2, answer_categories(name, len(record.release)), bound=bound)
        return oracle.variance(int(record.extras["n2"]))
    if record.extras.get("theta"):  # personalized: Lap(1/theta) (the sampling error is not noise)
        return noise_variance(record.extras["theta"], noise)
    return noise_variance(record.eps2, noise)  # central: noise of scale 1/eps2


class StreamIndex:
    """The in-memory index of one stream, fed from its log entries in slot order."""

    def __init__(self, settings: QuerySettings, domain: int, window: int, randomness: DerivedRandomness,
                 first_slot: int, noise: str = "discrete") -> None:
        self.settings = settings
        self.releases: ReleaseIndex | None = None
        self.raw: RTPDMM | None = None
        if settings.mode in ("A", "C"):
            self.releases = ReleaseIndex(settings.window, settings.decay, bins=domain, first_slot=first_slot)
        if settings.mode in ("B", "C"):
            self.raw = RTPDMM(settings.epsilon, settings.window, settings.decay, bins=domain, privacy_window=window,
                              lambda_variant=settings.lambda_variant, noise=noise, randomness=randomness,
                              first_slot=first_slot)
        self.index: CombinedIndex | ReleaseIndex | RTPDMM
        # the part whose blocks the log is pruned by: Mode B's wherever it runs
        self._blocks: RTPDMM | ReleaseIndex
        if self.releases is not None and self.raw is not None:  # Mode C
            self.index, self._blocks = CombinedIndex(self.releases, self.raw), self.raw
        elif self.releases is not None:  # Mode A
            self.index = self._blocks = self.releases
        else:  # Mode B
            assert self.raw is not None, f"query mode {settings.mode!r} is not A, B or C"
            self.index = self._blocks = self.raw

    @property
    def slot(self) -> int:
        return self.index.slot

    @property
    def index_block_size(self) -> int:
        return self._blocks.block_size

    def ready(self, entry: dict) -> bool:
        """Every part this mode needs for the slot has arrived."""
        return (self.releases is None or "release" in entry) and (self.raw is None or "counts" in entry)

    def insert(self, slot: int, entry: dict) -> None:
        if self.releases is not None:
            variance = entry.get("variance")
            if variance is None and self.releases.slot < self.releases.first_slot:
                # The index starts at a repeat whose fresh original has left the window: it enters
                # as fresh, with the noise variance it shares with that original.
                variance = entry["origin_variance"]
            self.releases.insert(entry["release"], variance, repeated=variance is None, slot=slot)
        if self.raw is not None:
            self.raw.insert(entry["counts"], slot=slot)


class QueryService:
    """Logs what each slot brings, keeps the indexes up to date, and answers queries.

    ``load``/``store``/``delete`` access the table (``stream/slot`` and ``stream/head`` keys).
    """

    def __init__(self, streams: dict, randomness: Callable[[str], DerivedRandomness]) -> None:
        self.streams = streams  # name -> StreamConfig with .query settings
        self.randomness = randomness
        self.indexes: dict[str, StreamIndex] = {}

    def settings(self, name: str) -> QuerySettings | None:
        stream = self.streams.get(name)
        return stream.query_settings if stream is not None else None

    # --- ingest ------------------------------------------------------------------------------
    def route(self, raw: bytes, topic: str) -> tuple[str, int, dict] | None:
        """(stream, slot, what it adds to the slot's entry) for a message this service indexes."""
        if topic == RELEASES:
            record = ReleaseRecord.from_json(raw)
            settings = self.settings(record.stream)
            if settings is None or settings.mode == "B" or unindexable(record.mechanism):
                return None
            options = self.streams[record.stream].options
            variance = release_variance(record, options.get("bound"), options.get("noise", "discrete"))
            return record.stream, record.slot, {"release": np.asarray(record.release), "variance": variance}
        message = decode_message(raw)
        settings = self.settings(message.stream)
        if not isinstance(message, MeasuredMessage) or settings is None or settings.mode == "A":
            return None
        counts = message.counts.sum(axis=0)  # all groups together: the raw histogram
        return message.stream, message.slot, {"counts": counts}

    def ingest(self, raw: bytes, topic: str, load, store, delete) -> None:
        routed = self.route(raw, topic)
        if routed is None:
            return
        name, slot, part = routed
        head = self._head(name, load)
        if slot <= head["indexed"]:
            return  # a redelivery of a slot already indexed
        if "release" in part:
            if part["variance"] is None:
                part["origin_variance"] = head["fresh_variance"]
            else:
                head["fresh_variance"] = part["variance"]
        key = QueryEntryKey(name, slot).encode()
        entry = packing.unpack(load(key)) if load(key) else {}
        entry.update(part)
        store(key, packing.pack(entry))
        index = self._index(name, load)
        while True:  # index every complete slot in order
            nxt = index.slot + 1
            stored = load(QueryEntryKey(name, nxt).encode())
            next_entry = packing.unpack(stored) if stored else None
            if next_entry is None or not index.ready(next_entry):
                break
            index.insert(nxt, next_entry)
        head["indexed"] = index.slot
        # Only whole blocks leave the log: a rebuild then starts at a block boundary and lays the
        # slots out exactly as before, so Mode B recomputes identical nodes with identical noise.
        block = index.index_block_size
        oldest = max(1, index.slot - index.settings.window + 1)
        expired = (oldest - 1) // block * block
        for old in range(head["pruned"] + 1, expired + 1):
            delete(QueryEntryKey(name, old).encode())
        head["pruned"] = max(head["pruned"], expired)
        store(QueryHeadKey(name).encode(), packing.pack(head))

    def _head(self, name: str, load) -> dict:
        stored = load(QueryHeadKey(name).encode())
        return packing.unpack(stored) if stored else {"indexed": 0, "pruned": 0, "fresh_variance": 0.0}

    def _index(self, name: str, load) -> StreamIndex:
        """The stream's in-memory index, rebuilt from the logged window after a restart."""
        index = self.indexes.get(name)
        head = self._head(name, load)
        if index is not None and index.slot == head["indexed"]:
            return index
        stream = self.streams[name]
        first = head["pruned"] + 1
        index = StreamIndex(stream.query_settings, stream.domain, stream.window or 1, self.randomness(name), first,
                            stream.options.get("noise", "discrete"))
        for slot in range(first, head["indexed"] + 1):
            index.insert(slot, packing.unpack(load(QueryEntryKey(name, slot).encode())))
        self.indexes[name] = index
        return index

    # --- answer ------------------------------------------------------------------------------
    def answer(self, params: dict[str, str], load) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body) for ``GET /query``; every refusal is a 400 with its reason."""
        name = params.get("stream")
        if not name:
            return 400, {"error": "give ?stream=NAME&from=SLOT&to=SLOT[&decay=P]"}
        if name not in self.streams:
            return 400, {"error": f"unknown stream {name!r}"}
        settings = self.settings(name)
        if settings is None:
            return 400, {"error": f"stream {name!r} has no query index (add a `query` table to its config)"}
        reason = unindexable(self.streams[name].mechanism)
        if reason and settings.mode != "B":
            return 400, {"error": f"stream {name!r} cannot answer range queries with standard errors over its "
                                  f"{self.streams[name].mechanism} releases: {reason}"}
        try:
            first, last = (_integer(params, k) for k in ("from", "to"))
            decay = float(params["decay"]) if params.get("decay") not in (None, "") else None
        except ValueError as exc:
            return 400, {"error": str(exc)}
        index = self._index(name, load)
        if index.slot == 0:
            return 400, {"error": f"stream {name!r} has no indexed slot yet"}
        try:
            answer, error = index.index.query(first, last, decay)
        except ParameterError as exc:
            return 400, {"error": str(exc)}
        return 200, {"stream": name, "from": first, "to": last, "slot": index.slot, "mode": settings.mode,
                     "decay": settings.decay, "answer": np.asarray(answer).tolist(),
                     "standard_error": np.broadcast_to(error, np.shape(answer)).tolist()}


def _integer(params: dict, name: str) -> int:
    text = params.get(name)
    if text in (None, ""):
        raise ValueError(f"missing ?{name}=SLOT")
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name} must be a whole slot number, got {text!r}") from None

"""Prometheus metrics of the workers (``wevent_`` prefix, ``_total`` counters, base units).

Labels are streams, strategies and reasons: never users. Faust's own sensors are served on the
same ``/metrics`` page under the ``wevent_faust_`` prefix. The processors count what they see in
:class:`~wevent.stream.agents.events.Events`; :func:`export` turns those into the metrics below.

A worker exports no function of raw data by default: it counts messages of reports, not reports
(:data:`RAW_DATA_METRICS` are served only when asked for, :class:`ServedMetrics`).
"""

from __future__ import annotations

from prometheus_client import REGISTRY, Counter, Gauge, Histogram

from ..agents.events import Events

report_batches = Counter(
    "wevent_report_batches_total",
    "Messages of reports (batches) applied to a stream's slots, however many reports each carried or had accepted",
    ["stream"],
)
reports_accepted = Counter("wevent_reports_accepted_total", "Reports counted into a slot (a function of raw data)",
                           ["stream"])
reports_rejected = Counter(
    "wevent_reports_rejected_total",
    "Reports rejected and dead-lettered (a function of raw data), by reason (malformed, unknown_stream, unknown_user, "
    "out_of_domain, duplicate, late, before_start, too_far_ahead, wrong_partition, "
    "watermark_too_far_ahead, too_many_producers, raw_value_for_local_stream, unrequested, unauthenticated, "
    "internal_error: a worker failed on their message)",
    ["stream", "reason"],
)
dead_letters = Counter(
    "wevent_dead_letters_total",
    "Messages written to the deadletter topic, by reason: every reason of wevent_reports_rejected_total, and "
    "internal_error (a worker failed on the message), gap, config_changed, unauthenticated, out_of_range",
    ["reason"],
)
slots_closed = Counter("wevent_slots_closed_total", "Slot partials emitted by assemblers", ["stream"])
releases = Counter("wevent_releases_total", "Releases emitted, by strategy", ["stream", "strategy"])
last_released_slot = Gauge("wevent_last_released_slot", "Index of the last released slot", ["stream"])
release_time = Gauge("wevent_last_release_timestamp_seconds", "Wall time of the last release", ["stream"])
# A window passes when spent + reserved <= budget: the host mechanism's spend and a query index's
# share, against the stream's total epsilon (for a personalized stream: the type closest to its
# own eps_k, with nothing reserved). So an overspend of either share shows.
window_spent = Gauge(
    "wevent_window_epsilon_spent",
    "Budget the host mechanism spent in the window of w slots ending at the last release",
    ["stream"],
)
window_reserved = Gauge(
    "wevent_window_epsilon_reserved",
    "Budget a query index (modes B and C) takes from every window of w slots (0 without one)",
    ["stream"],
)
window_budget = Gauge(
    "wevent_window_epsilon_budget", "Budget allowed in any window of w slots, every share together (epsilon)",
    ["stream"],
)
available_population = Gauge(
    "wevent_available_population", "Local model: users available to be asked (population division)", ["stream"]
)
communication_bits = Counter(
    "wevent_communication_bits_total", "Local model: bits of perturbed reports and instructions", ["stream"]
)
ldp_missing_reports = Counter(
    "wevent_ldp_missing_reports_total", "Local model: asked users who did not answer before the deadline", ["stream"]
)
input_gaps = Counter(
    "wevent_input_gaps_total",
    "Offsets a fetch passed over on a source partition: read again (outcome reread), or still absent after "
    "waiting for them (outcome absent)",
    ["topic", "outcome"],
)
slot_close_latency = Histogram(
    "wevent_slot_close_latency_seconds",
    "Seconds from a slot's close (last partition) to its release",
    ["stream"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
release_error = Gauge(
    "wevent_release_mean_absolute_error",
    "Replays with ground truth: running mean absolute error of releases against the true histograms",
    ["stream"],
)
device_refusals = Counter(
    "wevent_device_refusals_total",
    "Local model: reports a device refused (its user's window budget would be exceeded, or no value)",
    ["stream"],
)
device_requests_refused = Counter(
    "wevent_device_requests_refused_total",
    "Local model: whole requests a device fleet refused, by reason (malformed, bad_epsilon, conflict, stale, "
    "ahead, no_value)",
    ["stream", "reason"],
)
forged_messages = Counter(
    "wevent_forged_messages_total",
    "Messages refused on an internal or LDP topic: no valid MAC or signature (unauthenticated), or "
    "authentic-looking but impossible (out_of_range); workers also dead-letter them",
    ["topic", "reason"],
)


#: The exact numbers of reports each stream accepted and rejected: functions of the raw data (a slot's
#: count of reports is its histogram's total, which the releases only show with noise). A worker
#: serves them only with ``wevent worker --export-report-counts``.
RAW_DATA_METRICS = (reports_accepted, reports_rejected)


class ServedMetrics:
    """What a worker's ``/metrics`` serves: this process's metrics (``registry``), without
    :data:`RAW_DATA_METRICS` unless ``report_counts``."""

    def __init__(self, report_counts: bool = False, registry=REGISTRY) -> None:
        self.registry = registry
        self.hidden = set() if report_counts else {family.name for metric in RAW_DATA_METRICS
                                                   for family in metric.describe()}

    def collect(self):  # a collector of prometheus_client's
        return [family for family in self.registry.collect() if family.name not in self.hidden]


#: The gauges of one stream, set by the worker that publishes it.
STREAM_GAUGES = (last_released_slot, release_time, window_spent, window_reserved, window_budget, available_population,
                 release_error)


def forget_stream(name: str) -> None:
    """Stop serving ``name``'s gauges (its partition moved to another worker, which serves them now)."""
    for gauge in STREAM_GAUGES:
        try:
            gauge.remove(name)
        except KeyError:  # never set here
            pass


def export(events: Events) -> None:
    """Add what a processor or a device fleet saw of one input to the metrics: the one way for the
    workers, the fleets and the tests."""
    counted = ((reports_accepted, events.reports_accepted), (reports_rejected, events.reports_rejected),
               (dead_letters, events.dead_letters), (forged_messages, events.forged_messages),
               (slots_closed, events.slots_closed), (ldp_missing_reports, events.missing_reports),
               (device_refusals, events.device_refusals), (device_requests_refused, events.device_requests_refused))
    for metric, counts in counted:
        for labels, count in counts.items():
            metric.labels(*(labels if isinstance(labels, tuple) else (labels,))).inc(count)
    for stream in events.reports_accepted:  # an applied batch names its stream, even with none accepted
        report_batches.labels(stream).inc()
    for released in events.releases:
        stream = released.stream
        releases.labels(stream, released.strategy).inc()
        last_released_slot.labels(stream).set(released.slot)
        release_time.labels(stream).set(released.at)
        window_spent.labels(stream).set(released.window_spent)
        window_reserved.labels(stream).set(released.window_reserved)
        window_budget.labels(stream).set(released.window_budget)
        slot_close_latency.labels(stream).observe(released.close_latency)
        if released.communication_bits is not None:
            communication_bits.labels(stream).inc(released.communication_bits)
        if released.available_population is not None:
            available_population.labels(stream).set(released.available_population)


def export_release_error(stream: str, error: float | None) -> None:
    """Show a replay's running error against its truth (:class:`~wevent.stream.runtime.truth.TruthMonitor`)."""
    if error is not None:
        release_error.labels(stream).set(error)

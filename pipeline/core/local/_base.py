"""Shared plumbing of the local-model mechanisms: the per-slot request/response protocol.

The server of an LDP stream never sees raw values, so a slot is a round of requests:

1. ``request = m.open_slot()``: the M1 (dissimilarity) request of slot ``m.slot + 1``, or None
   for methods without M1 (LBU, LSP, LPU). Population methods sample the users here.
2. Devices answer; the collector sums the reports into the oracle's support and counts ``n``.
3. ``dis = m.measure(support, n)``: M1's private dissimilarity.
4. ``outcome = m.decide(dis)`` (``m.decide()`` without M1): M2's decision, either the
   publication :class:`Request` or, when nothing is published, the slot's final result.
5. ``result = m.publish(support, n)`` once the publication reports are collected.

The state serialises between any two calls and restores to an identical continuation; the
request in flight is :attr:`LocalMechanism.pending`. ``step(values)`` runs the same protocol
in-process with the ``devices`` given at construction (simulation). Missing users are allowed
(``n`` below the request's size); a publication nobody answered repeats the last release.

Communication is accounted as the papers' Table 2 implies (the arXiv version), since they
state no rule: a report costs its oracle's bits, plus one instruction bit when the server asked
that user specifically (``instructs``).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Callable, ClassVar

import numpy as np

from ..base import Mechanism, Strategy
from ..exact import grid, share
from ..options import Option
from ..randomness import DerivedRandomness, Phase
from ..validation import ParameterError, check_domain, check_positive, check_positive_int
from .device_reports import Devices
from .oracle import MIN_REPORT_EPSILON, VAR_MODES
from .oracles import ORACLE_NAMES, make_oracle
from .population import PopulationLedger
from .protocol import LocalDissimilarity, LocalStepResult, Request
from .schedules import Absorption, Distribution
from .user_ledger import SlidingUserLedger, UserLedger

__all__ = ["DEFAULT_BOUND", "LocalMechanism", "AdaptiveMechanism", "BudgetDivision", "PopulationDivision", "Populated", "Scheduled",
           "Absorbing"]

DecisionOverride = Callable[[int], "bool | None"]
DEFAULT_BOUND = 1.0  # the top of the value range of mean estimation (oracle hm) when none is given


def answered(request: Request, n) -> int:
    """How many users answered ``request`` (at most the users it asked)."""
    n = int(n)
    if not 0 <= n <= request.size:
        raise ParameterError(f"{n} answers to a request of {request.size} users")
    return n


def dissimilarity_of(request: Request, support, n: int, last_release: np.ndarray, var_mode: str = "exact_avg"
                     ) -> LocalDissimilarity:
    """M1's private dissimilarity (Eq. 4 of the arXiv version): ``mean_k (c1[k] - r_l[k])^2 - V(eps_1, n)``.

    ``support`` sums the ``n`` reports answering ``request``; with no report nothing is known, so
    the dissimilarity is ``-inf`` and nothing is published.
    The comparison covers the released bins, ``last_release``'s: an oracle with an "absent"
    category estimates one more (:class:`LocalMechanism`), which no release holds.
    """
    n = answered(request, n)
    oracle = request.make_oracle(var_mode)
    variance = oracle.variance(n)
    value = -math.inf
    if n:
        estimate = oracle.estimate(support, n)[: np.size(last_release)]
        value = float(np.mean((estimate - last_release) ** 2)) - variance
    return LocalDissimilarity(request.slot, value, request.epsilon, n, variance)


class LocalMechanism(Mechanism):
    """A w-event LDP mechanism over ``population`` users with values in a domain of ``domain_size``.

    ``oracle`` is ``ada`` (default), ``grr`` or ``oue`` for frequencies, or ``hm`` for means over
    ``[0, bound]`` (``domain_size`` 1). ``var_mode`` picks the form of ``V``
    (:data:`~.oracle.VAR_MODES`).

    With ``absent``, users may have no value in a slot, and they answer like everyone else: the
    number and timing of the answers then never depend on who has a value. The devices answer in
    :attr:`categories` ``= domain_size + 1`` categories, the last meaning "no value"; requests,
    the oracle (its ``ada`` choice, its variance ``V``, a report's bits) and the collected support
    cover them all, while the dissimilarity and the releases cover the ``domain_size`` values:
    the absent category's estimate is dropped. A release's bin k still estimates the share of all
    ``population`` users holding k. A stream always sets it, since whether its users always have a
    value is raw data; a simulation of a generated stream whose every user has a value by
    construction need not (the papers' binary streams keep their two categories).
    """

    model = "local"
    OPTIONS = {
        "var_mode": Option.choice("the form of V(eps, n)", VAR_MODES, example="approx"),
        "bound": Option.number('the top of the value range for oracle="hm"', 0, example=2.0, open_low=True,
                               derived="1 (oracle hm only)"),
    }
    has_dissimilarity: ClassVar[bool] = False
    instructs: ClassVar[tuple[bool, bool]] = (True, True)  # instruction bit per report in (M1, M2)
    # Why a fresh release has no noise variance of its own (None: it is the oracle's estimate from
    # the publication's n_2 reports at eps_2, with the oracle's variance V(eps_2, n_2)).
    no_release_variance: ClassVar[str | None] = None

    def __init__(
        self,
        epsilon: float,
        window: int,
        domain_size: int,
        population: int,
        *,
        oracle: str = "ada",
        var_mode: str = "exact_avg",
        bound: float | None = None,
        absent: bool = False,
        randomness: DerivedRandomness | None = None,
        devices: Devices | None = None,
        decision_override: DecisionOverride | None = None,
    ) -> None:
        super().__init__(epsilon, window, randomness=randomness)
        self.domain_size = check_domain(domain_size)
        self.population = check_positive_int(population, "population N")
        if oracle not in ORACLE_NAMES:
            raise ParameterError(f"unknown oracle {oracle!r}; choose one of {', '.join(ORACLE_NAMES)}")
        if var_mode not in VAR_MODES:
            raise ParameterError(f"var_mode must be one of {', '.join(VAR_MODES)}, got {var_mode!r}")
        self.oracle = oracle
        self.var_mode = var_mode
        self.bound = (DEFAULT_BOUND if bound is None else float(bound)) if oracle == "hm" else None
        if absent and oracle == "hm":
            raise ParameterError("a mean has no category for a user without a value: mean estimation (hm) needs "
                                 "every user's value in every slot, so absent must be False")
        self.absent = bool(absent)
        self.categories = self.domain_size + int(self.absent)  # what the devices answer in
        self._oracle(self.fixed_report_budget)  # fail now, not at slot 1
        self.devices = devices
        self.decision_override = decision_override
        self.last_release = self._freeze(np.zeros(self.domain_size))  # r_0 = 0, as the algorithms initialise it
        self._stage = "open"
        self._dissimilarity_request: Request | None = None
        self._dissimilarity: LocalDissimilarity | None = None
        self._err: float | None = None
        self.pending: Request | None = None  # the request whose reports the next call expects

    @property
    def fixed_report_budget(self) -> float:
        """The budget of a report the method asks for whatever the data (checked when it is built)."""
        return self.epsilon

    # --- the protocol ------------------------------------------------------------------------
    @property
    def expecting(self) -> str:
        """The protocol call the mechanism waits for: open_slot, measure, decide or publish."""
        return "open_slot" if self._stage == "open" else self._stage

    def open_slot(self) -> Request | None:
        """Start slot ``self.slot + 1``: its M1 request, or None when the method has no M1."""
        self._expect("open", "open_slot")
        slot = self.slot + 1
        request = self._open(slot)
        self._dissimilarity_request = self.pending = request
        self._stage = "decide" if request is None else "measure"
        return request

    def measure(self, support, n: int) -> LocalDissimilarity:
        """M1: ``mean_k (c1[k] - r_l[k])^2 - V(eps_1, n)`` from the support of ``n`` reports."""
        self._expect("measure", "measure")
        self._dissimilarity = dissimilarity_of(self._asked(self._dissimilarity_request), support, n, self.last_release,
                                               self.var_mode)
        self.pending, self._stage = None, "decide"
        return self._dissimilarity

    def decide(self, dissimilarity: LocalDissimilarity | None = None) -> Request | LocalStepResult:
        """M2: the publication request, or the slot's result when it repeats the last release.

        When M1 runs in another processor (the pipeline), the mechanism still waits for
        ``measure`` and ``dissimilarity`` is M1's result: :func:`dissimilarity_of` the M1 request's
        support against the same last release, so it is accepted if it belongs to that request.
        """
        if self._stage == "measure" and dissimilarity is not None:
            request = self._asked(self._dissimilarity_request)
            if (dissimilarity.slot, dissimilarity.epsilon) != (request.slot, request.epsilon) \
                    or not 0 <= dissimilarity.reporters <= request.size:
                raise ParameterError(f"dissimilarity of slot {dissimilarity.slot} does not answer this slot's M1 request")
            self._dissimilarity, self.pending, self._stage = dissimilarity, None, "decide"
        self._expect("decide", "decide")
        if dissimilarity is not None and dissimilarity != self._dissimilarity:
            raise ParameterError(f"dissimilarity of slot {dissimilarity.slot} is not the one measured in this slot")
        outcome = self._decide(self.slot + 1, self._dissimilarity)
        if isinstance(outcome, Request):
            self.pending, self._stage = outcome, "publish"
            return outcome
        return self._close(outcome, None, 0)

    def publish(self, support, n: int) -> LocalStepResult:
        """The release from the support of ``n`` publication reports; ends the slot."""
        self._expect("publish", "publish")
        request = self._asked(self.pending)
        n = answered(request, n)
        if not n:
            return self._close(Strategy.APPROXIMATE, request, 0)
        estimate = request.make_oracle(self.var_mode).estimate(support, n)[: self.domain_size]  # no absent bin
        self.last_release = self._freeze(self._fresh_release(estimate, request, n))
        return self._close(Strategy.PUBLISH, request, n)

    def step(self, values) -> LocalStepResult:
        """One slot in-process: ``values`` holds every user's value; the devices perturb them."""
        if self.devices is None:
            raise ParameterError("step() needs devices: construct the mechanism with devices=Devices(...)")
        if len(values) != self.population:
            raise ParameterError(f"a slot needs the values of all {self.population} users, got {len(values)}")
        request = self.open_slot()
        if request is not None:
            self.measure(*self.devices.collect(request, values))
        outcome = self.decide()
        if isinstance(outcome, Request):
            outcome = self.publish(*self.devices.collect(outcome, values))
        return outcome

    @property
    def window_spend_bound(self) -> float:
        """Per user and window: ``epsilon`` unless a method states a tighter bound."""
        return self.epsilon

    # --- hooks -------------------------------------------------------------------------------
    def _open(self, slot: int) -> Request | None:
        """The M1 request of ``slot`` (None without M1)."""
        return None

    def _decide(self, slot: int, dissimilarity: LocalDissimilarity | None) -> Request | Strategy:
        raise NotImplementedError

    def _fresh_release(self, estimate: np.ndarray, request: Request, n: int) -> np.ndarray:
        """The release a publication makes of the oracle's estimate (itself, unless a method filters it)."""
        return estimate

    def _closed(self, slot: int, publication: Request | None) -> None:
        """Bookkeeping at the end of ``slot`` (``publication``: the M2 request, if one was sent)."""

    # --- helpers -----------------------------------------------------------------------------
    def _oracle(self, epsilon: float, var_mode: str = "exact_avg"):
        """The devices' oracle at budget ``epsilon``, over :attr:`categories`."""
        return make_oracle(self.oracle, epsilon, self.categories, bound=self.bound, var_mode=var_mode)

    def _request(self, slot: int, phase: Phase, epsilon: float, users: np.ndarray | None) -> Request:
        oracle = self._oracle(epsilon).name
        return Request(slot, phase, float(epsilon), oracle, self.categories, self.population, users, self.bound)

    def _set_threshold(self, err: float) -> None:
        self._err = float(err)

    @staticmethod
    def _asked(request: Request | None) -> Request:
        """The request a stage waits on; the stage check before it guarantees one."""
        assert request is not None, "the protocol stage guarantees a request in flight"
        return request

    def _expect(self, stage: str, call: str) -> None:
        if self._stage != stage:
            raise ParameterError(f"{call}() called out of turn: slot {self.slot + 1} is waiting for {self.expecting}()")

    def _bits(self, request: Request | None, n: int, instructed: bool) -> int:
        if request is None:
            return 0
        return n * (request.make_oracle().bits_per_report + int(instructed))

    def _close(self, strategy: Strategy, publication: Request | None, n2: int) -> LocalStepResult:
        slot = self.slot + 1
        self._closed(slot, publication)
        first, dis = self._dissimilarity_request, self._dissimilarity
        n1 = dis.reporters if dis is not None else 0
        result = LocalStepResult(
            slot=slot,
            release=self.last_release,
            strategy=strategy,
            eps1=first.epsilon if first is not None else 0.0,
            eps2=publication.epsilon if publication is not None else 0.0,
            dissimilarity=dis.value if dis is not None else None,
            threshold=self._err,
            n1=n1,
            n2=n2,
            reports=n1 + n2,
            bits=self._bits(first, n1, self.instructs[0]) + self._bits(publication, n2, self.instructs[1]),
            users1=first.users if first is not None else None,
            users2=publication.users if publication is not None else None,
            oracle1=first.oracle if first is not None else None,
            oracle2=publication.oracle if publication is not None else None,
        )
        self.slot = slot
        self._stage, self.pending = "open", None
        self._dissimilarity_request = self._dissimilarity = self._err = None
        return result

    @staticmethod
    def _freeze(vector) -> np.ndarray:
        vector = np.array(vector, dtype=float)
        vector.flags.writeable = False  # releases are shared between slots and subscribers
        return vector

    def new_ledger(self) -> UserLedger:
        """A ledger per user: each user pays the phases that asked them, against ``epsilon``."""
        return UserLedger(self.population, self.window, self.epsilon)

    def sliding_ledger(self, state: np.ndarray | None = None) -> SlidingUserLedger:
        """A bound on every user's window without a number per user, continued from ``state``."""
        return SlidingUserLedger([self.window], [self.epsilon], state)

    # --- state -------------------------------------------------------------------------------
    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "domain_size": self.domain_size, "population": self.population,
                "oracle": self.oracle, "var_mode": self.var_mode, "bound": self.bound, "absent": self.absent}

    def _dynamic(self) -> dict[str, Any]:
        dis = self._dissimilarity
        return {
            "last_release": np.array(self.last_release),
            "stage": self._stage,
            "dissimilarity_request": None if self._dissimilarity_request is None else self._dissimilarity_request.to_dict(),
            "pending": None if self.pending is None else self.pending.to_dict(),
            "dissimilarity": None if dis is None else dis.to_dict(),
            "err": self._err,
        }

    def _load(self, dynamic: dict[str, Any]) -> None:
        self.last_release = self._freeze(dynamic["last_release"])
        self._stage = dynamic["stage"]
        first, pending, dis = dynamic["dissimilarity_request"], dynamic["pending"], dynamic["dissimilarity"]
        self._dissimilarity_request = None if first is None else Request.from_dict(first)
        self.pending = None if pending is None else Request.from_dict(pending)
        self._dissimilarity = None if dis is None else LocalDissimilarity.from_dict(dis)
        self._err = dynamic["err"]


class AdaptiveMechanism(LocalMechanism):
    """A mechanism with M1: it publishes iff ``dis > err``.

    Strict, as the algorithms write it (the text's "dis < err approximates, otherwise publish"
    differs only on ties, which have probability 0). ``beta`` splits the budget (budget
    division) or the population (population division) between M1 and M2 (default 0.5, the
    papers' even split); ``force_first`` publishes slot 1 whatever ``dis``;
    ``decision_override(slot) -> bool | None`` is the test hook replacing ``dis > err``.
    """

    OPTIONS = {
        "beta": Option.number("the share of the budget (budget division) or of the users (population division) "
                              "given to M1", 0, 1, example=0.4, open_low=True, open_high=True),
        "force_first": Option.boolean("publish slot 1 whatever dis"),
    }

    has_dissimilarity = True

    def __init__(
        self,
        epsilon: float,
        window: int,
        domain_size: int,
        population: int,
        *,
        beta: float = 0.5,
        force_first: bool = False,
        oracle: str = "ada",
        var_mode: str = "exact_avg",
        bound: float | None = None,
        absent: bool = False,
        randomness: DerivedRandomness | None = None,
        devices: Devices | None = None,
        decision_override: DecisionOverride | None = None,
    ) -> None:
        super().__init__(epsilon, window, domain_size, population, oracle=oracle, var_mode=var_mode, bound=bound,
                         absent=absent, randomness=randomness, devices=devices, decision_override=decision_override)
        beta = check_positive(beta, "beta")
        if not beta < 1:
            raise ParameterError(f"beta must lie strictly between 0 and 1, got {beta!r}")
        self.beta = beta
        self.force_first = bool(force_first)

    def _publishes(self, slot: int, dissimilarity: LocalDissimilarity | None, err: float) -> bool:
        self._set_threshold(err)
        if math.isinf(err):
            return False  # a publication that no report could carry: not even a forced one
        if self.decision_override is not None:
            forced = self.decision_override(slot)
            if forced is not None:
                return bool(forced)
        if self.force_first and slot == 1:
            return True
        return dissimilarity is not None and dissimilarity.value > err

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "beta": self.beta, "force_first": self.force_first}


class BudgetDivision(AdaptiveMechanism):
    """Every user reports at every slot; the window budget is split over slots (Section 5).

    M1 asks everyone with ``eps_1 = beta * eps / w`` at every slot; publications share the
    window pool ``(1 - beta) * eps``. Nobody is instructed for M1 (users report on a clock); M2
    reports are requested, one instruction bit each. ``eps_1`` and the pool are rounded down
    onto epsilon's grid (:func:`~wevent.core.exact.share`), and so is every budget the
    publications take of the pool (:attr:`grid`), so every window's spend adds up exactly.
    """

    instructs = (False, True)

    def __init__(
        self,
        epsilon: float,
        window: int,
        domain_size: int,
        population: int,
        *,
        beta: float = 0.5,
        force_first: bool = False,
        oracle: str = "ada",
        var_mode: str = "exact_avg",
        bound: float | None = None,
        absent: bool = False,
        randomness: DerivedRandomness | None = None,
        devices: Devices | None = None,
        decision_override: DecisionOverride | None = None,
    ) -> None:
        super().__init__(epsilon, window, domain_size, population, beta=beta, force_first=force_first, oracle=oracle,
                         var_mode=var_mode, bound=bound, absent=absent, randomness=randomness, devices=devices,
                         decision_override=decision_override)
        self.eps1 = share(self.epsilon, Fraction(self.beta) / self.window)
        self.pool = share(self.epsilon, 1 - Fraction(self.beta))  # w eps1 + pool <= eps, exactly
        self._oracle(self.eps1)  # M1's reports: fail now, not at slot 1

    @property
    def grid(self) -> float:
        """The unit every budget of the stream is a multiple of (:func:`~wevent.core.exact.grid`)."""
        return grid(self.epsilon)

    def _open(self, slot: int) -> Request | None:
        return self._request(slot, Phase.DISSIMILARITY, self.eps1, None)

    def _error(self, eps2: float) -> float:
        """``err = V(eps_2, N)``: the error of a publication by every user at ``eps_2``; infinite
        below :data:`~.oracle.MIN_REPORT_EPSILON`, where no report can be drawn (the slot approximates)."""
        if eps2 < MIN_REPORT_EPSILON:
            return math.inf
        return self._oracle(eps2, self.var_mode).variance(self.population)

    def _ask(self, slot: int, eps2: float) -> Request:
        return self._request(slot, Phase.PUBLICATION, eps2, None)


class Populated(LocalMechanism):
    """Users are asked with the whole ``eps`` and leave the available set for ``w`` slots
    (:class:`PopulationLedger`), so no user reports twice in any window (Theorem 6.2 of the arXiv
    version). Samples come from the server's generator at ``(slot, SAMPLE_DISSIMILARITY)`` and
    ``(slot, SAMPLE_PUBLICATION)``. A subclass creates ``ledger``."""

    ledger: PopulationLedger

    def _take(self, slot: int, phase: Phase, users: int) -> Request:
        sampling = Phase.SAMPLE_DISSIMILARITY if phase == Phase.DISSIMILARITY else Phase.SAMPLE_PUBLICATION
        taken = self.ledger.take(slot, users, self.randomness.transient_generator(slot, sampling))
        return self._request(slot, phase, self.epsilon, taken)

    def _error(self, users: float) -> float:
        """``V(eps, users)``: the error of an estimate from ``users`` reports at ``eps`` (a whole number)."""
        return self._oracle(self.epsilon, self.var_mode).variance(int(users))

    def _ask(self, slot: int, users: float) -> Request:
        return self._take(slot, Phase.PUBLICATION, int(users))

    def _closed(self, slot: int, publication: Request | None) -> None:
        self.ledger.end_slot(slot)

    @property
    def window_spend_bound(self) -> float:
        return self.epsilon  # one eps-LDP report per user per window (Theorem 6.2)

    def _dynamic(self) -> dict[str, Any]:
        return {**super()._dynamic(), "population": self.ledger.state()}

    def _load(self, dynamic: dict[str, Any]) -> None:
        super()._load(dynamic)
        self.ledger.load(dynamic["population"])


class PopulationDivision(Populated, AdaptiveMechanism):
    """Every report uses the full ``eps``; users are split over slots (Section 6 of the arXiv version).

    M1 samples ``n1 = floor(beta N / w)`` available users at every slot; publications draw from
    the pool ``P = floor((1 - beta) N)``, as the arXiv version's appendix B.1 sets it (the
    pseudo-code writes ``N/2``); ``pool='rest'`` gives it every user M1 leaves, ``N - w n1``.
    """

    OPTIONS = {"pool": Option.choice("the publication pool", ("floor", "rest"), example="rest")}

    def __init__(
        self,
        epsilon: float,
        window: int,
        domain_size: int,
        population: int,
        *,
        beta: float = 0.5,
        force_first: bool = False,
        pool: str = "floor",
        oracle: str = "ada",
        var_mode: str = "exact_avg",
        bound: float | None = None,
        absent: bool = False,
        randomness: DerivedRandomness | None = None,
        devices: Devices | None = None,
        decision_override: DecisionOverride | None = None,
    ) -> None:
        super().__init__(epsilon, window, domain_size, population, beta=beta, force_first=force_first, oracle=oracle,
                         var_mode=var_mode, bound=bound, absent=absent, randomness=randomness, devices=devices,
                         decision_override=decision_override)
        if self.population < 2 * self.window:
            raise ParameterError(f"population division needs N >= 2w users; got N = {self.population}, w = {self.window}")
        self.dissimilarity_users = math.floor(self.beta * self.population / self.window)
        if self.dissimilarity_users < 1:
            raise ParameterError(f"beta = {self.beta} leaves no dissimilarity users: floor(beta N / w) = 0")
        if pool not in ("floor", "rest"):
            raise ParameterError(f"pool must be 'floor' or 'rest', got {pool!r}")
        self.pool_rule = pool
        rest = self.population - self.window * self.dissimilarity_users
        self.pool = rest if pool == "rest" else math.floor((1.0 - self.beta) * self.population)
        self.ledger = PopulationLedger(self.population, self.window)

    def _open(self, slot: int) -> Request | None:
        return self._take(slot, Phase.DISSIMILARITY, self.dissimilarity_users)

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "pool": self.pool_rule}


class Scheduled(LocalMechanism):
    """An adaptive method whose publication schedule ``self.schedule`` (set by the subclass) is part of its state."""

    schedule: Distribution | Absorption

    def _dynamic(self) -> dict[str, Any]:
        return {**super()._dynamic(), "schedule": self.schedule.state()}

    def _load(self, dynamic: dict[str, Any]) -> None:
        super()._load(dynamic)
        self.schedule.load(dynamic["schedule"])


class Absorbing(Scheduled, AdaptiveMechanism):
    """LBA and LPA: absorption (:class:`~.schedules.Absorption`) of ``self.unit`` amounts (a budget
    or a number of users) per slot; a publication asks for ``k * unit``."""

    schedule: Absorption
    unit: float

    if TYPE_CHECKING:  # from BudgetDivision or PopulationDivision, which follow in the method order
        def _error(self, amount: float) -> float: ...
        def _ask(self, slot: int, amount: float) -> Request: ...

    def _decide(self, slot: int, dissimilarity: LocalDissimilarity | None) -> Request | Strategy:
        if self.schedule.nullified(slot):
            return Strategy.NULLIFIED
        amount = self.schedule.units(slot) * self.unit
        if self._publishes(slot, dissimilarity, self._error(amount)):
            return self._ask(slot, amount)
        return Strategy.APPROXIMATE

    def _closed(self, slot: int, publication: Request | None) -> None:
        if publication is not None:
            self.schedule.published(slot, self.schedule.units(slot))
        super()._closed(slot, publication)

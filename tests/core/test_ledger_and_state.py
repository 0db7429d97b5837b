import numpy as np
import pytest

from wevent.core import packing
from wevent.core.ledger import BudgetEntry, WindowLedger, window_sums


def test_window_sums_match_brute_force():
    rng = np.random.default_rng(0)
    x = rng.random(500)
    for w in (1, 2, 7, 40, 600):
        brute = np.array([x[max(0, i - w + 1): i + 1].sum() for i in range(x.size)])
        assert np.allclose(window_sums(x, w), brute, rtol=0, atol=1e-12)


def test_ledger_requires_consecutive_slots():
    ledger = WindowLedger(3)
    ledger.record(BudgetEntry(1, 0.1, 0.2))
    with pytest.raises(ValueError):
        ledger.record(BudgetEntry(3, 0.1, 0.2))


def test_state_roundtrip_bytes_and_json():
    s = {"a": 1, "b": [1.5, None, True], "arr": np.arange(6, dtype=np.int32).reshape(2, 3), "nested": {"x": np.zeros(0)}}
    for back in (packing.unpack(packing.pack(s)), packing.from_json(packing.to_json(s))):
        assert back["a"] == 1 and back["b"] == [1.5, None, True]
        assert back["arr"].dtype == np.int32 and back["arr"].tolist() == [[0, 1, 2], [3, 4, 5]]
        assert back["nested"]["x"].shape == (0,)


def test_state_rejects_garbage():
    with pytest.raises(packing.StateError):
        packing.unpack(b"nonsense")
    with pytest.raises(packing.StateError):
        packing.unpack(packing.pack({"a": np.zeros(3)})[:-4])
    with pytest.raises(packing.StateError):
        packing.from_json("{not json")

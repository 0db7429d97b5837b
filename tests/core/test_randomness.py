"""Derived randomness: reproducible per coordinate, independent across coordinates, Laplace-distributed;
the server's noise keystream and the devices' AES-CTR keystreams."""

import math
import struct

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from wevent.core.randomness import DerivedRandomness, KeyStream, NoiseKeystream, Phase, SecretKey, ZeroNoise


def test_same_coordinates_same_draws_across_instances():
    a = DerivedRandomness(SecretKey.from_seed(5), "s").generator(10, Phase.PUBLICATION, block=3).random(8)
    b = DerivedRandomness(SecretKey.from_seed(5), "s").generator(10, Phase.PUBLICATION, block=3).random(8)
    assert np.array_equal(a, b)


@pytest.mark.parametrize("kind, change", [(kind, change) for kind in ("generator", "keystream", "laplace", "discrete")
                                          for change in ("seed", "stream", "slot", "phase", "block")
                                          if change != "block" or kind in ("generator", "keystream")])  # noise has no block
def test_any_coordinate_changes_the_stream(change, kind):
    base = dict(seed=1, stream="s", slot=2, phase=Phase.DISSIMILARITY, block=0)
    other = dict(base)
    other[change] = {"seed": 2, "stream": "t", "slot": 3, "phase": Phase.PUBLICATION, "block": 1}[change]

    def draw(c):
        randomness = DerivedRandomness(SecretKey.from_seed(c["seed"]), c["stream"])
        if kind == "keystream":
            return randomness.keystream(c["slot"], c["phase"], c["block"]).words(4)
        if kind == "laplace":
            return randomness.laplace(c["slot"], c["phase"], 1.0, 4)
        if kind == "discrete":
            return randomness.discrete_laplace(c["slot"], c["phase"], 0.1, 8)
        return randomness.generator(c["slot"], c["phase"], c["block"]).random(4)

    assert np.array_equal(draw(base), draw(dict(base)))
    assert not np.array_equal(draw(base), draw(other))


def test_keystream_is_aes128_ctr():
    """NIST SP 800-38A, F.5.1 (CTR-AES128.Encrypt), first two blocks: keystream = ciphertext XOR plaintext."""
    secret = bytes.fromhex("2b7e151628aed2a6abf7158809cf4f3c" "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")
    plaintext = bytes.fromhex("6bc1bee22e409f96e93d7e117393172a" "ae2d8a571e03ac9c9eb76fac45af8e51")
    ciphertext = bytes.fromhex("874d6191b620e3261bef6864990db6ce" "9806f66b7970fdff8617187bb9fffdff")
    expected = bytes(c ^ p for c, p in zip(ciphertext, plaintext))
    assert KeyStream(secret).fill(np.empty(32, np.uint8)).tobytes() == expected


def test_keystream_reads_continue_and_refuse_strided_buffers():
    whole = KeyStream.from_seed(4).fill(np.empty(1000, np.uint8))
    stream = KeyStream.from_seed(4)
    parts = [stream.fill(np.empty(size, np.uint8)) for size in (0, 7, 393, 600)]
    assert np.concatenate(parts).tobytes() == whole.tobytes()
    assert KeyStream.from_seed(4).words(125).tobytes() == whole.tobytes()
    with pytest.raises(ValueError, match="contiguous"):
        KeyStream.from_seed(4).fill(np.empty((4, 4), np.uint8)[:, 0])
    with pytest.raises(ValueError, match="32 secret bytes"):
        KeyStream(b"short")


def test_keystream_bytes_are_uniform():
    """1e6 bytes: each of the 256 values ~ Bin(n, 1/256); Pearson's statistic has mean 255 and
    standard deviation sqrt(2 * 255) = 22.6, so 6 standard deviations bound it at 390."""
    counts = np.bincount(DerivedRandomness(SecretKey.from_seed(9), "s").keystream(1, Phase.PUBLICATION, 0)
                         .fill(np.empty(10**6, np.uint8)), minlength=256)
    expected = 10**6 / 256
    assert ((counts - expected) ** 2 / expected).sum() < 255 + 6 * math.sqrt(2 * 255)


def test_keystream_generator_is_reproducible_and_moves_the_stream_on():
    a, b = KeyStream.from_seed(2), KeyStream.from_seed(2)
    assert np.array_equal(a.generator().random(3), b.generator().random(3))
    assert np.array_equal(a.words(2), b.words(2))  # both read 32 bytes for the seed
    assert not np.array_equal(KeyStream.from_seed(2).words(4), KeyStream.from_seed(2).generator().bit_generator.random_raw(4))


def test_noise_ignores_call_order_and_instances_and_is_not_the_generators_stream():
    r = DerivedRandomness(SecretKey.from_seed(3), "s")
    first, scalar = r.laplace(7, Phase.PUBLICATION, 2.0, 5), r.laplace(7, Phase.PUBLICATION, 2.0)
    discrete = r.discrete_laplace(7, Phase.PUBLICATION, 0.2, 5)
    r.laplace(8, Phase.PUBLICATION, 2.0, 5)  # another slot in between must not matter
    r.discrete_laplace(8, Phase.PUBLICATION, 0.2, 5)
    again = DerivedRandomness(SecretKey.from_seed(3), "s")  # a restarted worker
    assert np.array_equal(first, again.laplace(7, Phase.PUBLICATION, 2.0, 5)) and np.array_equal(first, r.laplace(7, 2, 2.0, 5))
    assert scalar == again.laplace(7, Phase.PUBLICATION, 2.0) == pytest.approx(first[0], rel=1e-15)
    assert np.array_equal(discrete, again.discrete_laplace(7, Phase.PUBLICATION, 0.2, 5))
    assert not np.array_equal(first, r.generator(7, Phase.PUBLICATION).laplace(0.0, 2.0, 5))


def test_noise_at_neighbouring_coordinates_is_uncorrelated():
    """Pearson correlation of N pairs of independent draws has sd 1/sqrt(N): 5 sd bound, for the
    pairs (slot, slot + 1), (dissimilarity, publication) and (continuous, discrete) at one slot."""
    r, n = DerivedRandomness(SecretKey.from_seed(4), "s"), 20_000
    x = r.discrete_laplace(1, Phase.PUBLICATION, 0.3, n + 1).astype(float)
    pairs = [(x[:-1], x[1:]),
             (x[:-1], r.discrete_laplace(1, Phase.DISSIMILARITY, 0.3, n).astype(float)),
             (x[:-1], r.laplace(1, Phase.PUBLICATION, 1.0, n))]
    scalars = np.array([[r.laplace(s, Phase.DISSIMILARITY, 1.0), r.laplace(s + 1, Phase.DISSIMILARITY, 1.0)]
                        for s in range(1, 5001)])
    pairs.append((scalars[:, 0], scalars[:, 1]))
    for a, b in pairs:
        assert abs(np.corrcoef(a, b)[0, 1]) < 5 / math.sqrt(a.size)


def test_noise_keystream_is_aes128_of_its_counter_blocks():
    """A word is AES-128 (FIPS-197) of the block spelling (slot, phase, code, index), checked against
    an independent encryption; two words per block; every stream has its own key."""
    key = bytes(range(16))
    stream, reference = NoiseKeystream(key), Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    for slot, phase, code, index in ((1, 2, 0, 0), (-5, 255, 7, 2**48 - 1), (2**63 - 1, 0, 3, 12345 << 8 | 9)):
        block = reference.update(struct.pack("<qQ", slot, phase << 56 | code << 48 | index))
        assert stream.block(slot, phase, code, index) == struct.unpack("<QQ", block)
    words = stream.values(9, 1, 0, 7).copy()
    assert [int(w) for w in words] == [w for i in range(4) for w in stream.block(9, 1, 0, i)][:7]
    assert stream.lanes(9, 1, 4, np.array([3, 0])).tolist() == [stream.block(9, 1, 4, 3 << 8)[0], stream.block(9, 1, 4, 0)[0]]
    a, b = DerivedRandomness(SecretKey.from_seed(1), "a"), DerivedRandomness(SecretKey.from_seed(1), "b")
    assert not np.array_equal(a.laplace(1, 2, 1.0, 4), b.laplace(1, 2, 1.0, 4))
    with pytest.raises(ValueError):
        stream.values(1, 256, 0, 3)
    with pytest.raises(OverflowError):
        stream.values(2**63, 1, 0, 3)


def test_a_transient_generator_draws_what_a_generator_draws():
    rng = DerivedRandomness(SecretKey.from_seed(3), "s")
    for slot, phase, block in ((1, Phase.SAMPLE_PUBLICATION, 0), (7, Phase.PUBLICATION, -1), (1, Phase.SAMPLE_PUBLICATION, 0)):
        expected = rng.generator(slot, phase, block).binomial([10, 200], 0.3)
        assert rng.transient_generator(slot, phase, block).binomial([10, 200], 0.3).tolist() == expected.tolist()


def test_seed_keys_separate_purposes_and_hide_the_secret():
    assert SecretKey.from_seed(1, "server") != SecretKey.from_seed(1, "device")
    assert "hidden" in repr(SecretKey.from_seed(1))
    with pytest.raises(ValueError):
        SecretKey(b"short")
    with pytest.raises(ValueError):
        SecretKey.from_hex("zz")


def test_zero_noise_is_zero():
    z = ZeroNoise(SecretKey.from_seed(0))
    assert z.laplace(1, Phase.DISSIMILARITY, 5.0) == 0.0
    assert not z.laplace(1, Phase.PUBLICATION, 5.0, 3).any()


# The Laplace sampler's moments. For X ~ Lap(lam): E|X| = lam, Var|X| = lam^2, E X = 0, Var X = 2 lam^2,
# Var(X^2) = E X^4 - (E X^2)^2 = 24 lam^4 - 4 lam^4 = 20 lam^4. With N = 1e5 the standard errors are
# lam/316 for mean|X|, 1.41 lam/316 for mean X and 4.47 lam^2/316 for the variance, so the
# tolerances (2%, 0.02 lam, 5%) are 6.3, 4.5 and 7 standard errors.
N = 100_000
LAM = 3.0


def _check_laplace_moments(x):
    assert abs(np.abs(x).mean() - LAM) <= 0.02 * LAM
    assert abs(x.mean()) <= 0.02 * LAM
    assert abs(x.var() - 2 * LAM**2) <= 0.05 * 2 * LAM**2


def test_laplace_vector_moments():
    r = DerivedRandomness(SecretKey.from_seed(11), "s")
    _check_laplace_moments(r.laplace(1, Phase.PUBLICATION, LAM, N))


def test_laplace_scalar_moments_across_slots():
    # Scalars use the hash-inversion path: one draw per slot, pooled over N slots.
    r = DerivedRandomness(SecretKey.from_seed(12), "s")
    x = np.array([r.laplace(slot, Phase.DISSIMILARITY, LAM) for slot in range(1, N + 1)])
    _check_laplace_moments(x)
    # The inverse CDF must cover both tails symmetrically: P(X > lam ln 2) = 1/4 each side.
    tail = LAM * math.log(2)
    se = math.sqrt(0.25 * 0.75 / N)
    assert abs((x > tail).mean() - 0.25) < 5 * se
    assert abs((x < -tail).mean() - 0.25) < 5 * se


@pytest.mark.parametrize("epsilon", [0.7, 0.0125, 1e-5])  # 1e-5: every value takes the exact tail
def test_prefetched_discrete_noise_is_each_slots_own_draw(epsilon):
    """A batch of slots drawn ahead gives, value for value, each slot's own draw (vectors, their first k
    values, and scalars), and a draw not prefetched is drawn as usual."""
    rng = DerivedRandomness(SecretKey.from_seed(4), "ahead")
    slots = np.array([1, 2, 5, 9, 300])
    vectors = [rng.discrete_laplace(int(s), Phase.PUBLICATION, epsilon, 6) for s in slots]
    scalars = [rng.discrete_laplace(int(s), Phase.DISSIMILARITY, epsilon) for s in slots]
    rng.prefetch(slots, Phase.PUBLICATION, 6, epsilon=epsilon)
    rng.prefetch(slots, Phase.DISSIMILARITY, epsilon=epsilon)
    for s, vector, scalar in zip(slots.tolist(), vectors, scalars):
        assert rng.discrete_laplace(s, Phase.PUBLICATION, epsilon, 6).tolist() == vector.tolist()
        assert rng.discrete_laplace(s, Phase.PUBLICATION, epsilon, 2).tolist() == vector[:2].tolist()
        assert rng.discrete_laplace(s, Phase.DISSIMILARITY, epsilon) == scalar
    fresh = DerivedRandomness(SecretKey.from_seed(4), "ahead")
    assert rng.discrete_laplace(3, Phase.PUBLICATION, epsilon, 6).tolist() == \
        fresh.discrete_laplace(3, Phase.PUBLICATION, epsilon, 6).tolist()  # slot 3 was not prefetched
    rng.forget()
    assert not rng._prefetched


def test_prefetched_laplace_noise_is_each_slots_own_draw():
    rng = DerivedRandomness(SecretKey.from_seed(4), "ahead")
    slots = np.arange(1, 40)
    vectors = [rng.laplace(int(s), Phase.PUBLICATION, 2.5, 5) for s in slots]
    scalars = [rng.laplace(int(s), Phase.DISSIMILARITY, 0.1) for s in slots]  # value 0 by Python's math.log
    rng.prefetch(slots, Phase.PUBLICATION, 5, scale=2.5)
    rng.prefetch(slots, Phase.DISSIMILARITY, scale=0.1)
    assert all(np.array_equal(rng.laplace(int(s), Phase.PUBLICATION, 2.5, 5), v) for s, v in zip(slots, vectors))
    assert [rng.laplace(int(s), Phase.DISSIMILARITY, 0.1) for s in slots] == scalars
    with pytest.raises(ValueError, match="epsilon"):
        rng.prefetch(slots, Phase.PUBLICATION, 5)

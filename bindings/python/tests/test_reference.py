"""compute_fold_and_scatter against the published radix-mlp package's cases and checks, and
against a naive pure-Python fold on random batches."""

import numpy as np
import pytest

import radix_mlp
from radix_mlp import compute_fold_and_scatter

EXAMPLE_IDS = [1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 5, 6, 7, 8, 9]
EXAMPLE_POS = [0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5, 6, 7]
EXAMPLE_CU = [0, 7, 10, 15]


def naive_fold(ids, pos, cu, pad=None):
    """The definition: one compact row per distinct (token, position) path from a sequence's
    start, in order of first occurrence; padding rows (0, 0, gather 0) up to a multiple."""
    rows = {}
    cids, cpos, scatter, gather = [], [], [], []
    for s in range(len(cu) - 1):
        path = ()
        for i in range(cu[s], cu[s + 1]):
            path = path + ((ids[i], pos[i]),)
            if path not in rows:
                rows[path] = len(cids)
                cids.append(ids[i])
                cpos.append(pos[i])
                gather.append(i)
            scatter.append(rows[path])
    if pad and cids:
        while len(cids) % pad:
            cids.append(0)
            cpos.append(0)
            gather.append(0)
    return [np.array(a, dtype=np.uint32) for a in (cids, cpos, scatter, gather)]


def fold(ids, pos, cu, pad=None):
    out = compute_fold_and_scatter(ids, pos, cu, pad)
    assert len(out) == 4
    for a in out:
        assert isinstance(a, np.ndarray) and a.dtype == np.uint32 and a.ndim == 1
    cids, cpos, scatter, gather = out
    assert scatter.shape[0] == len(ids)
    assert cids.shape == cpos.shape == gather.shape
    ids, pos = np.asarray(ids, dtype=np.uint32), np.asarray(pos, dtype=np.uint32)
    np.testing.assert_array_equal(cids[scatter], ids)
    np.testing.assert_array_equal(cpos[scatter], pos)
    return [a.tolist() for a in out]


def r(a, b):
    return list(range(a, b + 1))


def test_identical_sequences():
    assert fold([1, 2, 3, 1, 2, 3], [0, 1, 2, 0, 1, 2], [0, 3, 6]) == [[1, 2, 3], [0, 1, 2], [0, 1, 2, 0, 1, 2],
                                                                       [0, 1, 2]]


def test_example_15_tokens_gives_12_rows():
    cids, cpos, scatter, gather = fold(EXAMPLE_IDS, EXAMPLE_POS, EXAMPLE_CU)
    assert len(cids) == 12
    assert cids == [1, 2, 3, 4, 5, 6, 7, 5, 6, 7, 8, 9]
    assert cpos == [0, 1, 2, 3, 4, 5, 6, 3, 4, 5, 6, 7]
    assert scatter == r(0, 6) + [0, 1, 2] + r(7, 11)
    assert gather == r(0, 6) + r(10, 14)


def test_no_overlap_is_identity():
    assert fold([1, 2, 3, 4], [0, 1, 0, 1], [0, 2, 4]) == [[1, 2, 3, 4], [0, 1, 0, 1], [0, 1, 2, 3], [0, 1, 2, 3]]
    assert fold([1, 2, 1, 2], [0, 1, 2, 3], [0, 2, 4]) == [[1, 2, 1, 2], [0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 2, 3]]


def test_single_sequence_is_identity():
    assert fold([1, 2, 3], [0, 1, 2], [0, 3]) == [[1, 2, 3], [0, 1, 2], [0, 1, 2], [0, 1, 2]]


def test_partial_overlap_and_first_occurrence():
    assert fold([1, 2, 3, 1, 2, 4], [0, 1, 2, 0, 1, 2], [0, 3, 6]) == [[1, 2, 3, 4], [0, 1, 2, 2],
                                                                       [0, 1, 2, 0, 1, 3], [0, 1, 2, 5]]
    assert fold([1, 2, 3, 4, 1, 2, 5, 6], [0, 1, 2, 3, 0, 1, 2, 3], [0, 4, 8]) == [
        [1, 2, 3, 4, 5, 6], [0, 1, 2, 3, 2, 3], [0, 1, 2, 3, 0, 1, 4, 5], [0, 1, 2, 3, 6, 7]]


def test_three_sequences_and_single_tokens():
    ids = [1, 2, 3, 4, 1, 2, 5, 6, 1, 2, 3, 7]
    pos = [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3]
    assert fold(ids, pos, [0, 4, 8, 12]) == [[1, 2, 3, 4, 5, 6, 7], [0, 1, 2, 3, 2, 3, 3],
                                             [0, 1, 2, 3, 0, 1, 4, 5, 0, 1, 2, 6], [0, 1, 2, 3, 6, 7, 11]]
    assert fold([1, 2, 1], [0, 0, 0], [0, 1, 2, 3]) == [[1, 2], [0, 0], [0, 1, 0], [0, 1]]


def test_padding():
    cids, cpos, scatter, gather = fold(EXAMPLE_IDS, EXAMPLE_POS, EXAMPLE_CU, 8)
    assert cids == [1, 2, 3, 4, 5, 6, 7, 5, 6, 7, 8, 9, 0, 0, 0, 0]
    assert cpos == [0, 1, 2, 3, 4, 5, 6, 3, 4, 5, 6, 7, 0, 0, 0, 0]
    assert gather == r(0, 6) + r(10, 14) + [0, 0, 0, 0]
    assert max(scatter) < 12
    assert scatter == fold(EXAMPLE_IDS, EXAMPLE_POS, EXAMPLE_CU)[2]
    assert fold([1, 2, 3, 1, 2, 4], [0, 1, 2, 0, 1, 2], [0, 3, 6], 8) == [
        [1, 2, 3, 4, 0, 0, 0, 0], [0, 1, 2, 2, 0, 0, 0, 0], [0, 1, 2, 0, 1, 3], [0, 1, 2, 5, 0, 0, 0, 0]]


def test_padding_when_already_a_multiple():
    ids = r(0, 7)
    unpadded = fold(ids, ids, [0, 8])
    for m in (8, 4, 1):
        assert fold(ids, ids, [0, 8], m) == unpadded
    shared = fold([1, 2, 3, 1, 2, 4], [0, 1, 2, 0, 1, 2], [0, 3, 6])
    for m in (4, 2):
        assert fold([1, 2, 3, 1, 2, 4], [0, 1, 2, 0, 1, 2], [0, 3, 6], m) == shared


def test_deterministic_and_writable():
    a = compute_fold_and_scatter(EXAMPLE_IDS, EXAMPLE_POS, EXAMPLE_CU, 8)
    b = compute_fold_and_scatter(EXAMPLE_IDS, EXAMPLE_POS, EXAMPLE_CU, 8)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
        assert x.flags.writeable and x.flags.c_contiguous
    a[0][0] = 99  # copies: the next call is unaffected
    assert compute_fold_and_scatter(EXAMPLE_IDS, EXAMPLE_POS, EXAMPLE_CU, 8)[0][0] == 1


def test_empty_batch():
    for cu in ([0, 0], [0, 0, 0], np.array([0, 0], dtype=np.int64)):
        out = compute_fold_and_scatter([], [], cu)
        assert len(out) == 4 and all(a.dtype == np.uint32 and a.shape == (0,) for a in out)
    out = compute_fold_and_scatter(np.zeros(0, np.uint32), np.zeros(0, np.uint32), [0, 0], pad_multiple_of=8)
    assert all(a.shape == (0,) for a in out)


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.int64, np.uint64, np.int16, np.uint8, np.uint16])
def test_any_integer_dtype(dtype):
    ids = np.array(EXAMPLE_IDS, dtype=dtype)
    pos = np.array(EXAMPLE_POS, dtype=dtype)
    cu = np.array(EXAMPLE_CU, dtype=dtype)
    assert [a.tolist() for a in compute_fold_and_scatter(ids, pos, cu)] == fold(EXAMPLE_IDS, EXAMPLE_POS, EXAMPLE_CU)


def test_non_contiguous_and_tuple_inputs():
    ids = np.array(EXAMPLE_IDS, dtype=np.int64).repeat(2)[::2]
    assert not ids.flags.c_contiguous
    out = compute_fold_and_scatter(ids, tuple(EXAMPLE_POS), EXAMPLE_CU)
    assert out[0].tolist() == fold(EXAMPLE_IDS, EXAMPLE_POS, EXAMPLE_CU)[0]


def test_full_uint32_range_values():
    big = 2**32 - 1
    out = compute_fold_and_scatter([big, big], [big, big], [0, 1, 2])
    assert out[0].tolist() == [big] and out[2].tolist() == [0, 0]


# The published package's checks, each a ValueError with a message saying what is wrong.
@pytest.mark.parametrize(
    "ids,pos,cu,pattern",
    [
        ([1, 2, 3], [0, 1], [0, 3], r"input_ids and position_ids must have the same length: 3 != 2"),
        ([1, 2], [0, 1], [2], r"cu_seq_lengths must have at least 2 elements \(start and end\), got 1"),
        ([1, 2], [0, 1], [], r"cu_seq_lengths must have at least 2 elements \(start and end\), got 0"),
        ([], [], [0], r"cu_seq_lengths must have at least 2 elements"),
        ([1, 2], [0, 1], [1, 2], r"cu_seq_lengths must start with 0, got 1"),
        ([1, 2, 3], [0, 1, 2], [0, 2, 1, 3], r"cu_seq_lengths must be non-decreasing at index 2: 1 < 2"),
        ([1, 2, 3], [0, 1, 2], [0, 5, 3], r"cu_seq_lengths element 1 \(5\) exceeds input_ids length \(3\)"),
        ([1, 2, 3], [0, 1, 2], [0, 2], r"cu_seq_lengths last element \(2\) must equal input_ids length \(3\)"),
        ([1, -2, 3], [0, 1, 2], [0, 3], r"input_ids\[1\]=-2 is negative"),
        ([1, 2, 3], [0, 1, 2**32], [0, 3], r"position_ids\[2\]=4294967296 is outside 0..2\^32-1"),
        ([1, 2, 3], [0, 1, 2], [0, -3], r"cu_seq_lengths\[1\]=-3 is negative"),
        ([2**70], [0], [0, 1], r"input_ids\[0\]=1180591620717411303424 is outside 0..2\^32-1"),
        ([[1, 2]], [[0, 1]], [0, 2], r"input_ids must be 1-dimensional, got 2D"),
    ],
)
def test_input_checks(ids, pos, cu, pattern):
    with pytest.raises(ValueError, match=pattern):
        compute_fold_and_scatter(ids, pos, cu)


def test_input_checks_numpy_values():
    with pytest.raises(ValueError, match=r"input_ids\[2\]=-1 is negative"):
        compute_fold_and_scatter(np.array([1, 2, -1], dtype=np.int8), [0, 1, 2], [0, 3])
    with pytest.raises(ValueError, match=r"input_ids\[0\]=4294967296 is outside"):
        compute_fold_and_scatter(np.array([2**32], dtype=np.uint64), [0], [0, 1])


def test_non_integer_inputs_are_type_errors():
    with pytest.raises(TypeError, match="input_ids must hold integers"):
        compute_fold_and_scatter([1.5, 2.0], [0, 1], [0, 2])
    with pytest.raises(TypeError, match="position_ids must hold integers"):
        compute_fold_and_scatter([1, 2], np.array([True, False]), [0, 2])


@pytest.mark.parametrize("pad,exc,pattern", [
    (0, ValueError, r"pad_multiple_of=0 must be at least 1"),
    (-8, ValueError, r"pad_multiple_of=-8 is outside"),
    (2**32, ValueError, r"pad_multiple_of=4294967296 is outside"),
    (True, TypeError, r"pad_multiple_of must be an int or None"),
    (8.0, TypeError, r"pad_multiple_of must be an integer"),
])
def test_bad_padding(pad, exc, pattern):
    with pytest.raises(exc, match=pattern):
        compute_fold_and_scatter([1, 2], [0, 1], [0, 2], pad)


@pytest.mark.parametrize("pad", [4096, 4097, 8192])
def test_padding_past_the_library_maximum(pad):
    # The published package pads to any multiple; RMLP_MAX_PAD_MULTIPLE bounds the library's plans only.
    ids, pos, cu = [1, 2, 3, 1, 2, 4], [0, 1, 2, 0, 1, 2], [0, 3, 6]
    cids, cpos, scatter, gather = compute_fold_and_scatter(ids, pos, cu, pad)
    assert cids.shape == cpos.shape == gather.shape == (pad,)
    assert cids[:4].tolist() == [1, 2, 3, 4] and cpos[:4].tolist() == [0, 1, 2, 2]
    assert gather[:4].tolist() == [0, 1, 2, 5]
    assert not cids[4:].any() and not cpos[4:].any() and not gather[4:].any()
    assert scatter.tolist() == [0, 1, 2, 0, 1, 3]


def random_batch(rng, max_seqs=8, vocab=4):
    """Sequences that share prefixes often: random prefixes of a few templates plus random tails;
    positions 0..len-1, sometimes offset or random."""
    templates = [rng.integers(0, vocab, size=rng.integers(1, 10)).tolist() for _ in range(3)]
    ids, pos, cu = [], [], [0]
    for _ in range(int(rng.integers(1, max_seqs + 1))):
        t = templates[int(rng.integers(0, 3))]
        seq = t[: int(rng.integers(0, len(t) + 1))] + rng.integers(0, vocab, size=int(rng.integers(0, 5))).tolist()
        mode = rng.random()
        if mode < 0.8:
            p = list(range(len(seq)))
        elif mode < 0.9:
            p = list(range(2, len(seq) + 2))
        else:
            p = rng.integers(0, 3, size=len(seq)).tolist()
        ids += seq
        pos += p
        cu.append(len(ids))
    return ids, pos, cu


def test_random_batches_match_naive():
    rng = np.random.default_rng(1234)
    for trial in range(400):
        ids, pos, cu = random_batch(rng)
        pad = [None, 1, 3, 8][trial % 4]
        got = compute_fold_and_scatter(ids, pos, cu, pad)
        want = naive_fold(ids, pos, cu, pad)
        for name, g, w in zip(("compact_input_ids", "compact_position_ids", "scatter", "fold_gather"), got, want):
            np.testing.assert_array_equal(g, w, err_msg="%s of ids=%s pos=%s cu=%s pad=%s" % (name, ids, pos, cu, pad))


def test_thread_local_planners():
    import threading

    rng = np.random.default_rng(7)
    batches = [random_batch(rng) for _ in range(40)]
    expected = [naive_fold(*b) for b in batches]
    failures = []

    def work(offset):
        for k in range(len(batches)):
            i = (k + offset) % len(batches)
            got = compute_fold_and_scatter(*batches[i])
            if not all(np.array_equal(g, w) for g, w in zip(got, expected[i])):
                failures.append(i)

    threads = [threading.Thread(target=work, args=(t * 5,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def test_module_exports():
    assert radix_mlp.compute_fold_and_scatter is compute_fold_and_scatter


def test_check_order_matches_reference():
    # At the same index a decrease is reported before exceeding; an earlier index wins.
    with pytest.raises(ValueError, match="element 1 \\(9\\) exceeds"):
        compute_fold_and_scatter([1, 2, 3], [0, 1, 2], [0, 9, 1, 3])
    with pytest.raises(ValueError, match="non-decreasing at index 2: 1 < 2"):
        compute_fold_and_scatter([1, 2, 3], [0, 1, 2], [0, 2, 1, 9])

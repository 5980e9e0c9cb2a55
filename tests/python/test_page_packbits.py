# SPDX-License-Identifier: Apache-2.0
"""Page operations and bit packing on the CPU against numpy."""

from __future__ import annotations

import numpy as np
import pytest
import reference as ref
from conftest import indptr_of, page_table

import kvinfer


def test_get_seq_lens_and_batch_indices_positions():
    kv_indptr = np.array([0, 3, 3, 4, 6], np.int32)
    last = np.array([13, 0, 8, 6], np.int32)
    seq_lens = kvinfer.get_seq_lens(kv_indptr, last, 16)
    assert seq_lens.dtype == np.int32
    assert seq_lens.tolist() == [45, 0, 8, 22]
    append_indptr = np.array([0, 2, 2, 5, 9], np.int32)
    bi, pos = kvinfer.get_batch_indices_positions(append_indptr, seq_lens, 9)
    assert bi.tolist() == [0, 0, 2, 2, 2, 3, 3, 3, 3]
    assert pos.tolist() == [43, 44, 5, 6, 7, 18, 19, 20, 21]
    # FlashInfer's docstring example
    bi, pos = kvinfer.get_batch_indices_positions(np.array([0, 1, 3, 6, 10], np.int32),
                                                  np.array([5, 5, 5, 5], np.int32), 10)
    assert bi.tolist() == [0, 1, 1, 2, 2, 2, 3, 3, 3, 3]
    assert pos.tolist() == [4, 3, 4, 2, 3, 4, 1, 2, 3, 4]
    # caller-provided outputs
    bo, po = np.empty(10, np.int32), np.empty(10, np.int32)
    r = kvinfer.get_batch_indices_positions(np.array([0, 1, 3, 6, 10], np.int32), np.array([5, 5, 5, 5], np.int32),
                                            10, bo, po)
    assert r[0] is bo and r[1] is po and bo.tolist() == bi.tolist()


@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("combined", [True, False])
def test_append_paged_kv_cache(rng, layout, combined):
    page_size, hk, d = 5, 2, 64
    old_lens, new_lens = [7, 0, 12], [3, 4, 1]
    seq_lens = [a + b for a, b in zip(old_lens, new_lens)]
    indptr, indices, last, num_pages = page_table(rng, seq_lens, page_size)
    seq = (page_size, hk) if layout == "NHD" else (hk, page_size)
    cache = np.zeros((num_pages, 2, *seq, d), np.float16)
    k_all = ref.make(rng, (sum(new_lens), hk, d))
    v_all = ref.make(rng, (sum(new_lens), hk, d))
    append_indptr = indptr_of(new_lens)
    bi, pos = kvinfer.get_batch_indices_positions(append_indptr, kvinfer.get_seq_lens(indptr, last, page_size),
                                                  int(append_indptr[-1]))
    target = cache if combined else (cache[:, 0], cache[:, 1])
    kvinfer.append_paged_kv_cache(k_all, v_all, bi, pos, target, indices, indptr, last, kv_layout=layout)
    expect = np.zeros_like(cache)
    for t in range(len(bi)):
        b, p = bi[t], pos[t]
        page = indices[indptr[b] + p // page_size]
        slot = p % page_size
        for kv, src in ((0, k_all), (1, v_all)):
            if layout == "NHD":
                expect[page, kv, slot] = src[t]
            else:
                expect[page, kv, :, slot] = src[t]
    assert (cache.view(np.uint16) == expect.view(np.uint16)).all()


def test_append_paged_mla_kv_cache(rng):
    page_size = 4
    seq_lens = [6, 3]
    indptr, indices, last, num_pages = page_table(rng, seq_lens, page_size)
    ckv = np.zeros((num_pages, page_size, 512), np.float16)
    kpe = np.zeros((num_pages, page_size, 64), np.float16)
    a_ckv = ref.make(rng, (9, 512))
    a_kpe = ref.make(rng, (9, 64))
    bi, pos = kvinfer.get_batch_indices_positions(indptr_of(seq_lens), np.array(seq_lens, np.int32), 9)
    kvinfer.append_paged_mla_kv_cache(a_ckv, a_kpe, bi, pos, ckv, kpe, indices, indptr, last)
    for t in range(9):
        page = indices[indptr[bi[t]] + pos[t] // page_size]
        assert (ckv[page, pos[t] % page_size] == a_ckv[t]).all()
        assert (kpe[page, pos[t] % page_size] == a_kpe[t]).all()


@pytest.mark.parametrize("bitorder", ["big", "little"])
@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 100])
def test_packbits_matches_numpy(rng, bitorder, n):
    x = rng.random(n) < 0.5
    got = kvinfer.packbits(x, bitorder)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, np.packbits(x, bitorder=bitorder))
    # uint8 input: non-zero is true
    np.testing.assert_array_equal(kvinfer.packbits((x * 3).astype(np.uint8), bitorder),
                                  np.packbits(x, bitorder=bitorder))


@pytest.mark.parametrize("bitorder", ["big", "little"])
def test_segment_packbits(rng, bitorder):
    lens = [4, 3, 0, 11, 8]
    indptr = indptr_of(lens)
    x = rng.random(int(indptr[-1])) < 0.5
    y, new_indptr = kvinfer.segment_packbits(x, indptr, bitorder)
    assert isinstance(y, np.ndarray) and y.dtype == np.uint8 and new_indptr.dtype == np.int32
    assert np.diff(new_indptr).tolist() == [(n + 7) // 8 for n in lens]
    for i in range(len(lens)):
        np.testing.assert_array_equal(y[new_indptr[i]:new_indptr[i + 1]],
                                      np.packbits(x[indptr[i]:indptr[i + 1]], bitorder=bitorder))
    # FlashInfer's docstring example
    xx = np.array([1, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1], bool)
    yy, ip = kvinfer.segment_packbits(xx, np.array([0, 4, 7, 11], np.int32), bitorder="big")
    assert [bin(v) for v in yy.tolist()] == ["0b10110000", "0b100000", "0b11010000"]
    assert ip.tolist() == [0, 1, 2, 3]

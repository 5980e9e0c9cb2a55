# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures: a seeded generator, the tolerance model, and page-table makers."""

from __future__ import annotations

import numpy as np
import pytest

import kvinfer  # noqa: F401  (fails the session early when the package is not built)

# max |kvinfer - reference| allowed, by output dtype (unit-variance inputs; the
# reference is float64, kvinfer accumulates in float32 and rounds the output).
ATOL = {"float16": 4e-3, "bfloat16": 2.5e-2, "float32": 1e-4}
LSE_ATOL = 2e-3


@pytest.fixture
def rng():
    return np.random.default_rng(20261201)


def assert_close(actual, expected, atol, what=""):
    actual = np.asarray(actual, dtype=np.float64)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert not np.isnan(actual).any(), f"{what}: NaN"
    inf_a, inf_e = np.isneginf(actual), np.isneginf(expected)
    assert (inf_a == inf_e).all(), f"{what}: -inf positions differ"
    fin = ~inf_e
    err = np.abs(actual[fin] - expected[fin]).max(initial=0.0)
    assert err <= atol, f"{what}: max abs error {err:.3g} > {atol:.3g}"


def page_table(rng, kv_lens, page_size, extra_pages=3):
    """A shuffled CSR page table over a pool with spare pages: (indptr, indices,
    last_page_len, num_pages), int32."""
    pages = [(n + page_size - 1) // page_size for n in kv_lens]
    total = sum(pages)
    num_pages = total + extra_pages
    indices = rng.permutation(num_pages)[:total].astype(np.int32)
    indptr = np.concatenate([[0], np.cumsum(pages)]).astype(np.int32)
    last = np.array([0 if n == 0 else n - (p - 1) * page_size for n, p in zip(kv_lens, pages)], dtype=np.int32)
    return indptr, indices, last, num_pages


def indptr_of(lens):
    return np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)


def workspace():
    return np.zeros(16 << 20, dtype=np.uint8)

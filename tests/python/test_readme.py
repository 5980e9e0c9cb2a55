# SPDX-License-Identifier: Apache-2.0
"""The README's numpy example, checked against the float64 reference."""

from __future__ import annotations

import numpy as np
import reference as ref
from conftest import ATOL, LSE_ATOL, assert_close

import kvinfer


def test_readme_numpy_decode():
    decode = kvinfer.BatchDecodeWithPagedKVCacheWrapper(np.zeros(128 << 20, np.uint8), "NHD")
    kv_cache = np.random.randn(8, 2, 16, 8, 128).astype(np.float16)
    i32 = lambda x: np.array(x, np.int32)  # noqa: E731
    decode.plan(i32([0, 3, 4]), i32([5, 0, 2, 7]), i32([8, 7]), 32, 8, 128, 16)
    q = np.random.randn(2, 32, 128).astype(np.float16)
    out, lse = decode.run(q, kv_cache, return_lse=True)
    per_req = ref.gather_pages(kv_cache[:, 0].astype(np.float64), kv_cache[:, 1].astype(np.float64),
                               [0, 3, 4], np.array([5, 0, 2, 7]), [8, 7])
    for b, (k, v) in enumerate(per_req):
        assert k.shape[0] == [40, 7][b]
        o_ref, lse_ref = ref.attention(q[b:b + 1].astype(np.float64), k, v)
        assert_close(out[b:b + 1], o_ref, ATOL["float16"], "out")
        assert_close(lse[b:b + 1], lse_ref, LSE_ATOL, "lse")

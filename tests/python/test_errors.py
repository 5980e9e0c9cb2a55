# SPDX-License-Identifier: Apache-2.0
"""Bad inputs raise kvinfer.Error (a ValueError) with the C++ message (operation,
argument, value, rule); FlashInfer arguments whose values kvinfer lacks raise
kvinfer.NotSupportedError (also a NotImplementedError) naming the argument; dtype
arguments take torch dtypes, numpy dtypes and FlashInfer's strings; FlashInfer's
signatures (names, order, defaults) hold."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import reference as ref
from conftest import indptr_of, page_table, workspace

import kvinfer


def test_exception_types():
    assert issubclass(kvinfer.Error, ValueError)
    assert issubclass(kvinfer.NotSupportedError, kvinfer.Error)
    assert issubclass(kvinfer.NotSupportedError, NotImplementedError)


@pytest.fixture
def decode_setup(rng):
    page_size, hq, hk, d = 16, 8, 2, 64
    table = page_table(rng, [20, 33], page_size)
    cache = ref.make(rng, (table[3], 2, page_size, hk, d))
    q = ref.make(rng, (2, hq, d))
    w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(workspace())
    w.plan(*table[:3], hq, hk, d, page_size)
    return w, q, cache, table


def test_run_errors_carry_the_cpp_message(decode_setup):
    w, q, cache, table = decode_setup
    with pytest.raises(kvinfer.Error, match=r"^BatchDecodeWithPagedKVCache: q.shape\[1\] = 4: must be 8"):
        w.run(q[:, :4], cache)
    with pytest.raises(kvinfer.Error, match=r"q.dtype = float32: must be float16"):
        w.run(q.astype(np.float32), cache)
    with pytest.raises(kvinfer.Error, match=r"out.shape\[0\] = 3"):
        w.run(q, cache, out=np.empty((3, 8, 64), np.float16))
    with pytest.raises(kvinfer.Error, match=r"^BatchDecodeWithPagedKVCache: q = list: must be an array"):
        w.run([[1.0]], cache, out=np.empty((2, 8, 64), np.float16))
    with pytest.raises(kvinfer.Error, match=r"^BatchDecodeWithPagedKVCacheWrapper: q = list: must be an array"):
        w.run([[1.0]], cache)
    with pytest.raises(kvinfer.Error, match=r"out = ndarray: must be writable"):
        ro = np.empty((2, 8, 64), np.float16)
        ro.flags.writeable = False
        w.run(q, cache, out=ro)
    with pytest.raises(kvinfer.Error, match=r"window_left = 5: must be None or the value given to plan\(\) \(-1\)"):
        w.run(q, cache, window_left=5)


def test_plan_errors(rng, decode_setup):
    w, q, cache, table = decode_setup
    indptr, indices, last, _ = table
    with pytest.raises(kvinfer.Error, match=r"kv_indptr.dtype = int64: .*int32"):
        w.plan(indptr.astype(np.int64), indices, last, 8, 2, 64, 16)
    with pytest.raises(kvinfer.Error, match=r"num_qo_heads = 6: must be a multiple of num_kv_heads \(4\)"):
        w.plan(indptr, indices, last, 6, 4, 64, 16)
    with pytest.raises(kvinfer.Error, match=r"kv_last_page_len"):
        w.plan(indptr, indices, np.array([17, 1], np.int32), 8, 2, 64, 16)
    with pytest.raises(kvinfer.Error, match=r"q_data_type = float64: must be one of"):
        w.plan(indptr, indices, last, 8, 2, 64, 16, q_data_type=np.float64)
    with pytest.raises(kvinfer.Error,
                       match=r"^BatchDecodeWithPagedKVCache: q_dtype = int32: must be float16 or bfloat16"):
        w.plan(indptr, indices, last, 8, 2, 64, 16, q_data_type="int32")
    with pytest.raises(kvinfer.Error, match=r"pos_encoding_mode = ROPE: must be"):
        w.plan(indptr, indices, last, 8, 2, 64, 16, pos_encoding_mode="ROPE")
    with pytest.raises(kvinfer.Error, match=r"head_dim = 72: must be a multiple of 16"):
        w.plan(indptr, indices, last, 8, 2, 72, 16)
    with pytest.raises(kvinfer.Error, match=r"kv_layout = NDH: must be \"NHD\" or \"HND\""):
        kvinfer.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NDH")
    fresh = kvinfer.BatchPrefillWithRaggedKVCacheWrapper(workspace())
    with pytest.raises(kvinfer.Error, match=r"run\(\) needs a successful plan\(\) first"):
        fresh.run(q, q, q)
    with pytest.raises(kvinfer.Error, match=r"paged_kv_indptr_buffer = None: use_cuda_graph=True needs the fixed"):
        kvinfer.BatchDecodeWithPagedKVCacheWrapper(workspace(), use_cuda_graph=True)
    graph = kvinfer.BatchPrefillWithPagedKVCacheWrapper(workspace(), use_cuda_graph=True, qo_indptr_buf=indptr,
                                                        paged_kv_indptr_buf=indptr, paged_kv_indices_buf=indices,
                                                        paged_kv_last_page_len_buf=last)
    with pytest.raises(kvinfer.Error, match=r"run\(\) needs a successful plan\(\) first"):
        graph.run(q, cache)


def test_page_op_errors(rng):
    with pytest.raises(kvinfer.Error, match=r"^get_seq_lens: kv_indptr"):
        kvinfer.get_seq_lens(np.array([0, 1], np.int64), np.array([1], np.int32), 16)
    i32 = lambda *v: np.array(v, np.int32)  # noqa: E731
    with pytest.raises(kvinfer.Error,
                       match=r"^get_seq_lens: kv_last_page_len\[0\] = 17: must be in \[1, page_size = 16\]"):
        kvinfer.get_seq_lens(i32(0, 1), i32(17), 16)
    with pytest.raises(kvinfer.Error, match=r"^get_seq_lens: kv_last_page_len\[0\] = 0: must be in \[1, page_size"):
        kvinfer.get_seq_lens(i32(0, 1), i32(0), 16)
    with pytest.raises(kvinfer.Error,
                       match=r"^get_batch_indices_positions: seq_lens\[1\] = 1: must be >= the 2 appended"):
        kvinfer.get_batch_indices_positions(i32(0, 1, 3), i32(4, 1), 3)
    with pytest.raises(kvinfer.Error,
                       match=r"^get_batch_indices_positions: batch_indices.shape\[0\] = 4: must equal append_indptr"):
        kvinfer.get_batch_indices_positions(i32(0, 1, 3), i32(4, 2), 4)
    with pytest.raises(kvinfer.Error, match=r"^get_batch_indices_positions: positions.shape\[0\] = 2"):
        kvinfer.get_batch_indices_positions(i32(0, 1, 3), i32(4, 2), 3, positions=np.empty(2, np.int32))
    with pytest.raises(kvinfer.Error, match=r"^packbits: bitorder = middle"):
        kvinfer.packbits(np.ones(3, bool), "middle")
    with pytest.raises(kvinfer.Error, match=r"^merge_state: "):
        kvinfer.merge_state(np.zeros((2, 2, 64), np.float16), np.zeros((3, 2), np.float32),
                            np.zeros((2, 2, 64), np.float16), np.zeros((2, 2), np.float32))
    with pytest.raises(kvinfer.Error, match=r"uint16 array is read as float16/bfloat16 bits only where"):
        kvinfer.merge_state(np.zeros((2, 2, 64), np.uint16), np.zeros((2, 2), np.float32),
                            np.zeros((2, 2, 64), np.uint16), np.zeros((2, 2), np.float32))
    indptr, indices, last, num_pages = page_table(rng, [3], 4)
    cache = np.zeros((num_pages, 2, 4, 2, 64), np.float16)
    k = np.zeros((3, 2, 64), np.float16)
    with pytest.raises(kvinfer.Error, match=r"^append_paged_kv_cache: positions\[0\] = 3"):
        kvinfer.append_paged_kv_cache(k, k, np.zeros(3, np.int32), np.array([3, 0, 1], np.int32), cache, indices,
                                      indptr, last)
    with pytest.raises(kvinfer.Error, match=r"append_key.dtype = float32: must equal the cache's dtype"):
        kvinfer.append_paged_kv_cache(k.astype(np.float32), k, np.zeros(3, np.int32), np.arange(3, dtype=np.int32),
                                      cache, indices, indptr, last)


def test_single_ops_and_constructors_name_themselves(rng):
    # The C++ single_prefill / single_decode plan with the ragged wrapper; their errors
    # still name the function called, and a constructor's its wrapper.
    q, k = np.zeros((3, 4, 72), np.float16), np.zeros((20, 2, 72), np.float16)
    with pytest.raises(kvinfer.Error, match=r"^single_prefill: head_dim_qk = 72: must be a multiple of 16"):
        kvinfer.single_prefill_with_kv_cache(q, k, k)
    with pytest.raises(kvinfer.Error, match=r"^single_decode: head_dim_qk = 72"):
        kvinfer.single_decode_with_kv_cache(q[0], k, k)
    with pytest.raises(kvinfer.Error, match=r"^BatchPrefillWithRaggedKVCache: kv_layout = XYZ"):
        kvinfer.BatchPrefillWithRaggedKVCacheWrapper(workspace(), kv_layout="XYZ")
    with pytest.raises(kvinfer.Error, match=r"^BatchDecodeWithPagedKVCache: kv_layout = XYZ"):
        kvinfer.BatchDecodeWithPagedKVCacheWrapper(workspace(), kv_layout="XYZ")


def test_single_prefill_two_dimensional_mask(rng):
    # bool [qo_len, kv_len], of any strides, is the flat mask; another shape of the
    # same size is an error (it would flatten to a different mask).
    q, k, v = ref.make(rng, (5, 4, 64)), ref.make(rng, (9, 2, 64)), ref.make(rng, (9, 2, 64))
    mask = rng.random((5, 9)) < 0.5
    flat = kvinfer.single_prefill_with_kv_cache(q, k, v, custom_mask=mask.reshape(-1))
    assert np.array_equal(kvinfer.single_prefill_with_kv_cache(q, k, v, custom_mask=mask), flat)
    assert np.array_equal(kvinfer.single_prefill_with_kv_cache(q, k, v, custom_mask=np.asfortranarray(mask)), flat)
    with pytest.raises(kvinfer.Error,
                       match=r"^single_prefill_with_kv_cache: custom_mask.shape = \[9, 5\]: .*\[5, 9\]"):
        kvinfer.single_prefill_with_kv_cache(q, k, v, custom_mask=mask.T.copy())


def test_dtype_arguments_accept_numpy_and_strings(rng):
    page_size, hq, hk, d = 16, 4, 4, 64
    table = page_table(rng, [10], page_size)
    for q_dtype in (np.float16, np.dtype("float16"), "float16", "half"):
        w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(workspace())
        w.plan(*table[:3], hq, hk, d, page_size, q_data_type=q_dtype, o_data_type="bfloat16")
        assert w._impl.q_data_type == "float16" and w._impl.o_data_type == "bfloat16"
    w.plan(*table[:3], hq, hk, d, page_size, q_data_type="bfloat16", kv_data_type="float8_e4m3fn")
    assert w._impl.kv_data_type == "float8_e4m3"
    w.plan(*table[:3], hq, hk, d, page_size, data_type="float16", q_data_type=None)
    assert w._impl.q_data_type == "float16" and w._impl.kv_data_type == "float16"


# FlashInfer arguments kvinfer lacks: a value that needs the feature raises
# NotSupportedError naming the argument; FlashInfer's default is accepted.
def _decode():
    return kvinfer.BatchDecodeWithPagedKVCacheWrapper(workspace())


NOT_SUPPORTED = [
    ("decode init backend", lambda t, q, c: kvinfer.BatchDecodeWithPagedKVCacheWrapper(workspace(), backend="cudnn"),
     "backend"),
    ("decode init jit_args", lambda t, q, c: kvinfer.BatchDecodeWithPagedKVCacheWrapper(workspace(), jit_args=[1]),
     "jit_args"),
    ("decode plan q_len_per_req", lambda t, q, c: _decode().plan(*t[:3], 8, 2, 64, 16, q_len_per_req=2),
     "q_len_per_req"),
    ("decode plan window_right", lambda t, q, c: _decode().plan(*t[:3], 8, 2, 64, 16, window_right=4),
     "window_right"),
    ("decode plan block_tables", lambda t, q, c: _decode().plan(*t[:3], 8, 2, 64, 16, block_tables=t[1]),
     "block_tables"),
    ("decode plan use_token_head_sf", lambda t, q, c: _decode().plan(*t[:3], 8, 2, 64, 16, use_token_head_sf=True),
     "use_token_head_sf"),
    ("prefill plan use_fp16_qk_reduction",
     lambda t, q, c: kvinfer.BatchPrefillWithPagedKVCacheWrapper(workspace()).plan(
         np.array([0, 1, 2], np.int32), *t[:3], 8, 2, 64, 16, use_fp16_qk_reduction=True), "use_fp16_qk_reduction"),
    ("prefill plan head_dim_vo",
     lambda t, q, c: kvinfer.BatchPrefillWithPagedKVCacheWrapper(workspace()).plan(
         np.array([0, 1, 2], np.int32), *t[:3], 8, 2, 64, 16, head_dim_vo=32), "head_dim_vo"),
    ("prefill plan backend",
     lambda t, q, c: kvinfer.BatchPrefillWithPagedKVCacheWrapper(workspace(), backend="trtllm-gen").plan(
         np.array([0, 1, 2], np.int32), *t[:3], 8, 2, 64, 16), "backend"),
    ("ragged plan multi-item",
     lambda t, q, c: kvinfer.BatchPrefillWithRaggedKVCacheWrapper(workspace()).plan(
         np.array([0, 1], np.int32), np.array([0, 1], np.int32), 8, 2, 64, prefix_len_ptr=t[1]), "prefix_len_ptr"),
    ("ragged plan v_indptr",
     lambda t, q, c: kvinfer.BatchPrefillWithRaggedKVCacheWrapper(workspace()).plan(
         np.array([0, 1], np.int32), np.array([0, 1], np.int32), 8, 2, 64, v_indptr=t[0]), "v_indptr"),
    ("single prefill scale_q",
     lambda t, q, c: kvinfer.single_prefill_with_kv_cache(q, q, q, scale_q=np.ones(8, np.float32)), "scale_q"),
    ("mla plan metadata",
     lambda t, q, c: kvinfer.BatchMLAPagedAttentionWrapper(workspace()).plan(metadata=object()), "metadata"),
    ("mla init backend",
     lambda t, q, c: kvinfer.BatchMLAPagedAttentionWrapper(workspace(), backend="cutlass"), "backend"),
]


@pytest.mark.parametrize("name,call,arg", NOT_SUPPORTED, ids=[n for n, _, _ in NOT_SUPPORTED])
def test_not_supported_arguments(rng, name, call, arg):
    table = page_table(rng, [20, 33], 16)
    q = ref.make(rng, (2, 8, 64))
    cache = ref.make(rng, (table[3], 2, 16, 2, 64))
    with pytest.raises(kvinfer.NotSupportedError, match=rf": {arg}(\.[a-z_]+)? = ") as e:
        call(table, q, cache)
    assert isinstance(e.value, NotImplementedError) and isinstance(e.value, ValueError)


RUN_NOT_SUPPORTED = [
    ("sinks", dict(sinks=np.zeros(8, np.float32))),
    ("q_len_per_req", dict(q_len_per_req=2)),
    ("skip_softmax_threshold_scale_factor", dict(skip_softmax_threshold_scale_factor=0.5)),
    ("kv_cache_sf", dict(kv_cache_sf=np.zeros(1, np.float32))),
    ("k_scale", dict(k_scale=np.ones(8, np.float32))),
]


@pytest.mark.parametrize("arg,kwargs", RUN_NOT_SUPPORTED, ids=[a for a, _ in RUN_NOT_SUPPORTED])
def test_decode_run_not_supported(decode_setup, arg, kwargs):
    w, q, cache, _ = decode_setup
    with pytest.raises(kvinfer.NotSupportedError, match=rf"BatchDecodeWithPagedKVCacheWrapper: {arg} = "):
        w.run(q, cache, **kwargs)
    # FlashInfer's defaults pass
    w.run(q, cache, sinks=None, q_len_per_req=1, skip_softmax_threshold_scale_factor=None, kv_cache_sf=None,
          k_scale=None, window_left=-1)


def test_prefill_run_not_supported(rng):
    table = page_table(rng, [20], 16)
    cache = ref.make(rng, (table[3], 2, 16, 2, 64))
    q = ref.make(rng, (4, 8, 64))
    w = kvinfer.BatchPrefillWithPagedKVCacheWrapper(workspace())
    w.plan(np.array([0, 4], np.int32), *table[:3], 8, 2, 64, 16, causal=True)
    for kwargs, arg in ((dict(lse_layout="HN"), "lse_layout"), (dict(use_fp16_softmax=True), "use_fp16_softmax"),
                        (dict(sinks=np.zeros(8, np.float32)), "sinks")):
        with pytest.raises(kvinfer.NotSupportedError, match=rf": {arg} = "):
            w.run(q, cache, **kwargs)
    with pytest.raises(kvinfer.Error, match=r"lse_base = 'e'"):
        w.run(q, cache, lse_base="e")


# Parameter names, order and defaults of FlashInfer 0.7.4 (its flashinfer/decode.py,
# prefill.py, cascade.py, page.py, quantization/packbits.py, mla): each must be a prefix
# of kvinfer's (kvinfer may add keyword-only extensions after them).
FLASHINFER_SIGNATURES = {
    "BatchDecodeWithPagedKVCacheWrapper.__init__": [
        ("float_workspace_buffer", None), ("kv_layout", "NHD"), ("use_cuda_graph", False),
        ("use_tensor_cores", False), ("paged_kv_indptr_buffer", None), ("paged_kv_indices_buffer", None),
        ("paged_kv_last_page_len_buffer", None), ("backend", "auto"), ("jit_args", None), ("jit_kwargs", None)],
    "BatchDecodeWithPagedKVCacheWrapper.plan": [
        ("indptr", None), ("indices", None), ("last_page_len", None), ("num_qo_heads", None),
        ("num_kv_heads", None), ("head_dim", None), ("page_size", None), ("pos_encoding_mode", "NONE"),
        ("window_left", -1), ("logits_soft_cap", None), ("q_data_type", "float16"), ("kv_data_type", None),
        ("o_data_type", None), ("data_type", None), ("sm_scale", None), ("rope_scale", None), ("rope_theta", None),
        ("non_blocking", True), ("block_tables", None), ("seq_lens", None), ("fixed_split_size", None),
        ("disable_split_kv", False), ("q_len_per_req", 1)],
    "BatchDecodeWithPagedKVCacheWrapper.run": [
        ("q", None), ("paged_kv_cache", None), ("q_scale", None), ("k_scale", None), ("v_scale", None),
        ("out", None), ("lse", None), ("return_lse", False), ("enable_pdl", None), ("window_left", None),
        ("sinks", None), ("q_len_per_req", None), ("skip_softmax_threshold_scale_factor", None),
        ("kv_cache_sf", None)],
    "BatchPrefillWithPagedKVCacheWrapper.__init__": [
        ("float_workspace_buffer", None), ("kv_layout", "NHD"), ("use_cuda_graph", False), ("qo_indptr_buf", None),
        ("paged_kv_indptr_buf", None), ("paged_kv_indices_buf", None), ("paged_kv_last_page_len_buf", None),
        ("custom_mask_buf", None), ("mask_indptr_buf", None), ("backend", "auto"), ("jit_args", None),
        ("jit_kwargs", None), ("variant_owns_mask", False), ("max_total_num_rows", None)],
    "BatchPrefillWithPagedKVCacheWrapper.plan": [
        ("qo_indptr", None), ("paged_kv_indptr", None), ("paged_kv_indices", None),
        ("paged_kv_last_page_len", None), ("num_qo_heads", None), ("num_kv_heads", None), ("head_dim_qk", None),
        ("page_size", None), ("head_dim_vo", None), ("custom_mask", None), ("packed_custom_mask", None),
        ("causal", False), ("pos_encoding_mode", "NONE"), ("use_fp16_qk_reduction", False), ("sm_scale", None),
        ("window_left", -1), ("logits_soft_cap", None), ("rope_scale", None), ("rope_theta", None),
        ("q_data_type", "float16"), ("kv_data_type", None), ("o_data_type", None), ("non_blocking", True)],
    "BatchPrefillWithRaggedKVCacheWrapper.plan": [
        ("qo_indptr", None), ("kv_indptr", None), ("num_qo_heads", None), ("num_kv_heads", None),
        ("head_dim_qk", None), ("head_dim_vo", None), ("custom_mask", None), ("packed_custom_mask", None),
        ("causal", False), ("pos_encoding_mode", "NONE"), ("use_fp16_qk_reduction", False), ("window_left", -1),
        ("logits_soft_cap", None), ("sm_scale", None), ("rope_scale", None), ("rope_theta", None),
        ("q_data_type", "float16"), ("kv_data_type", None), ("o_data_type", None), ("non_blocking", True)],
    "MultiLevelCascadeAttentionWrapper.plan": [
        ("qo_indptr_arr", None), ("paged_kv_indptr_arr", None), ("paged_kv_indices_arr", None),
        ("paged_kv_last_page_len", None), ("num_qo_heads", None), ("num_kv_heads", None), ("head_dim", None),
        ("page_size", None), ("causal", False), ("pos_encoding_mode", "NONE"), ("use_fp16_qk_reduction", False),
        ("sm_scale", None), ("window_left", -1), ("logits_soft_cap", None), ("rope_scale", None),
        ("rope_theta", None), ("q_data_type", "float16"), ("kv_data_type", None)],
    "BatchMLAPagedAttentionWrapper.plan": [
        ("qo_indptr", None), ("kv_indptr", None), ("kv_indices", None), ("kv_len_arr", None), ("num_heads", None),
        ("head_dim_ckv", None), ("head_dim_kpe", None), ("page_size", None), ("causal", None), ("sm_scale", None),
        ("q_data_type", None), ("kv_data_type", None), ("use_profiler", False)],
    "append_paged_kv_cache": [
        ("append_key", None), ("append_value", None), ("batch_indices", None), ("positions", None),
        ("paged_kv_cache", None), ("kv_indices", None), ("kv_indptr", None), ("kv_last_page_len", None),
        ("kv_layout", "NHD")],
    "single_prefill_with_kv_cache": [
        ("q", None), ("k", None), ("v", None), ("scale_q", None), ("scale_k", None), ("scale_v", None),
        ("o_dtype", None), ("custom_mask", None), ("packed_custom_mask", None), ("causal", False),
        ("kv_layout", "NHD"), ("pos_encoding_mode", "NONE"), ("use_fp16_qk_reduction", False), ("sm_scale", None),
        ("window_left", -1), ("logits_soft_cap", None), ("rope_scale", None), ("rope_theta", None),
        ("backend", "auto"), ("return_lse", False), ("kv_cache_sf", None), ("k_scale", None), ("v_scale", None)],
    "single_decode_with_kv_cache": [
        ("q", None), ("k", None), ("v", None), ("kv_layout", "NHD"), ("pos_encoding_mode", "NONE"),
        ("use_tensor_cores", False), ("q_scale", None), ("k_scale", None), ("v_scale", None), ("window_left", -1),
        ("logits_soft_cap", None), ("sm_scale", None), ("rope_scale", None), ("rope_theta", None),
        ("return_lse", False)],
    "get_batch_indices_positions": [("append_indptr", None), ("seq_lens", None), ("nnz", None),
                                    ("batch_indices", None), ("positions", None)],
    "packbits": [("x", None), ("bitorder", "big")],
    "segment_packbits": [("x", None), ("indptr", None), ("bitorder", "big")],
    "merge_state_in_place": [("v", None), ("s", None), ("v_other", None), ("s_other", None), ("mask", None)],
}


@pytest.mark.parametrize("name", sorted(FLASHINFER_SIGNATURES))
def test_flashinfer_signatures(name):
    obj = kvinfer
    for part in name.split("."):
        obj = getattr(obj, part)
    params = [p for p in inspect.signature(obj).parameters.values()
              if p.name != "self" and p.kind != inspect.Parameter.VAR_POSITIONAL]
    expected = FLASHINFER_SIGNATURES[name]
    got = [(p.name, None if p.default is inspect.Parameter.empty else p.default) for p in params[:len(expected)]]
    assert got == expected


def test_module_layout():
    import kvinfer.cascade
    import kvinfer.decode
    import kvinfer.mla
    import kvinfer.page
    import kvinfer.prefill
    import kvinfer.quantization
    for mod, names in ((kvinfer.prefill, ["BatchPrefillWithPagedKVCacheWrapper", "BatchPrefillWithRaggedKVCacheWrapper",
                                          "single_prefill_with_kv_cache"]),
                       (kvinfer.decode, ["BatchDecodeWithPagedKVCacheWrapper", "single_decode_with_kv_cache"]),
                       (kvinfer.page, ["append_paged_kv_cache", "append_paged_mla_kv_cache",
                                       "get_batch_indices_positions", "get_seq_lens"]),
                       (kvinfer.cascade, ["MultiLevelCascadeAttentionWrapper", "merge_state", "merge_state_in_place",
                                          "merge_states"]),
                       (kvinfer.mla, ["BatchMLAPagedAttentionWrapper"]),
                       (kvinfer.quantization, ["packbits", "segment_packbits"])):
        for n in names:
            assert getattr(mod, n) is getattr(kvinfer, n)


def test_typing_stub_next_to_the_module():
    import os
    stub = os.path.join(os.path.dirname(kvinfer._kvinfer.__file__), "_kvinfer.pyi")
    assert os.path.exists(stub), "nanobind's stubgen output is missing"
    text = open(stub).read()
    assert "class BatchDecodeWithPagedKVCache" in text and "def reset_workspace_buffer" in text


def test_outputs_are_written_in_place(rng):
    """No copies: an append into a strided view of a larger array lands in that array."""
    big = np.zeros((6, 2, 4, 2, 64 * 2), np.float16)
    cache = big[..., :64]  # last dim contiguous, other strides of the big array
    indptr, indices, last = np.array([0, 1], np.int32), np.array([3], np.int32), np.array([2], np.int32)
    k = ref.make(rng, (2, 2, 64))
    kvinfer.append_paged_kv_cache(k, k, np.zeros(2, np.int32), np.arange(2, dtype=np.int32), cache, indices, indptr,
                                  last)
    assert (big[3, 0, :2, :, :64] == k).all() and (big[..., 64:] == 0).all()

# SPDX-License-Identifier: Apache-2.0
"""kvinfer: attention kernels over paged and ragged KV caches, with FlashInfer's
Python API (module layout, names, argument order, keyword names and defaults), on
the CPU and on CUDA GPUs.

Code written for FlashInfer runs by changing the import (``import kvinfer as
flashinfer``): torch tensors on a GPU run on the CUDA backend, numpy arrays and CPU
tensors on the CPU backend. Tensors cross by DLPack without a copy; a call never
copies a tensor between devices. Errors: :class:`Error` (a ValueError) carries the C++
library's message; :class:`NotSupportedError` (also a NotImplementedError) names a
FlashInfer argument whose value needs a feature kvinfer does not have.
"""

from __future__ import annotations

import importlib.util as _importlib_util
import os as _os

# torch first where it is installed: the torch custom ops (torch.compile) register on
# import, and the wrappers read torch.compiler.is_compiling. KVINFER_NO_TORCH=1 skips
# it; without torch kvinfer needs numpy only.
if _os.environ.get("KVINFER_NO_TORCH", "") != "1" and _importlib_util.find_spec("torch") is not None:
    import torch as _torch  # noqa: F401

from . import _kvinfer
from ._kvinfer import Error, NotSupportedError
from . import cascade, decode, distributed, mla, page, prefill, quantization
from .cascade import MultiLevelCascadeAttentionWrapper, merge_state, merge_state_in_place, merge_states
from .decode import (BatchDecodeWithPagedKVCacheWrapper, CUDAGraphBatchDecodeWithPagedKVCacheWrapper,
                     single_decode_with_kv_cache)
from .mla import BatchMLAPagedAttentionWrapper
from .page import (append_paged_kv_cache, append_paged_mla_kv_cache, get_batch_indices_positions, get_seq_lens,
                   shard_page_table)
from .prefill import (BatchPrefillWithPagedKVCacheWrapper, BatchPrefillWithRaggedKVCacheWrapper,
                      single_prefill_with_kv_cache, single_prefill_with_kv_cache_return_lse)
from .quantization import packbits, segment_packbits

__version__ = _kvinfer.version()
cuda_backend_built = _kvinfer.cuda_backend_built
cuda_device_count = _kvinfer.cuda_device_count
instance_preset = _kvinfer.instance_preset

if "_torch" in globals():
    from . import _torch_ops  # noqa: F401  (registers torch.ops.kvinfer.*)

__all__ = [
    "Error", "NotSupportedError", "cascade", "decode", "distributed", "mla", "page", "prefill", "quantization",
    "BatchDecodeWithPagedKVCacheWrapper", "CUDAGraphBatchDecodeWithPagedKVCacheWrapper",
    "BatchPrefillWithPagedKVCacheWrapper", "BatchPrefillWithRaggedKVCacheWrapper",
    "MultiLevelCascadeAttentionWrapper", "BatchMLAPagedAttentionWrapper", "single_decode_with_kv_cache",
    "single_prefill_with_kv_cache", "single_prefill_with_kv_cache_return_lse", "merge_state",
    "merge_state_in_place", "merge_states", "append_paged_kv_cache", "append_paged_mla_kv_cache",
    "get_batch_indices_positions", "get_seq_lens", "shard_page_table", "packbits", "segment_packbits",
    "cuda_backend_built",
    "cuda_device_count", "instance_preset",
]

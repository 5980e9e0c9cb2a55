# SPDX-License-Identifier: Apache-2.0
# The one list of compiled attention kernel instances, one list per kernel family and
# preset. kvinfer_generate_instances() writes one .cu file per instance and the
# registry (X-macro lists) that the kernel selector reads, so what the selector may
# choose and what is compiled cannot drift. Which (dtype, head dim) combinations a
# family serves is said here and nowhere else.
#
# An attention family is a folder src/cuda/attention/<family>/ whose instance.cuh
# defines <family>::launch / occupancy / max_item_warps (cuda/attention/family.hpp);
# its instances are "<q/o dtype>:<kv dtype>:<head_dim_qk>:<head_dim_vo>". The mma
# operands are of the query's type, so a tensor-core family's KV is the query's type
# or fp8 (converted exactly); the tensor-core tile also takes fp16 with bf16 (the
# mma in bf16, the `full` preset). docs/kernels.md, "Adding a kernel family", says how to
# add one.
#
# "<folder>:<KernelFamily enumerator>", in the selector's order of preference.
set(KVINFER_ATTENTION_FAMILIES
    "cuda_core_decode:kCudaCoreDecode"
    "key_row_tile:kKeyRowTile"
    "tensor_core_tile:kTensorCoreTile"
    "fp8_decode_tile:kFp8DecodeTile"
    "wgmma_prefill:kWgmmaPrefill"
    "ws_prefill:kWsPrefill"
    "padded_tile:kPaddedTile")

# The CUDA-core decode kernel: one query token per request, any KV dtype.
set(KVINFER_cuda_core_decode_INSTANCES_minimal "bf16:bf16:128:128")
set(KVINFER_cuda_core_decode_INSTANCES_default "")
foreach(q f16 bf16)
  foreach(kv ${q} e4m3 e5m2)
    foreach(d 64 128 256)
      list(APPEND KVINFER_cuda_core_decode_INSTANCES_default "${q}:${kv}:${d}:${d}")
    endforeach()
  endforeach()
endforeach()
set(KVINFER_cuda_core_decode_INSTANCES_full ${KVINFER_cuda_core_decode_INSTANCES_default})
foreach(d 64 128 256)  # f16 q with bf16 KV and the reverse
  list(APPEND KVINFER_cuda_core_decode_INSTANCES_full "f16:bf16:${d}:${d}" "bf16:f16:${d}:${d}")
endforeach()

# The key-row decode tile (keys as the mma's M): 16-bit KV of the query's type.
set(KVINFER_key_row_tile_INSTANCES_minimal "bf16:bf16:128:128")
set(KVINFER_key_row_tile_INSTANCES_default "")
foreach(q f16 bf16)
  foreach(d 64 128 256)
    list(APPEND KVINFER_key_row_tile_INSTANCES_default "${q}:${q}:${d}:${d}")
  endforeach()
endforeach()
set(KVINFER_key_row_tile_INSTANCES_full ${KVINFER_key_row_tile_INSTANCES_default})

# The portable tensor-core tiles (mma.sync; 16, 64 and 128 rows). At head_dim 512 they
# are the only family (its warps split O's columns), decode included.
set(KVINFER_tensor_core_tile_INSTANCES_minimal "bf16:bf16:128:128")
set(KVINFER_tensor_core_tile_INSTANCES_default "")
foreach(q f16 bf16)
  foreach(kv ${q} e4m3 e5m2)
    foreach(d 64 128 256 512)
      list(APPEND KVINFER_tensor_core_tile_INSTANCES_default "${q}:${kv}:${d}:${d}")
    endforeach()
  endforeach()
  list(APPEND KVINFER_tensor_core_tile_INSTANCES_default "${q}:${q}:192:128")  # DeepSeek-style qk 192 / vo 128
endforeach()
set(KVINFER_tensor_core_tile_INSTANCES_full ${KVINFER_tensor_core_tile_INSTANCES_default})
foreach(d 64 128 256 512)  # f16 q with bf16 KV and the reverse: the mma in bf16
  list(APPEND KVINFER_tensor_core_tile_INSTANCES_full "f16:bf16:${d}:${d}" "bf16:f16:${d}:${d}")
endforeach()

# The fp8 decode tile (K and V converted in registers): 16-bit q, fp8 KV, head_dim 64/128.
set(KVINFER_fp8_decode_tile_INSTANCES_minimal "")
set(KVINFER_fp8_decode_tile_INSTANCES_default "")
foreach(q f16 bf16)
  foreach(kv e4m3 e5m2)
    foreach(d 64 128)
      list(APPEND KVINFER_fp8_decode_tile_INSTANCES_default "${q}:${kv}:${d}:${d}")
    endforeach()
  endforeach()
endforeach()
set(KVINFER_fp8_decode_tile_INSTANCES_full ${KVINFER_fp8_decode_tile_INSTANCES_default})

# The sm90 wgmma prefill: 16-bit KV of the query's type, equal head dims 64/128/256.
set(KVINFER_wgmma_prefill_INSTANCES_minimal "bf16:bf16:128:128")
set(KVINFER_wgmma_prefill_INSTANCES_default "")
foreach(q f16 bf16)
  foreach(d 64 128 256)
    list(APPEND KVINFER_wgmma_prefill_INSTANCES_default "${q}:${q}:${d}:${d}")
  endforeach()
endforeach()
set(KVINFER_wgmma_prefill_INSTANCES_full ${KVINFER_wgmma_prefill_INSTANCES_default})

# The sm90 warp-specialised prefill (ragged KV by TMA), at every head dim of the wgmma
# mainloop.
set(KVINFER_ws_prefill_INSTANCES_minimal "bf16:bf16:128:128")
set(KVINFER_ws_prefill_INSTANCES_default ${KVINFER_wgmma_prefill_INSTANCES_default})
set(KVINFER_ws_prefill_INSTANCES_full ${KVINFER_ws_prefill_INSTANCES_default})

# The padded tile (the tensor-core tile's kernels over smaller head dims, zero-padded to
# the instance's): in `full`, every head dim that is a multiple of 16 up to 512 (and
# unequal qk/vo) with no exact instance, for every q and KV dtype; none elsewhere.
set(KVINFER_padded_tile_INSTANCES_minimal "")
set(KVINFER_padded_tile_INSTANCES_default "")
set(KVINFER_padded_tile_INSTANCES_full "")
foreach(q f16 bf16)
  foreach(kv f16 bf16 e4m3 e5m2)
    foreach(d 64 128 256 512)
      list(APPEND KVINFER_padded_tile_INSTANCES_full "${q}:${kv}:${d}:${d}")
    endforeach()
  endforeach()
endforeach()

# MLA instance: "<q/o dtype>:<kv dtype>" (tensor cores; head_dim_ckv 512, with or
# without the 64-wide rotary part; items of 16, 32 or 64 rows).
set(KVINFER_MLA_INSTANCES_minimal "bf16:bf16")
set(KVINFER_MLA_INSTANCES_default "")
foreach(q f16 bf16)
  foreach(kv ${q} e4m3 e5m2)
    list(APPEND KVINFER_MLA_INSTANCES_default "${q}:${kv}")
  endforeach()
endforeach()
set(KVINFER_MLA_INSTANCES_full ${KVINFER_MLA_INSTANCES_default} "f16:bf16" "bf16:f16")  # the mma in bf16

set(_kvinfer_ctype_f16 "__half")
set(_kvinfer_ctype_bf16 "__nv_bfloat16")
set(_kvinfer_ctype_e4m3 "__nv_fp8_e4m3")
set(_kvinfer_ctype_e5m2 "__nv_fp8_e5m2")
set(_kvinfer_dtype_f16 "kF16")
set(_kvinfer_dtype_bf16 "kBF16")
set(_kvinfer_dtype_e4m3 "kE4M3")
set(_kvinfer_dtype_e5m2 "kE5M2")

# Sets q, kv, dqk and dvo in the caller's scope from an attention instance
# "<q>:<kv>:<head_dim_qk>:<head_dim_vo>" (an MLA instance "<q>:<kv>" sets q and kv).
macro(_kvinfer_split_instance inst)
  string(REPLACE ":" ";" _parts ${inst})
  list(GET _parts 0 q)
  list(GET _parts 1 kv)
  list(LENGTH _parts _count)
  if(_count EQUAL 4)
    list(GET _parts 2 dqk)
    list(GET _parts 3 dvo)
  endif()
endmacro()

function(kvinfer_generate_instances target)
  if(NOT DEFINED KVINFER_MLA_INSTANCES_${KVINFER_INSTANCES})
    message(FATAL_ERROR "KVINFER_INSTANCES=${KVINFER_INSTANCES}: use minimal, default or full")
  endif()
  set(dir ${CMAKE_BINARY_DIR}/generated/cuda)
  set(families "")
  set(registry "")
  set(sources "")
  foreach(entry ${KVINFER_ATTENTION_FAMILIES})
    string(REPLACE ":" ";" entry_parts ${entry})
    list(GET entry_parts 0 family)
    list(GET entry_parts 1 key)
    string(APPEND families "KVINFER_ATTENTION_FAMILY(${family}, ${key})\n")
    foreach(inst ${KVINFER_${family}_INSTANCES_${KVINFER_INSTANCES}})
      _kvinfer_split_instance(${inst})
      set(tq ${_kvinfer_ctype_${q}})
      set(tkv ${_kvinfer_ctype_${kv}})
      set(file ${dir}/${family}_${q}_${kv}_d${dqk}_${dvo}.cu)
      file(CONFIGURE OUTPUT ${file} CONTENT
"// Generated by cmake/KvinferInstances.cmake: one instance of the ${family} family.
#include \"cuda/attention/${family}/instance.cuh\"
namespace kvinfer::cuda {
KVINFER_INSTANTIATE_ATTENTION(${family}, ${tq}, ${tkv}, ${dqk}, ${dvo})
}
")
      list(APPEND sources ${file})
      string(APPEND registry "KVINFER_ATTENTION_INSTANCE(${family}, ${key}, ${tq}, ${_kvinfer_dtype_${q}}, ${tkv}, "
                             "${_kvinfer_dtype_${kv}}, ${dqk}, ${dvo})\n")
    endforeach()
  endforeach()
  set(mla_registry "")
  foreach(inst ${KVINFER_MLA_INSTANCES_${KVINFER_INSTANCES}})
    _kvinfer_split_instance(${inst})
    set(tq ${_kvinfer_ctype_${q}})
    set(tkv ${_kvinfer_ctype_${kv}})
    set(file ${dir}/mla_${q}_${kv}.cu)
    file(CONFIGURE OUTPUT ${file} CONTENT
"// Generated by cmake/KvinferInstances.cmake: one MLA kernel instance.
#include \"cuda/mla/instance.cuh\"
namespace kvinfer::cuda {
KVINFER_INSTANTIATE_MLA(${tq}, ${tkv})
}
")
    list(APPEND sources ${file})
    string(APPEND mla_registry "KVINFER_MLA_INSTANCE(${tq}, ${_kvinfer_dtype_${q}}, ${tkv}, ${_kvinfer_dtype_${kv}})\n")
  endforeach()
  file(CONFIGURE OUTPUT ${dir}/mla_instances.inc CONTENT
"// Generated by cmake/KvinferInstances.cmake: the MLA instances of preset ${KVINFER_INSTANCES}.
${mla_registry}")
  file(CONFIGURE OUTPUT ${dir}/attention_families.inc CONTENT
"// Generated by cmake/KvinferInstances.cmake: the attention kernel families (folder, KernelFamily).
${families}")
  file(CONFIGURE OUTPUT ${dir}/attention_instances.inc CONTENT
"// Generated by cmake/KvinferInstances.cmake: the attention instances of preset ${KVINFER_INSTANCES}.
${registry}")
  target_sources(${target} PRIVATE ${sources})
  target_include_directories(${target} PRIVATE ${dir})
endfunction()

# Every preset's attention instances, for the core library (src/plan/instance_presets.cpp),
# whatever this build compiles: the selector's error names the preset that has a
# kernel for a configuration this build lacks.
function(kvinfer_generate_preset_table target)
  set(dir ${CMAKE_BINARY_DIR}/generated/plan)
  # Presets by their index in instance_presets(): 0 minimal, 1 default, 2 full.
  set(table "")
  set(mla_table "")
  set(index 0)
  foreach(preset minimal default full)
    foreach(entry ${KVINFER_ATTENTION_FAMILIES})
      string(REPLACE ":" ";" entry_parts ${entry})
      list(GET entry_parts 0 family)
      list(GET entry_parts 1 key)
      foreach(inst ${KVINFER_${family}_INSTANCES_${preset}})
        _kvinfer_split_instance(${inst})
        string(APPEND table "KVINFER_PRESET_INSTANCE(${index}, ${key}, ${_kvinfer_dtype_${q}}, "
                            "${_kvinfer_dtype_${kv}}, ${dqk}, ${dvo})\n")
      endforeach()
    endforeach()
    foreach(inst ${KVINFER_MLA_INSTANCES_${preset}})
      _kvinfer_split_instance(${inst})
      string(APPEND mla_table "KVINFER_PRESET_MLA_INSTANCE(${index}, ${_kvinfer_dtype_${q}}, ${_kvinfer_dtype_${kv}})\n")
    endforeach()
    math(EXPR index "${index} + 1")
  endforeach()
  file(CONFIGURE OUTPUT ${dir}/instance_presets.inc CONTENT
"// Generated by cmake/KvinferInstances.cmake: every preset's attention instances.
${table}")
  file(CONFIGURE OUTPUT ${dir}/mla_instance_presets.inc CONTENT
"// Generated by cmake/KvinferInstances.cmake: every preset's MLA instances.
${mla_table}")
  target_include_directories(${target} PRIVATE ${dir})
endfunction()

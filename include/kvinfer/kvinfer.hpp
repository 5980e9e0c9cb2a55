// SPDX-License-Identifier: Apache-2.0
// Umbrella header: the whole public API.
#pragma once

#include "kvinfer/core/device.hpp"
#include "kvinfer/core/dtype.hpp"
#include "kvinfer/core/error.hpp"
#include "kvinfer/core/tensor.hpp"
#include "kvinfer/version.hpp"
#include "kvinfer/attention/cascade.hpp"
#include "kvinfer/attention/decode.hpp"
#include "kvinfer/attention/mla.hpp"
#include "kvinfer/attention/options.hpp"
#include "kvinfer/attention/prefill.hpp"
#include "kvinfer/attention/run_options.hpp"
#include "kvinfer/core/float_convert.hpp"
#include "kvinfer/layout/kv_layout.hpp"
#include "kvinfer/layout/mask.hpp"
#include "kvinfer/layout/mla_cache.hpp"
#include "kvinfer/layout/paged_kv_cache.hpp"
#include "kvinfer/layout/ragged.hpp"
#include "kvinfer/ops/merge.hpp"
#include "kvinfer/ops/packbits.hpp"
#include "kvinfer/ops/page.hpp"

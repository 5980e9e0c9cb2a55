// SPDX-License-Identifier: Apache-2.0
// The parts of the extension module kvinfer._kvinfer.
#pragma once

#include <nanobind/nanobind.h>

namespace kvinfer::python {

void bind_attention(nanobind::module_& m);
void bind_ops(nanobind::module_& m);

}  // namespace kvinfer::python

// SPDX-License-Identifier: Apache-2.0
// kvinfer._kvinfer: the extension module. kvinfer::Error becomes kvinfer.Error (a
// ValueError) with the C++ message unchanged.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <exception>

#include "bindings.hpp"
#include "tensor_arg.hpp"

namespace nb = nanobind;

namespace {

PyObject* g_error = nullptr;
PyObject* g_not_supported = nullptr;

}  // namespace

NB_MODULE(_kvinfer, m) {
  using namespace kvinfer::python;
  m.doc() =
      "kvinfer's C++ API for Python (nanobind). Use the package kvinfer: its modules give FlashInfer's API.";

  g_error = PyErr_NewExceptionWithDoc(
      "kvinfer.Error",
      "Bad input to kvinfer: the message names the operation, the argument, its value and the rule it broke "
      "(\"<op>: <argument> = <value>: <rule>\"), as kvinfer::Error in C++.",
      PyExc_ValueError, nullptr);
  nb::object bases = nb::steal(PyTuple_Pack(2, g_error, PyExc_NotImplementedError));
  g_not_supported = PyErr_NewExceptionWithDoc(
      "kvinfer.NotSupportedError",
      "A FlashInfer argument whose value needs a feature kvinfer does not have: a kvinfer.Error and a "
      "NotImplementedError. The message names the argument.",
      bases.ptr(), nullptr);
  m.attr("Error") = nb::handle(g_error);
  m.attr("NotSupportedError") = nb::handle(g_not_supported);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const NotSupported& e) {
      PyErr_SetString(g_not_supported, e.what());
    } catch (const kvinfer::Error& e) {
      PyErr_SetString(g_error, e.what());
    }
  });

  m.def("version", &kvinfer::version, "The library's version.");
  m.def("instance_preset", &kvinfer::instance_preset,
        "The CUDA kernel instance preset compiled in (\"minimal\", \"default\", \"full\"), \"none\" without "
        "CUDA.");
  m.def("cuda_backend_built", &kvinfer::cuda_backend_built, "Whether this build has the CUDA backend.");
  m.def("cuda_device_count", &kvinfer::cuda_device_count, "GPUs visible to the CUDA backend (0 without it).");

  m.def(
      "device_of",
      [](nb::handle array) { return kvinfer::to_string(device_arg("device_of", "array", array)); },
      nb::arg("array"), "The kvinfer device of an array (\"cpu\", \"cuda:0\"), read through DLPack.");

  bind_attention(m);
  bind_ops(m);
}

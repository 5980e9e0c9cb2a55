// SPDX-License-Identifier: Apache-2.0
#include "tensor_arg.hpp"

#include <nanobind/stl/string.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

namespace kvinfer::python {
namespace {

namespace dl = nb::dlpack;

// The DLPack element types kvinfer reads (one lane each).
struct DlpackDType {
  dl::dtype_code code;
  std::uint8_t bits;
  DType dtype;
};
constexpr DlpackDType kDlpackDTypes[] = {
    {dl::dtype_code::Float, 16, DType::kF16},       {dl::dtype_code::Float, 32, DType::kF32},
    {dl::dtype_code::Bfloat, 16, DType::kBF16},     {dl::dtype_code::Float8_E4M3FN, 8, DType::kE4M3},
    {dl::dtype_code::Float8_E5M2, 8, DType::kE5M2}, {dl::dtype_code::UInt, 8, DType::kU8},
    {dl::dtype_code::Int, 32, DType::kI32},         {dl::dtype_code::Int, 64, DType::kI64},
    {dl::dtype_code::Bool, 8, DType::kBool},
};

std::optional<DType> from_dlpack(dl::dtype t) {
  if (t.lanes != 1) return std::nullopt;
  for (const DlpackDType& d : kDlpackDTypes) {
    if (dl::dtype_code(t.code) == d.code && t.bits == d.bits) return d.dtype;
  }
  return std::nullopt;
}

std::string dlpack_dtype_name(dl::dtype t) {
  // DLPack's type codes 0..6 (Int, UInt, Float, OpaqueHandle, Bfloat, Complex, Bool).
  static constexpr const char* kKinds[] = {"int", "uint", "float", nullptr, "bfloat", "complex", "bool"};
  const char* kind = t.code < std::size(kKinds) ? kKinds[t.code] : nullptr;
  if (kind == nullptr) kind = "float8/other code ";
  std::string s = std::string(kind) + std::to_string(t.bits);
  if (t.lanes != 1) {
    s += 'x';
    s += std::to_string(t.lanes);
  }
  return s;
}

[[noreturn]] void fail(std::string_view op, std::string_view arg, std::string_view value,
                       std::string_view rule) {
  throw Error(op, arg, value, rule);
}

std::string py_type_name(nb::handle obj) {
  return nb::type_name(obj.type()).c_str();
}

// Element types that DLPack (and so numpy's export) cannot name: ml_dtypes' bfloat16
// and fp8 arrays, torch's fp8 tensors on versions that do not export them. Returns the
// kvinfer dtype and the unsigned integer of the same width to view the storage as.
struct RawDType {
  DType dtype;
  const char* uint_name;
};
std::optional<RawDType> raw_dtype(nb::handle obj) {
  if (!nb::hasattr(obj, "dtype") || !nb::hasattr(obj, "view")) return std::nullopt;
  nb::object dt = obj.attr("dtype");
  std::string name;
  if (nb::hasattr(dt, "name")) {
    name = nb::cast<std::string>(nb::str(dt.attr("name")));
  } else {
    name = nb::cast<std::string>(nb::str(dt));  // torch: "torch.float8_e4m3fn"
    if (name.rfind("torch.", 0) == 0) name = name.substr(6);
  }
  if (name == "bfloat16") return RawDType{DType::kBF16, "uint16"};
  if (name == "float8_e4m3fn") return RawDType{DType::kE4M3, "uint8"};
  if (name == "float8_e5m2") return RawDType{DType::kE5M2, "uint8"};
  return std::nullopt;
}

Device to_device(std::string_view op, std::string_view name, int device_type, int device_id, nb::handle obj) {
  switch (device_type) {
    case int(nb::device::cpu::value):
    case int(nb::device::cuda_host::value):  // pinned host memory
      return Device::cpu();
    case int(nb::device::cuda::value):
    case int(nb::device::cuda_managed::value):
      return Device::cuda(device_id);
    default:
      fail(op, std::string(name) + ".device", py_type_name(obj),
           "DLPack device type " + std::to_string(device_type) + " is neither the CPU nor a CUDA GPU");
  }
}

// DLPack's C exchange API (DLPack 1.2; torch.Tensor and others expose it as the type
// attribute __dlpack_c_exchange_api__, a capsule "dlpack_exchange_api"): the tensor's
// metadata read in C, without the Python-level __dlpack__ call and its capsule, which
// are most of a torch tensor's conversion cost. The layout is DLPack's dlpack.h.
struct DLPackVersionC {
  std::uint32_t major, minor;
};
struct DLPackExchangeAPIHeaderC {
  DLPackVersionC version;
  DLPackExchangeAPIHeaderC* prev_api;
};
struct DLPackExchangeAPIC {
  DLPackExchangeAPIHeaderC header;
  void* managed_tensor_allocator;
  void* managed_tensor_from_py_object_no_sync;
  void* managed_tensor_to_py_object_no_sync;
  int (*dltensor_from_py_object_no_sync)(void* py_object, dl::dltensor* out);
  void* current_work_stream;
};

// The API of obj's type, or null; one lookup per type (kept for the process: types
// that carry the attribute are the frameworks' tensor classes).
const DLPackExchangeAPIC* exchange_api(nb::handle obj) {
  static PyTypeObject* last_type = nullptr;
  static const DLPackExchangeAPIC* last_api = nullptr;
  PyTypeObject* tp = Py_TYPE(obj.ptr());
  if (tp == last_type) return last_api;
  const DLPackExchangeAPIC* api = nullptr;
  PyObject* attr = PyObject_GetAttrString(reinterpret_cast<PyObject*>(tp), "__dlpack_c_exchange_api__");
  if (attr == nullptr) {
    PyErr_Clear();
  } else {
    if (PyCapsule_IsValid(attr, "dlpack_exchange_api")) {
      auto* a = static_cast<const DLPackExchangeAPIC*>(PyCapsule_GetPointer(attr, "dlpack_exchange_api"));
      if (a != nullptr && a->header.version.major == 1 && a->header.version.minor >= 2 &&
          a->dltensor_from_py_object_no_sync != nullptr) {
        api = a;
      }
    }
    Py_DECREF(attr);
  }
  Py_INCREF(tp);  // the cached type stays valid
  if (last_type) Py_DECREF(last_type);
  last_type = tp;
  last_api = api;
  return api;
}

// What a TensorView is made of, from either import path.
struct Descriptor {
  void* data = nullptr;
  int device_type = 0, device_id = 0;
  std::size_t ndim = 0;
  dl::dtype dtype{};
  std::array<std::int64_t, kMaxRank> shape{}, strides{};
};

// numpy arrays read in place: the fields of numpy's PyArrayObject and PyArray_Descr
// that its C API macros (PyArray_DATA, PyArray_NDIM, ...) read, laid out as numpy's
// ndarraytypes.h has them in numpy 1.x and 2.x alike. Most of a numpy array's
// conversion cost is its __dlpack__ call (a capsule and a managed tensor per call);
// these reads replace it for the element types kvinfer has. Anything else (another
// byte order, a user dtype such as ml_dtypes', strides that are not whole elements)
// takes the DLPack path and its errors.
struct NumpyDescr {
  PyObject_HEAD
  PyTypeObject* typeobj;
  char kind, type, byteorder, flags_char;
  int type_num;
};
struct NumpyArray {
  PyObject_HEAD
  char* data;
  int nd;
  Py_ssize_t* dimensions;
  Py_ssize_t* strides;
  PyObject* base;
  NumpyDescr* descr;
  int flags;
};
constexpr int kNpyWriteable = 0x0400;  // NPY_ARRAY_WRITEABLE

// numpy's builtin type numbers (NPY_BOOL, NPY_UBYTE, ...) of the element types kvinfer
// reads, as DLPack dtypes.
std::optional<dl::dtype> numpy_dtype(int type_num) {
  auto d = [](dl::dtype_code code, std::size_t bits) {
    return std::optional(dl::dtype{std::uint8_t(code), std::uint8_t(bits), 1});
  };
  switch (type_num) {
    case 0: return d(dl::dtype_code::Bool, 8);               // NPY_BOOL
    case 2: return d(dl::dtype_code::UInt, 8);               // NPY_UBYTE
    case 4: return d(dl::dtype_code::UInt, 16);              // NPY_USHORT
    case 5: return d(dl::dtype_code::Int, 32);               // NPY_INT
    case 7: return d(dl::dtype_code::Int, 8 * sizeof(long));  // NPY_LONG
    case 9: return d(dl::dtype_code::Int, 64);               // NPY_LONGLONG
    case 11: return d(dl::dtype_code::Float, 32);            // NPY_FLOAT
    case 23: return d(dl::dtype_code::Float, 16);            // NPY_HALF
    default: return std::nullopt;
  }
}

bool is_numpy_array(PyTypeObject* tp) {
  static PyTypeObject* ndarray = nullptr;  // numpy.ndarray, found at its first use
  if (tp == ndarray) return true;
  if (ndarray != nullptr || std::strcmp(tp->tp_name, "numpy.ndarray") != 0) return false;
  Py_INCREF(tp);  // the cached type stays valid
  ndarray = tp;
  return true;
}

// A numpy array of a builtin dtype kvinfer reads, in place (false: the DLPack path).
bool numpy_descriptor(PyObject* obj, bool writable, Descriptor& d) {
  const auto* a = reinterpret_cast<const NumpyArray*>(obj);
  if (a->nd < 0 || a->nd > kMaxRank || (writable && !(a->flags & kNpyWriteable))) return false;
  if (a->descr->byteorder == '>') return false;
  const std::optional<dl::dtype> dtype = numpy_dtype(a->descr->type_num);
  if (!dtype) return false;
  const Py_ssize_t itemsize = dtype->bits / 8;
  d.ndim = std::size_t(a->nd);
  for (std::size_t i = 0; i < d.ndim; ++i) {
    if (a->strides[i] % itemsize != 0) return false;
    d.shape[i] = a->dimensions[i];
    d.strides[i] = a->strides[i] / itemsize;
  }
  d.data = a->data;
  d.device_type = int(nb::device::cpu::value);
  d.dtype = *dtype;
  return true;
}

template <bool Writable>
TensorArg convert(std::string_view op, std::string_view name, nb::handle obj, std::optional<DType> hint,
                  bool optional) {
  TensorArg out;
  if (obj.is_none()) {
    if (optional) return out;
    fail(op, name, "None", "is required: an array (numpy, torch, or any object with __dlpack__)");
  }
  std::optional<DType> named;  // the dtype of a raw-storage view
  Descriptor d;
  bool have = false;
  if (is_numpy_array(Py_TYPE(obj.ptr())) && numpy_descriptor(obj.ptr(), Writable, d)) {
    have = true;
    out.source = nb::borrow(obj);  // the array the view reads, for as long as the view is used
  } else if (const DLPackExchangeAPIC* api = exchange_api(obj)) {
    dl::dltensor t{};
    if (api->dltensor_from_py_object_no_sync(obj.ptr(), &t) == 0) {
      if (t.ndim < 0 || t.ndim > kMaxRank) {
        fail(op, std::string(name) + ".ndim", std::to_string(t.ndim), "kvinfer tensors have at most 6 dims");
      }
      have = true;
      d.data = static_cast<std::uint8_t*>(t.data) + t.byte_offset;
      d.device_type = t.device.device_type;
      d.device_id = t.device.device_id;
      d.ndim = std::size_t(t.ndim);
      d.dtype = t.dtype;
      std::int64_t contiguous = 1;
      for (std::size_t i = d.ndim; i-- > 0;) {
        d.shape[i] = t.shape[i];
        d.strides[i] = t.strides ? t.strides[i] : contiguous;
        contiguous *= t.shape[i];
      }
    } else {
      PyErr_Clear();  // a dtype the exporter cannot describe: the DLPack path below
    }
  }
  if (!have) {
    using Array = std::conditional_t<Writable, nb::ndarray<>, nb::ndarray<nb::ro>>;
    Array array;
    // No implicit conversion: a call never copies a tensor.
    bool ok = nb::try_cast<Array>(obj, array, /*convert=*/false);
    if (!ok) {
      if (std::optional<RawDType> raw = raw_dtype(obj)) {
        nb::object uint_dtype = nb::str(raw->uint_name);
        const std::string module = nb::cast<std::string>(nb::str(obj.type().attr("__module__")));
        if (module.rfind("torch", 0) == 0) uint_dtype = nb::module_::import_("torch").attr(raw->uint_name);
        out.source = obj.attr("view")(uint_dtype);
        ok = nb::try_cast<Array>(out.source, array, /*convert=*/false);
        named = raw->dtype;
      }
    }
    if (!ok) {
      const bool read_only = Writable && nb::try_cast<nb::ndarray<nb::ro>>(obj, out.array, false);
      fail(op, name, py_type_name(obj),
           read_only ? "must be writable (it is an output)"
                     : "must be an array with __dlpack__ or the buffer protocol (numpy, torch, ...)");
    }
    out.array = nb::ndarray<nb::ro>(array);
    d.ndim = array.ndim();
    if (d.ndim > std::size_t(kMaxRank)) {
      fail(op, std::string(name) + ".ndim", std::to_string(d.ndim), "kvinfer tensors have at most 6 dims");
    }
    d.data = const_cast<void*>(static_cast<const void*>(array.data()));
    d.device_type = array.device_type();
    d.device_id = array.device_id();
    d.dtype = array.dtype();
    for (std::size_t i = 0; i < d.ndim; ++i) {
      d.shape[i] = std::int64_t(array.shape(i));
      d.strides[i] = std::int64_t(array.stride(i));
    }
  }

  const std::size_t rank = d.ndim;
  std::array<std::int64_t, kMaxRank>& shape = d.shape;
  std::array<std::int64_t, kMaxRank>& strides = d.strides;
  std::int64_t numel = 1;
  for (std::size_t i = 0; i < rank; ++i) numel *= shape[i];
  if (numel == 0) {
    // An empty array addresses no element; exporters give it arbitrary strides (numpy's
    // DLPack: zeros), so it is taken as contiguous.
    std::int64_t st = 1;
    for (std::size_t i = rank; i-- > 0;) {
      strides[i] = st;
      st *= std::max<std::int64_t>(shape[i], 1);
    }
  }
  const dl::dtype t = d.dtype;
  std::optional<DType> dtype = named ? named : from_dlpack(t);
  const bool raw16 = dl::dtype_code(t.code) == dl::dtype_code::UInt && t.bits == 16 && t.lanes == 1;
  if (!named && hint && ((raw16 && is_half(*hint)) || (dtype == DType::kU8 && is_fp8(*hint)))) dtype = hint;
  if (!dtype) {
    const std::string rule =
        raw16
            ? "a uint16 array is read as float16/bfloat16 bits only where the call names that dtype "
              "(q_data_type, kv_data_type, o_data_type); pass ml_dtypes.bfloat16 or float16 arrays otherwise"
            : "kvinfer tensors are float32, float16, bfloat16, float8_e4m3fn, float8_e5m2, uint8, int32, "
              "int64 "
              "or bool";
    fail(op, std::string(name) + ".dtype", dlpack_dtype_name(t), rule);
  }
  const Device device = to_device(op, name, d.device_type, d.device_id, obj);
  out.view = TensorView(d.data, *dtype, std::span<const std::int64_t>(shape.data(), rank),
                        std::span<const std::int64_t>(strides.data(), rank), device);
  return out;
}

}  // namespace

Device device_arg(std::string_view op, std::string_view name, nb::handle obj) {
  nb::ndarray<nb::ro> array;
  if (!nb::try_cast<nb::ndarray<nb::ro>>(obj, array, /*convert=*/false)) {
    if (raw_dtype(obj)) return tensor_arg(op, name, obj).view.device();
    fail(op, name, py_type_name(obj),
         "must be an array with __dlpack__ or the buffer protocol (numpy, torch, ...)");
  }
  return to_device(op, name, array.device_type(), array.device_id(), obj);
}

TensorArg tensor_arg(std::string_view op, std::string_view name, nb::handle obj, std::optional<DType> hint,
                     bool optional) {
  return convert<false>(op, name, obj, hint, optional);
}

TensorArg tensor_out(std::string_view op, std::string_view name, nb::handle obj, std::optional<DType> hint,
                     bool optional) {
  return convert<true>(op, name, obj, hint, optional);
}

DType dtype_arg(std::string_view op, std::string_view name, std::string_view value) {
  std::string v(value);
  if (v.rfind("torch.", 0) == 0) v = v.substr(6);
  // FlashInfer's (torch's) names of the OCP fp8 types and the usual aliases.
  if (v == "float8_e4m3fn") v = "float8_e4m3";
  if (v == "half") v = "float16";
  if (v == "float") v = "float32";
  if (std::optional<DType> d = parse_dtype(v)) return *d;
  fail(op, name, std::string(value),
       "must be one of float16, bfloat16, float8_e4m3fn, float8_e5m2, float32, uint8, int32, int64, bool "
       "(a torch dtype, a numpy dtype or its name)");
}

AttentionOptions attention_options(std::string_view op, MaskMode mask, std::string_view pos_encoding_mode,
                                   int window_left, float logits_soft_cap, std::optional<float> sm_scale,
                                   float rope_scale, float rope_theta, std::string_view backend) {
  AttentionOptions o;
  o.mask_mode = mask;
  o.window_left = window_left;
  o.logits_soft_cap = logits_soft_cap;
  o.sm_scale = sm_scale;
  o.pos_encoding = pos_encoding_arg(op, pos_encoding_mode);
  o.rope_scale = rope_scale;
  o.rope_theta = rope_theta;
  o.backend = backend_arg(op, backend);
  return o;
}

PageTableArg page_table_arg(std::string_view op, nb::handle indptr, nb::handle indices, nb::handle last_page_len) {
  return {.indptr = tensor_arg(op, "kv_indptr", indptr),
          .indices = tensor_arg(op, "kv_indices", indices),
          .last_page_len = tensor_arg(op, "kv_last_page_len", last_page_len)};
}

KVLayout kv_layout_arg(std::string_view op, std::string_view value) {
  if (std::optional<KVLayout> l = parse_kv_layout(value)) return *l;
  fail(op, "kv_layout", std::string(value), "must be \"NHD\" or \"HND\"");
}

PosEncoding pos_encoding_arg(std::string_view op, std::string_view value) {
  if (value == "NONE") return PosEncoding::kNone;
  if (value == "ROPE_LLAMA") return PosEncoding::kRopeLlama;
  if (value == "ALIBI") return PosEncoding::kAlibi;
  fail(op, "pos_encoding_mode", std::string(value), "must be \"NONE\", \"ROPE_LLAMA\" or \"ALIBI\"");
}

BitOrder bit_order_arg(std::string_view op, std::string_view value) {
  if (value == "big") return BitOrder::kBig;
  if (value == "little") return BitOrder::kLittle;
  fail(op, "bitorder", std::string(value), "must be \"big\" or \"little\"");
}

PrefillBackend backend_arg(std::string_view op, std::string_view value) {
  if (value == "auto") return PrefillBackend::kAuto;
  if (value == "fa2") return PrefillBackend::kPortable;
  if (value == "fa3") return PrefillBackend::kHopper;
  throw NotSupported(op, "backend", value,
                     "kvinfer has \"auto\", \"fa2\" (portable mma.sync kernels) and \"fa3\" (Hopper wgmma)");
}

nb::object to_python(Tensor t, nb::handle like) {
  auto* owned = new Tensor(std::move(t));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  const TensorView& v = owned->view();
  std::array<std::size_t, kMaxRank> shape{};
  for (int i = 0; i < v.rank(); ++i) shape[std::size_t(i)] = std::size_t(v.size(i));
  dl::dtype dt{};
  switch (v.dtype()) {
    case DType::kU8:
      dt = nb::dtype<std::uint8_t>();
      break;
    case DType::kI32:
      dt = nb::dtype<std::int32_t>();
      break;
    case DType::kI64:
      dt = nb::dtype<std::int64_t>();
      break;
    case DType::kF32:
      dt = nb::dtype<float>();
      break;
    case DType::kBool:
      dt = nb::dtype<bool>();
      break;
    default:
      fail("to_python", "dtype", std::string(dtype_name(v.dtype())), "is not returned by kvinfer");
  }
  const int device_type = v.device().is_cpu() ? int(nb::device::cpu::value) : int(nb::device::cuda::value);
  const std::string module = nb::cast<std::string>(nb::str(like.type().attr("__module__")));
  if (module.rfind("torch", 0) == 0) {
    return nb::ndarray<nb::pytorch>(v.data(), std::size_t(v.rank()), shape.data(), owner, nullptr, dt,
                                    device_type, v.device().index)
        .cast();
  }
  if (!v.device().is_cpu()) {
    // Any other framework: a DLPack-capable nanobind array that it can import.
    return nb::ndarray<>(v.data(), std::size_t(v.rank()), shape.data(), owner, nullptr, dt, device_type,
                         v.device().index)
        .cast();
  }
  return nb::ndarray<nb::numpy>(v.data(), std::size_t(v.rank()), shape.data(), owner, nullptr, dt,
                                device_type, 0)
      .cast();
}

}  // namespace kvinfer::python

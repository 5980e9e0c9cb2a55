# SPDX-License-Identifier: Apache-2.0
"""The DLPack C exchange API path (DLPack 1.2's __dlpack_c_exchange_api__, which torch
tensors expose): an array type that has only that attribute (no __dlpack__, no buffer
protocol), its C function written with ctypes over numpy arrays, converts without a
copy and gives the results of the plain numpy call."""

from __future__ import annotations

import ctypes

import numpy as np
import reference as ref
from conftest import page_table, workspace

import kvinfer


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class Header(ctypes.Structure):
    _fields_ = [("version", Version), ("prev_api", ctypes.c_void_p)]


FROM_PY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(DLTensor))


class ExchangeAPI(ctypes.Structure):
    _fields_ = [("header", Header), ("managed_tensor_allocator", ctypes.c_void_p),
                ("managed_tensor_from_py_object_no_sync", ctypes.c_void_p),
                ("managed_tensor_to_py_object_no_sync", ctypes.c_void_p),
                ("dltensor_from_py_object_no_sync", FROM_PY), ("current_work_stream", ctypes.c_void_p)]


_CODES = {"f": 2, "i": 0, "u": 1, "b": 6}
calls = []


class Exported:
    """A numpy array seen only through the C exchange API."""

    def __init__(self, a: np.ndarray):
        self.a = a
        self.shape = a.shape
        self.dtype = a.dtype
        self._shape = (ctypes.c_int64 * a.ndim)(*a.shape)
        self._strides = (ctypes.c_int64 * a.ndim)(*(s // a.itemsize for s in a.strides))


@FROM_PY
def _dltensor_from_py_object(obj_ptr, out):
    obj = ctypes.cast(obj_ptr, ctypes.py_object).value
    calls.append(obj)
    a = obj.a
    t = out.contents
    t.data = a.ctypes.data
    t.device = DLDevice(1, 0)
    t.ndim = a.ndim
    t.dtype = DLDataType(_CODES[a.dtype.kind], a.dtype.itemsize * 8, 1)
    t.shape = obj._shape
    t.strides = obj._strides
    t.byte_offset = 0
    return 0


_API = ExchangeAPI(Header(Version(1, 2), None), None, None, None, _dltensor_from_py_object, None)
_NAME = ctypes.c_char_p(b"dlpack_exchange_api")
_new = ctypes.pythonapi.PyCapsule_New
_new.restype = ctypes.py_object
_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
Exported.__dlpack_c_exchange_api__ = _new(ctypes.addressof(_API), _NAME, None)


def test_exchange_api_path(rng):
    page_size, hq, hk, d = 16, 8, 2, 64
    table = page_table(rng, [33, 5], page_size)
    cache = ref.make(rng, (table[3], 2, page_size, hk, d))
    q_big = ref.make(rng, (2, 2 * hq, d))
    q = q_big[:, hq:]  # a strided view: the exchange path carries its strides
    w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(workspace())
    w.plan(*table[:3], hq, hk, d, page_size)
    expected = w.run(q, cache)
    out = np.empty_like(expected)
    calls.clear()
    w.run(Exported(q), Exported(cache), out=Exported(out))
    assert len(calls) == 3
    assert (out.view(np.uint16) == expected.view(np.uint16)).all()

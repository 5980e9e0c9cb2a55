# SPDX-License-Identifier: Apache-2.0
"""Reference cycles through the arrays a wrapper's C++ side holds (its workspace
buffers, the page indices and masks a plan reads) are collected: an interpreter that
exits with such a cycle alive prints no nanobind leak report.

Each case runs in a fresh interpreter, since nanobind reports at interpreter exit."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import kvinfer

# Arrays that can hold a reference back to the wrapper (an attribute of an ndarray
# subclass), as a framework tensor with attributes can; the cycle runs
# Python wrapper -> C++ wrapper -> array -> Python wrapper.
_PRELUDE = """
import gc
import weakref
import numpy as np
import kvinfer

class Owned(np.ndarray):
    pass

def owned(a):
    return np.asarray(a).view(Owned)

i32 = lambda x: owned(np.asarray(x, np.int32))
"""

CASES = {
    "decode workspace": """
        ws = owned(np.zeros(16 << 20, np.uint8))
        w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(ws)
        ws.owner = w
    """,
    "decode plan indices": """
        w = kvinfer.BatchDecodeWithPagedKVCacheWrapper(np.zeros(16 << 20, np.uint8))
        indices = i32([0])
        w.plan(i32([0, 1]), indices, i32([1]), 4, 4, 64, 16)
        indices.owner = w
    """,
    "paged prefill int workspace": """
        w = kvinfer.BatchPrefillWithPagedKVCacheWrapper(np.zeros(16 << 20, np.uint8))
        iw = owned(np.zeros(1 << 20, np.uint8))
        w.reset_workspace_buffer(w.float_workspace_buffer, iw)
        iw.owner = w
    """,
    "ragged prefill": """
        ws = owned(np.zeros(16 << 20, np.uint8))
        w = kvinfer.BatchPrefillWithRaggedKVCacheWrapper(ws)
        ws.owner = [w]
    """,
    "cascade": """
        ws = owned(np.zeros(16 << 20, np.uint8))
        w = kvinfer.MultiLevelCascadeAttentionWrapper(2, ws)
        ws.owner = w
    """,
    "mla": """
        ws = owned(np.zeros(16 << 20, np.uint8))
        w = kvinfer.BatchMLAPagedAttentionWrapper(ws)
        ws.owner = w
    """,
}


def _run(script: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(kvinfer.__file__)))
    env["PYTHONPATH"] = package_root + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", _PRELUDE + script], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("case", sorted(CASES))
def test_cycle_through_cpp_state_is_collected(case):
    # The cycle made in a function: unreachable once it returns.
    make = "def make():\n" + textwrap.indent(textwrap.dedent(CASES[case]), "    ") + "    return weakref.ref(w)\n"
    r = _run(make + "ref = make()\ngc.collect()\nprint('alive' if ref() else 'collected')\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "collected"
    assert "leaked" not in r.stderr, r.stderr


def test_cycle_alive_at_exit_is_not_reported_leaked():
    # The cycle is still referenced by module globals when the interpreter exits.
    r = _run(textwrap.dedent(CASES["decode workspace"]))
    assert r.returncode == 0, r.stderr
    assert "nanobind: leaked" not in r.stderr, r.stderr

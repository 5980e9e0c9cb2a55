# SPDX-License-Identifier: Apache-2.0
"""The end-to-end example (examples/python/llama_paged.py) as a test: a transformers
Llama-style model generating through kvinfer's paged cache, checked against the
model's own attention. Skips without torch and transformers."""

from __future__ import annotations

import importlib.util
import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

HERE = os.path.dirname(os.path.abspath(__file__))


def test_llama_paged_generation(tmp_path):
    path = os.path.join(HERE, "..", "..", "examples", "python", "llama_paged.py")
    spec = importlib.util.spec_from_file_location("llama_paged", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    assert example.main(["--tokens", "32", "--json", str(tmp_path / "llama.json")]) == 0

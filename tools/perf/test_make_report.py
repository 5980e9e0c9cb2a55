# SPDX-License-Identifier: Apache-2.0
"""Tests of tools/perf/make_report.py on the fixture transcribed from the experiment log
(testdata/log-4935be4) and on small hand-made GPU-check results.

  python3 -m unittest discover -s tools/perf -v     # stdlib only; the plot test needs matplotlib
"""
import copy
import importlib.util
import io
import json
import os
import shutil
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIXTURE = os.path.join(HERE, "testdata", "log-4935be4")

spec = importlib.util.spec_from_file_location("make_report", os.path.join(HERE, "make_report.py"))
make_report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_report)


def run(*args):
    """make_report's exit code and its stdout + stderr."""
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(out):
        rc = make_report.main(list(args))
    return rc, out.getvalue()


def table_row(text, first_cell):
    """The cells of the markdown table row whose first cell is first_cell."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no table row '{first_cell}'")


class FixtureReport(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.out = os.path.join(cls.tmp, "performance.md")
        rc, log = run("--data", FIXTURE, "--out", cls.out, "--img", os.path.join(cls.tmp, "img"), "--no-plots")
        assert rc == 0, log
        with open(cls.out) as f:
            cls.text = f.read()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_header_names_the_run_and_its_ceilings(self):
        t = self.text
        self.assertTrue(t.startswith(make_report.MARKER + "tools/perf/testdata/log-4935be4;"))
        self.assertIn("| date, commit | 2026-12-01, 4935be4 |", t)
        self.assertIn("NVIDIA H200 (132 SMs, compute capability 9.0, CUDA runtime 13.0, driver 580.159.04)", t)
        self.assertIn("| read bandwidth | 4.50 TB/s", t)
        self.assertIn("| copy bandwidth | 4.23 TB/s", t)
        self.assertIn("| bf16 GEMM | 765 TFLOP/s", t)
        self.assertIn("335 ran, 0 skipped, 0 failed", t)
        self.assertIn("> **Provisional.**", t)  # a fixture says what it is

    def test_decode_against_the_log(self):
        # The log's run 9 table: 16x8k 126.14 µs, of read 0.94, cuDNN 125.14, ours/cuDNN 1.008;
        # FlashInfer 132.11 (its run 7).
        self.assertEqual(table_row(self.text, "16x8k"),
                         ["16x8k", "126.14", "4.26", "0.94", "125.14", "1.008", "132.11", "0.955"])
        self.assertEqual(table_row(self.text, "64x16k")[5], "1.012")
        self.assertEqual(table_row(self.text, "16x8k skewed")[1:], ["0.86", "0.94"])
        self.assertEqual(table_row(self.text, "64x4k group1")[1], "0.93")
        self.assertEqual(table_row(self.text, "16x8k fp8e4m3")[-1], "0.572")

    def test_prefill_mla_cascade_layers_append(self):
        t = self.text
        ragged = table_row(t, "16x1k d128")
        self.assertEqual(ragged[:3], ["16x1k d128", "734.30", "374"])
        self.assertEqual(ragged[5], "0.909")  # FA2 took 1.10x our time in that run
        self.assertIn("| 4x4k d256 causal | 2220.8 | 495 | 0.63 | 0.989 |", t)
        self.assertEqual(table_row(t, "128 x 8k H128")[4:], ["226", "0.29"])
        self.assertEqual(table_row(t, "64 x (32k shared + 256)")[1:], ["113.80", "730.20", "0.156"])
        self.assertEqual(table_row(t, "1x1k")[1:4], ["13.99", "12.53", "1.46"])
        self.assertEqual(table_row(t, "even 8x625")[4:7], ["12.90", "3.18", "0.75"])

    def test_missing_parts_are_named(self):
        self.assertIn("`bench_cpu_attention` (no JSON", self.text)
        self.assertIn("decode peer torch SDPA flash", self.text)
        self.assertNotIn("FA2 µs", self.text)  # a column without figures is left out

    def test_every_table_row_has_its_header_width(self):
        width = None
        for line in self.text.splitlines():
            if line.startswith("|"):
                n = line.count("|")
                width = n if width is None else width
                self.assertEqual(n, width, line)
            else:
                width = None

    def test_deterministic(self):
        other = os.path.join(self.tmp, "again.md")
        rc, log = run("--data", FIXTURE, "--out", other, "--img", os.path.join(self.tmp, "img"), "--no-plots")
        self.assertEqual(rc, 0, log)
        with open(other) as f:
            self.assertEqual(f.read(), self.text)

    def test_length_is_a_reference_not_a_diary(self):
        self.assertLess(len(self.text.splitlines()), 400)


class CheckMode(unittest.TestCase):
    def test_committed_reference_is_up_to_date(self):
        rc, log = run("--check")
        self.assertEqual(rc, 0, log)

    def test_a_changed_document_fails(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "performance.md")
            self.assertEqual(run("--data", FIXTURE, "--out", out, "--no-plots")[0], 0)
            # Checked against the data it was made from (docs/data holds a GPU check of its own).
            self.assertEqual(run("--check", "--data", FIXTURE, "--out", out)[0], 0)
            with open(out) as f:
                text = f.read()
            with open(out, "w") as f:
                f.write(text.replace("126.14", "126.15"))
            rc, log = run("--check", "--data", FIXTURE, "--out", out)
            self.assertEqual(rc, 1)
            self.assertIn("126.15", log)  # the diff shows what differs


class Inputs(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        with open(os.path.join(FIXTURE, "results.json")) as f:
            self.results = json.load(f)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def write(self, name, obj):
        with open(os.path.join(self.tmp, name), "w") as f:
            f.write(obj if isinstance(obj, str) else json.dumps(obj))

    def report(self):
        out = os.path.join(self.tmp, "out.md")
        rc, log = run("--data", self.tmp, "--out", out, "--no-plots")
        text = open(out).read() if rc == 0 else ""
        return rc, log, text

    def test_a_plain_gpu_check(self):
        # As scripts/gpu-check.sh writes it (no fixture note, no FlashInfer file), with a
        # failed benchmark and the date and commit in build.log beside it.
        r = copy.deepcopy(self.results)
        del r["fixture"], r["run"]
        r["status"] = 1
        for b in r["benchmarks"]:
            if b["name"] == "bench_mla":
                b.update(rc=124, result=None, error="no JSON: timeout")
        self.write("results.json", r)
        self.write("build.log", "date: 2027-01-02T03:04:05Z\ncommit: abcdef1 (dirty)\n")
        rc, log, text = self.report()
        self.assertEqual(rc, 0, log)
        self.assertNotIn("Provisional", text)
        self.assertIn("| date, commit | 2027-01-02T03:04:05Z, abcdef1 (dirty) |", text)
        self.assertIn("FAIL (status 1)", text)
        self.assertIn("`bench_mla` (no JSON: timeout)", text)
        self.assertNotIn("## MLA", text)
        self.assertIn("FlashInfer's decode", text)  # named as missing
        self.assertEqual(table_row(text, "16x8k")[-1], "1.008")  # ours/cuDNN, no FlashInfer columns

    def test_flashinfer_errors_and_all_peers(self):
        r = copy.deepcopy(self.results)
        for b in r["benchmarks"]:
            if b["name"] == "peer_decode":
                rows = b["result"]["rows"]
                rows.append({"name": "16x8192", "peer": "torch sdpa flash", "median_us": 131.0, "GBps": 4100.0})
                rows.append({"name": "1x32768", "peer": "torch sdpa flash", "error": "not supported"})
        self.write("results.json", r)
        fi = json.load(open(os.path.join(FIXTURE, "peer_flashinfer.json")))
        fi["rows"] = [row for row in fi["rows"] if row["kind"] == "decode_paged"]
        fi["rows"].append(dict(fi["rows"][1], use_tensor_cores=False, time_us=195.0))  # the slower path
        fi["rows"].append(dict(fi["rows"][0], error="RuntimeError: x", time_us=1.0))  # failed: ignored
        self.write("fi.json", fi)
        rc, log, text = self.report()
        self.assertEqual(rc, 0, log)
        row = table_row(text, "16x8k")
        self.assertEqual(row[6:], ["131.00", "0.963", "132.11", "0.955"])  # FA2, then FlashInfer's faster path
        self.assertEqual(table_row(text, "1x32k")[6:8], ["-", "-"])
        self.assertIn("prefill peer FlashInfer", text)

    def test_flashinfer_mla_peer_and_its_own_device_call(self):
        self.write("results.json", self.results)
        fi = json.load(open(os.path.join(FIXTURE, "peer_flashinfer.json")))
        mla = {"kind": "mla_decode", "batch": 128, "kv_len": 4096, "heads": 128, "page_size": 64, "TFLOPs": 450.0}
        fi["rows"] = [dict(mla, backend="fa3", time_us=336.0), dict(mla, backend="fa2", time_us=500.0),
                      dict(mla, backend="fa3", kv_len=8192, error="RuntimeError: x", time_us=1.0)]
        fi["run"] = {"commit": "abcdef1", "date": "2027-01-02"}
        self.write("fi.json", fi)
        rc, log, text = self.report()
        self.assertEqual(rc, 0, log)
        # ours 671.95 µs against FlashInfer's faster backend; a failed row is no figure
        self.assertEqual(table_row(text, "128 x 4k H128")[-3:], ["336.00", "450", "2.000"])
        self.assertEqual(table_row(text, "128 x 8k H128")[-3:], ["-", "-", "-"])
        self.assertNotIn("MLA peer", text)
        self.assertIn("(in its own device call, abcdef1 on 2027-01-02)", text)

    def test_python_host_cost_and_end_to_end_example(self):
        self.write("results.json", self.results)
        self.write("host.json", {"runs_per_step": 32, "steps": 200, "kv_len": 1024, "kvinfer": "0.1.0",
                                 "flashinfer": "0.7.4", "torch": "2.11", "rows": [
                                     {"impl": "kvinfer python", "batch": 64, "step_us": 400.0, "plan_us": 64.0,
                                      "per_run_us": 10.5},
                                     {"impl": "kvinfer c++", "batch": 64, "step_us": 240.0, "plan_us": 36.0,
                                      "per_run_us": 6.375},
                                     {"impl": "flashinfer python", "batch": 64, "step_us": 1600.0, "plan_us": 350.0,
                                      "per_run_us": 39.0}]})
        self.write("llama.json", {"transformers": "4.57", "requests": [5, 9], "tokens_per_request": 32,
                                  "max_logit_error": 0.0123, "tolerance": 0.05, "tokens_checked": 60,
                                  "token_mismatches": [], "kvinfer_tokens_per_s": 134.2,
                                  "model_attention_tokens_per_s": 19.4})
        rc, log, text = self.report()
        self.assertEqual(rc, 0, log)
        self.assertEqual(table_row(text, "64"), ["64", "400.0", "64.0", "10.5", "240.0", "6.4", "+4.1", "1600.0",
                                                 "39.0", "0.250"])
        self.assertIn("## End-to-end example", text)
        self.assertEqual(table_row(text, "134"), ["134", "19", "0.0123", "0.05", "60", "0"])
        self.assertNotIn("the end-to-end example (", text)  # not named as missing

    def test_bad_inputs_exit_2_with_the_reason(self):
        rc, log, _ = self.report()
        self.assertEqual(rc, 2)
        self.assertIn("holds 0 GPU check results", log)
        self.write("a.json", self.results)
        self.write("b.json", self.results)
        rc, log, _ = self.report()
        self.assertEqual(rc, 2)
        self.assertIn("holds 2 GPU check results (a.json, b.json)", log)
        os.remove(os.path.join(self.tmp, "b.json"))
        self.write("c.json", "{not json")
        rc, log, _ = self.report()
        self.assertEqual(rc, 2)
        self.assertIn("c.json: not a readable JSON file", log)
        self.write("c.json", {"rows": []})
        rc, log, _ = self.report()
        self.assertEqual(rc, 2)
        self.assertIn("c.json: neither a GPU check's results.json", log)
        rc, log = run("--data", os.path.join(self.tmp, "nowhere"), "--out", os.path.join(self.tmp, "x.md"))
        self.assertEqual(rc, 2)
        self.assertIn("not a folder", log)


@unittest.skipIf(importlib.util.find_spec("matplotlib") is None, "matplotlib not installed")
class Plots(unittest.TestCase):
    def test_plots_are_written_and_reproducible(self):
        with tempfile.TemporaryDirectory() as tmp:
            img = os.path.join(tmp, "img")
            out = os.path.join(tmp, "p.md")
            self.assertEqual(run("--data", FIXTURE, "--out", out, "--img", img)[0], 0)
            first = {}
            for name in sorted(os.listdir(img)):
                with open(os.path.join(img, name), "rb") as f:
                    first[name] = f.read()
            self.assertEqual(sorted(first), sorted(n + ".png" for n in make_report.PLOTS))
            for data in first.values():
                self.assertTrue(data.startswith(b"\x89PNG"))
            text = open(out).read()
            for name in first:
                self.assertIn(f"(img/{name})", text)
            self.assertEqual(run("--data", FIXTURE, "--out", out, "--img", img)[0], 0)
            for name, data in first.items():
                with open(os.path.join(img, name), "rb") as f:
                    self.assertEqual(f.read(), data, name)


if __name__ == "__main__":
    unittest.main()

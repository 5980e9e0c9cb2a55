# SPDX-License-Identifier: Apache-2.0
"""Make the staged FlashInfer bundle (<repo>/.deps/flashinfer, built by stage.sh)
importable: unpack its .tar.xz once into a writable folder, put it first on
sys.path and point FlashInfer's JIT workspace there.  Import this before torch
or flashinfer:

    import fi_bundle; info = fi_bundle.activate()   # then: import flashinfer

activate(allow_jit=False) sets FLASHINFER_DISABLE_JIT=1, so a module that was not
prebuilt fails with an error instead of compiling on the GPU machine."""
import glob
import os
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_BUNDLE = os.path.normpath(os.path.join(HERE, "..", "..", ".deps", "flashinfer"))


class BundleError(RuntimeError):
    pass


def activate(bundle_dir=None, extract_root=None, allow_jit=True, quiet=False):
    bundle_dir = bundle_dir or os.environ.get("FI_BUNDLE_DIR") or DEFAULT_BUNDLE
    say = (lambda *a: None) if quiet else (lambda *a: print("[fi_bundle]", *a, file=sys.stderr, flush=True))
    say(f"python {sys.version.split()[0]} at {sys.executable}")
    if sys.version_info[:2] != (3, 12):
        raise BundleError(
            f"the bundle's apache-tvm-ffi is a cp312 build; this is Python "
            f"{sys.version_info[0]}.{sys.version_info[1]} ({sys.executable}). Re-stage with a matching "
            f"tvm-ffi wheel (stage.sh, TVM wheel --python-version) or run with python3.12.")
    archives = sorted(glob.glob(os.path.join(bundle_dir, "flashinfer-*.tar.xz")))
    if not archives:
        raise BundleError(f"no flashinfer-*.tar.xz in {bundle_dir}: run bench/flashinfer/stage.sh and carry .deps")
    archive = archives[-1]
    st = os.stat(archive)
    tag = f"{os.path.basename(archive)[:-7]}-{st.st_size}"
    root = extract_root or os.environ.get("FI_BUNDLE_EXTRACT") or os.path.join(
        os.environ.get("TMPDIR", "/tmp"), "fi-bundle")
    dest = os.path.join(root, tag)
    site = os.path.join(dest, "site")
    marker = os.path.join(dest, ".complete")
    if not os.path.exists(marker):
        say(f"unpacking {archive} ({st.st_size} bytes) -> {dest}")
        os.makedirs(dest, exist_ok=True)
        with tarfile.open(archive, "r:xz") as tf:
            try:
                tf.extractall(dest, filter="data")
            except TypeError:  # Python without extraction filters
                tf.extractall(dest)
        open(marker, "w").close()
    if site not in sys.path:
        sys.path.insert(0, site)
    # FlashInfer writes generated sources (and JIT builds, if any) under this base.
    os.environ.setdefault("FLASHINFER_WORKSPACE_BASE", os.path.join(dest, "ws"))
    # Same arch tag the modules were built for (an H200 reports 9.0 -> "90a" anyway).
    os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", "9.0a")
    if not allow_jit:
        os.environ["FLASHINFER_DISABLE_JIT"] = "1"
    aot = os.path.join(site, "flashinfer", "data", "aot")
    mods = sorted(os.listdir(aot)) if os.path.isdir(aot) else []
    say(f"site {site}; {len(mods)} prebuilt modules; JIT {'allowed' if allow_jit else 'disabled'}")
    return {"archive": archive, "site": site, "aot_modules": mods,
            "workspace": os.environ["FLASHINFER_WORKSPACE_BASE"], "allow_jit": allow_jit}

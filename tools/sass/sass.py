#!/usr/bin/env python3
"""sass.py: compiles a kernel source with NVRTC to Hopper machine code and reads it, with no GPU.

NVRTC emits CUBIN for a real architecture without a device, and nvdisasm/cuobjdump read it, so
the questions a profile would answer first (registers, stack frame and spills, how many
instructions a loop body holds, whether an array went to local memory) are answered here, at no
device time. All three tools come as wheels:

    python3 -m pip install --target DIR nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-nvdisasm nvidia-cuda-cuobjdump

Usage (the full source from `cargo run --release --example kernel_source -- eval.cu`):

    tools/sass/sass.py FULL.cu [-D NAME=VALUE ...] [--kernel REGEX] [--sass OUT.sass] [--tools DIR]

Prints, per kernel: registers, stack frame, spill stores/loads (bytes, from ptxas -v), local
loads/stores in the code (callees included: ptxas places them in the kernel's section), and the
instruction count. The options are grove's own (`src/backend/cuda/nvrtc.rs`:
`--gpu-architecture=sm_90 --std=c++17 --fmad=false`).
"""
import argparse
import collections
import ctypes
import os
import re
import subprocess
import sys
import tempfile


def find(tools, name):
    for root, _, files in os.walk(tools):
        if name in files:
            return os.path.join(root, name)
    sys.exit(f"sass.py: {name} not found under {tools} (install the wheels named in the docstring)")


def compile_cubin(lib, src, name, opts):
    # NVRTC opens its builtins library by name: load it first from beside libnvrtc.
    for f in os.listdir(os.path.dirname(lib)):
        if f.startswith("libnvrtc-builtins.so"):
            ctypes.CDLL(os.path.join(os.path.dirname(lib), f), mode=ctypes.RTLD_GLOBAL)
    nvrtc = ctypes.CDLL(lib)
    prog = ctypes.c_void_p()
    check = lambda r, what: r == 0 or sys.exit(f"sass.py: {what} failed with NVRTC error {r}")
    check(nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), name.encode(), 0, None, None), "nvrtcCreateProgram")
    argv = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    r = nvrtc.nvrtcCompileProgram(prog, len(opts), argv)
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    if r != 0:
        sys.exit(f"sass.py: compile failed:\n{log.value.decode(errors='replace')}")
    text = log.value.decode(errors="replace")
    if os.environ.get("GROVE_SASS_LOG") and text.strip():
        print(text, file=sys.stderr)
    check(nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "nvrtcGetCUBINSize")
    cubin = ctypes.create_string_buffer(size.value)
    check(nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
    return cubin.raw, text


def spills(log):
    """{entry function: (spill store bytes, spill load bytes)} from ptxas -v's log, the entry's own
    and those of the functions it calls (listed after it until the next entry)."""
    out, entry = {}, None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            entry = m.group(1)
            out.setdefault(entry, (0, 0))
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and entry:
            st, ld = out[entry]
            out[entry] = (st + int(m.group(1)), ld + int(m.group(2)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("source")
    ap.add_argument("-D", action="append", default=[], help="a define, NAME=VALUE")
    ap.add_argument("--kernel", default=".", help="regex on kernel names to report")
    ap.add_argument("--sass", help="write the disassembly here")
    ap.add_argument("--tools", default=os.environ.get("GROVE_SASS_TOOLS", "/work/tools-pip"))
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--lineinfo", action="store_true", help="compile with line tables, so that --sass names each instruction's source line")
    a = ap.parse_args()

    src = open(a.source).read()
    opts = [f"--gpu-architecture={a.arch}", "--std=c++17", "--fmad=false"] + [f"-D{d}" for d in a.D] + ["--ptxas-options=-v"]
    if a.lineinfo:
        opts.append("--generate-line-info")
    cubin, log = compile_cubin(find(a.tools, "libnvrtc.so.13"), src, os.path.basename(a.source), opts)
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
        path = f.name
    usage = subprocess.run([find(a.tools, "cuobjdump"), "--dump-resource-usage", path], capture_output=True, text=True).stdout
    sass = subprocess.run([find(a.tools, "nvdisasm"), "-c", "-g", path], capture_output=True, text=True).stdout
    os.unlink(path)
    if a.sass:
        open(a.sass, "w").write(sass)

    res = {}
    name = None
    for line in usage.splitlines():
        m = re.search(r"Function (\S+):", line)
        if m:
            name = m.group(1)
        m = re.search(r"REG:(\d+) STACK:(\d+)", line)
        if m and name:
            res[name] = (int(m.group(1)), int(m.group(2)))
    counts = collections.defaultdict(collections.Counter)
    name = None
    for line in sass.splitlines():
        m = re.match(r"\s*\.text\.(\S+):", line)
        if m:
            name = m.group(1)
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if m and name:
            op = m.group(1).split(".")[0]
            counts[name]["all"] += 1
            counts[name][op] += 1
    rx = re.compile(a.kernel)
    spilled = spills(log)
    print(f"{'kernel':44} {'regs':>4} {'stack':>5} {'spillST':>7} {'spillLD':>7} {'instr':>6} {'LDL':>4} {'STL':>4} {'LDS':>4} {'BRA':>4} {'BRX':>4}")
    for k in sorted(counts):
        if not rx.search(k) or k.startswith("$"):
            continue
        reg, stack = res.get(k, (0, 0))
        c = counts[k]
        st, ld = spilled.get(k, (0, 0))
        print(f"{k:44} {reg:4} {stack:5} {st:7} {ld:7} {c['all']:6} {c['LDL']:4} {c['STL']:4} {c['LDS']:4} {c['BRA']:4} {c['BRX']:4}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Coverage of the kernels kept in a family's .cu (kernels_cuda/<family>.cu) instead of its .cuh.

Such a kernel has no harness test of its own: it runs under the SIMT harness when the op suite
drives the CUDA Device through the cudasim module, which appends the name of every kernel it
launches to the launch log (MOETRAIN_SIMT_LAUNCH_LOG). This check fails when a `__global__`
function of a .cu file is missing from that log, or when a .cu file uses block cooperation
(barriers, warp exchange, shared memory, atomics): kernels that do belong in the .cuh, where a
harness test runs them under two interleavings and requires the same bits.

  cu_kernel_coverage.py <kernels_cuda dir> <launch log>
"""
import pathlib
import re
import sys

KERNEL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s+)?void\s+(\w+)\s*\(")
COOPERATION = re.compile(
    r"\b(__syncthreads|__syncwarp|__shfl\w*|__ballot_sync|__any_sync|__all_sync|__shared__"
    r"|mt_dynamic_shared|atomic\w+|block_\w+|warp_\w+)\b")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: cu_kernel_coverage.py <kernels_cuda dir> <launch log>")
    kernels_dir, log = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    launched = set(log.read_text().split()) if log.exists() else set()
    problems, kernels = [], 0
    for cu in sorted(kernels_dir.glob("*.cu")):
        text = cu.read_text(encoding="utf-8")
        for name in KERNEL.findall(text):
            kernels += 1
            if name not in launched:
                problems.append(f"{cu.name}: kernel {name} was never launched by the op suite "
                                "on cudasim")
        if KERNEL.search(text):
            for word in sorted(set(COOPERATION.findall(text))):
                problems.append(f"{cu.name}: uses {word}; a kernel that cooperates within a block "
                                "goes in the .cuh with a harness test")
    if problems:
        sys.exit("CUDA kernels in .cu files:\n  " + "\n  ".join(problems))
    print(f"{kernels} kernel(s) in kernels_cuda/*.cu, each launched by the op suite on cudasim")


if __name__ == "__main__":
    main()

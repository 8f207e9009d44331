#!/usr/bin/env python3
"""clang-tidy over every C++ source of the tree, with a result cache; tools/tidy.sh runs it.

Usage: tidy.py ROOT REGEX DB [DB ...]
  ROOT   the repository; REGEX (a Python regex, searched in the repo-relative path) picks sources.
  DB     compile_commands.json files, merged in order (the first command for a file wins).

Every tracked .cpp must have a compile command; the CUDA-only sources are excused only when
the databases hold no CUDA backend at all (the toolkit was not found). CUDA sources (.cu) are
compiled by nvcc and skipped; their headers (kernels_cuda/*.cuh) are checked through the SIMT
harness sources that include them.

Cache: a source found clean is remembered under a key that hashes the clang-tidy version, every
.clang-tidy of the tree, the compile command and the source preprocessed by the same clang (so
every header it includes, with line numbers). A later run with the same key skips it. Sources
with findings are never cached: they are checked again each run. TIDY_CACHE names the
directory (default ~/.cache/moetrain/tidy; empty = no cache).

Shared record: the same keys, with the repository's and the home directory's paths taken out
(so a clone at another path computes the same key), are kept in tools/tidy-clean.txt, which is
committed. A developer's run adds the keys of the sources it found clean (a run over every
source replaces the record with exactly those), so a clean clone (CI) re-checks only what
changed since the committer's run instead of every source (a change to a header that every
source includes, api/moetrain/device.h, costs 25-45 min of clang-tidy on two cores). The
record is not taken on trust: TIDY_RECHECK (default 0.05) of the sources it vouches for, picked
by a hash of the key and the checked-out commit, are checked again anyway, and a finding there
fails the run like any other. TIDY_RECORD=0 leaves the file unchanged.
Environment: CLANG_TIDY (default clang-tidy-19), TIDY_CLANG (the clang++ of the same version,
default: derived from CLANG_TIDY), TIDY_JOBS (default: the number of cores).
Exit status: 0 clean, 1 findings (printed once each), 2 usage or setup error.
"""
import concurrent.futures
import hashlib
import json
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import time

# Sources that need the CUDA toolkit (backends/cuda's module, the cudasim module, NCCL).
CUDA_ONLY = ("backends/cuda/", "comm/nccl/", "tests/simt/cudasim/")
# Sources built outside every CMake database, with the command that compiles them.
EXTRA = {
    # The install test builds it against the installed headers: the public API only.
    "tests/install_consumer/main.cpp": ["c++", "-std=c++20", "-I{root}/api"],
}
RECORD = "tools/tidy-clean.txt"  # the shared record of clean keys (module docstring)
FINDING = re.compile(r"^[^ ].*:\d+:\d+: (warning|error): ")
EXTRA_ARGS = ["-Wno-unknown-warning-option"]  # the databases hold GCC's warning flags


def without_openmp(args):
    """The command with OpenMP off: clang (19 included) refuses OpenMP regions that use a
    structured binding of the enclosing function, which GCC compiles and the cpu backend does.
    The pragmas are then ignored and the loops are checked as serial code (omp.h is clang's
    own, from libomp-19-dev: GCC's does not parse with clang)."""
    out = [a for a in args if a != "-fopenmp" and not a.startswith("-fopenmp=")]
    return out + ["-Wno-unknown-pragmas"] if len(out) != len(args) else out


def die(msg):
    print(f"tidy: {msg}", file=sys.stderr)
    sys.exit(2)


def entry_args(entry):
    if "arguments" in entry:
        return list(entry["arguments"])
    return shlex.split(entry["command"])


def load_sources(root, dbs):
    """repo-relative path -> (directory, argument list), first database wins."""
    sources = {}
    for db in dbs:
        try:
            entries = json.load(open(db))
        except OSError as e:
            die(f"cannot read {db}: {e} (configure with cmake first)")
        for e in entries:
            path = os.path.normpath(os.path.join(e["directory"], e["file"]))
            rel = os.path.relpath(path, root)
            if rel.startswith("..") or not rel.endswith(".cpp") or rel in sources:
                continue
            sources[rel] = (e["directory"], without_openmp(entry_args(e)))
    for rel, cmd in EXTRA.items():
        args = [a.format(root=root) for a in cmd] + ["-c", os.path.join(root, rel)]
        sources.setdefault(rel, (root, args))
    return sources


def check_coverage(root, sources):
    tracked = subprocess.run(["git", "ls-files", "*.cpp"], cwd=root, check=True,
                             capture_output=True, text=True).stdout.split()
    has_cuda = any(s.startswith("backends/cuda/") for s in sources)
    missing = [t for t in tracked if t not in sources]
    excused = [t for t in missing if not has_cuda and t.startswith(CUDA_ONLY)]
    if excused:
        print(f"tidy: {len(excused)} CUDA sources not checked (no CUDA toolkit was found)")
    missing = [t for t in missing if t not in excused]
    if missing:
        die("no compile command for " + ", ".join(missing) +
            " (build them in a configured target or list them in tools/tidy.py's EXTRA)")
    # Generated sources (under a build directory) are not ours to fix.
    return {k: v for k, v in sources.items() if k in set(tracked)}


def preprocess_args(args, clang):
    """The compile command turned into `clang++ -E` of the same source, output to stdout."""
    out, skip = [clang], False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a in ("-c", "--") or a.startswith("-o"):
            continue
        out.append(a)
    return out + EXTRA_ARGS + ["-E"]


class Tidy:
    def __init__(self, root, cache, db_dir):
        self.root, self.cache, self.db_dir = root, cache, db_dir
        self.tidy = os.environ.get("CLANG_TIDY", "clang-tidy-19")
        if not shutil.which(self.tidy):
            die(f"{self.tidy} not found (tools/install-deps.sh installs clang-tidy-19)")
        default_clang = os.path.basename(self.tidy).replace("clang-tidy", "clang++")
        self.clang = os.environ.get("TIDY_CLANG", default_clang)
        self.keyed = shutil.which(self.clang) is not None  # the keys need it
        if not self.keyed:  # said once: without it every source is checked
            print(f"tidy: {self.clang} not found: no cache and no record, every source is "
                  "checked (clang-19 comes with clang-tidy-19)", flush=True)
        version = subprocess.run([self.tidy, "--version"], capture_output=True, text=True).stdout
        h = hashlib.sha256(version.encode())
        configs = subprocess.run(["git", "ls-files", "*.clang-tidy"], cwd=root, check=True,
                                 capture_output=True, text=True).stdout.split()
        for c in sorted(configs):
            h.update(c.encode() + open(os.path.join(root, c), "rb").read())
        self.base = h.digest()
        # The shared record (module docstring): keys vouched clean, and what this run found.
        self.record_path = os.path.join(root, RECORD)
        self.record = set()
        if os.path.exists(self.record_path):
            self.record = {l.strip() for l in open(self.record_path) if l.strip()}
        self.clean = set()
        self.recheck = float(os.environ.get("TIDY_RECHECK", "0.05"))
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                              text=True).stdout.strip()
        self.seed = head.encode()
        self.home = os.path.expanduser("~")

    def portable(self, data):
        """data (bytes) with the repository's and the home directory's paths replaced."""
        data = data.replace(self.root.encode(), b"@ROOT@")
        if len(self.home) > 1:
            data = data.replace((self.home + "/").encode(), b"@HOME@/")
        return data

    def rechecked(self, key):
        """Whether a key that only the shared record vouches for is checked again anyway."""
        draw = hashlib.sha256(self.seed + key.encode()).digest()
        return int.from_bytes(draw[:4], "big") < self.recheck * 2**32

    def key(self, directory, args):
        if not self.keyed:
            return None
        pre = subprocess.run(preprocess_args(args, self.clang), cwd=directory,
                             capture_output=True)
        if pre.returncode != 0:
            return None  # clang-tidy will report why
        h = hashlib.sha256(self.base)
        h.update(self.portable("\0".join(args).encode()))
        h.update(self.portable(pre.stdout))
        return h.hexdigest()

    def check(self, rel, directory, args):
        """(how it was decided, clang-tidy's exit status, its output) for one source: "cache"
        (this machine's cache), "record" (the shared record), "recheck" (vouched for by the
        record and checked anyway) or "" (checked)."""
        key = self.key(directory, args)
        mark = os.path.join(self.cache, key[:2], key) if key and self.cache else None
        if mark and os.path.exists(mark):
            os.utime(mark)
            self.clean.add(key)
            return "cache", 0, ""
        if key in self.record and not self.rechecked(key):
            self.clean.add(key)
            return "record", 0, ""
        cmd = [self.tidy, "--quiet", f"-p={self.db_dir}"]
        cmd += [f"--extra-arg={a}" for a in EXTRA_ARGS] + [os.path.join(self.root, rel)]
        run = subprocess.run(cmd, cwd=self.root, capture_output=True, text=True)
        out = run.stdout + run.stderr
        clean = run.returncode == 0 and not any(FINDING.match(l) for l in out.splitlines())
        if key and clean:
            self.clean.add(key)
        if mark and clean:
            os.makedirs(os.path.dirname(mark), exist_ok=True)
            open(mark, "w").close()
        if key in self.record and not clean:
            out += (f"\ntidy: {rel} is recorded clean in {RECORD} but is not: the record was "
                    "not written by a clean run of this source")
        return "recheck" if key in self.record else "", run.returncode, out

    def save_record(self, everything):
        """Adds this run's clean keys to the shared record; a run over every source leaves
        exactly them (the keys of sources since changed or removed drop out)."""
        if os.environ.get("TIDY_RECORD", "1") == "0" or not self.keyed:
            return  # asked not to, or no keys were computed (the record would lose them all)
        keys = self.clean if everything else self.record | self.clean
        if keys != self.record:
            with open(self.record_path + ".tmp", "w") as f:
                f.writelines(k + "\n" for k in sorted(keys))
            os.replace(self.record_path + ".tmp", self.record_path)


def main():
    if len(sys.argv) < 4:
        die("usage: tidy.py ROOT REGEX DB [DB ...]")
    root, regex, dbs = os.path.abspath(sys.argv[1]), re.compile(sys.argv[2]), sys.argv[3:]
    start = time.time()
    sources = check_coverage(root, load_sources(root, dbs))
    picked = sorted(s for s in sources if regex.search(s))
    if not picked:
        die(f"no source matches '{sys.argv[2]}'")
    # clang-tidy reads the commands from a database: one merged database holds them all.
    merged_dir = os.path.join(os.path.dirname(os.path.abspath(dbs[0])), "tidy-merged")
    os.makedirs(merged_dir, exist_ok=True)
    merged = [{"directory": d, "file": os.path.join(root, s), "arguments": a}
              for s, (d, a) in sorted(sources.items())]
    with open(os.path.join(merged_dir, "compile_commands.json"), "w") as f:
        json.dump(merged, f, indent=1)
    cache = os.environ.get("TIDY_CACHE", os.path.expanduser("~/.cache/moetrain/tidy"))
    tidy = Tidy(root, cache, merged_dir)

    jobs = int(os.environ.get("TIDY_JOBS", os.cpu_count() or 1))
    findings, failed = set(), []
    how = {"cache": 0, "record": 0, "recheck": 0, "": 0}
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = {pool.submit(tidy.check, s, *sources[s]): s for s in picked}
        for fut in concurrent.futures.as_completed(futures):
            decided, rc, out = fut.result()
            how[decided] += 1
            lines = [l for l in out.splitlines() if FINDING.match(l)]
            # Printed as each source finishes (a header's finding once, for its first source).
            for l in lines:
                l = os.path.relpath(l, root) if l.startswith(root) else l
                if l not in findings:
                    findings.add(l)
                    print(l, flush=True)
            if rc != 0 and not lines:
                failed.append(futures[fut])
                print(f"tidy: clang-tidy failed on {futures[fut]} without a finding:\n"
                      f"{out.strip()[-2000:]}", flush=True)
    tidy.save_record(everything=len(picked) == len(sources))
    # The CPU time of clang-tidy and the cache's preprocessing: unlike the wall time it does not
    # depend on what else the machine runs, so it estimates a quiet machine's wall time as
    # cpu / jobs.
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"tidy: {len(picked)} sources ({how['cache']} unchanged since a clean run here, "
          f"{how['record']} vouched for by {RECORD}, {how[''] + how['recheck']} checked, "
          f"{how['recheck']} of them re-checks of the record) in {time.time() - start:.0f} s, "
          f"{usage.ru_utime + usage.ru_stime:.0f} s CPU on {jobs} jobs")
    if findings or failed:
        print(f"tidy: {len(findings)} findings (above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

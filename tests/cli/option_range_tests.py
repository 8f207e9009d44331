#!/usr/bin/env python3
"""Range checks of every numeric option of every command (docs/RELIABILITY.md, "Linear parsers
and checked numbers"). Each case reads `moetrain COMMAND --help`, finds every INT / UINT /
FLOAT option, and gives it values that must be refused with one line naming the option:
below and above its range (read from --help, where add_int_option / add_real_option print
it), negative, beyond 64 bits, inf, nan, hex, octal-looking and other non-decimal text. An
INT / UINT / FLOAT option that shows no range was declared some other way, and fails.
Registered with ctest as options:CASE:

    option_range_tests.py --moetrain build/moetrain --work DIR CASE
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from cli_testlib import expect_error, main, run, test, work, write  # noqa: E402

# Every command and sub-subcommand; `every_command_is_walked` fails when one is missing.
COMMANDS = [["info"], ["train"], ["eval"], ["generate"], ["bench"], ["gradcheck"], ["config"],
            ["plan"], ["report"], ["tokenizer", "info"], ["tokenizer", "encode"],
            ["tokenizer", "decode"], ["tokenizer", "train"], ["tokenizer", "bench"],
            ["tokenize"], ["verify"], ["export"], ["import"]]

OPTION = re.compile(r"^\s+(?:-\w,)?(--[\w-]+)\s+(INT|UINT|FLOAT)\b(\S*(?: \S+)?)")
RANGE = re.compile(r"^:([\[(])([-0-9.e+]+), ([-0-9.e+]+|finite)([\])])")

# Refused by every numeric option, whatever its range.
ALWAYS_BAD = ["abc", "1x", "0x10", "1.5.2", "--", "+1", "1_000", "inf", "-inf", "nan",
              "1e999", "-1e999", "0x1p3"]
# Refused by every integer option (beyond 64 bits), and by a real one with a finite upper end.
HUGE = ["99999999999999999999999", "18446744073709551616"]


def subcommands(argv):
    """The subcommand names that `moetrain ARGV --help` lists."""
    text = run(*argv, "--help").stdout
    names, inside = [], False
    for line in text.splitlines():
        if line.startswith("Subcommands:"):
            inside = True
        elif inside and re.match(r"^  \S", line):
            names.append(line.split()[0])
        elif inside and line and not line.startswith(" "):
            inside = False
    return names


def numeric_options(argv):
    """[(option, type, range text)] of `moetrain ARGV --help`."""
    out = []
    for line in run(*argv, "--help").stdout.splitlines():
        m = OPTION.match(line)
        if m:
            out.append((m.group(1), m.group(2), m.group(3)))
    return out


def out_of_range(kind, spec):
    """Values just outside the range that --help shows (`spec` like ":[0, 2147483647]")."""
    m = RANGE.match(spec)
    assert m, f"no range in --help ('{spec}'): declare it with add_int_option / add_real_option"
    lo_open, lo, hi, hi_open = m.group(1) == "(", m.group(2), m.group(3), m.group(4) == ")"
    bad = []
    if kind in ("INT", "UINT"):
        bad += HUGE + ["-" + h for h in HUGE]
        bad += [str(int(lo) - 1), str(int(hi) + 1), str(int(hi) * 10)]
        if int(lo) >= 0:
            bad.append("-1")
        return bad
    lo_f = float(lo)
    bad.append(lo if lo_open else repr(lo_f - max(1.0, abs(lo_f))))
    if lo_f >= 0:
        bad += ["-1", "-1e-300"] if lo_f == 0 and not lo_open else ["-1"]
    if hi != "finite":
        bad += HUGE
        hi_f = float(hi)
        bad.append(hi if hi_open else repr(hi_f + max(1.0, abs(hi_f))))
    return bad


def walk(argv):
    opts = numeric_options(argv)
    for name, kind, spec in opts:
        for value in ALWAYS_BAD + out_of_range(kind, spec):
            p = expect_error([*argv, f"{name}={value}"], name)
            assert "must be" in p.error, f"{argv} {name}={value}: not refused by the range " \
                f"check: {p.error}"
    print(f"{' '.join(argv)}: {len(opts)} numeric options checked")
    return len(opts)


for cmd in COMMANDS:
    def case(cmd=cmd):
        walk(cmd)
    case.__name__ = "numeric_" + "_".join(cmd)
    test(case)


@test
def every_command_is_walked():
    """Every command and sub-subcommand of --help is in COMMANDS (so none goes unchecked)."""
    found = []
    for name in subcommands([]):
        subs = subcommands([name])
        found += [[name, s] for s in subs] if subs else [[name]]
    missing = [c for c in found if c not in COMMANDS]
    assert not missing, f"commands not walked by option_range_tests.py: {missing}"
    assert len(found) >= 15, found


@test
def the_examples_of_issue_27():
    """The values the hostile review found wrapping or saturating are refused by name."""
    expect_error(["tokenize", "--eot", "4294967301", "--data", "x", "--out", "y"], "--eot",
                 "must be")
    for seed in ["-1", "18446744073709551616"]:
        expect_error(["train", f"--seed={seed}", "--steps", "1"], "--seed", "must be")
    expect_error(["train", "--steps", "9223372036854775808"], "--steps", "must be")
    expect_error(["train", "--steps", "1", "--eps", "inf"], "--eps", "must be")
    # Numbers in files too: an id of 2^64 - 1 used to read back as -1.
    ids = os.path.join(work("decode_ids"), "ids.json")
    for bad in ["[18446744073709551615]", "[4294967301]", "[-2147483649]"]:
        write(ids, bad)
        expect_error(["tokenizer", "decode", "--tokenizer", "bytes", ids], "not a JSON array of ids")
    write(ids, "[104, 105]")
    assert run("tokenizer", "decode", "--tokenizer", "bytes", ids).stdout == "hi"


@test
def accepted_values_read_as_written():
    """In-range values pass, and a leading zero does not make an octal number."""
    p = run("plan", "--preset", "tiny", "--batch", "010", "--seq", "16", "--memory-gb", "1.5")
    assert "B=10 T=16" in p.stdout, p.stdout[-2000:]
    assert "a 1.5 GB device" in p.stdout, p.stdout[-2000:]


sys.exit(main())

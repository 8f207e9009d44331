#!/usr/bin/env python3
"""Writes the op table of docs/OPS.md from the op table api/moetrain/device_ops.def.

Each row of device_ops.def becomes one table row: the op, its contract (the comment above the
row), and the files that implement it on each backend (the files defining `<op>_impl`), one
table per `// ---- family ----` section. The table sits between the two marker lines in
docs/OPS.md; the rest of that file is written by hand.

  python3 tools/ops_doc.py          rewrite the table in docs/OPS.md
  python3 tools/ops_doc.py --check  exit 1 (naming the command to run) when it is out of date
"""
import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEF = ROOT / "api" / "moetrain" / "device_ops.def"
DOC = ROOT / "docs" / "OPS.md"
BEGIN = "<!-- op table: written by tools/ops_doc.py from api/moetrain/device_ops.def -->"
END = "<!-- end of the op table -->"
# Where each backend's <op>_impl definitions live.
BACKENDS = [
    ("cpu", ["backends/cpu/*.cpp"]),
    ("opencl", ["backends/opencl/*.cpp"]),
    ("cuda", ["kernels_cuda/*.cu", "backends/cuda/*.cpp"]),
]


def parse_table(text):
    """[(section title, [(op, contract)])] in the order of the table."""
    sections, comment = [], []
    for line in text.splitlines():
        marker = re.match(r"// ---- (.*) ----$", line)
        row = re.match(r"MT_DEVICE_OP\((\w+),", line)
        if marker:
            sections.append((marker.group(1), []))
            comment = []
        elif line.startswith("//"):
            comment.append(line[2:].strip())
        elif row:
            if not sections:
                sys.exit(f"{DEF}: the row of '{row.group(1)}' comes before any section marker")
            sections[-1][1].append((row.group(1), " ".join(comment)))
            comment = []
    return sections


def implementing_files():
    """{op: {backend: [file names]}} from the `Class::<op>_impl(` definitions."""
    found = {}
    for backend, patterns in BACKENDS:
        for pattern in patterns:
            for path in sorted(ROOT.glob(pattern)):
                text = path.read_text(encoding="utf-8")
                for op in sorted(set(re.findall(r"\w+::(\w+)_impl\(", text))):
                    found.setdefault(op, {}).setdefault(backend, []).append(path.name)
    return found


def cell(text):
    return text.replace("|", "\\|")


def render(sections, files):
    out = [BEGIN, ""]
    for title, rows in sections:
        out += [f"#### {title}", "", "| op | contract | cpu | opencl | cuda |", "|---|---|---|---|---|"]
        for op, contract in rows:
            impl = [", ".join(files.get(op, {}).get(b, [])) or "MISSING" for b, _ in BACKENDS]
            out.append(f"| {op} | {cell(contract)} | " + " | ".join(impl) + " |")
        out.append("")
    out.append(END)
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail when docs/OPS.md is out of date")
    check = ap.parse_args().check
    doc = DOC.read_text(encoding="utf-8")
    if BEGIN not in doc or END not in doc:
        sys.exit(f"{DOC}: the op table markers are missing ({BEGIN} ... {END})")
    table = render(parse_table(DEF.read_text(encoding="utf-8")), implementing_files())
    head, rest = doc.split(BEGIN, 1)
    new = head + table + rest.split(END, 1)[1]
    if "| MISSING |" in table or "| MISSING" in table:
        sys.exit("an op of device_ops.def has no <op>_impl on some backend (MISSING in the table)")
    if check:
        if new != doc:
            sys.exit("docs/OPS.md's op table is out of date: run python3 tools/ops_doc.py")
        print("docs/OPS.md's op table matches api/moetrain/device_ops.def")
        return
    if new != doc:
        DOC.write_text(new, encoding="utf-8")
        print("docs/OPS.md: op table rewritten")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Exit 0 when every failed test of a ctest JUnit report failed only because LeakSanitizer's own
stop-the-world tracer crashed at exit ("Tracer caught signal 11 ... LeakSanitizer has
encountered a fatal error"), else 1. That crash is an intermittent fault of the sanitizer
runtime, not a finding (google/sanitizers#1353): the test body had passed and no leak was
reported. tools/test.sh then runs just those tests once more; any other failure (an ASan or
UBSan report, a leak, a failed assertion) is final.

Usage: tracer_crash_only.py REPORT.xml
"""
import sys
import xml.etree.ElementTree as ET

TRACER = "LeakSanitizer has encountered a fatal error"
FINDINGS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer: detected", "runtime error:",
            "Status: FAILURE")


def main():
    failed = []
    for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
        if case.get("status") in ("fail", "failed") or case.find("failure") is not None:
            out = "".join(e.text or "" for e in case.iter("system-out"))
            failed.append((case.get("name"), out))
    if not failed:
        return 1  # ctest failed for a reason the report does not show
    for name, out in failed:
        crash_only = TRACER in out and not any(f in out for f in FINDINGS)
        print(f"sanitize: {name}: {'LSan tracer crash, rerun' if crash_only else 'a finding'}")
        if not crash_only:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

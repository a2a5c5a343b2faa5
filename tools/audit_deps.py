"""Check every pin of a lock file against a vulnerability service with pip-audit, and say
plainly when the check could not be made.

pip-audit reports a pin the service does not know as "skipped" and still exits 0, and a
service that cannot be reached as a traceback. Here: a known vulnerability fails; a service
that could not check every pin prints one NOT CHECKED line and passes, unless ``--strict``.

Usage: python tools/audit_deps.py requirements/dev.lock [--service pypi|osv] [--strict]
"""

from __future__ import annotations

import argparse
import json
import subprocess  # nosec B404 # runs pip-audit
import sys
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lock", type=Path)
    parser.add_argument("--service", default="pypi", choices=["pypi", "osv"])
    parser.add_argument("--strict", action="store_true", help="NOT CHECKED fails too")
    args = parser.parse_args()
    command = [
        sys.executable, "-m", "pip_audit", "-r", str(args.lock), "--require-hashes",
        "--disable-pip", "--timeout", "10", "--progress-spinner", "off",
        "-s", args.service, "-f", "json",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)  # nosec B603 # fixed argv
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
        print(f"pip-audit: NOT CHECKED - the {args.service} service failed: {last}")
        return 1 if args.strict else 0
    deps = report.get("dependencies", [])
    vulnerable = [d for d in deps if d.get("vulns")]
    skipped = [d for d in deps if d.get("skip_reason")]
    for dep in vulnerable:
        ids = ", ".join(v["id"] for v in dep["vulns"])
        print(f"pip-audit: {dep['name']} {dep.get('version', '')}: {ids}")
    if vulnerable:
        print(f"pip-audit: {len(vulnerable)} pins of {args.lock} have known vulnerabilities")
        return 1
    if skipped:
        print(f"pip-audit: NOT CHECKED - {len(skipped)} of {len(deps)} pins unknown to the "
              f"{args.service} service (unreachable or no data)")  # fmt: skip
        return 1 if args.strict else 0
    print(f"pip-audit: no known vulnerabilities in {len(deps)} pins ({args.service})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`mlft env`: versions of mlft and its libraries, the git commit, the LID model and the device (for bug reports)."""

from __future__ import annotations

import json


def add_parser(sub) -> None:
    p = sub.add_parser(
        "env", help="print versions, git commit, LID model and device (paste into bug reports)", description=__doc__
    )
    p.add_argument("--json", action="store_true", help="as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from mlft.provenance import environment

    env = environment()
    if args.json:
        print(json.dumps(env, indent=2))
        return 0
    for name, version in env["versions"].items():
        print(f"{name:18} {version or 'not installed'}")
    for key in ("git_commit", "python", "platform", "device", "lid_model"):
        print(f"{key:18} {env[key] or '-'}")
    return 0

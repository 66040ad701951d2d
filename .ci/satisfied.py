"""Exit 0 when every requirement of pyproject.toml's dependencies and the named extras (mlft[...] self-references
followed) is installed in this python at a version the requirement admits; else 1, naming the first one missing.
`make install` then skips pip's resolver (a minute or more of index look-ups even when nothing changes) and only
points the editable install at this checkout. Any doubt (no tomllib / packaging yet, an unparsable line) is a 1:
the full install runs.

    python .ci/satisfied.py all
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(extras: list[str]) -> int:
    try:
        import importlib.metadata as md

        import tomllib
        from packaging.requirements import Requirement
    except ImportError as exc:
        print(f"satisfied: {exc}", file=sys.stderr)
        return 1
    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    name, optional = project["name"], project.get("optional-dependencies", {})
    todo, seen, reqs = list(extras), set(), list(project.get("dependencies", []))
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for line in optional.get(extra, []):
            req = Requirement(line)
            if req.name == name:
                todo += sorted(req.extras)
            else:
                reqs.append(line)
    for line in reqs:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        try:
            version = md.version(req.name)
        except md.PackageNotFoundError:
            print(f"satisfied: {req.name} is not installed", file=sys.stderr)
            return 1
        if not req.specifier.contains(version, prereleases=True):
            print(f"satisfied: {req.name} {version} is outside {req.specifier}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

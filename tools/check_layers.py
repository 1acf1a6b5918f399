#!/usr/bin/env python3
"""Fails on an include that runs up the layers of docs/architecture.md ("Layers").

Each folder may include its own headers and those of the folders listed for it below, nothing else
of ours (bench/, tests/ and tools/ may include anything; nothing may include them, nor apps/).
A more specific folder (ops/cuda/) is matched before its parent. Run from anywhere:

    python3 tools/check_layers.py        prints each upward include as FILE:LINE: … and exits 1
"""
import pathlib
import re
import subprocess
import sys

# folder → the folders of ours it may include besides itself (docs/architecture.md, "Layers"). A
# folder's sub-folders are layers of their own (ops/cuda/ above ops/, the test support in
# protocol/testing/ and net/testing/) and are named where they may be included.
_BELOW_ENGINE = {"engine", "protocol", "onnx", "ops", "ops/cuda"}
ALLOWED = {
    "apps": {"scenarios", "protocol/testing", "nodes", "cheats", "verifiers", "mpi", "referee", "dispute", "net"}
    | _BELOW_ENGINE,
    "scenarios": {"nodes", "cheats", "verifiers", "referee", "dispute", "net", "protocol/testing"} | _BELOW_ENGINE,
    "cheats": {"nodes", "verifiers", "referee", "net"} | _BELOW_ENGINE,
    "nodes": {"referee", "dispute", "net"} | _BELOW_ENGINE,
    "referee": {"dispute"} | _BELOW_ENGINE,
    "dispute": _BELOW_ENGINE,  # what both parties of a dispute compute from a job; engine/ never includes it
    "verifiers": _BELOW_ENGINE,
    "mpi": _BELOW_ENGINE,
    "net/testing": set(),
    "net": {"protocol"},
    "engine": {"protocol", "onnx", "ops", "ops/cuda"},
    "onnx": {"ops"},  # the ONNX importer: model files lowered onto RepOps ops
    "protocol/testing": {"protocol", "ops"},  # the counter program names ops' OpKind (test support)
    "protocol": set(),
    "ops/cuda": {"ops"},
    "ops": set(),
}
ANY = {"bench", "tests", "tools"}  # may include any folder; none may include them
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path: str) -> str | None:
    """The most specific folder of ALLOWED or ANY that holds `path` (None: a file outside them)."""
    for folder in sorted(ALLOWED.keys() | ANY, key=len, reverse=True):
        if path.startswith(folder + "/"):
            return folder
    return None


def may_include(layer: str, target: str) -> bool:
    if layer in ANY:
        return True
    return target == layer or target in ALLOWED[layer]


def main() -> int:
    root = pathlib.Path(__file__).resolve().parent.parent
    files = subprocess.run(["git", "ls-files", "*.h", "*.cpp", "*.cu", "*.cuh"], cwd=root, check=True,
                           capture_output=True, text=True).stdout.split()
    bad = 0
    for name in files:
        layer = layer_of(name)
        if layer is None:
            continue
        for number, line in enumerate((root / name).read_text(encoding="utf-8").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or "/" not in m.group(1):
                continue  # a system header, or one beside the file
            target = layer_of(m.group(1))
            if target is None:
                continue  # not one of our folders (a generated or library header)
            ok = may_include(layer, target)
            if not ok:
                print(f"{name}:{number}: {layer}/ may not include {m.group(1)} (docs/architecture.md, Layers)")
                bad += 1
    if bad:
        print(f"check_layers: {bad} upward include(s)")
        return 1
    print(f"check_layers: {len(files)} files, every include points down the layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())

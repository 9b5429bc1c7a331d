#!/usr/bin/env python3
"""The image's build as Docker would see it, without a Docker engine.

    python3 scripts/docker_context.py list              # the files .dockerignore lets into the build context
    python3 scripts/docker_context.py assemble DEST     # DEST/context: that context; DEST/src: the build stage's
                                                        # WORKDIR after its COPY lines, with `swift package
                                                        # resolve` run where the Dockerfile runs it
    python3 scripts/docker_context.py verify DEST [PRODUCT]
                                                        # DEST/src (assembled) has what PRODUCT (maidian) builds
                                                        # from: see verify()

.dockerignore rules as Docker applies them: patterns relative to the context root, `*` and `?` within one
path element, `**` across elements, a pattern matching a directory covers everything under it, `!` re-includes,
and the last matching pattern wins. A directory is skipped whole only when no `!` pattern could re-include
something under it (Docker does the same).
"""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

# MAIDIAN_CONTEXT_ROOT: another tree (the tests use a small one to see the checks fail).
ROOT = pathlib.Path(os.environ.get("MAIDIAN_CONTEXT_ROOT", pathlib.Path(__file__).resolve().parent.parent)).resolve()


def compile_pattern(p):
    """A .dockerignore pattern as a regular expression over '/'-separated relative paths."""
    p = os.path.normpath(p.strip()).lstrip("/")
    out, i = "", 0
    while i < len(p):
        c = p[i]
        if p.startswith("**", i):
            out += ".*"
            i += 2
            if p.startswith("/", i):
                out += "/?"
                i += 1
            continue
        out += "[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c)
        i += 1
    return re.compile("^" + out + "$")


def read_rules(root):
    rules = []
    path = root / ".dockerignore"
    if path.exists():
        for line in path.read_text().splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            pattern = line[1:].strip() if negate else line
            rules.append((negate, pattern, compile_pattern(pattern)))
    return rules


def excluded(rel, rules):
    """Whether `rel` is left out: the last rule that matches it or one of its parent directories decides."""
    parts = rel.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    result = False
    for negate, _, rx in rules:
        if any(rx.match(p) for p in prefixes):
            result = not negate
    return result


def context_files(root=ROOT):
    rules = read_rules(root)
    negations = [os.path.normpath(p).lstrip("/") for neg, p, _ in rules if neg]
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir
        keep = []
        for d in sorted(dirnames):
            rel = f"{rel_dir}/{d}" if rel_dir else d
            # Descend into an excluded directory only when an exception may re-include something in it.
            if excluded(rel, rules) and not any(n.startswith(rel + "/") or n == rel for n in negations):
                continue
            keep.append(d)
        dirnames[:] = keep
        for f in sorted(filenames):
            rel = f"{rel_dir}/{f}" if rel_dir else f
            if not excluded(rel, rules):
                files.append(rel)
    return files


def build_stage(root=ROOT):
    """The first stage's COPY and RUN instructions, continuation lines joined."""
    text = (root / "Dockerfile").read_text()
    lines, current = [], ""
    for raw in text.splitlines():
        if raw.strip().startswith("#") and not current:
            continue
        current += raw.rstrip("\\").rstrip() + " " if raw.endswith("\\") else raw
        if not raw.endswith("\\"):
            lines.append(current.strip())
            current = ""
    stage, froms = [], 0
    for line in lines:
        word = line.split(" ", 1)[0].upper()
        if word == "FROM":
            froms += 1
            if froms > 1:
                break
        elif froms == 1 and word in ("COPY", "RUN", "WORKDIR"):
            stage.append((word, line.split(" ", 1)[1]))
    return stage


def assemble(dest):
    dest = pathlib.Path(dest)
    context, src = dest / "context", dest / "src"
    for rel in context_files():
        target = context / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, target, follow_symlinks=True)
    src.mkdir(parents=True, exist_ok=True)
    copies = 0
    for word, args in build_stage():
        if word == "COPY":
            if args.startswith("--"):
                raise SystemExit(f"Dockerfile: COPY {args}: options are not emulated")
            parts = args.split()
            sources, target = parts[:-1], parts[-1]
            for s in sources:
                matches = sorted(context.glob(s))
                if not matches:
                    raise SystemExit(f"Dockerfile: COPY {s}: not in the build context (.dockerignore leaves it out)")
                for m in matches:
                    to = src / target if not target.endswith("/") and len(matches) == 1 and len(sources) == 1 else src / target / m.name
                    if m.is_dir():
                        shutil.copytree(m, to, dirs_exist_ok=True)
                    else:
                        to.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(m, to)
            copies += 1
        elif word == "RUN" and "swift package resolve" in args:
            # With only what the COPY lines so far brought in (Package.* first, for the layer cache).
            print(f"docker_context: after {copies} COPY line(s): swift package resolve", flush=True)
            subprocess.run(["swift", "package", "resolve"], cwd=src, check=True)


# Manifest settings that can make a build read files outside its targets' directories.
OUTSIDE_READS = re.compile(r"headerSearchPath|resources\s*:|plugins\s*:|\.plugin\(|\"-I|\"-L|\"-Xcc|\"-fmodule-map-file")


def files_under(directory):
    """Every file under `directory`, as paths relative to it."""
    out = set()
    for dirpath, _, filenames in os.walk(directory):
        for f in filenames:
            out.add(os.path.relpath(os.path.join(dirpath, f), directory))
    return out


def verify(dest, product="maidian"):
    """Whether the assembled build stage (DEST/src) can build PRODUCT as this tree does, without compiling it.

    A build reads the manifest, the dependencies `swift package resolve` fetched, and the files under the
    directories of the targets the product is made of (Package.swift names no path outside them). So:
      1. the manifest loads in the build stage (`swift package describe`): every target it declares, even
         one the product does not use, has its directory there (a missing one fails `swift build` too);
      2. Package.swift and every file under the product's target directories are there, byte for byte.
    The tree itself builds (`make test` builds it), so the build stage does too. This replaced compiling the
    product in the copy, a debug build from scratch that took 3 to 4 minutes of CI on two cores.
    Returns a list of problems, empty when there are none.
    """
    src = pathlib.Path(dest) / "src"
    described = subprocess.run(["swift", "package", "describe", "--type", "json"], cwd=src,
                               capture_output=True, text=True)
    if described.returncode != 0:
        return [f"the manifest does not load in the build stage: {described.stderr.strip() or described.stdout.strip()}"]
    targets = [t for t in json.loads(described.stdout)["targets"] if product in (t.get("product_memberships") or [])]
    if not targets:
        return [f"no target of the manifest builds product {product}"]
    problems, checked = [], 0
    # What would let a build read files outside its target directories: say so rather than vouch for it.
    manifest = (ROOT / "Package.swift").read_text()
    for construct in sorted(set(OUTSIDE_READS.findall(manifest))):
        problems.append(f"Package.swift uses {construct}: files it names may lie outside the target directories, "
                        "which this check does not compare; extend verify() (or build the copy: KEEP=1)")
    tree_files = {t["path"]: files_under(ROOT / t["path"]) for t in targets}
    for rel in ["Package.swift"] + [f"{path}/{f}" for path, files in tree_files.items() for f in sorted(files)]:
        checked += 1
        there = src / rel
        if not there.is_file():
            problems.append(f"{rel}: {product} builds from it, but the build stage does not have it "
                            "(.dockerignore or the Dockerfile's COPY lines leave it out)")
        elif there.read_bytes() != (ROOT / rel).read_bytes():
            problems.append(f"{rel}: differs from the tree's")
    for path, files in tree_files.items():
        for extra in sorted(files_under(src / path) - files):
            problems.append(f"{path}/{extra}: in the build stage but not in the tree")
    if not problems:
        print(f"build stage: the manifest loads; {checked} files of the {len(targets)} targets {product} builds from are "
              "there, byte for byte")
    return problems


def main():
    if sys.argv[1:] == ["list"]:
        print("\n".join(context_files()))
    elif len(sys.argv) == 3 and sys.argv[1] == "assemble":
        assemble(sys.argv[2])
    elif len(sys.argv) in (3, 4) and sys.argv[1] == "verify":
        problems = verify(sys.argv[2], *sys.argv[3:])
        for p in problems:
            print(f"docker_context: {p}", file=sys.stderr)
        return 1 if problems else 0
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

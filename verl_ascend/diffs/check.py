"""The upstream-ready diffs (`verl-ascend patches check`): do they fit a source tree?

Every runtime fix that has a source form also ships as a plain unified diff,
``patches/<project>/<version>/<fix>.patch`` (inside the wheel: ``verl_ascend/upstream_patches``).
A person can read it, apply it to an image's site-packages or a checkout, or send it upstream.
This module finds those diffs, reads their headers, and tells for a source tree whether each diff
applies, is already applied, is obsolete (upstream changed the code it fixes), or conflicts.

A diff's header (free text before the first ``diff --git``, ignored by git apply and patch):
    Subject: one line
    Runtime-patch: name of the runtime patch (verl_ascend/patches/<name>.py)
    Upstream: the upstream issue/PR/version, or "not filed yet"
    Remove-when: condition
    Obsolete-if: <file>: <text>          the upstream fix is present when <file> contains <text>
    Obsolete-if-missing: <file>: <text>  the code this diff fixes is gone when <text> is absent from
                                         <file> and from every other source file of the project
"""

import dataclasses
import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Optional

from verl_ascend.core.findings import WARNING, BadInput, Finding, exit_code, to_json

PROJECTS = ("verl", "torch")
APPLIES = "applies"
APPLIED = "already applied"
OBSOLETE = "obsolete"
CONFLICT = "does not apply"
_HEADER_KEY = re.compile(r"^([A-Z][A-Za-z-]+):\s*(.*)$")


class SourceError(BadInput, ValueError):
    """Bad input: the named directory holds no source tree we can check."""


@dataclasses.dataclass
class Diff:
    path: Path
    project: str
    version: str
    fix: str
    header: dict

    @property
    def runtime_patch(self) -> str:
        return self.header.get("Runtime-patch", [self.fix])[0]

    @property
    def subject(self) -> str:
        return self.header.get("Subject", [""])[0]

    def edited_files(self) -> list:
        """Files the diff changes (not the ones it creates): a tree without them has another layout."""
        pairs = re.findall(r"^--- (\S+).*\n\+\+\+ b/(\S+)", self.path.read_text(), flags=re.M)
        return [new for old, new in pairs if old != "/dev/null"]


def patches_dir() -> Path:
    """The diffs shipped in the wheel, or the checkout's ``patches/`` when running from source."""
    package = Path(__file__).resolve().parents[1]  # verl_ascend/
    packaged = package / "upstream_patches"
    if packaged.is_dir():
        return packaged
    return package.parent / "patches"


def parse_header(text: str) -> dict:
    header: dict = {}
    for line in text.splitlines():
        if line.startswith(("diff --git ", "--- ")):
            break
        match = _HEADER_KEY.match(line)
        if match:
            header.setdefault(match.group(1), []).append(match.group(2).strip())
    return header


def load_diffs(root: Optional[Path] = None) -> list:
    root = Path(root) if root else patches_dir()
    diffs = []
    for path in sorted(root.glob("*/*/*.patch")):
        version_dir = path.parent
        diffs.append(Diff(path, version_dir.parent.name, version_dir.name, path.stem, parse_header(path.read_text())))
    return diffs


def versions_with_diffs(diffs, project: str) -> list:
    return sorted({d.version for d in diffs if d.project == project}, key=_version_key)


def _version_key(text: str):
    return tuple(int(x) if x.isdigit() else 0 for x in re.findall(r"\d+", text)[:3])


def tree_version(project: str, root: Path) -> str:
    """The version a source tree reports, read from its files (importing it could run our hooks)."""
    if project == "verl":
        stamp = root / "verl" / "version" / "version"
        return stamp.read_text().strip() if stamp.is_file() else ""
    version_py = root / "torch" / "version.py"
    if version_py.is_file():
        match = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", version_py.read_text(), flags=re.M)
        if match:
            return match.group(1)
    return ""


def release(version: str) -> str:
    """``2.13.0+cpu`` -> ``2.13.0``; ``0.8.0.dev`` -> ``0.8.0`` (source checkouts of a tag say .dev)."""
    match = re.match(r"\d+(\.\d+){0,2}", version)
    return match.group(0) if match else version


def _holds(path: Path, project: str) -> bool:
    """A package directory, or a partial tree with the version stamp (e.g. sources cut from a wheel)."""
    package = path / project
    stamp = package / ("version/version" if project == "verl" else "version.py")
    return (package / "__init__.py").is_file() or stamp.is_file()


def locate(project: str, source: Optional[str] = None) -> Path:
    """The directory holding ``<project>/`` (site-packages or a checkout root)."""
    if source is None:
        spec = importlib.util.find_spec(project)  # finds without importing (no activation, no torch)
        if spec is None or not spec.submodule_search_locations:
            raise SourceError(f"{project} is not installed here; pass --source DIR (a checkout or site-packages)")
        return Path(list(spec.submodule_search_locations)[0]).resolve().parent
    path = Path(source).expanduser().resolve()
    if not path.is_dir():
        raise SourceError(f"--source {source}: no such directory")
    if _holds(path, project):
        return path
    if path.name == project and _holds(path.parent, project):
        return path.parent
    raise SourceError(f"--source {source}: no {project}/ package in it; give the directory that holds {project}/")


def projects_in(source: str) -> list:
    path = Path(source).expanduser().resolve()
    if not path.is_dir():
        raise SourceError(f"--source {source}: no such directory")
    found = [p for p in PROJECTS if _holds(path, p) or (path.name == p and _holds(path.parent, p))]
    if not found:
        raise SourceError(f"--source {source}: holds neither verl/ nor torch/; give the directory that holds them")
    return found


def _tool() -> str:
    if shutil.which("git"):
        return "git"
    if shutil.which("patch"):
        return "patch"
    raise SourceError("neither `git` nor `patch` is on PATH; install one of them to check diffs")


def dry_run(diff_path: Path, root: Path, reverse: bool = False) -> tuple:
    """(ok, message) of applying the diff (or reverting it) to the tree at ``root``, changing nothing."""
    if _tool() == "git":
        cmd = ["git", "apply", "--check", "-v", "-p1"] + (["-R"] if reverse else []) + [str(diff_path)]
        # git apply inside some enclosing repository skips paths outside it and still exits 0.
        env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(root.parent)}
        env.pop("GIT_DIR", None)
        env.pop("GIT_WORK_TREE", None)
    else:
        cmd = ["patch", "-p1", "--dry-run", "--batch", "--fuzz=0", "-s"]
        cmd += ["-R"] if reverse else ["--forward"]
        cmd += ["-i", str(diff_path)]
        env = dict(os.environ)
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=60)
    text = (proc.stdout + proc.stderr).strip()
    ok = proc.returncode == 0 and "Skipped patch" not in text
    return ok, text


def _marker(spec: str):
    rel, _, text = spec.partition(":")
    return rel.strip(), text.strip()


def _contains(root: Path, rel: str, text: str) -> bool:
    path = root / rel
    return path.is_file() and text in path.read_text(errors="replace")


def _files_containing(root: Path, package: str, text: str) -> list:
    """Source files of ``root/package`` holding ``text`` (relative paths, sorted)."""
    found = []
    for path in sorted((root / package).rglob("*.py")):
        try:
            if text in path.read_text(errors="replace"):
                found.append(path.relative_to(root).as_posix())
        except OSError:
            continue
    return found


def check_diff(diff: Diff, root: Path) -> dict:
    ok, message = dry_run(diff.path, root)
    if ok:
        return {"state": APPLIES, "detail": ""}
    if dry_run(diff.path, root, reverse=True)[0]:
        return {"state": APPLIED, "detail": ""}
    for spec in diff.header.get("Obsolete-if", []):
        rel, text = _marker(spec)
        if _contains(root, rel, text):
            return {"state": OBSOLETE, "detail": f"upstream has its own fix: {rel} contains {text!r}"}
    missing = [f for f in diff.edited_files() if not (root / f).is_file()]
    if missing:  # another layout (an older or newer version), not an upstream fix
        return {"state": CONFLICT, "detail": f"files not in this tree: {', '.join(missing)}"}
    for spec in diff.header.get("Obsolete-if-missing", []):
        rel, text = _marker(spec)
        if _contains(root, rel, text):
            continue
        # Gone from the file the diff edits is not gone: another version may define it elsewhere
        # (verl 0.5.0 has MegatronWorker._init_hf_config_and_tf_config in
        # single_controller/base/megatron/worker.py, 0.6.1 in workers/megatron_workers.py).
        elsewhere = _files_containing(root, rel.split("/")[0], text)
        if elsewhere:
            return {"state": CONFLICT, "detail": f"the code this fixes is in {', '.join(elsewhere)} here, not in "
                                                 f"{rel}: a layout this diff was not made for"}
        return {"state": OBSOLETE, "detail": f"the code this fixes is gone: no file under {rel.split('/')[0]}/ "
                                             f"has {text!r} (the diff edits {rel})"}
    lines = [ln for ln in message.splitlines() if "error" in ln.lower() or "failed" in ln.lower()]
    return {"state": CONFLICT, "detail": "; ".join(lines[:3]) or message[-300:]}


def check_tree(project: str, root: Path, diffs) -> dict:
    """The report for one source tree: its version, whether diffs exist for it, each diff's state."""
    version = tree_version(project, root)
    known = versions_with_diffs(diffs, project)
    matching = release(version) in known
    chosen = [d for d in diffs if d.project == project and (not matching or d.version == release(version))]
    rows = []
    for diff in chosen:
        row = check_diff(diff, root)
        rows.append({"fix": diff.fix, "for_version": diff.version, "runtime_patch": diff.runtime_patch,
                     "subject": diff.subject, "diff": str(diff.path), **row})
    note = ""
    if not known:
        matching = True  # nothing to check is not a problem of this tree
        note = f"no diffs for {project} in {patches_dir()}"
    elif not version:
        note = f"no version stamp found under {root}/{project}"
    elif not matching:
        note = (f"{project} {version} is not a version these diffs were made for "
                f"({', '.join(known) or 'none'}); the diffs of every version were tried")
    return {"project": project, "root": str(root), "version": version or None, "supported": matching,
            "note": note, "diffs": rows}


def render(report: dict) -> str:
    lines = [f"{report['project']} {report['version'] or '?'} at {report['root']}"]
    if report["note"]:
        lines.append(f"  {'WARNING: ' if not report['supported'] else ''}{report['note']}")
    width = max([len(r["fix"]) for r in report["diffs"]] or [4])
    for row in report["diffs"]:
        label = row["fix"] if report["supported"] else f"{row['fix']} ({row['for_version']})"
        lines.append(f"  {label:<{width + 10}} {row['state']}" + (f": {row['detail']}" if row["detail"] else ""))
    todo = [r for r in report["diffs"] if r["state"] == APPLIES]
    if todo:
        lines.append(f"  to apply: cd {report['root']} && git apply " + " ".join(r["diff"] for r in todo))
    return "\n".join(lines)


def judge(reports) -> list:
    """A tree of a version with no diffs, or a diff that does not apply, is a warning (exit 1)."""
    found = [Finding(WARNING, r["project"], r["note"]) for r in reports if not r["supported"]]
    found += [Finding(WARNING, f"{r['project']} {d['fix']}", f"{d['state']}: {d['detail']}")
              for r in reports for d in r["diffs"] if d["state"] == CONFLICT]
    return found


def run(diffs_dir=None, project=None, source=None, as_json: bool = False) -> int:
    """Check the diffs against the trees; print the reports; the exit code. Bad input raises SourceError."""
    diffs = load_diffs(diffs_dir)
    if not diffs:
        raise SourceError(f"no diffs under {diffs_dir or patches_dir()}")
    if project:
        projects = [project]
    elif source:
        projects = projects_in(source)
    else:
        projects = [p for p in PROJECTS if importlib.util.find_spec(p) is not None]
    _tool()
    reports = [check_tree(p, locate(p, source), diffs) for p in projects]
    found = judge(reports)
    print(to_json("patches check", found, trees=reports) if as_json else "\n".join(render(r) for r in reports))
    return exit_code(found)

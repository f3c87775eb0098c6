"""Fetch the website's third-party JavaScript at build time, so pages load nothing from a CDN.

Readers often sit behind networks where public CDNs are slow or blocked, so the
site serves its own copy of the math engine (MathJax 3). The files come from the
npm registry (``npm pack``), are unpacked into ``_vendor/`` (git-ignored, never
committed) and Sphinx copies that folder into ``_build/html/_static/``
(``html_static_path`` in ``_config.yml``; ``mathjax_path`` points at it).

Usage: ``python tools/fetch_assets.py`` (``make book`` runs it; the Sphinx
extension ``tools/book_ext.py`` calls :func:`ensure_assets` too, so a plain
``jupyter-book build .`` works as well). A stamp file records what was fetched:
a second run with the same pins does nothing.
"""
from __future__ import annotations

import hashlib
import json
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENDOR = ROOT / "_vendor"

# Exact versions: the site is reproducible and the stamp knows when to refetch.
MATHJAX = "mathjax@3.2.2"
MATHJAX_TGZ_SHA256 = "1b9c0a1c44df864e915690558e72adb9cc5203360daefd385084ced3b6c64c09"
# What of MathJax's ``es5/`` folder the site needs: the TeX+MathML->CommonHTML bundle,
# the TeX extensions it autoloads, the CommonHTML fonts, the menu and its
# accessibility tools (speech rule engine), loaded on demand from the same folder.
MATHJAX_PARTS = [
    "tex-mml-chtml.js",
    "input",
    "output/chtml.js",
    "output/chtml",
    "a11y",
    "ui",
    "adaptors",
    "sre",
]
# The one file pages load; ``mathjax_path`` in _config.yml is this, relative to _static/.
MATHJAX_ENTRY = "mathjax/tex-mml-chtml.js"


def _stamp_text() -> str:
    return json.dumps({"mathjax": MATHJAX, "sha256": MATHJAX_TGZ_SHA256, "parts": MATHJAX_PARTS}, sort_keys=True)


def _npm_pack(spec: str, dest: pathlib.Path) -> pathlib.Path:
    """``npm pack spec`` into ``dest``; return the tarball path."""
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError(
            f"npm is needed to fetch {spec} for the website (MathJax is served by the site itself, "
            "not from a CDN). Install Node.js/npm (Debian: apt-get install npm) and build again."
        )
    out = subprocess.run([npm, "pack", "--silent", "--pack-destination", str(dest), spec],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"`npm pack {spec}` failed:\n{out.stdout}\n{out.stderr}")
    tarballs = sorted(dest.glob("*.tgz"))
    if len(tarballs) != 1:
        raise RuntimeError(f"`npm pack {spec}` produced {len(tarballs)} tarballs in {dest}, expected 1")
    return tarballs[0]


def _check_sha256(path: pathlib.Path, expected: str) -> None:
    got = hashlib.sha256(path.read_bytes()).hexdigest()
    if got != expected:
        raise RuntimeError(f"{path.name}: sha256 {got} but expected {expected} (tools/fetch_assets.py)")


def _safe_extract(tgz: pathlib.Path, dest: pathlib.Path) -> pathlib.Path:
    with tarfile.open(tgz) as tar:
        for member in tar.getmembers():
            target = (dest / member.name).resolve()
            if not str(target).startswith(str(dest.resolve())) or member.issym() or member.islnk():
                raise RuntimeError(f"refusing to unpack suspicious member {member.name!r} of {tgz.name}")
        if hasattr(tarfile, "data_filter"):  # Python >= 3.12 (and security backports)
            tar.extractall(dest, filter="data")
        else:
            tar.extractall(dest)
    return dest / "package"


def fetch_mathjax(vendor: pathlib.Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        tgz = _npm_pack(MATHJAX, tmp)
        _check_sha256(tgz, MATHJAX_TGZ_SHA256)
        package = _safe_extract(tgz, tmp)
        es5 = package / "es5"
        target = vendor / "mathjax"
        for part in MATHJAX_PARTS:
            src = es5 / part
            if not src.exists():
                raise RuntimeError(f"{MATHJAX} has no es5/{part}")
            dst = target / part
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, dst)
            else:
                shutil.copy2(src, dst)
        shutil.copy2(package / "LICENSE", target / "LICENSE")


def ensure_assets(vendor: pathlib.Path = VENDOR, quiet: bool = False) -> pathlib.Path:
    """Make sure ``vendor`` holds the pinned assets; fetch them if not. Return ``vendor``."""
    stamp = vendor / ".stamp"
    want = _stamp_text()
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == want and (vendor / MATHJAX_ENTRY).is_file():
        return vendor
    if not quiet:
        print(f"fetching {MATHJAX} from the npm registry into {vendor} ...", file=sys.stderr)
    staging = vendor.with_name(vendor.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    fetch_mathjax(staging)
    (staging / ".stamp").write_text(want, encoding="utf-8")
    shutil.rmtree(vendor, ignore_errors=True)
    staging.rename(vendor)
    return vendor


if __name__ == "__main__":
    ensure_assets()
    print(f"assets ready in {VENDOR.relative_to(ROOT)}/ ({MATHJAX})")

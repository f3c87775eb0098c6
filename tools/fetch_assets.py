"""Fetch the website's third-party JavaScript at build time, so pages load nothing from a CDN.

Readers often sit behind networks where public CDNs are slow or blocked, so the site
serves its own copies of the math engine (MathJax 3) and of the libraries that draw the
interactive figures (vega, vega-lite and vega-embed, the versions Altair's spec schema
names). Every package comes from the npm registry (``npm pack``), pinned to an exact
version and checked against the tarball's sha256 (table :data:`ASSETS`); the needed files
are unpacked into ``_vendor/`` (git-ignored, never committed) and Sphinx copies that
folder into ``_build/html/_static/`` (``html_static_path`` in ``_config.yml``).

Usage: ``python tools/fetch_assets.py`` (``make book`` runs it; the Sphinx extension
``tools/book_ext.py`` calls :func:`ensure_assets` too, so a plain ``jupyter-book build .``
works as well). A stamp file records what was fetched: a second run with the same pins
does nothing.
"""
from __future__ import annotations

import dataclasses
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


@dataclasses.dataclass(frozen=True)
class NpmAsset:
    """One npm package: what to fetch, its tarball's sha256, which of its files the site serves.

    ``parts`` are paths inside ``package/<source>/`` (files or folders); they are copied to
    ``_vendor/<dest>/`` (so the site serves them under ``_static/<dest>/``), with the
    package's LICENSE next to them.
    """

    spec: str      # "name@exact.version"
    sha256: str    # of the tarball `npm pack` downloads
    source: str    # folder inside the package
    parts: tuple
    dest: str

    @property
    def name(self) -> str:
        return self.spec.rsplit("@", 1)[0]

    @property
    def version(self) -> str:
        return self.spec.rsplit("@", 1)[1]


# Exact versions: the site is reproducible and the stamp knows when to refetch.
ASSETS = (
    # MathJax: the TeX+MathML->CommonHTML bundle, the TeX extensions it autoloads, the
    # CommonHTML fonts, the menu and its accessibility tools (speech rule engine), loaded
    # on demand from the same folder.
    NpmAsset("mathjax@3.2.2", "1b9c0a1c44df864e915690558e72adb9cc5203360daefd385084ced3b6c64c09", "es5",
             ("tex-mml-chtml.js", "input", "output/chtml.js", "output/chtml", "a11y", "ui", "adaptors", "sre"),
             "mathjax"),
    # The interactive figures (mha.interactive): vega-lite must be the version of Altair's
    # schema (alt.SCHEMA_VERSION), vega and vega-embed the majors Altair names
    # (alt.VEGA_VERSION, alt.VEGAEMBED_VERSION); tests/test_interactive.py checks it.
    NpmAsset("vega@6.4.0", "3521fb6ff68a94a40323954f0ba4484ba4014b157bfd37f89a3b063082320c42", "build",
             ("vega.min.js",), "vega"),
    NpmAsset("vega-lite@6.4.1", "7226845c140626b2bf2dae3dd7372d6e2dbdf65380d857c70da8e487ca6cf15e", "build",
             ("vega-lite.min.js",), "vega-lite"),
    NpmAsset("vega-embed@7.3.0", "d9a958ced3240f0418df7d5e12e97dba6e63cecda15b8403e47a0db7eb6ea859", "build",
             ("vega-embed.min.js",), "vega-embed"),
    # Chapter 13's playground runs the trained model in the page (tools/static/numerals-playground.js):
    # the WebAssembly build of ONNX Runtime, its loader (imported by ort.wasm.min.js) and the
    # 14 MB binary, all loaded only when the reader starts the model. (No LICENSE file in this
    # package: its package.json, which names the MIT licence, is copied instead.)
    NpmAsset("onnxruntime-web@1.30.0", "d2228df7e4616bc3348bf504ee888f3bec43789a273f0a63f3e68d203ce3bf71", "dist",
             ("ort.wasm.min.js", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm"), "onnxruntime-web"),
)
MATHJAX = ASSETS[0].spec
MATHJAX_TGZ_SHA256 = ASSETS[0].sha256
MATHJAX_PARTS = list(ASSETS[0].parts)
# The one MathJax file pages load; ``mathjax_path`` in _config.yml is this, relative to _static/.
MATHJAX_ENTRY = "mathjax/tex-mml-chtml.js"
# What a page with an interactive figure loads, in this order (relative to _static/);
# tools/book_ext.py adds them to those pages only.
VEGA_SCRIPTS = ("vega/vega.min.js", "vega-lite/vega-lite.min.js", "vega-embed/vega-embed.min.js")
# What chapter 13's playground loads when the reader starts it (relative to _static/).
ORT_SCRIPT = "onnxruntime-web/ort.wasm.min.js"
ORT_WASM = "onnxruntime-web/ort-wasm-simd-threaded.wasm"


def asset(name: str) -> NpmAsset:
    """The pinned npm package called ``name``."""
    for a in ASSETS:
        if a.name == name:
            return a
    raise KeyError(name)


def _stamp_text() -> str:
    return json.dumps([dataclasses.asdict(a) for a in ASSETS], sort_keys=True)


def _npm_pack(spec: str, dest: pathlib.Path) -> pathlib.Path:
    """``npm pack spec`` into ``dest``; return the tarball path."""
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError(
            f"npm is needed to fetch {spec} for the website (its scripts are served by the site itself, "
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


def _verify_sha256(path: pathlib.Path, expected: str) -> None:
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


def fetch(a: NpmAsset, vendor: pathlib.Path) -> None:
    """Fetch one package, check its sha256 and copy its ``parts`` into ``vendor/<dest>``."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        tgz = _npm_pack(a.spec, tmp)
        _verify_sha256(tgz, a.sha256)
        package = _safe_extract(tgz, tmp)
        source = package / a.source
        target = vendor / a.dest
        for part in a.parts:
            src = source / part
            if not src.exists():
                raise RuntimeError(f"{a.spec} has no {a.source}/{part}")
            dst = target / part
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, dst)
            else:
                shutil.copy2(src, dst)
        licence = package / "LICENSE"
        licence = licence if licence.is_file() else package / "package.json"  # names the licence
        shutil.copy2(licence, target / licence.name)


def _complete(vendor: pathlib.Path) -> bool:
    return all((vendor / f).is_file() for f in (MATHJAX_ENTRY, *VEGA_SCRIPTS))


def ensure_assets(vendor: pathlib.Path = VENDOR, quiet: bool = False) -> pathlib.Path:
    """Make sure ``vendor`` holds the pinned assets; fetch them if not. Return ``vendor``."""
    stamp = vendor / ".stamp"
    want = _stamp_text()
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == want and _complete(vendor):
        return vendor
    if not quiet:
        print(f"fetching {', '.join(a.spec for a in ASSETS)} from the npm registry into {vendor} ...",
              file=sys.stderr)
    staging = vendor.with_name(vendor.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for a in ASSETS:
        fetch(a, staging)
    (staging / ".stamp").write_text(want, encoding="utf-8")
    shutil.rmtree(vendor, ignore_errors=True)
    staging.rename(vendor)
    return vendor


if __name__ == "__main__":
    ensure_assets()
    print(f"assets ready in {VENDOR.relative_to(ROOT)}/ ({', '.join(a.spec for a in ASSETS)})")

"""Install the website's pinned npm packages at build time and lay out what the pages serve.

Readers often sit behind networks where public CDNs are slow or blocked, so the site
serves its own copies of everything a page loads. The npm packages are pinned in
``package.json`` (exact versions) and ``package-lock.json`` (every package with its
registry ``integrity`` hash, which ``npm ci`` verifies), installed into ``node_modules/``
(git-ignored) by ``npm ci``:

- ``katex``: renders every formula at build time (``tools/book_ext.py`` runs it in node);
  the site serves only its stylesheet and fonts, no math JavaScript;
- ``pagefind``: builds the Chinese search index over ``_build/html`` after the build;
- ``vega``, ``vega-lite``, ``vega-embed``: draw the interactive figures (the versions
  Altair's spec schema names; tests/course/test_page_figures.py checks them);
- ``onnxruntime-web``: runs chapter 13's trained model in the page (its playground), loaded
  only when the reader starts it;
- ``axe-core`` (dev): the accessibility checks of the browser tests.

The files the pages load (table :data:`SERVED`) are copied into ``_vendor/`` (git-ignored)
and Sphinx copies that folder into ``_build/html/_static/`` (``html_static_path``). The 14 MB
WebAssembly runtime is also stored gzip-compressed (:data:`PRECOMPRESSED`, 3.7 MB): the playground
fetches that copy and inflates it in the page (``DecompressionStream``), so its download is small
on any host, whether or not the host compresses ``application/wasm``.

To add a package: ``npm install --save-exact NAME@VERSION`` (updates both files), and if
the pages load some of its files, one ``Served(...)`` row below.

Usage: ``python tools/fetch_assets.py`` (the Sphinx extension ``tools/book_ext.py`` calls
:func:`ensure_assets` at the start of every build, so ``make book`` on a fresh machine does
all the set-up). Stamps record what was installed and copied: a second run with the same
lock file does nothing (no network).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENDOR = ROOT / "_vendor"
NODE_MODULES = ROOT / "node_modules"
LOCK = ROOT / "package-lock.json"


@dataclasses.dataclass(frozen=True)
class Served:
    """Files of one installed npm package that the site serves.

    ``parts`` are paths inside ``node_modules/<package>/<source>/`` (files or folders), copied
    to ``_vendor/<dest>/`` (the site serves them under ``_static/<dest>/``) with the package's
    LICENSE next to them.
    """

    package: str
    source: str
    parts: tuple
    dest: str


SERVED = (
    # KaTeX's stylesheet and fonts: the formulas are HTML+MathML written at build time.
    Served("katex", "dist", ("katex.min.css", "fonts"), "katex"),
    Served("vega", "build", ("vega.min.js",), "vega"),
    Served("vega-lite", "build", ("vega-lite.min.js",), "vega-lite"),
    Served("vega-embed", "build", ("vega-embed.min.js",), "vega-embed"),
    # Chapter 13's playground (tools/static/numerals-playground.js): the WebAssembly build of ONNX
    # Runtime, its loader (imported by ort.wasm.min.js) and the 14 MB binary.
    Served("onnxruntime-web", "dist", ("ort.wasm.min.js", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm"),
           "onnxruntime-web"),
)
# What a page with an interactive figure loads, in this order (relative to _static/);
# tools/book_ext.py adds them to those pages only.
VEGA_SCRIPTS = ("vega/vega.min.js", "vega-lite/vega-lite.min.js", "vega-embed/vega-embed.min.js")
KATEX_CSS = "katex/katex.min.css"
# What chapter 13's playground loads when the reader starts it (relative to _static/).
ORT_SCRIPT = "onnxruntime-web/ort.wasm.min.js"
ORT_WASM = "onnxruntime-web/ort-wasm-simd-threaded.wasm"
# Served a second time as FILE.gz (gzip -9, no timestamp: the same bytes at every build).
PRECOMPRESSED = (ORT_WASM,)
# Every file some page loads: the vendor folder is complete when all of them are there.
PAGE_FILES = (KATEX_CSS, *VEGA_SCRIPTS, ORT_SCRIPT, ORT_WASM, *(f + ".gz" for f in PRECOMPRESSED))


def gzip_bytes(data: bytes) -> bytes:
    """``data`` gzip-compressed, deterministically (level 9, mtime 0)."""
    import gzip

    return gzip.compress(data, compresslevel=9, mtime=0)


@dataclasses.dataclass(frozen=True)
class NpmPackage:
    """A package as ``package-lock.json`` pins it."""

    name: str
    version: str
    integrity: str  # "sha512-...", checked by npm ci


def locked() -> dict:
    """Every package of ``package-lock.json``, by name (top-level installs)."""
    packages = json.loads(LOCK.read_text(encoding="utf-8"))["packages"]
    return {path.split("node_modules/", 1)[1]: NpmPackage(path.split("node_modules/", 1)[1], p["version"],
                                                          p.get("integrity", ""))
            for path, p in packages.items() if path.count("node_modules/") == 1}


def direct() -> tuple:
    """The packages ``package.json`` names (dependencies and devDependencies), as locked."""
    spec = json.loads((ROOT / "package.json").read_text(encoding="utf-8"))
    names = [*spec.get("dependencies", {}), *spec.get("devDependencies", {})]
    pins = locked()
    return tuple(pins[n] for n in names)


def asset(name: str) -> NpmPackage:
    """The pinned npm package called ``name`` (one that package.json names)."""
    for a in direct():
        if a.name == name:
            return a
    raise KeyError(name)


def _lock_digest() -> str:
    return hashlib.sha256(LOCK.read_bytes()).hexdigest()


def package_dir(name: str, node_modules: pathlib.Path = NODE_MODULES) -> pathlib.Path:
    return node_modules / name


def npm_ci(node_modules: pathlib.Path = NODE_MODULES, quiet: bool = False) -> pathlib.Path:
    """``npm ci`` (install exactly the lock file, integrity checked) unless already done for this lock."""
    stamp = node_modules / ".mha-lock-sha256"
    want = _lock_digest()
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == want:
        return node_modules
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError(
            "npm is needed to install the website's pinned packages (package.json: KaTeX, Pagefind, vega, ONNX Runtime; "
            "the site serves its own copies, not a CDN). Install Node.js/npm (Debian: apt-get install npm) "
            "and build again.")
    if not quiet:
        print("npm ci: installing the pinned packages of package-lock.json into node_modules/ ...", file=sys.stderr)
    # --ignore-scripts: no package needs an install script (pagefind's binary comes as an npm package)
    out = subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
                         cwd=node_modules.parent, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"`npm ci` failed:\n{out.stdout}\n{out.stderr}")
    stamp.write_text(want, encoding="utf-8")
    return node_modules


def _stamp_text() -> str:
    return json.dumps({"lock": _lock_digest(), "served": [dataclasses.asdict(s) for s in SERVED],
                       "precompressed": PRECOMPRESSED}, sort_keys=True)


def _complete(vendor: pathlib.Path) -> bool:
    return all((vendor / f).is_file() for f in PAGE_FILES)


def copy_served(node_modules: pathlib.Path, vendor: pathlib.Path) -> None:
    """Copy the :data:`SERVED` files of the installed packages into ``vendor`` (replacing it)."""
    staging = vendor.with_name(vendor.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for s in SERVED:
        package = package_dir(s.package, node_modules)
        for part in s.parts:
            src = package / s.source / part
            if not src.exists():
                raise RuntimeError(f"npm package {s.package} has no {s.source}/{part} (tools/fetch_assets.py SERVED)")
            dst = staging / s.dest / part
            dst.parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
        # (onnxruntime-web ships no LICENSE file: its package.json, which names the MIT licence, instead)
        licence = package / "LICENSE" if (package / "LICENSE").is_file() else package / "package.json"
        shutil.copy2(licence, staging / s.dest / licence.name)
    for name in PRECOMPRESSED:
        (staging / (name + ".gz")).write_bytes(gzip_bytes((staging / name).read_bytes()))
    (staging / ".stamp").write_text(_stamp_text(), encoding="utf-8")
    shutil.rmtree(vendor, ignore_errors=True)
    staging.rename(vendor)


def ensure_assets(vendor: pathlib.Path = VENDOR, quiet: bool = False) -> pathlib.Path:
    """Make sure ``node_modules`` matches the lock and ``vendor`` holds the served files. Return ``vendor``."""
    npm_ci(quiet=quiet)
    stamp = vendor / ".stamp"
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == _stamp_text() and _complete(vendor):
        return vendor
    copy_served(NODE_MODULES, vendor)
    return vendor


if __name__ == "__main__":
    ensure_assets()
    print(f"assets ready in {VENDOR.relative_to(ROOT)}/ ({', '.join(f'{a.name}@{a.version}' for a in direct())})")

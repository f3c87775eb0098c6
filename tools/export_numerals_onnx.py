"""Export chapter 13's trained numeral Transformer for the in-browser playground (build time).

The page (``tools/static/numerals-playground.js``) runs the *same* model as the chapter: this
script loads the shipped weights with :func:`mha.course.numerals.load_pretrained`, wraps the model's
own teacher-forced pass (:meth:`NumeralTransformer.attention_maps`) and exports it with
``torch.onnx.export(..., dynamo=True)``. The page only tokenises, loops over the decoding steps
(feeding ``<bos> d1 ... dk`` and taking the argmax of the last position) and draws.

Two files are written into ``<out>/numerals/``:

* ``numerals_4h.onnx``: inputs ``src`` (1, S) and ``tgt_in`` (1, T) int64 token ids; outputs
  ``logits`` (1, T, V_tgt) and the attention weights of every layer and head,
  ``encoder`` (n_enc, 1, h, S, S), ``decoder`` (n_dec, 1, h, T, T), ``cross`` (n_dec, 1, h, T, S);
* ``numerals_4h.json``: everything else the page needs, read from the Python modules (nothing
  is typed twice): the vocabularies and special ids (:mod:`mha.course.numerals.data`), the model's
  sizes, the chapter's figure labels (:mod:`mha.course.pictures.numerals`) and colour map (``mha.course.pictures``'s
  ``CMAP``), and the file sizes the page reports while loading.

A stamp (sha256 of the inputs: weights, this script and the model code, library versions) makes a
second build with nothing changed skip the export. Usage: ``python tools/export_numerals_onnx.py [OUT]``.
"""
from __future__ import annotations

import hashlib
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
KIND = "4heads"
ONNX_NAME = "numerals_4h.onnx"
TABLES_NAME = "numerals_4h.json"
INPUTS = ("src", "tgt_in")
OUTPUTS = ("logits", "encoder", "decoder", "cross")
COLORS = 64  # stops of the colour map shipped to the page


def playground_module(model):
    """The exported computation: ``(src (1, S), tgt_in (1, T)) -> (logits, encoder, decoder, cross)``.

    It is :meth:`NumeralTransformer.attention_maps` with the padding mask the model's own
    :func:`mha.masks.padding_mask` builds, the per-layer lists stacked into one tensor each.
    """
    import torch

    from mha.masks import padding_mask
    from mha.course.numerals.data import PAD

    class Playground(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, src, tgt_in):
            maps = self.model.attention_maps(src, padding_mask(src, PAD), tgt_in)
            return (maps["logits"], torch.stack(maps["encoder"]), torch.stack(maps["decoder"]),
                    torch.stack(maps["cross"]))

    return Playground().eval()


def max_positions(model) -> int:
    """How many positions the model's positional table holds (its longest source or target)."""
    return int(model.pe.shape[0])


def export_onnx(model, path: pathlib.Path) -> pathlib.Path:
    """Export :func:`playground_module` of ``model`` to ``path`` with dynamic S and T; return ``path``.

    Raises ``RuntimeError`` if the exported graph fixed S or T to the example's length (the
    exporter would rather specialise than fail, which would make every other input fail in the page).
    """
    import onnx
    import torch

    from mha.course.numerals.data import BOS, encode_source

    longest = max_positions(model)
    src, _ = encode_source(["两千零二十六"])  # example inputs; S and T stay symbolic
    tgt_in = torch.tensor([[BOS, 5, 3, 5]])
    dims = {"src": {1: torch.export.Dim("S", min=1, max=longest)},
            "tgt_in": {1: torch.export.Dim("T", min=1, max=longest)}}
    with torch.no_grad():
        program = torch.onnx.export(playground_module(model), (src, tgt_in), dynamo=True, input_names=list(INPUTS),
                                    output_names=list(OUTPUTS), dynamic_shapes=dims, verbose=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    program.save(str(path))
    graph = onnx.load(str(path)).graph
    fixed = [(i.name, [d.dim_value or d.dim_param for d in i.type.tensor_type.shape.dim]) for i in graph.input
             if i.type.tensor_type.shape.dim[1].dim_value]
    if fixed:
        raise RuntimeError(f"the export fixed a sequence length instead of keeping it symbolic: {fixed}")
    return path


def page_tables(model) -> dict:
    """What the page needs besides the graph, all read from the Python modules."""
    import matplotlib

    from mha.course.numerals import data
    from mha.course.pictures import style
    from mha.course.pictures.numerals import BLOCK_TITLES, head_label, row_label

    cfg = model.cfg
    n_layers = {"encoder": cfg.n_encoder_layers, "decoder": cfg.n_decoder_layers, "cross": cfg.n_decoder_layers}
    cmap = matplotlib.colormaps[style.CMAP]
    return {
        "model": KIND,
        "config": cfg.to_dict(),
        "src_tokens": list(data.SRC_TOKENS),
        "tgt_tokens": list(data.TGT_TOKENS),
        "pad": data.PAD, "bos": data.BOS, "eos": data.EOS,
        "max_source_len": data.MAX_SOURCE_LEN,    # the longest numeral of the task
        "max_target_len": data.MAX_TARGET_LEN,    # decoding steps (digits + <eos>), as greedy_ids
        "max_positions": max_positions(model),    # what the model itself accepts
        "inputs": list(INPUTS), "outputs": list(OUTPUTS),
        "blocks": [{"name": b, "title": BLOCK_TITLES[b], "layers": [row_label(b, l) for l in range(n_layers[b])]}
                   for b in BLOCK_TITLES],
        "heads": [head_label(i) for i in range(cfg.n_heads)],
        "colormap": {"name": style.CMAP,
                     "colors": [matplotlib.colors.to_hex(cmap(i / (COLORS - 1))) for i in range(COLORS)]},
    }


def _inputs_digest(weights: pathlib.Path) -> str:
    import onnxscript
    import torch

    import mha

    code = [pathlib.Path(__file__)] + sorted(pathlib.Path(mha.__file__).parent.rglob("*.py"))
    h = hashlib.sha256()
    for path in [weights, *code]:
        h.update(path.as_posix().encode() + b"\0" + path.read_bytes())
    h.update(f"torch {torch.__version__} onnxscript {onnxscript.__version__}".encode())
    return h.hexdigest()


def ensure_exported(out: pathlib.Path) -> pathlib.Path:
    """Make sure ``out/numerals/`` holds the graph and the tables of the shipped model; return ``out``."""
    from mha.course.numerals import DATA_DIR, load_pretrained, shipped_info

    folder = out / "numerals"
    stamp = folder / ".stamp"
    digest = _inputs_digest(DATA_DIR / shipped_info(KIND)["file"])
    if stamp.is_file() and stamp.read_text() == digest and all((folder / n).is_file() for n in (ONNX_NAME, TABLES_NAME)):
        return out
    model = load_pretrained(KIND)
    onnx_path = export_onnx(model, folder / ONNX_NAME)
    tables = page_tables(model)
    tables["onnx"] = {"file": ONNX_NAME, "bytes": onnx_path.stat().st_size}
    (folder / TABLES_NAME).write_text(json.dumps(tables, ensure_ascii=False, indent=1), encoding="utf-8")
    stamp.write_text(digest)
    return out


if __name__ == "__main__":
    target = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "book" / "_generated" / "playground"
    ensure_exported(target)
    print(f"exported to {target / 'numerals'}")

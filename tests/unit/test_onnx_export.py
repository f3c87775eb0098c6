"""Chapter 13's model exported for the browser (tools/export_numerals_onnx.py), checked without a browser.

* mha's value checks (NaN inputs, token ids out of range) run on every ordinary call and skip
  themselves while torch.export traces (they would stop it); symbolic sizes stay symbolic;
* the exported graph, run by onnxruntime (Python), gives PyTorch's logits and attention weights
  (max abs difference printed, <= 1e-4) for inputs of every length, one character to the longest;
* the page's decoding loop (greedy, one run per step, argmax of the last position) over that graph
  answers exactly what ``python -m mha.course.numerals`` answers, on a few hundred numerals;

tests/browser/test_browser_playground.py checks the same in the page itself for some inputs.
"""
from __future__ import annotations

import json
import random
import subprocess
import sys

import numpy as np
import pytest
import torch

import export_numerals_onnx as ex

from mha import MultiHeadAttention
from mha.course.numerals import held_out_numbers, load_pretrained, to_chinese
from mha.course.numerals.data import MAX_SOURCE_LEN, SRC_TOKENS, encode_source

ort = pytest.importorskip("onnxruntime")
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = ex.ensure_exported(tmp_path_factory.mktemp("playground")) / "numerals"
    tables = json.loads((out / ex.TABLES_NAME).read_text(encoding="utf-8"))
    session = ort.InferenceSession(str(out / ex.ONNX_NAME), providers=["CPUExecutionProvider"])
    return {"session": session, "tables": tables, "dir": out}


@pytest.fixture(scope="module")
def model():
    return load_pretrained(ex.KIND)


def _run(session, src_ids, tgt_ids) -> dict:
    feeds = {"src": np.array([src_ids], dtype=np.int64), "tgt_in": np.array([tgt_ids], dtype=np.int64)}
    return dict(zip(ex.OUTPUTS, session.run(list(ex.OUTPUTS), feeds)))


def page_decode(session, tables, text) -> tuple[str, list]:
    """What numerals-playground.js does: ids from the tables, one run per step, argmax of the last row."""
    src = [tables["src_tokens"].index(c) for c in text]
    tgt = [tables["bos"]]
    while True:
        nxt = int(_run(session, src, tgt)["logits"][0, -1].argmax())
        if nxt == tables["eos"] or len(tgt) >= tables["max_target_len"]:
            break
        tgt.append(nxt)
    return "".join(tables["tgt_tokens"][i] for i in tgt[1:]), tgt


def _cli(lines) -> list:
    run = subprocess.run([sys.executable, "-m", "mha.course.numerals"], input="\n".join(lines) + "\n",
                         capture_output=True, text=True, encoding="utf-8", check=False)
    return run.stdout.splitlines()


def _numerals(count: int, seed: int = 22) -> list:
    """Numerals of every length: held-out numbers, some training-like ones, the extremes."""
    rng = random.Random(seed)
    numbers = [0, 1, 2, 10, 12, 20, 110, 1001, 20000, 30500, 10001000, 99999999, 97979797]
    numbers += held_out_numbers(count // 2)
    numbers += [rng.randrange(10 ** rng.randrange(1, 9)) for _ in range(count - len(numbers))]
    return [to_chinese(n) for n in numbers]


# ---------------------------------------------------------------- validation while exporting

class _Self(torch.nn.Module):
    def __init__(self, causal: bool):
        super().__init__()
        self.attn, self.causal = MultiHeadAttention(8, 2, dropout=0.0), causal

    def forward(self, x):
        return self.attn(x, x, x, is_causal=self.causal, need_weights=True)


def test_value_checks_still_run_outside_an_export(model):
    layer = MultiHeadAttention(8, 2, dropout=0.0)
    x = torch.randn(1, 3, 8)
    x[0, 1, 2] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        layer(x, x, x)
    src, mask = encode_source(["十二"])
    with pytest.raises(ValueError, match="ids must lie in"):
        model.encode(src + len(SRC_TOKENS), mask)


@pytest.mark.parametrize("causal", [False, True])
def test_layers_export_with_a_symbolic_length(causal):
    """torch.export stops at a value check (NaN sum) and fixes a size that goes through operator.index
    (causal_mask's require_int); both skip/keep symbolic while exporting, so the length stays free."""
    module = _Self(causal).eval()
    L = torch.export.Dim("L", min=1, max=32)
    program = torch.export.export(module, (torch.randn(1, 5, 8),), dynamic_shapes={"x": {1: L}})
    for n in (1, 7):
        x = torch.randn(1, n, 8)
        got, want = program.module()(x), module(x)
        assert all(torch.allclose(g, w, atol=1e-6) for g, w in zip(got, want))


def test_without_the_skip_the_value_check_stops_the_export(monkeypatch):
    import mha.validate

    monkeypatch.setattr(mha.validate, "tracing", lambda: False)
    with pytest.raises(Exception, match="(?i)data.dependent|guard"):
        torch.export.export(_Self(False).eval(), (torch.randn(1, 5, 8),))


def test_the_exported_graph_keeps_both_lengths_free(exported):
    for i in exported["session"].get_inputs():
        assert isinstance(i.shape[1], str), f"{i.name} has a fixed length {i.shape}"


# ---------------------------------------------------------------- same numbers as PyTorch

def test_onnxruntime_matches_pytorch(exported, model):
    words = ["零", "十二", "两千零二十六", "三万零五百", to_chinese(97979797)] + _numerals(40)[13:]
    assert max(len(w) for w in words) == MAX_SOURCE_LEN
    worst = {name: 0.0 for name in ex.OUTPUTS}
    for text in words:
        _, tgt = page_decode(exported["session"], exported["tables"], text)
        src, mask = encode_source([text])
        got = _run(exported["session"], src[0].tolist(), tgt)
        with torch.no_grad():
            maps = model.attention_maps(src, mask, torch.tensor([tgt]))
        want = {"logits": maps["logits"], **{k: torch.stack(maps[k]) for k in ("encoder", "decoder", "cross")}}
        for name in ex.OUTPUTS:
            assert got[name].shape == tuple(want[name].shape), name
            worst[name] = max(worst[name], float(np.abs(got[name] - want[name].numpy()).max()))
    print(f"onnxruntime vs PyTorch on {len(words)} inputs, max abs difference:", worst)
    assert max(worst.values()) <= TOLERANCE, worst


def test_the_pages_decoding_loop_answers_like_the_cli(exported):
    words = _numerals(300)
    page = [page_decode(exported["session"], exported["tables"], w)[0] for w in words]
    cli = _cli(words)
    assert len(cli) == len(words)
    differ = [(w, p, c) for w, p, c in zip(words, page, cli) if p != c]
    assert not differ, f"{len(differ)} of {len(words)} differ (numeral, page, CLI): {differ[:5]}"


def test_a_second_export_with_nothing_changed_is_skipped(exported):
    before = (exported["dir"] / ex.ONNX_NAME).stat().st_mtime_ns
    ex.ensure_exported(exported["dir"].parent)
    assert (exported["dir"] / ex.ONNX_NAME).stat().st_mtime_ns == before

"""The package's two rooms: a torch-only core, the course beside it, and every old name still importing."""
import doctest
import importlib
import json
import pathlib
import re
import subprocess
import sys

import pytest

import mha

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORE_MODULES = ["mha", "mha.layer", "mha.steps", "mha.masks", "mha.kv_cache", "mha.validate", "mha.interop",
                "mha.positional", "mha.gqa"]
HEAVY = ("matplotlib", "ipywidgets", "altair", "jupyterquiz", "IPython", "pandas")


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    return set(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                              cwd=ROOT).stdout.split())


def test_the_core_imports_only_torch():
    with_torch = _loaded_after("import torch")
    with_core = _loaded_after("import mha; from mha import *; mha.MultiHeadAttention()")
    extra = {m for m in with_core - with_torch if m.split(".")[0] != "mha"}
    assert not extra, f"importing the core loads more than torch does: {sorted(extra)[:20]}"
    assert not {m for m in with_core if m.startswith("mha.course")}, "the core loaded the course package"
    assert not {m for m in with_core if m.split(".")[0] in HEAVY}


# Every name the chapters imported when the package moved (readers keep saved copies).
OLD_NAMES = {
    "mha": ["fmt", "MultiHeadAttention", "GroupedQueryAttention", "KVCache", "from_torch", "to_torch", "project",
            "split_heads", "attention_scores", "masked_softmax", "scaled_dot_product_attention", "merge_heads",
            "causal_mask", "padding_mask", "padding_mask_from_lengths"],
    "mha.display": ["fmt", "source"],
    "mha.bench": ["format_table", "load_stored_result", "measure_peak_memory"],
    "mha.exercises": ["summary", "check_attention", "check_split_heads", "check_my_multihead_attention",
                      "check_greedy_decode", "check_pad_numerals", "check_zero_head_hook"],
    "mha.selfcheck": ["show"],
    "mha.viz": ["plot_flow", "plot_heatmap", "plot_heads", "plot_head_split", "plot_mask", "plot_block_heads",
                "plot_head_panels", "plot_head_table", "plot_loss", "plot_transformer"],
    "mha.viz.curves": ["plot_benchmark", "plot_curves"],
    "mha.viz.mixing": ["plot_head_dependency"],
    "mha.viz.numerals": ["head_label", "row_label", "step_label"],
    "mha.viz.scaling": ["plot_scaling"],
    "mha.viz.flow_grid": ["plot_flow_grid"],
    "mha.widgets": ["head_weights", "mask_weights", "score_stats", "shape_steps", "shape_explorer",
                    "shape_explorer_static", "head_viewer", "mask_explorer", "scaling_explorer"],
    "mha.interactive": ["head_figure", "mask_figure", "scaling_figure", "shape_figure", "trained_head_figure"],
    "mha.interactive.shapes": ["fill"],
    "mha.masks": ["to_torch_attn_mask", "to_torch_key_padding_mask"],
    "mha.positional": ["sinusoidal_positional_encoding"],
    "mha.toy_task": ["ToyConfig", "LookBackModel", "make_batch", "train", "head_offsets"],
    "mha.numerals": ["ACCURACY_THRESHOLD", "BLOCKS", "NumeralError", "TrainConfig", "exact_match",
                     "held_out_numbers", "is_held_out", "ablate_heads", "retrain", "load_pretrained", "parse",
                     "to_chinese", "train"],
    "mha.numerals.__main__": ["main"],
    "mha.numerals.analysis": ["mass_on"],
    "mha.numerals.data": ["BOS", "EOS", "SRC_TOKENS", "TGT_TOKENS", "encode_source", "training_numbers", "SRC_ID"],
    "mha.numerals.model": ["DecoderLayer", "EncoderLayer"],
    "mha.numerals.train": ["lr_at"],
}


@pytest.mark.parametrize("module", sorted(OLD_NAMES))
def test_every_old_name_still_imports(module):
    imported = importlib.import_module(module)
    missing = [name for name in OLD_NAMES[module] if not hasattr(imported, name)]
    assert not missing, f"{module} lost {missing}"


def test_an_old_name_is_the_very_module_under_mha_course():
    import mha.course.viz.curves
    import mha.viz.curves

    assert mha.viz.curves is mha.course.viz.curves
    assert mha.viz.curves.__spec__.name == "mha.course.viz.curves"  # its own spec, not the alias's
    from mha.numerals import train  # the function, even after the submodule of the same name was imported

    assert callable(train) and not isinstance(train, type(mha))


def test_what_the_chapters_import_today_resolves():
    """Every `from mha.X import a, b` and `import mha.X` in the stored chapters."""
    statements = set()
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                source = "".join(cell["source"]).replace("\\\n", " ")
                source = re.sub(r"\(([^)]*)\)", lambda m: m.group(0).replace("\n", " "), source)
                statements |= set(re.findall(r"^\s*((?:from|import) mha\b[^#\n]*)", source, re.M))
    assert statements
    for statement in sorted(statements):
        names = {}
        exec(statement.strip(), names)  # noqa: S102 (the chapters' own import lines)


def test_the_command_line_runs_under_its_old_name():
    result = subprocess.run([sys.executable, "-m", "mha.numerals", "五十"], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0 and result.stdout.split()[-1] == "50", result


@pytest.mark.parametrize("name", CORE_MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0


def test_the_core_has_examples():
    """The layer, the steps, the masks and the cache show how they are called."""
    attempted = {name: doctest.testmod(importlib.import_module(name), verbose=False).attempted for name in CORE_MODULES}
    assert all(attempted[n] > 0 for n in ("mha.layer", "mha.steps", "mha.masks", "mha.kv_cache", "mha.positional")), attempted

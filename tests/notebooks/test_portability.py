"""The numeric matrix really changes the kernels, and mha.fmt hides the last bits they change.

`make nbval-matrix` (and `make test`'s second nbval pass) re-runs every notebook with
MKL_ENABLE_INSTRUCTIONS=AVX2, ATEN_CPU_CAPABILITY=default and OMP_NUM_THREADS=1. These
tests prove those settings take effect in a fresh interpreter, and that the printing
helper the chapters use gives one text for numbers that differ only in their last bits.
"""
import json
import pathlib
import re
import subprocess
import sys

import pytest
import torch

import mha

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROBE = ("import json, torch; print(json.dumps({'capability': torch.backends.cpu.get_cpu_capability(), "
         "'threads': torch.get_num_threads()}))")


def probe(env_extra: dict) -> dict:
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "OMP_NUM_THREADS")}
    env.update(env_extra)
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def test_scalar_kernels_and_one_thread_take_effect():
    other = probe({"ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "1"})
    assert other == {"capability": "DEFAULT", "threads": 1}


def test_native_run_uses_vector_kernels():
    native = probe({})
    assert native["capability"] != "DEFAULT", native  # otherwise the matrix would test nothing new


@pytest.mark.parametrize("a, b", [
    (torch.tensor([1.0, 1.0]), torch.tensor([0.99999994, 1.0000001])),  # `1.` vs `1.0000` in torch's repr
    (torch.tensor([0.0, 0.5]), torch.tensor([-1e-9, 0.5])),              # no "-0.0000"
    (torch.tensor([0.0, 0.5]), torch.tensor([1e-10, 0.5])),              # no switch to scientific notation
])
def test_fmt_is_blind_to_last_bits(a, b):
    assert mha.fmt(a) == mha.fmt(b)
    assert str(a) != str(b) or a.tolist() == b.tolist()  # torch's own repr is not


def test_fmt_layout_and_types():
    assert mha.fmt(torch.tensor([1.0, 0.5]), 2) == "[1.00, 0.50]"
    assert mha.fmt(0.11284) == "0.1128"
    assert mha.fmt(torch.tensor([[1, 2], [3, 4]])) == "[[1, 2],\n [3, 4]]"
    assert mha.fmt(torch.tensor([True, False])) == "[ True, False]"
    assert mha.fmt(torch.tensor([float("-inf"), 1.0]), 1) == "[-inf,  1.0]"
    with pytest.raises(ValueError, match="decimals"):
        mha.fmt(1.0, -1)
    with pytest.raises(TypeError, match="tensor"):
        mha.fmt("1.0")


def test_fmt_takes_half_precision_and_tensors_that_require_grad():
    assert mha.fmt(torch.tensor([1.5, -0.25], dtype=torch.bfloat16), 2) == "[ 1.50, -0.25]"
    assert mha.fmt(torch.tensor([0.1], dtype=torch.float16)) == "[0.1000]"  # float16's 0.1 is 0.0999755859375
    assert mha.fmt(torch.tensor(0.5, dtype=torch.bfloat16)) == "0.5000"
    w = torch.tensor([0.25, 0.75], requires_grad=True)
    assert mha.fmt([w[0], w[1]], 2) == "[0.25, 0.75]"
    assert mha.fmt([torch.tensor([1.0], dtype=torch.bfloat16), torch.tensor([2.0], dtype=torch.bfloat16)], 1) == \
        "[[1.0],\n [2.0]]"


FLOAT_REPR = re.compile(r"tensor\((?:\[|\s)*-?\d+\.")  # torch's repr of a float tensor


def test_no_notebook_prints_a_float_tensor_with_torchs_repr():
    """Stored outputs print floats through mha.fmt (or formatted text), never torch's value-dependent repr."""
    offenders = []
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            if cell["cell_type"] != "code" or "nbval-ignore-output" in cell["metadata"].get("tags", []):
                continue
            for output in cell.get("outputs", []):
                text = "".join(output.get("text", "")) + "".join(output.get("data", {}).get("text/plain", ""))
                if FLOAT_REPR.search(text):
                    offenders.append(f"{path.name} cell {cell.get('id')}: {FLOAT_REPR.search(text).group(0)}")
    assert not offenders, "\n".join(offenders)

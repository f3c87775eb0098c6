"""The benchmark code on a tiny grid: structure of the result, table and JSON (not a timing test)."""
import json
import math

import pytest
import torch

from mha.course import bench


@pytest.fixture(scope="module")
def tiny():
    return bench.run_benchmark(lengths=(8, 16), batch=2, d_model=16, n_heads=4, repeats=2, warmup=1)


def test_result_structure(tiny):
    assert tiny["config"]["lengths"] == [8, 16]
    assert tiny["config"]["baseline"] == bench.BASELINE
    assert "profile_memory" in tiny["config"]["memory_method"]
    rows = tiny["rows"]
    assert [(r["L"], r["case"]) for r in rows] == [(L, c) for L in (8, 16) for c in bench.CASES]
    for r in rows:
        assert r["median_ms"] > 0
        assert r["peak_mib"] > 0
        assert math.isfinite(r["time_ratio"]) and r["time_ratio"] > 0


def test_explicit_path_allocates_the_weights(tiny):
    """Explicit path returns (B, h, L, L) weights: its peak must cover at least that tensor."""
    for r in tiny["rows"]:
        if r["case"] == "mha_explicit":
            weights_mib = 2 * 4 * r["L"] * r["L"] * 4 / 2**20
            assert r["peak_mib"] >= weights_mib


def test_table_lists_every_row(tiny):
    table = bench.format_table(tiny)
    lines = table.splitlines()
    assert "time ms" in lines[0] and "peak MiB" in lines[0]
    assert len(lines) == 2 + len(tiny["rows"])
    assert all(case in table for case in bench.CASES)


def test_cases_compute_the_same_output():
    cases = bench.make_cases(16, 4, "cpu", torch.float32)
    x = torch.randn(2, 5, 16)
    outs = [fn(x) for fn, _ in cases.values()]
    for out in outs[1:]:
        torch.testing.assert_close(out, outs[0], atol=1e-5, rtol=1e-5)


def test_cpu_peak_memory_sees_a_big_allocation():
    def fn(x):
        big = torch.ones(256, 1024) * x.sum()  # 1 MiB alive during the call
        return (big.sum() + x).view(1, 1, -1)

    x = torch.randn(1, 1, 4, requires_grad=True)
    peak = bench.measure_peak_memory(fn, [], x)
    assert peak >= 2**20


def test_main_writes_json(tmp_path, capsys):
    out = tmp_path / "r.json"
    bench.main(["--lengths", "8", "--batch", "1", "--d-model", "8", "--heads", "2",
                "--repeats", "1", "--warmup", "0", "--out", str(out)])
    printed = capsys.readouterr().out
    assert "torch_no_weights" in printed and "wrote" in printed
    data = json.loads(out.read_text())
    assert len(data["rows"]) == len(bench.CASES)


def test_bad_arguments():
    with pytest.raises(ValueError, match="cpu' or 'cuda"):
        bench.run_benchmark(lengths=(8,), device="meta")
    with pytest.raises(ValueError, match="repeats"):
        bench.run_benchmark(lengths=(8,), d_model=8, n_heads=2, repeats=0)
    with pytest.raises(SystemExit):
        bench.main(["--dtype", "int8"])


def test_load_stored_result_missing_file_says_how_to_fix():
    with pytest.raises(FileNotFoundError, match="python -m mha.course.bench --out"):
        bench.load_stored_result("does_not_exist.json")


def test_stored_cpu_result_has_the_full_grid():
    result = bench.load_stored_result()
    assert result["config"]["lengths"] == list(bench.FULL_LENGTHS)
    assert result["config"]["batch"] == 4 and result["config"]["d_model"] == 512 and result["config"]["n_heads"] == 8
    assert len(result["rows"]) == len(bench.FULL_LENGTHS) * len(bench.CASES)


def test_cli_reports_unavailable_cuda_as_usage_error(capsys):
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(SystemExit):
        bench.main(["--device", "cuda", "--lengths", "8"])
    assert "cuda" in capsys.readouterr().err


def test_compile_benchmark_structure():
    """Tiny size, the eager backend (compiles fast): four cases, ratios against torch in the same mode."""
    result = bench.run_compile_benchmark(batch=2, length=8, d_model=16, n_heads=4, repeats=2, warmup=1,
                                         backend="eager")
    rows = {r["case"]: r for r in result["rows"]}
    assert list(rows) == list(bench.COMPILE_CASES)
    assert rows["torch_eager"]["time_ratio"] == rows["torch_compiled"]["time_ratio"] == 1.0
    for name in ("mha_eager", "mha_compiled"):
        baseline = rows[name.replace("mha", "torch")]["median_ms"]
        assert rows[name]["time_ratio"] == pytest.approx(rows[name]["median_ms"] / baseline)
    table = bench.format_compile_table(result)
    assert "median of 2 interleaved" in table and all(name in table for name in bench.COMPILE_CASES)


def test_compile_cases_compute_the_same_output():
    cases = bench.make_compile_cases(16, 4, "cpu", torch.float32, backend="eager")
    x = torch.randn(2, 5, 16)
    outs = [fn(x) for fn, _ in cases.values()]
    outs = [o[0] if isinstance(o, tuple) else o for o in outs]
    for out in outs[1:]:
        torch.testing.assert_close(out, outs[0], atol=1e-5, rtol=1e-5)

"""Benchmark: forward + backward time and peak memory of four attention layers.

Run ``python -m mha.course.bench`` (full grid, minutes on a laptop CPU) or
``python -m mha.course.bench --quick``. The four cases share the same weights:

* ``mha_explicit``: :class:`mha.MultiHeadAttention`, ``need_weights=True``
  (the step-by-step path, the (B, h, L, L) weights are materialised and returned);
* ``mha_fused``: :class:`mha.MultiHeadAttention`, ``need_weights=False``
  (``F.scaled_dot_product_attention``);
* ``torch_no_weights``: ``nn.MultiheadAttention(need_weights=False)``, the baseline;
* ``torch_weights``: ``nn.MultiheadAttention(need_weights=True, average_attn_weights=False)``
  (per-head weights, like ``mha_explicit``).

Every case is self-attention (query = key = value = x, no mask, dropout 0) in
training mode; one measured call is ``out = layer(x)`` followed by
``torch.autograd.grad(out.sum(), [x, *parameters])``.

Time: the median over ``repeats`` calls after ``warmup`` calls; the cases are
interleaved (round robin) so that a slow spell of the machine hits all of them.

Peak memory: the largest amount of memory allocated *during* one call, above
what was allocated before it (inputs and weights excluded).

* CUDA: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``.
* CPU: PyTorch has no CPU peak counter, so one extra call runs under
  ``torch.profiler.profile(profile_memory=True)``; the profiler records every
  allocation and free of the CPU allocator (``[memory]`` events with a signed
  byte count). Sorted by time, their running sum is the live extra memory;
  its maximum is the peak. Memory is measured in a separate call from the
  timing, so the profiler's overhead does not touch the times.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import platform
import statistics
from dataclasses import asdict, dataclass

import torch
import torch.utils.benchmark as benchmark

from mha.interop import to_torch
from mha.layer import MultiHeadAttention

__all__ = ["CASES", "BASELINE", "FULL_LENGTHS", "QUICK_LENGTHS", "Row", "make_cases", "measure_time",
           "measure_peak_memory", "run_benchmark", "format_table", "load_stored_result", "main",
           "COMPILE_CASES", "make_compile_cases", "run_compile_benchmark", "format_compile_table"]

CASES = ("mha_explicit", "mha_fused", "torch_no_weights", "torch_weights")
BASELINE = "torch_no_weights"
FULL_LENGTHS = (128, 256, 512, 1024, 2048)
QUICK_LENGTHS = (64, 128, 256)
MEMORY_METHODS = {
    "cpu": "torch.profiler(profile_memory=True): max running sum of [memory] alloc/free events during one call",
    "cuda": "torch.cuda.max_memory_allocated() - memory_allocated() before the call (reset_peak_memory_stats)",
}


@dataclass
class Row:
    """One measurement: case ``case`` at sequence length ``L``."""

    L: int
    case: str
    median_ms: float
    peak_mib: float
    time_ratio: float = float("nan")  # median_ms / baseline median_ms at the same L
    memory_ratio: float = float("nan")  # peak_mib / baseline peak_mib at the same L


def make_cases(d_model: int, n_heads: int, device, dtype) -> dict:
    """The four layers with identical weights, each wrapped as ``fn(x) -> output``."""
    torch.manual_seed(0)
    ours = MultiHeadAttention(d_model, n_heads, dropout=0.0).to(device=device, dtype=dtype)
    ref = to_torch(ours)  # same weights, batch_first=True
    ours.train()
    ref.train()

    def mha_explicit(x):
        out, weights = ours(x, x, x, need_weights=True)  # weights (B, h, L, L)
        return out

    def mha_fused(x):
        return ours(x, x, x)

    def torch_no_weights(x):
        return ref(x, x, x, need_weights=False)[0]

    def torch_weights(x):
        out, weights = ref(x, x, x, need_weights=True, average_attn_weights=False)  # (B, h, L, L)
        return out

    fns = {"mha_explicit": mha_explicit, "mha_fused": mha_fused,
           "torch_no_weights": torch_no_weights, "torch_weights": torch_weights}
    params = {"mha_explicit": list(ours.parameters()), "mha_fused": list(ours.parameters()),
              "torch_no_weights": list(ref.parameters()), "torch_weights": list(ref.parameters())}
    return {name: (fns[name], params[name]) for name in CASES}


def _forward_backward(fn, params, x):
    out = fn(x)  # (B, L, d_model)
    grads = torch.autograd.grad(out.float().sum(), [x, *params])
    return out, grads


def measure_time(cases: dict, x: torch.Tensor, repeats: int, warmup: int) -> dict:
    """Median seconds of one forward + backward call per case.

    Each case gets a ``torch.utils.benchmark.Timer`` (it synchronises CUDA and keeps
    the machine's thread count here); the calls go round robin over the cases, one
    call at a time, so a slow spell of the machine hits all of them alike.
    """
    timers = {name: benchmark.Timer("run()", globals={"run": functools.partial(_forward_backward, fn, params, x)},
                                    num_threads=torch.get_num_threads(), sub_label=name)
              for name, (fn, params) in cases.items()}
    if warmup:
        for timer in timers.values():
            timer.timeit(warmup)
    times = {name: [] for name in cases}
    for _ in range(repeats):
        for name, timer in timers.items():
            times[name].append(timer.timeit(1).mean)
    return {name: statistics.median(t) for name, t in times.items()}


@contextlib.contextmanager
def _quiet_fd2():
    """Hide what C++ code writes straight to file descriptor 2 (the profiler's start/stop lines)."""
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 at all: nothing to hide
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _cpu_peak_bytes(fn, params, x) -> int:
    from torch.profiler import ProfilerActivity, profile

    with _quiet_fd2(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        _forward_backward(fn, params, x)
    events = [e for e in prof.profiler.kineto_results.events()
              if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU]
    events.sort(key=lambda e: e.start_ns())
    live = peak = 0
    for e in events:
        live += e.nbytes()  # > 0: allocation, < 0: free
        peak = max(peak, live)
    return peak


def _cuda_peak_bytes(fn, params, x) -> int:
    torch.cuda.synchronize(x.device)
    torch.cuda.reset_peak_memory_stats(x.device)
    before = torch.cuda.memory_allocated(x.device)
    _forward_backward(fn, params, x)
    torch.cuda.synchronize(x.device)
    return torch.cuda.max_memory_allocated(x.device) - before


def measure_peak_memory(fn, params, x: torch.Tensor) -> int:
    """Peak extra bytes allocated during one forward + backward call (see the module docstring)."""
    if x.device.type == "cuda":
        return _cuda_peak_bytes(fn, params, x)
    if x.device.type == "cpu":
        return _cpu_peak_bytes(fn, params, x)
    raise ValueError(f"device must be 'cpu' or 'cuda', got {x.device.type!r}")


def run_benchmark(lengths=FULL_LENGTHS, batch: int = 4, d_model: int = 512, n_heads: int = 8,
                  device: str = "cpu", dtype: torch.dtype = torch.float32, repeats: int = 5,
                  warmup: int = 2, log=None) -> dict:
    """Measure every case at every length; returns a JSON-ready dict ``{"config": ..., "rows": [...]}``."""
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was requested but torch.cuda.is_available() is False")
    if device.type not in MEMORY_METHODS:
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device.type!r}")
    if dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise TypeError(f"dtype must be float32, bfloat16 or float16, got {dtype}")
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got repeats={repeats}, warmup={warmup}")
    cases = make_cases(d_model, n_heads, device, dtype)
    rows = []
    for L in lengths:
        x = torch.randn(batch, L, d_model, device=device, dtype=dtype, requires_grad=True)  # (B, L, d_model)
        medians = measure_time(cases, x, repeats, warmup)
        peaks = {name: measure_peak_memory(fn, params, x) for name, (fn, params) in cases.items()}
        for name in CASES:
            rows.append(Row(L, name, 1e3 * medians[name], peaks[name] / 2**20))
        if log is not None:
            log(f"L={L}: " + ", ".join(f"{n} {1e3 * medians[n]:.1f} ms" for n in CASES))
    for row in rows:
        base = next(r for r in rows if r.L == row.L and r.case == BASELINE)
        row.time_ratio = row.median_ms / base.median_ms
        row.memory_ratio = row.peak_mib / base.peak_mib if base.peak_mib > 0 else float("nan")
    config = {
        "batch": batch, "d_model": d_model, "n_heads": n_heads, "lengths": list(lengths),
        "device": device.type, "dtype": str(dtype).replace("torch.", ""), "repeats": repeats, "warmup": warmup,
        "threads": torch.get_num_threads(), "torch": torch.__version__, "python": platform.python_version(),
        "machine": platform.machine(), "processor": platform.processor() or platform.machine(),
        "baseline": BASELINE, "timed": "median of forward + backward (autograd.grad of out.sum())",
        "memory_method": MEMORY_METHODS[device.type],
    }
    if device.type == "cuda":
        config["gpu"] = torch.cuda.get_device_name(device)
    return {"config": config, "rows": [asdict(r) for r in rows]}


CASE_NAMES_ZH = {  # how the book names the cases (chapter 12's table and figure legend; glyphs of the shipped font)
    "mha_explicit": "mha 显式",
    "mha_fused": "mha 融合",
    "torch_no_weights": "torch 不要权重",
    "torch_weights": "torch 要权重",
}
MEMORY_METHODS_ZH = {
    "cpu": "torch.profiler(profile_memory=True)：一次调用里分配与释放事件累计值的最大值",
    "cuda": "调用前先 reset_peak_memory_stats，torch.cuda.max_memory_allocated() 减去调用前的 memory_allocated()",
}


def _pad(text: str, width: int, right: bool = False) -> str:
    """Pad to ``width`` display columns (a CJK character takes two)."""
    import unicodedata
    used = sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)
    fill = " " * max(0, width - used)
    return fill + text if right else text + fill


def format_table(result: dict, chinese: bool = False) -> str:
    """A plain-text table: one line per (L, case), with ratios against the baseline.

    ``chinese=True``: the header and the case names in Chinese (:data:`CASE_NAMES_ZH`), as the book shows them.
    """
    names = CASE_NAMES_ZH if chinese else {}
    cols = (("L", 5), ("做法", 18), ("时间 ms", 10), ("倍数", 7), ("峰值 MiB", 10), ("倍数", 7)) if chinese else \
        (("L", 5), ("case", 17), ("time ms", 10), ("x base", 7), ("peak MiB", 10), ("x base", 7))
    header = "  ".join(_pad(name, w, right=i != 1) for i, (name, w) in enumerate(cols))
    lines = [header, "-" * len(header)]
    for r in result["rows"]:
        cells = (str(r["L"]), names.get(r["case"], r["case"]), f"{r['median_ms']:.2f}", f"{r['time_ratio']:.2f}",
                 f"{r['peak_mib']:.1f}", f"{r['memory_ratio']:.2f}")
        lines.append("  ".join(_pad(c, w, right=i != 1) for i, (c, (_, w)) in enumerate(zip(cells, cols))))
    return "\n".join(lines)


COMPILE_CASES = ("mha_eager", "torch_eager", "mha_compiled", "torch_compiled")
COMPILE_BASELINES = {"mha_eager": "torch_eager", "torch_eager": "torch_eager",
                     "mha_compiled": "torch_compiled", "torch_compiled": "torch_compiled"}
STORED_COMPILE_RESULT = "compile_cpu.json"  # tools/bench_compile.py, shipped like STORED_RESULT


def make_compile_cases(d_model: int, n_heads: int, device, dtype, backend: str = "inductor") -> dict:
    """Our fused layer and ``nn.MultiheadAttention`` (same weights), each eager and ``torch.compile(fullgraph=True)``."""
    cases = make_cases(d_model, n_heads, device, dtype)
    (ours, ours_params), (ref, ref_params) = cases["mha_fused"], cases["torch_no_weights"]
    compile_ = functools.partial(torch.compile, fullgraph=True, backend=backend)
    return {"mha_eager": (ours, ours_params), "torch_eager": (ref, ref_params),
            "mha_compiled": (compile_(ours), ours_params), "torch_compiled": (compile_(ref), ref_params)}


def run_compile_benchmark(batch: int = 4, length: int = 512, d_model: int = 512, n_heads: int = 8,
                          device="cpu", dtype=torch.float32, repeats: int = 31, warmup: int = 3,
                          backend: str = "inductor") -> dict:
    """Forward + backward time, eager and compiled, ours against ``nn.MultiheadAttention`` (one size).

    As :func:`run_benchmark`: self-attention, no mask, dropout 0, training mode, one call =
    ``layer(x)`` + ``autograd.grad``; the four cases interleaved, the median of ``repeats``
    calls each, after ``warmup`` calls (the first of which compiles). Compilation time is not
    measured, nor memory. Each ratio compares with ``nn.MultiheadAttention`` in the same mode.
    """
    torch._dynamo.reset()
    cases = make_compile_cases(d_model, n_heads, device, dtype, backend)
    x = torch.randn(batch, length, d_model, device=device, dtype=dtype, requires_grad=True)
    medians = measure_time(cases, x, repeats, warmup)
    rows = [{"case": name, "median_ms": 1e3 * medians[name],
             "time_ratio": medians[name] / medians[COMPILE_BASELINES[name]]} for name in COMPILE_CASES]
    config = {"batch": batch, "length": length, "d_model": d_model, "n_heads": n_heads, "device": str(device),
              "dtype": str(dtype).removeprefix("torch."), "repeats": repeats, "warmup": warmup,
              "backend": backend, "threads": torch.get_num_threads(), "torch": torch.__version__,
              "processor": platform.processor() or platform.machine(),
              "timed": "median of forward + backward (autograd.grad of out.sum()), cases interleaved",
              "not_timed": "compilation (the first warmup call), memory",
              "shared_machine": "the cases take turns call by call, so a busy spell slows all four alike"}
    return {"config": config, "rows": rows}


def format_compile_table(result: dict) -> str:
    """The compile benchmark as a text table: median ms and the ratio to nn.MultiheadAttention in the same mode."""
    c = result["config"]
    lines = [f"B={c['batch']} L={c['length']} d_model={c['d_model']} h={c['n_heads']} {c['device']} {c['dtype']}, "
             f"{c['threads']} threads, median of {c['repeats']} interleaved forward+backward calls",
             f"{'case':<16}{'time ms':>10}{'vs torch':>10}"]
    for r in result["rows"]:
        lines.append(f"{r['case']:<16}{r['median_ms']:>10.2f}{r['time_ratio']:>9.2f}x")
    return "\n".join(lines)


STORED_RESULT = "cpu_results.json"  # a full CPU run, shipped inside the package (mha/course/data/)


def load_stored_result(name: str = STORED_RESULT) -> dict:
    """Read a benchmark result stored in the package (``mha/course/data/NAME``).

    The file travels with ``mha`` itself, so the chapter reads it in Colab or
    anywhere else without a repository checkout or network access. Refresh it
    with ``python -m mha.course.bench --out mha/course/data/cpu_results.json``.
    """
    from importlib import resources

    path = resources.files("mha.course") / "data" / name
    if not path.is_file():
        raise FileNotFoundError(f"no stored benchmark result mha/course/data/{name}; "
                                f"create it with python -m mha.course.bench --out mha/course/data/{name}")
    return json.loads(path.read_text(encoding="utf-8"))


def _parse_dtype(name: str) -> torch.dtype:
    table = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if name not in table:
        raise argparse.ArgumentTypeError(f"dtype must be one of {sorted(table)}, got {name!r}")
    return table[name]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m mha.course.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"small grid L in {QUICK_LENGTHS}, fewer repeats")
    parser.add_argument("--lengths", type=int, nargs="+", help="override the sequence lengths L")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--dtype", type=_parse_dtype, default=torch.float32, help="float32, bfloat16, float16")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per case (default 7, quick 3)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed calls per case (default 2, quick 1)")
    parser.add_argument("--out", default=None, help="write the JSON result to this path")
    args = parser.parse_args(argv)
    lengths = tuple(args.lengths) if args.lengths else (QUICK_LENGTHS if args.quick else FULL_LENGTHS)
    repeats = args.repeats if args.repeats is not None else (3 if args.quick else 7)
    warmup = args.warmup if args.warmup is not None else (1 if args.quick else 2)
    try:
        result = run_benchmark(lengths, args.batch, args.d_model, args.heads, args.device, args.dtype,
                               repeats, warmup, log=lambda s: print(s, flush=True))
    except (ValueError, TypeError) as error:  # bad device/dtype/sizes: a usage message, not a traceback
        parser.error(str(error))
    print(format_table(result))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
        print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()

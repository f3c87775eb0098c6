"""Compiled vs eager forward + backward: mha.MultiHeadAttention against nn.MultiheadAttention.

    PYTHONPATH=$PWD .venv/bin/python tools/bench_compile.py --out mha/course/data/compile_cpu.json

Prints a table (median of interleaved repeats; the machine may be shared, so the cases
take turns call by call) and optionally writes the JSON chapter 12 reads. Not a test:
the goal (compiled ours <= 1.05x compiled torch, eager <= 1.0x) is checked by reading it.
"""
import argparse
import json

from mha.course import bench


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", default=None, help="write the JSON result here")
    args = parser.parse_args(argv)
    result = bench.run_compile_benchmark(args.batch, args.length, args.d_model, args.heads,
                                         repeats=args.repeats, warmup=args.warmup)
    print(bench.format_compile_table(result))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

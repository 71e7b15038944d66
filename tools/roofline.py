#!/usr/bin/python3
"""The sgemm roofline of each model: its FLOPs over the GEMM rate measured on this machine,
against the latencies that tools/bench_compare.py measured (its --json-out file).

    tools/roofline.py build/bench_compare.json --gflops 1=148.7,2=321.7

--gflops: the packed kernel's GFLOP/s per thread count, from `test_sgemm --bench` (its
1024^3 row). Prints a Markdown table: model, threads, GFLOP, roofline ms, onnxexec ms and its
ratio to the roofline, ONNX Runtime ms and its ratio.
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bench_json", help="the --json-out file of tools/bench_compare.py")
    ap.add_argument("--gflops", required=True,
                    help="GFLOP/s per thread count, as 1=148.7,2=321.7")
    a = ap.parse_args()
    rate = {}
    for part in a.gflops.split(","):
        t, _, g = part.partition("=")
        try:
            rate[int(t)] = float(g)
        except ValueError:
            sys.exit(f"roofline.py: --gflops: '{part}' is not THREADS=GFLOPS")
    with open(a.bench_json) as f:
        rows = json.load(f)["rows"]
    print("| model | threads | GFLOP | sgemm roofline (ms) | onnxexec (ms) | onnxexec / roofline "
          "| ORT (ms) | ORT / roofline |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        t = r["threads"]
        if t not in rate or not r.get("gflop"):
            continue
        gflop = r["gflop"][0]
        roof = gflop / rate[t] * 1e3
        ox, ort = r.get("ox_ms"), r.get("ort_ms")
        cell = lambda v: f"{v:.3f} | {v / roof:.2f}" if v else "- | -"
        print(f"| {r['model']} | {t} | {gflop:.4f} | {roof:.3f} | {cell(ox)} | {cell(ort)} |")


if __name__ == "__main__":
    main()

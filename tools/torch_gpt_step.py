#!/usr/bin/python3
"""Times one GPT training step in PyTorch CPU for bench/bench_gpt_step.cpp (which launches it).

Usage: /usr/bin/python3 tools/torch_gpt_step.py EXPORT [--onnx FILE --heads H] [--threads 1,2] [--warmup N]
                                                [--repeats N] [--profile]

EXPORT is a parity export (tools/parity_export.h) of the benchmarked job: our initial weights, step 0's
batch and the configuration. The step timed is what tribunal's step does: zero the gradients, forward,
mean cross-entropy, backward, clip_grad_norm_ (if the job clips), AdamW with the job's lr. Every repeat
trains on the same batch (the parameters move, the work does not). An onnx job's model (--onnx: a GPT-2
exported by tools/onnx_export.py --gpt2, H heads) is that module with the file's initializers
(parity_torch.OnnxTwin), its dropout layers applying our step-0 masks from the export. Prints one JSON object:
    {"torch_version", "threads": [{"threads", "median_s", "min_s", "forward_s", "backward_s",
      "optimizer_s", "samples_s": [...]}], "loss0", "profile": [{"op", "self_s", "calls"}] (with --profile)}
or {"error": "..."} with exit code 1 when torch is unusable.
"""
import argparse
import json
import os
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("export")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--onnx", help="the onnx job's model file (a tools/onnx_export.py --gpt2 export)")
    ap.add_argument("--heads", type=int, default=12, help="its attention heads (not in the weights)")
    ap.add_argument("--profile", action="store_true", help="per-op self time of one step (torch.profiler)")
    args = ap.parse_args()
    try:
        import torch
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import parity_torch as pt
    except Exception as e:  # python3-torch missing or broken: say so, never invent numbers
        print(json.dumps({"error": f"cannot import torch: {e}"}))
        return 1

    export = pt.read_export(args.export)
    if args.onnx:
        import onnx_export  # tools/onnx_export.py: the module the file was exported from
        twin = pt.OnnxTwin(export["config"]["model"], args.onnx, onnx_export.gpt2_from_onnx(args.onnx, args.heads))
        twin.set_masks(export["masks"][0])
        trainer = pt.Trainer(export, torch.float32, twin)
    else:
        trainer = pt.Trainer(export, torch.float32)
    x, y = trainer.batch(*export["batches"][0])
    if args.onnx or export["config"]["model"].get("dropout", 0.0) > 0:
        trainer.model.train()

    def step():
        t0 = time.perf_counter()
        trainer.opt.zero_grad(set_to_none=False)
        logits = trainer.model(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        trainer.update(0)
        t3 = time.perf_counter()
        return t3 - t0, t1 - t0, t2 - t1, t3 - t2, float(loss)

    out = {"torch_version": torch.__version__, "threads": [], "warmup": args.warmup, "repeats": args.repeats}
    for threads in [int(t) for t in args.threads.split(",")]:
        torch.set_num_threads(threads)
        for _ in range(args.warmup):
            loss0 = step()[4]
        samples = [step() for _ in range(args.repeats)]
        med = lambda i: statistics.median(s[i] for s in samples)  # noqa: E731
        out["threads"].append({"threads": threads, "torch_threads": torch.get_num_threads(),
                               "median_s": med(0), "min_s": min(s[0] for s in samples),
                               "forward_s": med(1), "backward_s": med(2), "optimizer_s": med(3),
                               "samples_s": [s[0] for s in samples]})
        out.setdefault("loss_first_warmup", loss0)
    if args.profile:
        torch.set_num_threads(1)
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            step()
        rows = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
        out["profile_threads"] = 1
        out["profile"] = [{"op": e.key, "self_s": e.self_cpu_time_total * 1e-6, "calls": e.count}
                          for e in rows[:15]]
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

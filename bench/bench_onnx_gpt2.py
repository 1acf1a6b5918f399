#!/usr/bin/python3
"""GPT-2 small as a user's ONNX export, trained, timed against PyTorch and disputed (issue 31, item 6).
Prints one JSON object.

    /usr/bin/python3 bench/bench_onnx_gpt2.py [--build build/release] [--dir DIR] [--onnx FILE]
        [--vocab 50257] [--context 256] [--layers 12] [--heads 12] [--d-model 768] [--batch 4]
        [--threads 2] [--train-steps 3] [--warmup 1] [--repeats 2] [--rounds 2] [--dispute-steps 2]
        [--parts train,step,dispute] [--step-seconds S] [--dispute-batch N]

A driver of commands that each measure one part (python3-torch and python3-onnx needed):
  1. tools/onnx_export.py --gpt2 writes the export (nanoGPT's GPT-2, GPT-2's initialization, ~500 MB at
     GPT-2 small: never committed) into DIR (a temporary directory unless given; --onnx reuses a file).
  2. `tribunal train` runs a job on it (byte-level text, the fortunes corpus: byte ids are valid token
     ids of any vocabulary ≥ 256) for --train-steps steps, one checkpoint at the end; its peak resident
     set is the child's ru_maxrss (os.wait4), its step times tribunal's resources.csv (step 0 apart).
  3. bench/bench_gpt_step on the same job: our step against PyTorch CPU's on the same export (the module
     re-created from the file's initializers, our dropout masks), interleaved round by round; the step's
     memory per term from the step graph.
  4. bench/bench_dispute on the same job (T = --dispute-steps, stride 1): an honest provider and cheaters
     corrupting one node each (forward, backward, optimizer, largest matmul, largest opening) play the
     dispute against the referee in one process; the referee's CPU and the bytes it receives. The
     referee's limit on one node's re-execution work is raised to fit the job (GPT-2's 50257-token head
     at batch 4 × 256 is 2^35.2 multiply-adds, beyond `tribunal referee`'s default 2^34), as an
     operator serving such jobs does with --max-reexecution-work.
The referee's CPU per dispute is stated as a share of one step: of bench_gpt_step's median step (after
the first) at the same thread count, and of bench_dispute's own honest step (train time / T, step 0
included). The machine's load average is recorded before and after: on a shared machine every time is
an upper bound.
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
NAME = "gpt2s"  # the model file's registered name in the job


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return ""


def run(cmd, log):
    """Runs cmd; returns (stdout, wall seconds, peak resident bytes of the child)."""
    print("+ " + " ".join(map(str, cmd)), file=sys.stderr, flush=True)
    t0 = time.monotonic()
    with open(log, "w") as err:
        p = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=err, text=True)
        out = p.stdout.read()
        _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[0]} exited {p.returncode}; see {log}")
    return out, time.monotonic() - t0, usage.ru_maxrss * 1024


def last_json(out):
    return json.loads(out[out.index("{"):])


def job_text(a, steps, stride, batch=None):
    return f"""# GPT-2 small as an ONNX export (bench/bench_onnx_gpt2.py writes this file).
[model]
kind = "onnx"
file = "{NAME}"
input = "ids"
output = "logits"
context = {a.context}

[data]
dataset = "text"
name = "fortunes"
validation = 0.1

[train]
seed = 5
steps = {steps}
batch_size = {batch or a.batch}
stride = {stride}

[optimizer]
kind = "adamw"
lr = 0.0006
weight_decay = 0.1
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=str(ROOT / "build/release"))
    ap.add_argument("--dir", help="where the export, the jobs and the runs go (default: a temporary one, removed)")
    ap.add_argument("--onnx", help="an existing tools/onnx_export.py --gpt2 export of the same shape")
    for key, value in {"vocab": 50257, "context": 256, "layers": 12, "heads": 12, "d-model": 768}.items():
        ap.add_argument("--" + key, type=int, default=value)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--train-steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--dispute-steps", type=int, default=2)
    ap.add_argument("--dispute-batch", type=int,
                    help="the disputed job's batch (default --batch): both providers' dispute sessions run in "
                         "bench_dispute's one process, each holding a traced step's values")
    ap.add_argument("--parts", default="train,step,dispute", help="which measurements to run (comma-separated)")
    ap.add_argument("--step-seconds", type=float,
                    help="without the step part: our median step from an earlier run, for the referee's shares")
    a = ap.parse_args()
    parts = set(a.parts.split(","))
    build = pathlib.Path(a.build)
    work = pathlib.Path(a.dir) if a.dir else pathlib.Path(tempfile.mkdtemp(prefix="bench_onnx_gpt2_"))
    work.mkdir(parents=True, exist_ok=True)
    result = {"bench": "onnx_gpt2", "command": " ".join([sys.argv[0]] + sys.argv[1:]),
              "cpu": {"model": cpu_model(), "hardware_threads": os.cpu_count()},
              "loadavg_before": loadavg(),
              "shape": {"vocab": a.vocab, "context": a.context, "layers": a.layers, "heads": a.heads,
                        "d_model": a.d_model, "batch": a.batch}, "threads": a.threads}
    try:
        # 1. The export.
        onnx = pathlib.Path(a.onnx) if a.onnx else work / "gpt2_small.onnx"
        if not a.onnx:
            out, seconds, rss = run([sys.executable, ROOT / "tools/onnx_export.py", "--gpt2", onnx,
                                     "--vocab", a.vocab, "--context", a.context, "--layers", a.layers,
                                     "--heads", a.heads, "--d-model", a.d_model], work / "export.log")
            result["export"] = {"seconds": seconds, "peak_rss_bytes": rss,
                                "parameters": int(out.split(", ")[-1].split()[0])}
        result.setdefault("export", {})["bytes"] = onnx.stat().st_size
        model = f"{NAME}={onnx}"

        # 2. tribunal train: a few steps, one checkpoint at the end.
        train_job = work / "train.toml"
        train_job.write_text(job_text(a, a.train_steps, a.train_steps))
        ours = {"median_s": a.step_seconds}
        if "train" in parts:
            train(a, build, model, train_job, work, result)
        if "step" in parts:
            ours = step(a, build, model, train_job, work, result)
        if "dispute" in parts:
            dispute(a, build, model, work, result, ours["median_s"])
    finally:
        result["loadavg_after"] = loadavg()
        if not a.dir:
            shutil.rmtree(work, ignore_errors=True)
        print(json.dumps(result, indent=1))
    return 0


def train(a, build, model, train_job, work, result):
    run_dir = work / "run"
    shutil.rmtree(run_dir, ignore_errors=True)
    out, seconds, rss = run([build / "apps/tribunal", "train", train_job, "--model", model, "--out", run_dir,
                             "--threads", a.threads, "--no-eval", "--json"], work / "train.log")
    summary = last_json(out)
    rows = [line.split(",") for line in (run_dir / "resources.csv").read_text().split("\n")[1:] if line]
    walls = [float(r[1]) for r in rows]
    result["train"] = {"command": f"tribunal train JOB --model {model} --threads {a.threads} --no-eval",
                       "steps": summary["steps"], "wall_seconds": seconds,
                       "load_seconds": summary["load_seconds"], "loss_first": summary["loss_first"],
                       "loss_last": summary["loss_last"], "step0_s": walls[0],
                       "later_median_s": statistics.median(walls[1:]) if len(walls) > 1 else None,
                       "step_wall_s": walls, "step_cpu_s": [float(r[2]) for r in rows],
                       "peak_rss_bytes": rss}
    shutil.rmtree(run_dir, ignore_errors=True)


def step(a, build, model, train_job, work, result):
    # 3. Our step against PyTorch's, and the step's memory per term.
    out, _, rss = run([build / "bench/bench_gpt_step", "--job", train_job, "--model", model, "--heads", a.heads,
                       "--threads", a.threads, "--warmup", a.warmup, "--repeats", a.repeats, "--rounds",
                       a.rounds], work / "gpt_step.log")
    step = last_json(out)
    ours = step["tribunal"][0]
    torch = step["torch"]
    result["step"] = {"tribunal_step0_s": ours["step0_s"], "tribunal_median_s": ours["median_s"],
                      "tribunal_samples_s": ours["samples_s"],
                      "tribunal_phases_s": {k: ours["profiled"][k] for k in ("forward_s", "backward_s",
                                                                             "optimizer_s")},
                      "tribunal_top_ops": ours["profiled"]["per_op"][:6],
                      "torch_available": torch.get("available", False),
                      "rounds": step["rounds"], "loss_step0": step["loss_step0"],
                      "openblas_core": step["cpu"]["openblas_core"], "avx512f": step["cpu"]["avx512f"],
                      "bench_peak_rss_bytes": rss}
    if torch.get("available"):
        t = torch["threads"][0]
        result["step"].update({"torch_version": torch["torch_version"], "torch_median_s": t["median_s"],
                               "torch_samples_s": t["samples_s"],
                               "torch_loss_first_warmup": torch.get("loss_first_warmup"),
                               "ratio_tribunal_over_torch": ours["median_s"] / t["median_s"]})
    else:
        result["step"]["torch_reason"] = torch.get("reason")
    mem = dict(step["memory"])
    if "train" in result:
        mem["train_peak_rss_bytes"] = result["train"]["peak_rss_bytes"]
        mem["peak_over_sum"] = mem["train_peak_rss_bytes"] / mem["sum_bytes"]
    result["memory"] = mem
    return ours


def dispute(a, build, model, work, result, median_step):
    # 4. Disputes through the referee, its re-execution limit fitted to the heaviest node: the head's
    # matmul, batch × context × d_model × vocab multiply-adds.
    batch = a.dispute_batch or a.batch
    head = batch * a.context * a.d_model * a.vocab
    limit = max(1 << 34, 1 << (head - 1).bit_length())
    dispute_job = work / "dispute.toml"
    dispute_job.write_text(job_text(a, a.dispute_steps, 1, batch))
    out, seconds, rss = run([build / "bench/bench_dispute", "--job", dispute_job, "--model", model, "--threads",
                             a.threads, "--max-reexecution-work", limit], work / "dispute.log")
    disputes = last_json(out)
    problems = (work / "dispute.log").read_text().strip()
    result["dispute"] = {"steps": a.dispute_steps, "stride": 1, "batch": batch, "wall_seconds": seconds,
                         "max_reexecution_work": limit,
                         "peak_rss_bytes": rss, "problems": problems.split("\n") if problems else [],
                         "results": []}
    for r in disputes["results"]:
        result["dispute"]["results"].append({
            "role": r["injected"]["role"], "op": r["injected"]["op"], "node": r["injected"]["node"],
            "output": r["injected"]["output"], "caught": r["caught"], "rounds": r["rounds"],
            "round_bound": r["round_bound"], "referee_cpu_s": r["referee_cpu_seconds"],
            "referee_cpu_breakdown": r["referee_cpu_breakdown"],
            "max_node_work": r["max_node_work"],
            "share_of_median_step": r["referee_cpu_seconds"] / median_step if median_step else None,
            "share_of_dispute_bench_step": r["cpu_ratio"],
            "referee_bytes_in": r["referee_bytes_in"], "op_input_bytes": r["op_input_bytes"],
            "bytes_overhead": r["bytes_overhead"], "referee_bytes_out": r["referee_bytes_out"],
            "dispute_wall_s": r["dispute_wall_seconds"], "train_step_s": r["train_step_seconds"],
            "train_step_cpu_s": r["train_step_cpu_seconds"]})


if __name__ == "__main__":
    sys.exit(main())

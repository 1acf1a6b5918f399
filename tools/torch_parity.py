#!/usr/bin/python3
"""PyTorch parity fixtures for tests/engine/test_parity.cpp.

Usage (Debian python3-torch; run by hand, not in CI — tools/regen_parity_fixtures.sh does both steps):
    build-parity/bench/parity_export scenarios/jobs/parity_gpt.toml /tmp/gpt_export.safetensors
    /usr/bin/python3 tools/torch_parity.py /tmp/gpt_export.safetensors tests/fixtures/parity/gpt.safetensors
An imported (onnx) job names its ONNX file and the tools/onnx_export.py module it was exported from
(needs python3-onnx too):
    build-parity/bench/parity_export scenarios/jobs/parity_onnx_mlp.toml /tmp/mlp_export.safetensors \
        --model mlp=tests/fixtures/onnx/mlp.onnx
    /usr/bin/python3 tools/torch_parity.py /tmp/mlp_export.safetensors \
        tests/fixtures/parity/onnx_mlp.safetensors --onnx tests/fixtures/onnx/mlp.onnx --module Mlp
Then torch runs that module with the file's initializers (checked bitwise against our state 0) and our
dropout masks (parity_torch.OnnxTwin).

Reads a parity export (our initial weights, the batches our sampler chose, the job's configuration),
builds the same model in torch from those weights, runs the export's steps with torch.optim.AdamW,
torch.nn.utils.clip_grad_norm_ and the job's lr schedule, and writes the fixture:

    loss        [steps]           the training loss of each step
    grad_norm   [steps]           total gradient norm before clipping (0 without clipping)
    lr          [steps]           the learning rate each step used
    logits      [rows, classes]   step 0's logits
    grad/<p>    our layout        step 0's gradient of parameter p (before clipping)
    param/<p>   our layout        the parameters after the last step
    buffer/<b>                    onnx jobs: the buffers (BatchNorm running statistics) after the last step
    batch<t>/inputs, batch<t>/labels   the export's batches (the test checks our sampler still picks them)
    batch<t>/dropout<k>                onnx jobs: the export's dropout factors (the test checks ours)

All in float32 (torch float32 run). The same steps are also run in float64; the metadata records, per
quantity, max |f32 − f64| / max |f64| (how far torch's own float32 result is from the exact math), the
yardstick for the test's tolerance.
"""
import json
import sys

import numpy as np
import torch

sys.path.insert(0, __import__("os").path.dirname(__file__))
import parity_torch as pt  # noqa: E402


def onnx_twin(export, onnx_path, module_name, dtype):
    """The OnnxTwin of an onnx job: tools/onnx_export.py's `module_name` with `onnx_path`'s initializers,
    which must be bitwise our state 0 (the export's param/*)."""
    import onnx_export  # tools/onnx_export.py: the modules the fixtures were exported from

    model = pt.OnnxTwin(export["config"]["model"], onnx_path, getattr(onnx_export, module_name), dtype)
    if dtype == torch.float32:
        for name, p, _ in model.our_params():
            ours = export["params"][name]
            if ours.shape != tuple(p.shape) or not np.array_equal(ours.view(np.uint32),
                                                                 p.detach().numpy().view(np.uint32)):
                raise ValueError(f"{onnx_path}: initializer {name} is not our state 0's {name}")
    return model


def run(export, dtype, onnx=None):
    """Runs every step of the export; returns the quantities of the fixture as float64 numpy arrays.
    `onnx`: (ONNX file, tools/onnx_export.py module name) for an onnx job."""
    tr = pt.Trainer(export, dtype, onnx_twin(export, onnx[0], onnx[1], dtype) if onnx else None)
    out = {"loss": [], "grad_norm": [], "lr": []}
    for t, (inputs, labels) in enumerate(export["batches"]):
        if onnx:
            tr.model.set_masks(export["masks"][t])
        x, y = tr.batch(inputs, labels)
        loss, logits = tr.forward_backward(x, y)
        if t == 0:
            out["logits"] = logits.detach().double().numpy().copy()
            out["grads"] = tr.grads()
        out["loss"].append(float(loss))
        out["lr"].append(pt.lr_at(export["config"]["optimizer"], t))
        out["grad_norm"].append(tr.update(t))
    out["params"] = tr.params()
    out["buffers"] = tr.buffers()
    return out


def rel_err(a, b):
    """max |a − b| / max |b| (relative to the magnitude of the reference b)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = np.max(np.abs(b)) if b.size else 0.0
    return float(np.max(np.abs(a - b)) / scale) if scale > 0 else float(np.max(np.abs(a - b), initial=0.0))


def main(argv):
    onnx = None
    if len(argv) == 7 and argv[3] == "--onnx" and argv[5] == "--module":
        onnx = (argv[4], argv[6])
    elif len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    export = pt.read_export(argv[1])
    if (export["config"]["model"]["kind"] == "onnx") != (onnx is not None):
        print("torch_parity: an onnx job needs --onnx FILE --module NAME (and only an onnx job)", file=sys.stderr)
        return 2
    torch.manual_seed(0)  # nothing draws from torch's RNG (dropout 0 or our masks), but keep runs identical
    torch.set_num_threads(1)
    f32 = run(export, torch.float32, onnx)
    f64 = run(export, torch.float64, onnx)

    errors = {
        "loss": rel_err(f32["loss"], f64["loss"]),
        "logits": rel_err(f32["logits"], f64["logits"]),
        "grad": max(rel_err(f32["grads"][n], f64["grads"][n]) for n in f64["grads"]),
        "param": max(rel_err(f32["params"][n], f64["params"][n]) for n in f64["params"]),
        "grad_per_param": {n: rel_err(f32["grads"][n], f64["grads"][n]) for n in f64["grads"]},
        "param_per_param": {n: rel_err(f32["params"][n], f64["params"][n]) for n in f64["params"]},
        "buffer": max([rel_err(f32["buffers"][n], f64["buffers"][n]) for n in f64["buffers"]], default=0.0),
    }
    tensors = {"loss": f32["loss"], "grad_norm": f32["grad_norm"], "lr": f32["lr"], "logits": f32["logits"]}
    for n, g in f32["grads"].items():
        tensors["grad/" + n] = g
    for n, p in f32["params"].items():
        tensors["param/" + n] = p
    for n, b in f32["buffers"].items():
        tensors["buffer/" + n] = b
    for t, (inputs, labels) in enumerate(export["batches"]):
        tensors[f"batch{t}/inputs"] = inputs
        tensors[f"batch{t}/labels"] = labels
        for k, mask in enumerate(export["masks"][t]):
            tensors[f"batch{t}/dropout{k}"] = mask
    meta = {
        "format": "tribunal-parity-fixture-1",
        "config": json.dumps(export["config"], sort_keys=True),
        "job_id": export["meta"].get("job_id", ""),
        "torch_version": torch.__version__,
        "torch_f32_vs_f64": json.dumps(errors, sort_keys=True),
        "f64_loss": json.dumps(f64["loss"]),
    }
    pt.write_safetensors(argv[2], tensors, meta)
    summary = {k: v for k, v in errors.items() if not k.endswith("per_param")}
    print(json.dumps({"fixture": argv[2], "loss_f32": f32["loss"], "loss_f64": f64["loss"],
                      "grad_norm": f32["grad_norm"], "torch_f32_vs_f64": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

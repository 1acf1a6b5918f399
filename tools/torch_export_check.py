#!/usr/bin/python3
"""`tribunal export` loaded into the reference torch modules (docs/parity.md "Exported weights").

Usage (Debian python3-torch; run by hand, not in CI — tools/check_export_torch.sh does every step):
    /usr/bin/python3 tools/torch_export_check.py PARITY_EXPORT BEFORE_DIR AFTER_DIR

PARITY_EXPORT is the job's parity export (tools/parity_export.h: its configuration and the batch of
every step); BEFORE_DIR and AFTER_DIR are `tribunal export`'s output for the job's checkpoints at steps
t and t + 1. Builds the job's torch module (tools/parity_torch.py) with fresh weights, loads
BEFORE_DIR/model.safetensors with load_state_dict(strict=True) and BEFORE_DIR/optimizer.safetensors
into torch.optim.AdamW, then takes step t in torch on the batch our sampler chose:
  - the loss must be the one the provider reported for step t (AFTER_DIR's "loss": the training loss
    committed in state t + 1), within 1e-5 relative;
  - after clipping and AdamW, every parameter and moment must be AFTER_DIR's, within 1e-4 relative
    (max |ours − torch| / max |ours| per tensor, the parity test's tolerance for parameters), but for
    the moments of the attention key biases, whose exact gradient is zero.
Prints one JSON object with the errors; exits 1 when a tolerance is exceeded.
"""
import json
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, __import__("os").path.dirname(__file__))
import parity_torch as pt  # noqa: E402

LOSS_TOLERANCE = 1e-5
PARAM_TOLERANCE = 1e-4


def rel_err(a, b):
    """max |a − b| / max |b| (b the reference)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"shapes {a.shape} and {b.shape} differ")
    scale = np.max(np.abs(b)) if b.size else 0.0
    diff = float(np.max(np.abs(a - b), initial=0.0))
    return diff / scale if scale > 0 else diff


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    export = pt.read_export(argv[1])
    before, after = argv[2], argv[3]
    cfg = export["config"]
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model, meta = pt.load_pytorch_export(cfg["model"], before + "/model.safetensors")
    if meta["job_id"] != export["meta"]["job_id"]:
        raise ValueError(f"{before}: job {meta['job_id']}, the parity export's is {export['meta']['job_id']}")
    opt = pt.make_optimizer(model, cfg["optimizer"])
    t = pt.load_pytorch_optimizer(model, opt, before + "/optimizer.safetensors")
    after_weights, after_meta = pt.read_safetensors(after + "/model.safetensors")
    after_opt, _ = pt.read_safetensors(after + "/optimizer.safetensors")
    if int(after_meta["step"]) != t + 1 or int(after_opt["step"]) != t + 1:
        raise ValueError(f"{after}: step {after_meta['step']}, expected {t + 1}")

    inputs, labels = export["batches"][t]
    x, y = type(model).prepare(torch.from_numpy(inputs), torch.from_numpy(labels))
    opt.zero_grad(set_to_none=False)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    clip = cfg["optimizer"]["clip_norm"]
    if clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    for g in opt.param_groups:
        g["lr"] = pt.lr_at(cfg["optimizer"], t)
    opt.step()

    reported = float(after_meta["loss"])
    loss_err = abs(float(loss) - reported) / abs(reported)
    params = {n: rel_err(p.detach().numpy(), after_weights[n]) for n, p in model.named_parameters()}
    # The attention key biases' exact gradient is zero (softmax is invariant to a shift of a row's
    # scores, docs/parity.md), so their moments are rounding noise on both sides and not compared; their
    # weights are (the noise moves them by ~lr at most).
    moments = {f"{k}/{n}": rel_err(opt.state[p][k].numpy(), after_opt[f"{k}/{n}"])
               for n, p in model.named_parameters() for k in ("exp_avg", "exp_avg_sq")
               if not (n.startswith("blocks.") and n.endswith(".k.bias"))}
    worst_param = max(params, key=params.get)
    worst_moment = max(moments, key=moments.get)
    ok = bool(loss_err <= LOSS_TOLERANCE and params[worst_param] <= PARAM_TOLERANCE and \
        moments[worst_moment] <= PARAM_TOLERANCE)
    print(json.dumps({"model": cfg["model"]["kind"], "step": t, "torch_loss": float(loss), "reported_loss": reported,
                      "loss_rel_err": loss_err, "param_rel_err": params[worst_param], "worst_param": worst_param,
                      "moment_rel_err": moments[worst_moment], "worst_moment": worst_moment,
                      "tensors_loaded": len(params), "ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

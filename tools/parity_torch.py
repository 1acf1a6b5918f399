"""PyTorch twins of tribunal's models and optimizer, shared by tools/torch_parity.py (fixtures),
tools/torch_gpt_step.py (the GPT step benchmark) and tools/torch_export_check.py (`tribunal export`
loaded into them). Run with Debian's python3-torch (/usr/bin/python3); not part of the build or CI.

These modules are the reference for the names of `tribunal export`'s model.safetensors
(engine/pytorch_export.h): their state_dict names are its tensor names (e.g. "blocks.0.q.weight",
"convs.1.bias", "2.weight" of the MLP's nn.Sequential), so renaming an attribute here renames the
export — change engine/pytorch_export.cpp with it.

Everything a run needs comes from a *parity export* written by the C++ side (`parity_export`, built from
tools/parity_export.cpp): our initial weights by our parameter names, the batches our sampler chose for
each step, and the job's configuration as JSON in the metadata. Our Linear weights are stored [in, out]
(y = x·w + b), so torch's nn.Linear.weight is our weight transposed; convolution weights share torch's
[C_out, C_in, k, k] layout.

Only numpy and torch are used; safetensors files are read and written by the few lines below
(format: u64 LE header length, JSON header, raw little-endian data;
https://github.com/huggingface/safetensors, README "Format").
"""
import json
import math
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# --------------------------------------------------------------------------------------------------
# safetensors


def read_safetensors(path):
    """Returns (tensors: dict name -> numpy array (F32: float32, I64: int64), metadata: dict str -> str)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack_from("<Q", blob, 0)
    header = json.loads(blob[8 : 8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        dtype = {"F32": "<f4", "I64": "<i8"}.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: tensor {name}: dtype {info['dtype']} is not F32 or I64")
        begin, end = info["data_offsets"]
        arr = np.frombuffer(blob, dtype=dtype, count=(end - begin) // np.dtype(dtype).itemsize, offset=base + begin)
        tensors[name] = arr.reshape(info["shape"]).astype(np.float32 if info["dtype"] == "F32" else np.int64)
    return tensors, meta


def write_safetensors(path, tensors, metadata):
    """Writes `tensors` (dict name -> array-like, stored as little-endian F32 in insertion order) and
    `metadata` (dict str -> str). The header is padded with spaces to a multiple of 8 bytes."""
    header = {"__metadata__": {str(k): str(v) for k, v in metadata.items()}}
    chunks, offset = [], 0
    for name, value in tensors.items():
        arr = np.ascontiguousarray(np.asarray(value, dtype="<f4"))
        data = arr.tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)


# --------------------------------------------------------------------------------------------------
# models


class Block(nn.Module):
    """One pre-LN transformer block: h += proj(attn(ln1(h))); h += mlp.proj(gelu_tanh(mlp.fc(ln2(h))))."""

    def __init__(self, d, heads, dropout=0.0):
        super().__init__()
        self.heads = heads
        self.dropout = dropout
        self.ln1 = nn.LayerNorm(d, eps=1e-5)
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d, eps=1e-5)
        self.fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)

    def forward(self, h):
        b, t, d = h.shape
        e = d // self.heads
        a = self.ln1(h)

        def split(x):  # [B,T,D] -> [B,H,T,E]
            return x.view(b, t, self.heads, e).transpose(1, 2)

        q, k, v = split(self.q(a)), split(self.k(a)), split(self.v(a))
        s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(e))
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        p = F.softmax(s.masked_fill(~mask, float("-inf")), dim=-1)
        o = (p @ v).transpose(1, 2).reshape(b, t, d)
        h = h + F.dropout(self.proj(o), self.dropout, self.training)
        return h + F.dropout(self.mlp_proj(F.gelu(self.fc(self.ln2(h)), approximate="tanh")), self.dropout, self.training)


class Gpt(nn.Module):
    """tribunal's GPT: byte embeddings + learned positions, pre-LN blocks, ln_f, untied head."""

    def __init__(self, cfg):
        super().__init__()
        v, t, d = cfg["vocab"], cfg["context"], cfg["d_model"]
        self.tok_emb = nn.Embedding(v, d)
        self.pos_emb = nn.Embedding(t, d)
        self.dropout = cfg.get("dropout", 0.0)
        self.blocks = nn.ModuleList([Block(d, cfg["heads"], self.dropout) for _ in range(cfg["layers"])])
        self.ln_f = nn.LayerNorm(d, eps=1e-5)
        self.head = nn.Linear(d, v)

    def forward(self, ids):
        """ids [B,T] (long) -> logits [B·T, V]."""
        b, t = ids.shape
        h = F.dropout(self.tok_emb(ids) + self.pos_emb.weight[:t], self.dropout, self.training)
        for blk in self.blocks:
            h = blk(h)
        return self.head(self.ln_f(h)).reshape(b * t, -1)

    def our_params(self):
        """[(our name, torch parameter, transposed)] in our canonical order."""
        out = [("tok_emb", self.tok_emb.weight, False), ("pos_emb", self.pos_emb.weight, False)]
        for l, blk in enumerate(self.blocks):
            p = f"h{l}."
            out += [(p + "ln1.weight", blk.ln1.weight, False), (p + "ln1.bias", blk.ln1.bias, False)]
            for n in ("q", "k", "v", "proj"):
                lin = getattr(blk, n)
                out += [(p + f"attn.{n}.weight", lin.weight, True), (p + f"attn.{n}.bias", lin.bias, False)]
            out += [(p + "ln2.weight", blk.ln2.weight, False), (p + "ln2.bias", blk.ln2.bias, False)]
            out += [(p + "mlp.fc.weight", blk.fc.weight, True), (p + "mlp.fc.bias", blk.fc.bias, False)]
            out += [(p + "mlp.proj.weight", blk.mlp_proj.weight, True), (p + "mlp.proj.bias", blk.mlp_proj.bias, False)]
        out += [("ln_f.weight", self.ln_f.weight, False), ("ln_f.bias", self.ln_f.bias, False)]
        out += [("head.weight", self.head.weight, True), ("head.bias", self.head.bias, False)]
        return out

    @staticmethod
    def prepare(inputs, labels):
        """Our batch tensors (ids and next-byte labels as floats [B,T]) -> torch (ids, targets[B·T])."""
        return inputs.long(), labels.long().reshape(-1)


class Cnn(nn.Module):
    """tribunal's CNN: per block Conv2d(k, stride 1, padding k/2) → ReLU → MaxPool 2×2; then fc."""

    def __init__(self, cfg):
        super().__init__()
        chans = [cfg["image_channels"]] + list(cfg["channels"])
        k = cfg["kernel"]
        self.convs = nn.ModuleList([nn.Conv2d(chans[i], chans[i + 1], k, stride=1, padding=k // 2)
                                    for i in range(len(chans) - 1)])
        self.image = (cfg["image_channels"], cfg["image_height"], cfg["image_width"])
        h, w = self.image[1:]
        for _ in self.convs:
            h, w = h // 2, w // 2
        self.fc = nn.Linear(chans[-1] * h * w, cfg["classes"])

    def forward(self, x):
        """x [B, C·H·W] -> logits [B, classes]."""
        h = x.reshape(x.shape[0], *self.image)
        for conv in self.convs:
            h = F.max_pool2d(F.relu(conv(h)), 2)
        return self.fc(h.flatten(1))

    def our_params(self):
        out = []
        for i, conv in enumerate(self.convs):
            out += [(f"conv{i}.weight", conv.weight, False), (f"conv{i}.bias", conv.bias, False)]
        return out + [("fc.weight", self.fc.weight, True), ("fc.bias", self.fc.bias, False)]

    @staticmethod
    def prepare(inputs, labels):
        return inputs, labels.long().reshape(-1)


class Mlp(nn.Sequential):
    """tribunal's MLP: Linear(widths[i] → widths[i+1]) with ReLU between, as nn.Sequential (so its
    parameters are "0.weight", "0.bias", "2.weight", …)."""

    def __init__(self, cfg):
        w = cfg["widths"]
        layers = []
        for i in range(len(w) - 1):
            if i:
                layers.append(nn.ReLU())
            layers.append(nn.Linear(w[i], w[i + 1]))
        super().__init__(*layers)

    def our_params(self):
        linears = [m for m in self if isinstance(m, nn.Linear)]
        out = []
        for i, lin in enumerate(linears):
            out += [(f"l{i}.weight", lin.weight, True), (f"l{i}.bias", lin.bias, False)]
        return out

    @staticmethod
    def prepare(inputs, labels):
        return inputs, labels.long().reshape(-1)


MODELS = {"gpt": Gpt, "cnn": Cnn, "mlp": Mlp}


class OnnxTwin(nn.Module):
    """An imported (onnx) job's model in torch: the very module of tools/onnx_export.py the ONNX file was
    exported from, its parameters set from the file's initializers (onnx.numpy_helper), so it starts
    from the job's state 0. Parameter names and layouts are torch's on both sides (the importer keeps
    them), so nothing is transposed.

    Dropout: torch's RNG cannot draw our masks (Philox, ops/pointwise.h), so each nn.Dropout is put in
    eval mode and a forward hook multiplies its input by our factor for this step (the export's
    batch<t>/dropout<k>: keepᵢ ? 1/(1−p) : 0; the k-th nn.Dropout in module order is the k-th Dropout
    node of our graph). In float64 the factor is recomputed as keepᵢ / (1 − p) from the same keep."""

    def __init__(self, cfg, onnx_path, module_cls, dtype=torch.float32):
        super().__init__()
        import onnx
        from onnx import numpy_helper

        graph = onnx.load(str(onnx_path)).graph
        self.inner = module_cls().to(dtype)
        inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        named = dict(self.inner.named_parameters())
        if sorted(named) != sorted(cfg["params"]):
            raise ValueError(f"{onnx_path}: the job's parameters {cfg['params']} are not the module's {sorted(named)}")
        with torch.no_grad():
            for name, p in named.items():
                w = inits[name]
                if tuple(w.shape) != tuple(p.shape):
                    raise ValueError(f"{onnx_path}: initializer {name} has shape {w.shape}, the module {tuple(p.shape)}")
                p.copy_(torch.from_numpy(np.array(w, dtype=np.float32)).to(dtype))
            # Float buffers the file holds (BatchNorm's running statistics: our state's buffers).
            for name, b in self.inner.named_buffers():
                if name in inits and b.is_floating_point():
                    b.copy_(torch.from_numpy(np.array(inits[name], dtype=np.float32)).to(dtype))
        inputs = [i for i in graph.input if i.name not in inits]
        name = cfg.get("input") or inputs[0].name
        dims = next(i for i in inputs if i.name == name).type.tensor_type.shape.dim
        self.sample_shape = tuple(d.dim_value for d in dims[1:])
        # int64 token ids (a GPT's input): our batches carry them as integral floats.
        self.token_ids = next(i for i in inputs if i.name == name).type.tensor_type.elem_type == onnx.TensorProto.INT64
        self.dropouts = [m for m in self.inner.modules() if isinstance(m, nn.Dropout)]
        ratios = cfg.get("dropout", [])
        if len(ratios) != len(self.dropouts) or any(abs(m.p - r) > 1e-7 for m, r in zip(self.dropouts, ratios)):
            raise ValueError(f"our graph's dropout ratios {ratios} are not the module's {[m.p for m in self.dropouts]}")
        self.dtype = dtype
        self.factors = None
        for k, m in enumerate(self.dropouts):
            m.eval()
            m.register_forward_hook(lambda mod, inp, out, k=k: inp[0] * self.factors[k])

    def set_masks(self, masks):
        """Our dropout factors of this step (float32 numpy arrays, one per nn.Dropout)."""
        self.factors = []
        for m, f in zip(self.dropouts, masks):
            f = torch.from_numpy(f)
            if self.dtype == torch.float32:
                self.factors.append(f)
            else:
                p = float(np.float32(m.p))
                self.factors.append((f != 0).to(self.dtype) / (1.0 - p))

    def forward(self, x):
        """x [B, features] -> the module's output on x reshaped to [B, graph input's dims after the batch]
        (token ids as int64); per-position logits [B, T, V] flattened to [B·T, V] like our loss reads them."""
        x = x.reshape(x.shape[0], *self.sample_shape)
        y = self.inner(x.long() if self.token_ids else x)
        return y.reshape(-1, y.shape[-1]) if y.dim() == 3 else y

    def train(self, mode=True):
        super().train(mode)
        for m in getattr(self, "dropouts", []):
            m.eval()  # our masks replace torch's
        return self

    def our_params(self):
        return [(n, p, False) for n, p in self.inner.named_parameters()]

    def our_buffers(self):
        """The float buffers (BatchNorm running statistics): our state's buffers, same names."""
        return [(n, b) for n, b in self.inner.named_buffers() if b.is_floating_point()]

    @staticmethod
    def prepare(inputs, labels):
        return inputs, labels.long().reshape(-1)


def build_model(cfg, params, dtype=torch.float32):
    """The model of `cfg` ("kind": "gpt" | "cnn" | "mlp") with our weights `params` (name -> numpy array)."""
    model = MODELS[cfg["kind"]](cfg).to(dtype)
    with torch.no_grad():
        names = set()
        for name, p, transposed in model.our_params():
            w = torch.from_numpy(params[name]).to(dtype)
            p.copy_(w.t() if transposed else w)
            names.add(name)
    missing = set(params) - names
    if missing:
        raise ValueError(f"export has parameters the torch model lacks: {sorted(missing)}")
    if len(names) != len(list(model.parameters())):
        raise ValueError("torch model has parameters the export lacks")
    return model


# --------------------------------------------------------------------------------------------------
# optimizer and schedule


def lr_at(opt_cfg, t):
    """Learning rate of step t (0-based): linear warmup lr·(t+1)/warmup for t < warmup, then cosine from
    lr to min_lr over the remaining steps of the job (constant lr when the schedule is "constant")."""
    lr = opt_cfg["lr"]
    if opt_cfg["schedule"] == "constant":
        return lr
    warmup, total, min_lr = opt_cfg["warmup_steps"], opt_cfg["total_steps"], opt_cfg["min_lr"]
    if t < warmup:
        return lr * (t + 1) / warmup
    if total - warmup <= 0:
        return min_lr
    progress = (t - warmup) / (total - warmup)
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * min(progress, 1.0)))


def make_optimizer(model, opt_cfg):
    """torch.optim.AdamW with decoupled weight decay on rank ≥ 2 parameters only ("matrices") or on all."""
    decay_all = opt_cfg["decay"] == "all"
    decay, no_decay = [], []
    for _, p, _ in model.our_params():
        (decay if decay_all or p.dim() >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": opt_cfg["weight_decay"]},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=opt_cfg["lr"], betas=(opt_cfg["beta1"], opt_cfg["beta2"]),
                             eps=opt_cfg["eps"], foreach=False)


class Trainer:
    """Runs the job's steps in torch: forward, mean cross-entropy (or squared error), backward,
    clip_grad_norm_, AdamW."""

    def __init__(self, export, dtype=torch.float32, model=None):
        """`model`: the torch model to train (an OnnxTwin); default build_model from the export."""
        self.cfg = export["config"]
        self.model = model if model is not None else build_model(self.cfg["model"], export["params"], dtype)
        self.opt = make_optimizer(self.model, self.cfg["optimizer"])
        self.dtype = dtype

    def mse(self):
        """The job's loss is the mean squared error against float targets (model.loss = "mse")."""
        return self.cfg["model"].get("loss") == "mse"

    def batch(self, inputs, labels):
        if self.mse():  # float targets [B, K], as they are
            return torch.from_numpy(inputs).to(self.dtype), torch.from_numpy(labels).to(self.dtype)
        x, y = type(self.model).prepare(torch.from_numpy(inputs), torch.from_numpy(labels))
        return (x.to(self.dtype) if x.is_floating_point() else x), y

    def forward_backward(self, x, y):
        """Zeroes the gradients, returns (loss, logits) with .grad set (before clipping). The loss is the
        mean cross-entropy, or torch.nn.MSELoss() (reduction "mean") for an mse job."""
        self.opt.zero_grad(set_to_none=False)
        logits = self.model(x)
        loss = F.mse_loss(logits, y) if self.mse() else F.cross_entropy(logits, y)
        loss.backward()
        return loss, logits

    def update(self, t):
        """Clips (if the job says so) and applies AdamW with step t's learning rate. Returns the total
        gradient norm before clipping (0 when not clipping)."""
        norm = 0.0
        clip = self.cfg["optimizer"]["clip_norm"]
        if clip > 0:
            norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip))
        lr = lr_at(self.cfg["optimizer"], t)
        for g in self.opt.param_groups:
            g["lr"] = lr
        self.opt.step()
        return norm

    def grads(self):
        """Current gradients by our parameter names, in our layout, as float64 numpy arrays."""
        return {n: (p.grad.t() if tr else p.grad).detach().double().numpy().copy()
                for n, p, tr in self.model.our_params()}

    def params(self):
        return {n: (p.t() if tr else p).detach().double().numpy().copy() for n, p, tr in self.model.our_params()}

    def buffers(self):
        """An imported model's float buffers (BatchNorm running statistics) by name; {} otherwise."""
        if not hasattr(self.model, "our_buffers"):
            return {}
        return {n: b.detach().double().numpy().copy() for n, b in self.model.our_buffers()}


def load_pytorch_export(cfg, model_path, dtype=torch.float32):
    """The model of `cfg` with the weights of `tribunal export`'s model.safetensors, loaded by torch's own
    names with load_state_dict(strict=True): every parameter present, none extra, shapes equal."""
    model = MODELS[cfg["kind"]](cfg).to(dtype)
    tensors, meta = read_safetensors(model_path)
    if meta.get("format") != "tribunal-pytorch-model-1":
        raise ValueError(f"{model_path}: not a tribunal PyTorch export (format {meta.get('format')!r})")
    model.load_state_dict({k: torch.from_numpy(v).to(dtype) for k, v in tensors.items()}, strict=True)
    return model, meta


def load_pytorch_optimizer(model, opt, optimizer_path, dtype=torch.float32):
    """Loads `tribunal export`'s optimizer.safetensors into the torch.optim.AdamW `opt` of `model`:
    state[p] = {"step", "exp_avg", "exp_avg_sq"} by p's torch name. Returns the step."""
    tensors, meta = read_safetensors(optimizer_path)
    if meta.get("format") != "tribunal-pytorch-optimizer-1" or meta.get("optimizer") != "adamw":
        raise ValueError(f"{optimizer_path}: not a tribunal AdamW optimizer export")
    step = int(tensors["step"])
    for name, p in model.named_parameters():
        opt.state[p] = {"step": torch.tensor(float(step)),
                        "exp_avg": torch.from_numpy(tensors["exp_avg/" + name]).to(dtype).clone(),
                        "exp_avg_sq": torch.from_numpy(tensors["exp_avg_sq/" + name]).to(dtype).clone()}
    used = {"step"} | {f"{k}/{n}" for n, _ in model.named_parameters() for k in ("exp_avg", "exp_avg_sq")}
    if set(tensors) != used:
        raise ValueError(f"{optimizer_path}: tensors not matched to the model: {sorted(set(tensors) ^ used)}")
    return step


def read_export(path):
    """A parity export: {"config": dict, "params": name -> array, "batches": [(inputs, labels)], "masks":
    [[dropout factor per Dropout node] per step] (onnx jobs; empty lists otherwise), ...}."""
    tensors, meta = read_safetensors(path)
    if meta.get("format") != "tribunal-parity-export-1":
        raise ValueError(f"{path}: not a tribunal parity export (format {meta.get('format')!r})")
    cfg = json.loads(meta["config"])
    params = {k[len("param/"):]: v for k, v in tensors.items() if k.startswith("param/")}
    batches, masks = [], []
    for t in range(cfg["steps"]):
        batches.append((tensors[f"batch{t}/inputs"], tensors[f"batch{t}/labels"]))
        masks.append([tensors[f"batch{t}/dropout{k}"] for k in range(len(cfg["model"].get("dropout", [])))]
                     if cfg["model"]["kind"] == "onnx" else [])
    return {"config": cfg, "params": params, "batches": batches, "masks": masks, "meta": meta}

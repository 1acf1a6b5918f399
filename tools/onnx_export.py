#!/usr/bin/python3
"""Exports the small ONNX models of tests/fixtures/onnx/ from PyTorch modules (docs/onnx.md).

    /usr/bin/python3 tools/onnx_export.py [OUT_DIR [NAME…]]   (default tests/fixtures/onnx, every model;
                                                             needs python3-torch)
    /usr/bin/python3 tools/onnx_export.py --gpt2 OUT.onnx [--vocab 50257] [--context 256] [--layers 12]
                                          [--heads 12] [--d-model 768]   (GPT-2 small; not committed)

Each family is defined here as a user would define it, and exported the way docs/onnx.md tells users
to: torch.onnx.export in training mode (dropout kept as training-mode Dropout nodes), opset 17, no
constant folding by the exporter (tribunal folds shape computations itself), a dynamic batch axis.
The initializers are torch's default initialization under a fixed seed: the job's state 0.

  mlp.onnx  Linear(784, 64) → ReLU → Dropout(0.1) → Linear(64, 10)            (Fashion-MNIST, 51k params)
  cnn.onnx  Conv(1→8, 3×3, pad 1) → ReLU → MaxPool 2 → Conv(8→16, 3×3, pad 1) → ReLU → MaxPool 2
            → Flatten → Linear(784, 10)                                       (Fashion-MNIST, 9.1k params)
  gpt2.onnx GPT-2 as nanoGPT and Hugging Face write it: byte vocabulary 256, context 32, 2 layers, 2 heads,
            d_model 32, dropout 0.1, the causal mask a registered buffer, the LM head tied to the token
            embedding; layer 0's MLP uses nn.GELU() (exported as Erf), layer 1's GPT-2's tanh form
            written out (Pow, Tanh), so one file has both.                    (bytes of text, 35k params)
  gpt2_vocab512.onnx the same module with a vocabulary of 512 tokens, context 8, 1 layer, 2 heads,
            d_model 8: logits wider than the byte classes               (bytes of text, 5k params)
  llama.onnx a Llama-style decoder: byte vocabulary, context 32, 2 layers, 4 heads sharing 2 key/value
            heads (grouped-query attention through expand + reshape), d_model 32, RMSNorm, rotary
            embeddings computed in forward (folded at import), SwiGLU MLP of 64, no biases, untied head.
                                                                              (bytes of text, 35k params)
  resnet.onnx a ResNet (He et al. 2016) as torchvision writes it, shrunk for Fashion-MNIST: a 3×3 stem
            conv of 8 channels without bias → BatchNorm → ReLU → MaxPool 3/2 pad 1, a BasicBlock of 8,
            a BasicBlock of 16 with stride 2 and a 1×1 conv + BatchNorm downsample, global average
            pooling, Flatten, Linear(16, 10); BatchNorm in training mode, its running statistics the
            buffers a step updates.                                           (Fashion-MNIST, 5.1k params)
  grouped_cnn.onnx the convolutions of MobileNet and ResNeXt at toy size: x[N, 4, 9, 9] → depthwise
            Conv(4→4, 3×3, groups 4, dilation 2, stride (1, 2), padding (2, 1)) → Conv(4→6, 3×2, groups 2,
            dilation (2, 1), padding 1) → GlobalAveragePool → Flatten: 6 logits (no ReLU, so the autodiff
            test's finite differences never cross a kink)                    (tests/engine, 118 params)
  regressor.onnx Linear(4, 32) → Tanh → Linear(32, 32) → ReLU → Linear(32, 2), output "prediction" [B, 2]
            (an mse job's model: tests/fixtures/regression/, tools/make_regression.py; 1.3k params)

Not run in CI (python3-torch stays out of its critical path): the exported files are committed.
"""
import math
import pathlib
import sys

import torch
from torch import nn


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 64)
        self.drop = nn.Dropout(0.1)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


class Regressor(nn.Module):
    """A small MLP regressor: K = 2 float predictions per sample, trained with model.loss = "mse"."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 32)
        self.fc2 = nn.Linear(32, 32)
        self.fc3 = nn.Linear(32, 2)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.tanh(self.fc1(x)))))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc(torch.flatten(x, 1))


class TanhGelu(nn.Module):
    """GPT-2's GELU, the tanh approximation as its code writes it (Hugging Face's NewGELUActivation)."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, heads, context, dropout):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(d_model, 3 * d_model)
        self.c_proj = nn.Linear(d_model, d_model)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.register_buffer("bias", torch.tril(torch.ones(context, context)).view(1, 1, context, context))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.heads))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = self.attn_dropout(torch.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class Block(nn.Module):
    def __init__(self, d_model, heads, context, dropout, gelu):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, heads, context, dropout)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), gelu, nn.Linear(4 * d_model, d_model),
                                 nn.Dropout(dropout))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt2(nn.Module):
    """`layers` = None: the fixture's two blocks (Erf GELU, then the tanh form); a number: that many
    blocks with nn.GELU() (nanoGPT's model.py)."""

    def __init__(self, vocab=256, context=32, d_model=32, heads=2, dropout=0.1, layers=None):
        super().__init__()
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(context, d_model)
        self.drop = nn.Dropout(dropout)
        gelus = [nn.GELU(), TanhGelu()] if layers is None else [nn.GELU() for _ in range(layers)]
        self.h = nn.ModuleList([Block(d_model, heads, context, dropout, g) for g in gelus])
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as GPT-2 does
        for name, p in self.named_parameters():  # GPT-2's initialization (nanoGPT's _init_weights)
            if name.endswith("weight") and p.dim() == 2:
                nn.init.normal_(p, mean=0.0, std=0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, ids):
        pos = torch.arange(0, ids.size(1), dtype=torch.long, device=ids.device)
        x = self.drop(self.wte(ids) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class RmsNorm(nn.Module):
    """RMSNorm as Llama writes it: x · rsqrt(mean(x²) + ε) · weight."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaAttention(nn.Module):
    """Grouped-query attention with rotary embeddings; the cos/sin tables computed in forward from
    constants (folded at import), the key/value heads repeated with expand + reshape."""

    def __init__(self, d_model, heads, kv_heads, context):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, d_model // heads
        self.q_proj = nn.Linear(d_model, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(d_model, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d_model, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, d_model, bias=False)
        self.register_buffer("mask", torch.tril(torch.ones(context, context)).view(1, 1, context, context),
                             persistent=False)

    def repeat_kv(self, x):
        B, H, T, E = x.shape
        r = self.heads // self.kv_heads
        return x[:, :, None, :, :].expand(B, H, r, T, E).reshape(B, H * r, T, E)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        freqs = torch.arange(T).float()[:, None] @ inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = self.repeat_kv(k), self.repeat_kv(v)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        y = (torch.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(B, T, -1)
        return self.o_proj(y)


class LlamaBlock(nn.Module):
    def __init__(self, d_model, heads, kv_heads, context, hidden):
        super().__init__()
        self.input_layernorm = RmsNorm(d_model)
        self.self_attn = LlamaAttention(d_model, heads, kv_heads, context)
        self.post_attention_layernorm = RmsNorm(d_model)
        self.gate_proj = nn.Linear(d_model, hidden, bias=False)
        self.up_proj = nn.Linear(d_model, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, d_model, bias=False)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(nn.functional.silu(self.gate_proj(h)) * self.up_proj(h))  # SwiGLU


class Llama(nn.Module):
    def __init__(self, vocab=256, context=32, d_model=32, heads=4, kv_heads=2, hidden=64, layers=2):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d_model)
        self.layers = nn.ModuleList([LlamaBlock(d_model, heads, kv_heads, context, hidden) for _ in range(layers)])
        self.norm = RmsNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)
        for p in self.parameters():  # Llama's initialization: normal(0, 0.02) for every matrix
            if p.dim() == 2:
                nn.init.normal_(p, mean=0.0, std=0.02)

    def forward(self, ids):
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


class BasicBlock(nn.Module):
    """torchvision.models.resnet.BasicBlock: two 3×3 convs with BatchNorm, a residual add."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + identity)


class Resnet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = BasicBlock(8, 8, 1)
        self.layer2 = BasicBlock(8, 16, 2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.maxpool(torch.relu(self.bn1(self.conv1(x))))
        x = self.layer2(self.layer1(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class GroupedCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.depthwise = nn.Conv2d(4, 4, 3, stride=(1, 2), padding=(2, 1), dilation=2, groups=4)
        self.grouped = nn.Conv2d(4, 6, (3, 2), padding=1, dilation=(2, 1), groups=2)

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.grouped(self.depthwise(x)), 1)
        return torch.flatten(x, 1)


def export(module, example, path, input_name="x", output_name="logits"):
    module.train()
    torch.onnx.export(module, example, str(path), opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=[input_name], output_names=[output_name],
                      dynamic_axes={input_name: {0: "batch"}, output_name: {0: "batch"}})
    print(f"{path}: {path.stat().st_size} bytes, {sum(p.numel() for p in module.parameters())} parameters")


# GPT-2 small (Radford et al. 2019; nanoGPT's "gpt2" configuration) at context 256.
GPT2_SMALL = {"vocab": 50257, "context": 256, "layers": 12, "heads": 12, "d_model": 768}


def gpt2_sized(vocab, context, layers, heads, d_model, seed=2030):
    """nanoGPT's GPT-2 at any size, GPT-2's initialization under `seed`, dropout 0.1, every block with
    nn.GELU(). At GPT2_SMALL: 124M parameters (the LM head tied); 85M with the byte vocabulary 256."""
    torch.manual_seed(seed)
    return Gpt2(vocab=vocab, context=context, d_model=d_model, heads=heads, dropout=0.1, layers=layers)


def gpt2_from_onnx(path, heads):
    """A constructor of the Gpt2 module `path` was exported from by --gpt2 (its vocabulary, context,
    layers and d_model read from the file's initializers; the head count is not in the weights), for
    parity_torch.OnnxTwin, which copies the file's weights in."""
    import onnx
    graph = onnx.load(str(path)).graph
    dims = {t.name: list(t.dims) for t in graph.initializer}
    layers = len({n.split(".")[1] for n in dims if n.startswith("h.")})
    vocab, d_model = dims["wte.weight"]
    return lambda: Gpt2(vocab=vocab, context=dims["wpe.weight"][0], d_model=d_model, heads=heads, layers=layers)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--gpt2":
        # tools/onnx_export.py --gpt2 OUT.onnx [--vocab V] [--context T] [--layers L] [--heads H] [--d-model D]:
        # GPT-2 small by default (~500 MB: never committed; bench/bench_onnx_gpt2.py generates it).
        import argparse
        ap = argparse.ArgumentParser(prog="onnx_export.py --gpt2")
        ap.add_argument("out")
        for key, value in GPT2_SMALL.items():
            ap.add_argument("--" + key.replace("_", "-"), type=int, default=value)
        a = ap.parse_args(sys.argv[2:])
        path = pathlib.Path(a.out)
        path.parent.mkdir(parents=True, exist_ok=True)
        model = gpt2_sized(a.vocab, a.context, a.layers, a.heads, a.d_model)
        export(model, torch.zeros(4, a.context, dtype=torch.long), path, input_name="ids")
        return
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/onnx")
    out.mkdir(parents=True, exist_ok=True)
    only = set(sys.argv[2:])  # the model names to export; none: all
    # name → (seed, module, example input, input name, output name); each seeded on its own, so exporting
    # one reproduces its file alone (two may share a seed).
    models = {
        "mlp": (2026, Mlp, lambda: torch.zeros(4, 784), "x", "logits"),
        "cnn": (2027, Cnn, lambda: torch.zeros(4, 1, 28, 28), "x", "logits"),
        "gpt2": (2028, Gpt2, lambda: torch.zeros(4, 32, dtype=torch.long), "ids", "logits"),
        "llama": (2029, Llama, lambda: torch.zeros(4, 32, dtype=torch.long), "ids", "logits"),
        "resnet": (2030, Resnet, lambda: torch.zeros(4, 1, 28, 28), "x", "logits"),
        # A GPT-2 whose vocabulary is wider than the byte classes (byte ids are token ids of it): a text
        # job reads its [B, 8, 512] logits (tests/engine/test_job_onnx.cpp). gpt2_sized seeds itself.
        "gpt2_vocab512": (2030, lambda: gpt2_sized(vocab=512, context=8, layers=1, heads=2, d_model=8),
                          lambda: torch.zeros(4, 8, dtype=torch.long), "ids", "logits"),
        "regressor": (2030, Regressor, lambda: torch.zeros(4, 4), "x", "prediction"),
        "grouped_cnn": (2031, GroupedCnn, lambda: torch.zeros(4, 4, 9, 9), "x", "logits"),
    }
    for name, (seed, module, example, input_name, output_name) in models.items():
        if only and name not in only:
            continue
        torch.manual_seed(seed)
        export(module(), example(), out / f"{name}.onnx", input_name=input_name, output_name=output_name)


if __name__ == "__main__":
    main()

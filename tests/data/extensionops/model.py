"""A recurrent model in the style of research code that compiles its CUDA kernel when imported
(`torch.utils.cpp_extension.load(..., is_python_module=False)`: the kernel's ops registered as `torch.ops.toywkv`),
whose autograd wrapper asserts the bfloat16 inputs its launcher trains in and hands the kernel an output tensor to
write; its config is the training run's `args` (an attribute bag), whose `ctx_len` its forward asserts (archviz test
fixture; the .cu files are never read)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

load(name="toywkv", sources=["cuda/toywkv_op.cpp", "cuda/toywkv_cuda.cu"], is_python_module=False, verbose=True,
     extra_cuda_cflags=["-O3", "--use_fast_math"])


class WKV(torch.autograd.Function):
    @staticmethod
    def forward(ctx, r, k, v):
        B, T, C = r.size()
        assert r.dtype == torch.bfloat16
        assert k.dtype == torch.bfloat16
        assert v.dtype == torch.bfloat16
        y = torch.empty((B, T, C), device=r.device, dtype=torch.bfloat16, memory_format=torch.contiguous_format)
        torch.ops.toywkv.forward(B, T, C, r, k, v, y)
        return y


class TimeMix(nn.Module):
    def __init__(self, args, layer_id: int):
        super().__init__()
        self.layer_id = layer_id
        self.receptance = nn.Linear(args.n_embd, args.n_embd, bias=False)
        self.key = nn.Linear(args.n_embd, args.n_embd, bias=False)
        self.value = nn.Linear(args.n_embd, args.n_embd, bias=False)
        self.output = nn.Linear(args.n_embd, args.n_embd, bias=False)

    def forward(self, x):
        return self.output(WKV.apply(self.receptance(x), self.key(x), self.value(x)))


class ToyRWKV(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.emb = nn.Embedding(args.vocab_size, args.n_embd)
        self.blocks = nn.ModuleList([TimeMix(args, i) for i in range(args.n_layer)])
        self.ln_out = nn.LayerNorm(args.n_embd)
        self.head = nn.Linear(args.n_embd, args.vocab_size, bias=False)

    def forward(self, idx):
        B, T = idx.size()
        assert T <= self.args.ctx_len, "Cannot forward, model ctx_len is exhausted."
        x = self.emb(idx)
        for block in self.blocks:
            x = x + block(x)
        return self.head(self.ln_out(x))

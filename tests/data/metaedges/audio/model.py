"""An audio encoder in the style of speech-recognition code: a dataclass of dims, a conv front end, a buffer of
alignment heads made without a device and stored sparse (`.to_sparse()`, no meta kernel), a TorchScript helper with
the fuser switched on at import (as training code does) and a scripted module, a forward that checks `x.type()`
against the tensor type names and moves lengths with `.cpu()`, and a `self.to(device=None)` a loader passes through.
Written for archviz's tests."""

from dataclasses import dataclass

import torch
from torch import nn

torch._C._jit_set_profiling_mode(False)
torch._C._jit_set_profiling_executor(False)
torch._C._jit_override_can_fuse_on_cpu(True)


@dataclass
class AudioDims:
    n_mels: int
    n_state: int
    n_head: int
    n_layer: int
    n_vocab: int


@torch.jit.script
def fused_gelu(x):
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1.0 + 0.044715 * x * x)))


class Block(nn.Module):
    def __init__(self, n_state: int):
        super().__init__()
        self.ln = nn.LayerNorm(n_state)
        self.fc1 = nn.Linear(n_state, 4 * n_state)
        self.fc2 = nn.Linear(4 * n_state, n_state)

    def forward(self, x):
        return x + self.fc2(fused_gelu(self.fc1(self.ln(x))))


class AudioModel(nn.Module):
    def __init__(self, dims: AudioDims, device=None):
        super().__init__()
        self.dims = dims
        self.conv = nn.Conv1d(dims.n_mels, dims.n_state, kernel_size=3, padding=1)
        self.blocks = nn.ModuleList(Block(dims.n_state) for _ in range(dims.n_layer))
        self.ln_post = torch.jit.script(nn.LayerNorm(dims.n_state))
        self.head = nn.Linear(dims.n_state, dims.n_vocab, bias=False)
        heads = torch.zeros(dims.n_layer, dims.n_head, dtype=torch.bool)
        heads[dims.n_layer // 2:] = True
        self.register_buffer("alignment_heads", heads.to_sparse(), persistent=False)
        self.to(device=device)

    def forward(self, mel):
        if mel.type() not in ("torch.FloatTensor", "torch.cuda.FloatTensor"):
            raise TypeError(f"mel must be float32, not {mel.type()}")
        frames = mel.new_ones(mel.shape[0]).cpu()  # lengths on the host, as a packed sequence wants them
        assert frames.shape == (mel.shape[0],)
        x = fused_gelu(self.conv(mel)).permute(0, 2, 1)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_post(x))

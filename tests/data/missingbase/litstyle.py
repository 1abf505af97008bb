import torch
import torch.nn as nn
import trainerkit_absent as tk
from trainerkit_absent.utilities import rank_zero_info


class Mix(nn.Module):
    def __init__(self, args, layer_id):
        super().__init__()
        self.layer_id = layer_id
        self.decay = nn.Parameter(torch.zeros(args.n_embd))
        self.key = nn.Linear(args.n_embd, args.dim_att, bias=False)
        self.value = nn.Linear(args.dim_att, args.n_embd, bias=False)

    def forward(self, x):
        return self.value(torch.relu(self.key(x)) * torch.sigmoid(self.decay).mean())


class MixVariant(nn.Module):
    """An experimental variant that no class instantiates."""

    def __init__(self, args, layer_id):
        super().__init__()
        self.key = nn.Linear(args.n_embd, args.n_embd, bias=False)

    def forward(self, x):
        return self.key(x)


class Block(nn.Module):
    def __init__(self, args, layer_id):
        super().__init__()
        self.ln = nn.LayerNorm(args.n_embd)
        self.mix = Mix(args, layer_id)

    def forward(self, x):
        return x + self.mix(self.ln(x))


class TinyRNNLM(tk.TrainableModule):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.emb = nn.Embedding(args.vocab_size, args.n_embd)
        self.blocks = nn.ModuleList([Block(args, i) for i in range(args.n_layer)])
        self.ln_out = nn.LayerNorm(args.n_embd)
        self.head = nn.Linear(args.n_embd, args.vocab_size, bias=False)

    def configure_optimizers(self):
        rank_zero_info("optimizers")
        return torch.optim.AdamW(self.parameters())

    def forward(self, idx):
        x = self.emb(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_out(x))


class Logger(tk.Callback):
    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        rank_zero_info(batch_idx)

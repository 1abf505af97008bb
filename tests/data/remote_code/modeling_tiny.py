"""The folder's own model code: a relative import of its config, a pre-trained base and a causal-LM head."""

import torch
from torch import nn
from transformers import PreTrainedModel

from .configuration_tiny import TinyRemoteConfig


class TinyRemoteBlock(nn.Module):
    def __init__(self, config: TinyRemoteConfig):
        super().__init__()
        self.norm = nn.LayerNorm(config.hidden_size)
        self.up = nn.Linear(config.hidden_size, config.expansion * config.hidden_size)
        self.down = nn.Linear(config.expansion * config.hidden_size, config.hidden_size, bias=False)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.down(torch.relu(self.up(self.norm(h))))


class TinyRemotePreTrainedModel(PreTrainedModel):
    config_class = TinyRemoteConfig
    base_model_prefix = "model"


class TinyRemoteModel(TinyRemotePreTrainedModel):
    def __init__(self, config: TinyRemoteConfig):
        super().__init__(config)
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        self.blocks = nn.ModuleList(TinyRemoteBlock(config) for _ in range(config.num_hidden_layers))
        self.post_init()

    def forward(self, input_ids: torch.Tensor, **kwargs) -> torch.Tensor:
        h = self.embed(input_ids)
        for block in self.blocks:
            h = block(h)
        return h


class TinyRemoteForCausalLM(TinyRemotePreTrainedModel):
    def __init__(self, config: TinyRemoteConfig):
        super().__init__(config)
        self.model = TinyRemoteModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def forward(self, input_ids: torch.Tensor, **kwargs) -> torch.Tensor:
        return self.lm_head(self.model(input_ids))

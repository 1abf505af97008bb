"""Model code written for another transformers: it imports a helper this one does not have (as the Hub's
DeepSeek-V3 modeling file imports `is_torch_fx_available`, gone in transformers 5)."""

from torch import nn
from transformers import PreTrainedModel
from transformers.utils import a_helper_this_transformers_does_not_have  # noqa: F401

from .configuration_old import OldRemoteConfig


class OldRemoteForCausalLM(PreTrainedModel):
    config_class = OldRemoteConfig

    def __init__(self, config):
        super().__init__(config)
        self.proj = nn.Linear(config.hidden_size, config.hidden_size)

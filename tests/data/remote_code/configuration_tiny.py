"""A model type transformers does not know, shipped as code beside its config.json (auto_map), as Hub repos do."""

from transformers import PretrainedConfig


class TinyRemoteConfig(PretrainedConfig):
    model_type = "tiny_remote"

    def __init__(self, vocab_size=96, hidden_size=24, num_hidden_layers=3, expansion=3, **kwargs):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.expansion = expansion
        super().__init__(**kwargs)

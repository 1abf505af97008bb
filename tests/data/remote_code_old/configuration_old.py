"""A config that imports fine."""

from transformers import PretrainedConfig


class OldRemoteConfig(PretrainedConfig):
    model_type = "old_remote"

    def __init__(self, hidden_size=16, **kwargs):
        self.hidden_size = hidden_size
        super().__init__(**kwargs)

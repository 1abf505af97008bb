"""A model whose constructor reads a file its config names (gemma_pytorch's style: the tokenizer built in `__init__`
from `config.tokenizer`, asserted to exist), the embedding sized by it (archviz test fixture)."""
import os
from dataclasses import dataclass

import torch.nn as nn


@dataclass
class LMConfig:
    hidden_size: int = 24
    tokenizer: str = "tokenizer/vocab.txt"


class Vocabulary:
    def __init__(self, path: str):
        assert os.path.isfile(path), path
        with open(path, encoding="utf-8") as f:
            self.words = [line.rstrip("\n") for line in f]


class TinyLM(nn.Module):
    def __init__(self, config: LMConfig):
        super().__init__()
        self.vocab = Vocabulary(config.tokenizer)
        self.embed = nn.Embedding(len(self.vocab.words), config.hidden_size)
        self.head = nn.Linear(config.hidden_size, len(self.vocab.words), bias=False)

    def forward(self, ids):
        return self.head(self.embed(ids))

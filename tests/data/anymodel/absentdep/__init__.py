from .build import build_small, build_large
from .predictor import Predictor

"""What a token costs, from the code: FLOPs per module in the meta pass (flops), KV cache (kv), memory (memory,
activations), the passes that measure them (measure) and their records (report)."""

"""The model shapes the GPU checks build with random weights: SmolLM2-1.7B's geometry (`full`: its config's
sizes, the shape whose MFU and memory the checks report) and a tiny one of the same family (`reduced`: the CPU
mode the tests run). One home for both checks (decode_check.py, train_check.py) and the memory plan's test."""

SMOLLM2_1_7B = {
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_hidden_layers": 24,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "head_dim": 64,
}
GEOMETRY = {
    "full": SMOLLM2_1_7B,
    "reduced": {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
    },
}

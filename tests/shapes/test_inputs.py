"""--input gives the meta pass other inputs than token ids."""
import json


def test_input_option_feeds_the_meta_forward(archviz_cli):
    p = archviz_cli("inspect", "vision:build", "head", "--input", "pixels=B,T,24", "--input", "scale=float:0.5", "--json")
    assert p.returncode == 0, p.stderr
    card = json.loads(p.stdout)
    # head is nn.Linear(48, 10) in the factory: in [B, T, 48], out [B, T, 10]
    assert card["inputs"] == [["B", "T", 48]] and card["outputs"] == [["B", "T", 10]]
    assert card["call_sites"][0]["code"] == "self.head(torch.relu(self.proj(pixels * scale)))"


def test_bad_input_spec_is_one_line_exit_2(archviz_cli):
    # (B,Q,24 is valid: Q takes the size of the default features' [B, T, 24] time axis; no default has 4 dims)
    p = archviz_cli("inspect", "vision:build", "--input", "pixels=B,Q,2,24")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "'Q' is not an int, B or T" in p.stderr


def test_given_inputs_come_beside_the_default_token_ids(archviz_cli):
    """An encoder-decoder needs decoder inputs too: `--input decoder_input_ids=B,T` adds them to the default
    input_ids (before, --input replaced every default, and T5's encoder then had no input_ids)."""
    import transformers

    cfg = transformers.T5Config()
    p = archviz_cli("inspect", "hf:t5", "decoder.final_layer_norm", "--input", "decoder_input_ids=B,T", "--json")
    assert p.returncode == 0, p.stderr
    card = json.loads(p.stdout)
    assert card["outputs"] == [["B", "T", cfg.d_model]]
    p = archviz_cli("inspect", "hf:t5", "encoder.final_layer_norm", "--input", "decoder_input_ids=B,T", "--json")
    assert json.loads(p.stdout)["outputs"] == [["B", "T", cfg.d_model]]
    p = archviz_cli("inspect", "hf:t5")  # without them: one line that names the way out
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "--input decoder_input_ids=B,T" in p.stderr


def test_none_drops_a_default_input(archviz_cli):
    """`--input input_ids=none --input inputs_embeds=B,T,64:float32`: the embeddings are given, so the embedding
    table is never called and the first layer sees [B, T, 64]."""
    sets = ["--set", "num_hidden_layers=1", "--set", "hidden_size=64", "--set", "intermediate_size=128",
            "--set", "num_attention_heads=4", "--set", "num_key_value_heads=2", "--set", "vocab_size=256"]
    given = ["--input", "input_ids=none", "--input", "inputs_embeds=B,T,64:float32", "--json"]
    emb = json.loads(archviz_cli("inspect", "hf:llama", *sets, "model.embed_tokens", *given).stdout)
    assert emb["called"] is False
    norm = archviz_cli("inspect", "hf:llama", *sets, "model.layers.0.input_layernorm", *given)
    assert norm.returncode == 0, norm.stderr
    assert json.loads(norm.stdout)["inputs"] == [["B", "T", 64]]


def test_a_vision_model_asks_for_its_inputs(archviz_cli):
    """An audio model's forward takes input_values, not token ids: without --input the error names the input to
    give (a vision model's pixel_values now have a default from the config: tests/shapes/test_vision_hf.py). ViT given
    pixel_values: the pooler sees [B, patches + 1, hidden] (from ViTConfig)."""
    import transformers

    cfg = transformers.ViTConfig()
    p = archviz_cli("inspect", "hf:wav2vec2")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "takes no token ids" in p.stderr and "--input input_values=" in p.stderr
    pixels = f"pixel_values=B,{cfg.num_channels},{cfg.image_size},{cfg.image_size}"
    p = archviz_cli("inspect", "hf:vit", "pooler", "--input", pixels, "--json")
    assert p.returncode == 0, p.stderr
    tokens = (cfg.image_size // cfg.patch_size) ** 2 + 1
    assert json.loads(p.stdout)["inputs"] == [["B", tokens, cfg.hidden_size]]


def test_a_text_and_image_model_names_the_input_it_lacks(archviz_cli):
    """CLIP's forward takes token ids and pixel_values; with ids alone its vision tower fails. The one line names
    pixel_values with the image size of CLIPConfig's vision config; given it, the vision embeddings put out
    [B, patches + 1, vision hidden]."""
    import transformers

    vision = transformers.CLIPConfig().vision_config
    p = archviz_cli("inspect", "hf:clip")
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    example = f"--input pixel_values=B,{vision.num_channels},{vision.image_size},{vision.image_size}"
    assert "CLIPModel.forward also takes pixel_values" in p.stderr and example in p.stderr, p.stderr
    p = archviz_cli("inspect", "hf:clip", "vision_model.embeddings", example.split()[0], example.split()[1] + ":float32",
             "--json")
    assert p.returncode == 0, p.stderr
    tokens = (vision.image_size // vision.patch_size) ** 2 + 1
    assert json.loads(p.stdout)["outputs"] == [["B", tokens, vision.hidden_size]]


def test_an_encoder_decoder_without_decoder_ids_names_them(archviz_cli):
    """T5's decoder needs its own token ids: the one line says which input to give, and giving it makes the pass
    run."""
    sets = ["--set", "num_layers=1", "--set", "num_decoder_layers=1"]
    p = archviz_cli("inspect", "hf:t5", *sets)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "also takes decoder_input_ids" in p.stderr and "--input decoder_input_ids=B,T" in p.stderr
    p = archviz_cli("inspect", "hf:t5", *sets, "--input", "decoder_input_ids=B,T", "--json")
    assert p.returncode == 0, p.stderr


def test_token_ids_take_the_rows_a_sequence_has_as_the_forward_documents_them(archviz_cli):
    """MusicgenForCausalLM documents input_ids as `(batch_size * num_codebooks, sequence_length)` and reshapes them
    to (-1, num_codebooks, T): the pass feeds B·C rows (the gallery's musicgen died on token ids [B, T]). The logits
    come out [B·C, T, V], as a small copy run for real on CPU gives them; each codebook's embedding and head sees
    [B, T]."""
    import torch
    from transformers import MusicgenConfig, MusicgenForCausalLM

    from archviz.records import loads, to_json_dict

    small = type(MusicgenConfig().decoder)(hidden_size=16, ffn_dim=32, num_hidden_layers=1, num_attention_heads=2,
                                           vocab_size=24, num_codebooks=3)
    B, T = 2, 5
    real = MusicgenForCausalLM(small)(torch.zeros(B * small.num_codebooks, T, dtype=torch.long)).logits
    assert tuple(real.shape) == (B * small.num_codebooks, T, small.vocab_size)
    d = MusicgenConfig().decoder
    p = archviz_cli("walk", "hf:musicgen", "--shapes", "-o", "-")
    assert p.returncode == 0, p.stderr
    calls = {m["path"]: m["calls"][0] for m in to_json_dict(loads(p.stdout))["modules"] if m.get("calls")}
    rows = f"B·{d.num_codebooks}"
    assert calls[""]["inputs"] == [[rows, "T"]] and calls[""]["outputs"] == [[rows, "T", d.vocab_size]]
    assert calls["model.decoder.embed_tokens.0"]["inputs"] == [["B", "T"]]
    assert calls["lm_heads.0"]["outputs"] == [["B", "T", d.vocab_size]]

"""Hugging Face models from small configs (random weights, no download) import as given.

Each model is tiny (2 layers, hidden 32, vocabulary 128, sequence 8) so the whole file runs
in seconds; what is checked is that the user's ``(module, inputs)`` imports without a dict
wrapper or a loss, that every operator knows its module, and that the model is left as it was.
"""

from __future__ import annotations

import pytest

import optpart
from optpart.formats.torch import DEFAULT_LOSS

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

from optpart.formats.torch_import import from_torch  # noqa: E402

V, S = 128, 8


def _ids():
    return torch.randint(0, V, (2, S), generator=torch.Generator().manual_seed(0))


def gpt2():
    return tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=V, n_positions=16,
                                            bos_token_id=0, eos_token_id=0)), (_ids(),)


def bert():
    return tf.BertForMaskedLM(tf.BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                            intermediate_size=64, vocab_size=V, max_position_embeddings=16)), (_ids(),)


def t5():
    cfg = tf.T5Config(num_layers=2, num_decoder_layers=2, d_model=32, d_kv=16, num_heads=2, d_ff=64, vocab_size=V,
                      decoder_start_token_id=0)
    return tf.T5ForConditionalGeneration(cfg), {"input_ids": _ids(), "decoder_input_ids": _ids()}


def llama():
    return tf.LlamaForCausalLM(tf.LlamaConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                                              num_attention_heads=2, num_key_value_heads=1, vocab_size=V,
                                              max_position_embeddings=16, bos_token_id=0, eos_token_id=0)), (_ids(),)


def mixtral():
    cfg = tf.MixtralConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=2,
                           num_key_value_heads=1, vocab_size=V, max_position_embeddings=16, num_local_experts=4,
                           num_experts_per_tok=2, bos_token_id=0, eos_token_id=0)
    return tf.MixtralForCausalLM(cfg), (_ids(),)


def vit():
    cfg = tf.ViTConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                       image_size=16, patch_size=8, num_labels=10)
    return tf.ViTForImageClassification(cfg), (torch.randn(2, 3, 16, 16),)


def resnet():
    cfg = tf.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_labels=10)
    return tf.ResNetForImageClassification(cfg), (torch.randn(2, 3, 32, 32),)


MODELS = {"gpt2": gpt2, "bert": bert, "t5": t5, "llama": llama, "mixtral": mixtral, "vit": vit, "resnet": resnet}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_imports_as_given_and_nodes_know_their_module(name):
    torch.manual_seed(0)
    model, inputs = MODELS[name]()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    mode = model.training
    p = from_torch(model, inputs)
    assert p.meta["loss"] == DEFAULT_LOSS and p.meta["training"]
    assert p.meta["parameters"] == sum(t.numel() for t in model.parameters())
    paths = dict(model.named_modules())
    ops = [m for m in p.node_meta if m["phase"] in ("forward", "backward") and m["op"] not in ("input", "buffer")]
    assert all(m["module"] in paths and m["module_class"] == type(paths[m["module"]]).__name__ for m in p.node_meta)
    # nearly every operator is inside a submodule (the rest: the default loss, input plumbing)
    inside = sum(1 for m in ops if m["module"]) / len(ops)
    assert inside > 0.9, inside
    backward = {m["module"] for m in ops if m["phase"] == "backward"}
    assert any(".0." in path for path in backward) and any(".1." in path for path in backward)
    # the model is untouched: same weights, caching and train/eval mode as before
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    if hasattr(model.config, "use_cache") and name != "bert":
        assert model.config.use_cache is True
    assert model.training is mode


def test_gpt2_inference_with_its_cache_config():
    model, inputs = gpt2()
    p = from_torch(model, inputs, training=False)
    assert {m["phase"] for m in p.node_meta} == {"forward"}
    assert "use_cache=False" in p.meta["trace_notes"][0]


def test_mixture_of_experts_routing_traces_with_real_tensors():
    model, inputs = mixtral()
    impl = model.get_experts_implementation()
    p = from_torch(model, inputs)
    assert p.meta["trace_mode"] == "real"
    assert any("experts_implementation='eager'" in n for n in p.meta["trace_notes"])
    assert any("real CPU tensors" in n for n in p.meta["trace_notes"])
    assert any(m["module_class"] == "MixtralExperts" for m in p.node_meta)
    assert model.get_experts_implementation() == impl


def test_gpt2_blocks_kept_whole_with_no_split_and_placed_by_a_solver():
    model, inputs = gpt2()
    p = from_torch(model, inputs, no_split="GPT2Block")
    cap = 0.6 * float(p.memory.sum())  # neither device holds the whole step: the solver must split it
    problem = p.with_devices(2, memory=[cap, cap])
    result = optpart.solve(problem, "heuristic")
    optpart.check(problem, result)
    assert len(set(result.placement.tolist())) == 2
    for block in ("transformer.h.0", "transformer.h.1"):
        devs = {int(result.placement[i]) for i, m in enumerate(p.node_meta)
                if m["module"] == block or m["module"].startswith(block + ".")}
        assert len(devs) == 1, (block, devs)


def test_labels_make_the_model_compute_its_own_loss():
    from optpart.formats.torch import OUTPUT_LOSS

    model, (ids,) = gpt2()
    p = from_torch(model, {"input_ids": ids, "labels": ids})
    assert p.meta["loss"] == OUTPUT_LOSS
    assert [i for i in p.node_ids if i.startswith("input.")] == ["input.input_ids", "input.labels"]
    assert any(m["op"].startswith("aten.nll_loss") or "log_softmax" in m["op"] for m in p.node_meta)

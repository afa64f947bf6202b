"""record_attention: the recorded weights are the attention modules' own weights, and nothing else
changes."""

import pytest
import torch

from transformer_book.attention_maps import record_attention
from transformer_lib import MultiHeadAttention
from transformer_lib.nn.masks import causal_mask

pytestmark = pytest.mark.book

PAD = 0


def padded_batch() -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.tensor([[3, 4, 5, 6, 7], [8, 9, 3, PAD, PAD]])
    tgt = torch.tensor([[1, 5, 6, 7], [1, 4, PAD, PAD]])
    return src, tgt


def test_weights_equal_what_multihead_attention_returns_with_need_weights():
    torch.manual_seed(1)
    mha = MultiHeadAttention(16, 4).eval()
    q, kv = torch.randn(2, 3, 16), torch.randn(2, 5, 16)
    mask = torch.tensor([True, True, True, False, False]).view(1, 1, 1, 5)
    with record_attention(mha) as maps:
        out, none = mha(q, kv, kv, mask)
    assert none is None  # the caller still gets what it asked for
    expected_out, expected = mha(q, kv, kv, mask, need_weights=True)
    torch.testing.assert_close(maps[""], expected, rtol=0, atol=0)
    torch.testing.assert_close(out, expected_out, rtol=0, atol=0)
    assert maps[""].shape == (2, 4, 3, 5)
    with record_attention(mha) as again:
        _, asked = mha(q, kv, kv, mask, need_weights=True)  # a caller that asks still gets them
    torch.testing.assert_close(asked, expected, rtol=0, atol=0)
    assert len(again.calls[""]) == 1


@pytest.mark.parametrize("norm_first", [False, True])
def test_every_module_records_its_own_weights_on_its_own_inputs(norm_first, tiny_model):
    model = tiny_model(norm_first=norm_first)
    src, tgt = padded_batch()
    inputs = {}

    def grab(name):
        def hook(_module, args, kwargs):
            inputs[name] = (args, kwargs)

        return hook

    handles = [
        m.register_forward_pre_hook(grab(n), with_kwargs=True)
        for n, m in model.named_modules()
        if isinstance(m, MultiHeadAttention)
    ]
    with torch.no_grad():
        plain = model(src, tgt)
        with record_attention(model) as maps:
            recorded_logits = model(src, tgt)
    for h in handles:
        h.remove()
    # The logits do not change (reference path instead of the fused kernel: round-off only).
    torch.testing.assert_close(recorded_logits, plain, rtol=1e-5, atol=1e-5)
    assert set(maps.names()) == set(inputs) and len(inputs) == 6
    for name, (args, kwargs) in inputs.items():
        q, k, v, mask = args[:4]
        _, expected = model.get_submodule(name)(q, k, v, mask, need_weights=True, **kwargs)
        torch.testing.assert_close(maps[name], expected, rtol=0, atol=0)


def test_rows_sum_to_one_and_masked_keys_get_zero(tiny_model):
    model = tiny_model(norm_first=True)
    src, tgt = padded_batch()
    with torch.no_grad(), record_attention(model) as maps:
        model(src, tgt)
    src_ok = src != PAD  # (B, S)
    tgt_ok = tgt != PAD  # (B, T)
    for name in maps.names():
        w = maps[name]  # (B, H, T_q, T_k)
        keys = tgt_ok if name.endswith("self_attn") and name.startswith("decoder") else src_ok
        sums = w.sum(-1)  # (B, H, T_q)
        # every query row has a visible key here
        torch.testing.assert_close(sums, torch.ones_like(sums))
        assert torch.all(w.masked_select(~keys[:, None, None, :].expand_as(w)) == 0), name
    dec_self = maps["decoder.layers.0.self_attn"]
    upper = ~causal_mask(tgt.size(1))
    assert torch.all(dec_self[..., upper] == 0)  # the future is never attended


def test_hooks_are_removed_and_bad_input_is_refused(tiny_model):
    model = tiny_model(norm_first=True)
    src, tgt = padded_batch()
    with torch.no_grad(), record_attention(model) as maps:
        model(src, tgt)
    assert len(maps.calls["encoder.layers.0.self_attn"]) == 1
    with torch.no_grad():
        model(src, tgt)  # after the context: nothing is recorded any more
    assert len(maps.calls["encoder.layers.0.self_attn"]) == 1
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
    with pytest.raises(KeyError, match="no attention module named"):
        maps["decoder.layers.9.cross_attn"]
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        with record_attention("model"):
            pass
    with pytest.raises(ValueError, match="no MultiHeadAttention"):
        with record_attention(torch.nn.Linear(2, 2)):
            pass


def test_plot_attention_heads_draws_the_weights_it_is_given():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from transformer_book.plotting import plot_attention_heads

    weights = torch.softmax(torch.randn(2, 3, 4), dim=-1)  # (H, T_q, T_k)
    fig = plot_attention_heads(weights, keys=list("abcd"), queries=list("xyz"))
    drawn = [a for a in fig.axes if a.images]
    assert len(drawn) == 2
    for head, ax in enumerate(drawn):
        torch.testing.assert_close(torch.as_tensor(ax.images[0].get_array()), weights[head])
    assert [t.get_text() for t in drawn[0].get_xticklabels()] == list("abcd")
    with pytest.raises(ValueError, match="keys has 3 labels"):
        plot_attention_heads(weights, keys=list("abc"))
    with pytest.raises(ValueError, match="3 dimensions"):
        plot_attention_heads(weights[0])
    plt.close("all")

"""The joint BPE tokenizer (round trip on real sentences, saving in a checkpoint) and sacreBLEU
scoring."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest
import sacrebleu
import torch

from transformer_lib import Transformer, TransformerConfig, load_checkpoint, save_checkpoint
from transformer_lib.data.tokenizer import BPETokenizer, train_bpe_tokenizer
from transformer_tasks.bleu import bleu_signature, corpus_bleu
from transformer_tasks.multi30k import load_multi30k
from transformer_tasks.translation import train_translation_tokenizer


@pytest.fixture(scope="module")
def data(multi30k_dir: Path) -> dict[str, list[tuple[str, str]]]:
    return load_multi30k(multi30k_dir)


@pytest.fixture(scope="module")
def tokenizer(data: dict[str, list[tuple[str, str]]]) -> BPETokenizer:
    return train_translation_tokenizer(data["train"], vocab_size=8000)


# ----------------------------------------------------------------------------- tokenizer


def test_vocabulary_size_and_special_ids(tokenizer: BPETokenizer) -> None:
    assert tokenizer.vocab_size == 8000
    assert (tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id, tokenizer.unk_id) == (0, 1, 2, 3)
    assert [tokenizer.tokenizer.id_to_token(i) for i in range(4)] == [
        "<pad>",
        "<bos>",
        "<eos>",
        "<unk>",
    ]


def test_decode_inverts_encode_on_every_test_sentence(
    tokenizer: BPETokenizer, data: dict[str, list[tuple[str, str]]]
) -> None:
    sentences = [s for pair in data["test_2016_flickr"] for s in pair]
    encoded = tokenizer.encode_batch(sentences)
    assert encoded[0] == tokenizer.encode(sentences[0])
    assert all(0 < len(ids) and min(ids) > tokenizer.unk_id for ids in encoded[:50])
    mismatches = [
        (s, tokenizer.decode(ids))
        for s, ids in zip(sentences, encoded, strict=True)
        if tokenizer.decode(ids) != s
    ]
    assert mismatches == []


def test_joint_vocabulary_has_frequent_words_of_both_languages_as_single_tokens(
    tokenizer: BPETokenizer,
) -> None:
    for word in ("Mann", "Frau", "man", "woman", "Hund", "dog"):
        assert len(tokenizer.encode(word)) == 1, tokenizer.tokens(word)
    # A rare compound is split into sub-words, not mapped to <unk>.
    ids = tokenizer.encode("Fahrradreparaturwerkstatt")
    assert len(ids) > 1 and tokenizer.unk_id not in ids
    assert tokenizer.decode(ids) == "Fahrradreparaturwerkstatt"


def test_decode_stops_at_eos_and_skips_bos_and_padding(tokenizer: BPETokenizer) -> None:
    ids = tokenizer.encode("Ein Hund rennt.")
    row = [tokenizer.bos_id, *ids, tokenizer.eos_id, *tokenizer.encode("Nicht das."), 0, 0]
    assert tokenizer.decode(row) == "Ein Hund rennt."
    assert tokenizer.decode_batch(torch.tensor([row, row]).tolist()) == ["Ein Hund rennt."] * 2


def test_saved_tokenizer_travels_inside_a_checkpoint(
    tokenizer: BPETokenizer, tmp_path: Path, tiny_config: Callable[..., TransformerConfig]
) -> None:
    config = tiny_config(src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size)
    path = save_checkpoint(
        Transformer(config), tmp_path / "m.safetensors", tokenizer=tokenizer.to_json_str()
    )
    _, metadata = load_checkpoint(path)
    restored = BPETokenizer.from_json_str(metadata["tokenizer"])
    text = "Zwei junge Männer spielen Fußball im Park."
    assert restored.encode(text) == tokenizer.encode(text)
    assert restored.decode(restored.encode(text)) == text


def test_training_reads_only_the_sentences_given() -> None:
    seen: list[str] = []

    def sentences():
        for s in ["ein kleiner Hund", "a small dog"] * 20:
            seen.append(s)
            yield s

    tok = train_bpe_tokenizer(sentences(), vocab_size=60, min_frequency=1)
    assert len(seen) == 40
    assert tok.decode(tok.encode("ein kleiner Hund")) == "ein kleiner Hund"
    # Characters never seen in training have no token: they become <unk> (and vanish on decoding).
    assert tok.unk_id in tok.encode("Zebra")


def test_bad_tokenizer_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="vocab_size"):
        train_bpe_tokenizer(["a b"], vocab_size=3)
    with pytest.raises(ValueError, match="empty"):
        train_bpe_tokenizer([], vocab_size=100)
    with pytest.raises(TypeError, match="sentences must hold str"):
        train_bpe_tokenizer([1, 2], vocab_size=100)
    with pytest.raises(ValueError, match="to_json_str"):
        BPETokenizer.from_json_str("{not json")
    tok = train_bpe_tokenizer(["a b c"], vocab_size=20, min_frequency=1)
    with pytest.raises(TypeError, match="text must be a str"):
        tok.encode(["a"])  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- BLEU


def test_identical_output_scores_100() -> None:
    refs = ["A man rides a bike.", "Two dogs play in the snow."]
    assert corpus_bleu(refs, refs).score == pytest.approx(100.0)
    assert bleu_signature().startswith("nrefs:1|") and "tok:13a" in bleu_signature()


def test_bleu_matches_the_hand_computed_value() -> None:
    # 13a tokens: hyp "the cat sat on the mat", ref "the cat sat on a mat" (6 tokens each, BP = 1).
    # Matches: 5/6 unigrams, 3/5 bigrams, 2/4 trigrams, 1/3 four-grams.
    result = corpus_bleu(["the cat sat on the mat"], ["the cat sat on a mat"])
    expected = 100 * math.exp(
        (math.log(5 / 6) + math.log(3 / 5) + math.log(2 / 4) + math.log(1 / 3)) / 4
    )
    assert result.score == pytest.approx(expected, abs=1e-9)
    assert result.bp == 1.0 and result.sys_len == result.ref_len == 6


def test_short_output_pays_the_brevity_penalty() -> None:
    # Every n-gram of the hypothesis is in the reference, but it has 5 tokens for 6: BP = exp(1 -
    # 6/5).
    result = corpus_bleu(["the cat sat on the"], ["the cat sat on the mat"])
    assert result.score == pytest.approx(100 * math.exp(1 - 6 / 5))
    assert result.ratio == pytest.approx(5 / 6)


def test_bleu_equals_sacrebleu_functional_api_on_a_corpus() -> None:
    hyps = [
        "A man is riding a bicycle.",
        "Two dogs are playing in snow.",
        "A woman sings on stage!",
    ]
    refs = ["A man rides a bike.", "Two dogs play in the snow.", "A woman is singing on a stage."]
    result = corpus_bleu(hyps, refs)
    reference = sacrebleu.corpus_bleu(hyps, [refs])
    assert vars(result) == vars(reference)  # sacreBLEU's own score: every field the same
    assert 0.0 < result.score < 100.0


def test_bad_bleu_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="same length"):
        corpus_bleu(["a"], ["a", "b"])
    with pytest.raises(TypeError, match=r"hypotheses\[0\]"):
        corpus_bleu([["a"]], ["a"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="empty"):
        corpus_bleu([], [])

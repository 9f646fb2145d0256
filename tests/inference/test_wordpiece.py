import random
import string

from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from tf2rnn_hf.inference.streaming import StreamingEncoder
from tf2rnn_hf.inference.wordpiece import AsciiWordPiece, ascii_wordpiece


def _backend_ids(backend, word):
    return backend.encode(word, add_special_tokens=False).ids


def _unpadded(tokenizer):
    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())  # the teacher's pads every encoding to 128
    backend.no_padding()
    backend.no_truncation()
    return backend


def test_plain_words_get_the_tokenizers_ids(teacher):
    # Every vocabulary entry that is a plain word (and its continuations as words), capitalised and not, random
    # words of letters and digits up to past WordPiece's 100-character limit: the same ids as the tokenizer's pipeline.
    backend = _unpadded(teacher.tokenizer)
    fast = AsciiWordPiece.of(backend)
    assert fast is not None
    words = {t.removeprefix("##") for t in backend.get_vocab() if t.removeprefix("##").isascii()}
    words = {w for w in words if w.isalnum()}
    rng = random.Random(0)
    alphabet = string.ascii_letters + string.digits
    words |= {"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30))) for _ in range(3000)}
    words |= {w.capitalize() for w in list(words)[:3000]} | {w.upper() for w in list(words)[:1000]}
    words |= {"a" * 100, "a" * 101, "ab" * 60, "Q" * 100}
    assert len(words) > 25_000
    mismatched = [w for w in words if fast(w) != _backend_ids(backend, w)]
    assert not mismatched, mismatched[:10]
    for word in ["don't", "naïve", "日本", "a-b", "", " x", "x\u00a0", "a\tb", "[MASK]"]:
        assert fast(word) is None  # not a plain word: the tokenizer's own pipeline takes it


def test_other_pipelines_and_added_words_keep_the_tokenizer(teacher):
    vocab = {"[UNK]": 0, "hello": 1, "##s": 2}
    cased = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    cased.normalizer = normalizers.BertNormalizer(lowercase=False)
    cased.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    fast = AsciiWordPiece.of(cased)
    assert fast("hellos") == _backend_ids(cased, "hellos") == [1, 2]
    assert fast("Hellos") == _backend_ids(cased, "Hellos") == [0]  # cased: no lowercasing
    cased.pre_tokenizer = pre_tokenizers.Whitespace()
    assert AsciiWordPiece.of(cased) is None  # another pipeline: not assumed
    cased.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    cased.add_tokens(["hello2"])
    assert AsciiWordPiece.of(cased) is None  # an added token a word could hold is matched before WordPiece


def test_streams_type_with_plain_words_as_the_tokenizer_would(teacher, monkeypatch):
    # A stream types the same ids with the Python WordPiece as through the tokenizer alone, punctuation and
    # non-ASCII words (which take the tokenizer) included; and the helper is built once per tokenizer.
    from tf2rnn_hf.distill import build_student

    model, tokenizer = build_student(teacher, cell_type="gru", hidden_size=32)
    text = "Search as-you-type, naïvely: 42 Typewriters don't jam at 3am"
    with_fast = StreamingEncoder(model, tokenizer)
    for char in text:
        with_fast.type(char)
    assert ascii_wordpiece(tokenizer, with_fast._batch.backend) is with_fast._batch._plain_words is not None
    monkeypatch.setattr(AsciiWordPiece, "__call__", lambda self, word: None)
    without = StreamingEncoder(model, tokenizer)
    for char in text:
        without.type(char)
    assert with_fast.embedding.tolist() == without.embedding.tolist()
    ids = [s for s in with_fast._batch.streams.values()][0].word_tokens
    assert ids == _backend_ids(with_fast._batch.backend, "3am")


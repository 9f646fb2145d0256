"""A BERT tokenizer's ids for one word of ASCII letters and digits, in Python: what a keystroke tokenises.

A streaming keystroke re-tokenises only the word being typed, and a typist's keystroke comes after an idle gap in
which the caches went cold: there a call into `tokenizers` cost ~160 us (its normaliser, pre-tokeniser and model,
then an `Encoding`), the greedy longest-match below ~70 us, and ~3 us against ~8 warm (experiments.md, session 39).
For such a word a BERT pipeline reduces to WordPiece: the normaliser only lowercases it (nothing to clean, no
accents or CJK characters), the pre-tokeniser leaves it whole (no punctuation or whitespace). Any other word, or
any other pipeline, goes to the tokenizer itself; tests hold the two equal over the vocabulary and random words.
"""

import weakref
from typing import Callable, Dict, List, Optional

_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class AsciiWordPiece:
    """`tokenizers`' WordPiece for words of ASCII letters and digits (`__call__` returns None for any other word)."""

    def __init__(self, vocab: Dict[str, int], unk_token: str, prefix: str, max_chars: int, lowercase: bool):
        self.vocab, self.unk, self.prefix, self.max_chars = vocab, [vocab[unk_token]], prefix, max_chars
        self.lowercase = lowercase

    @classmethod
    def of(cls, backend) -> Optional["AsciiWordPiece"]:
        """For a `tokenizers.Tokenizer` of BERT's pipeline (BertNormalizer, BertPreTokenizer, WordPiece, no added
        token a word could hold); None for any other."""
        normalizer, pre_tokenizer, model = backend.normalizer, backend.pre_tokenizer, backend.model
        if (type(normalizer).__name__, type(pre_tokenizer).__name__, type(model).__name__) != (
                "BertNormalizer", "BertPreTokenizer", "WordPiece"):
            return None
        if any(_plain(token.content.lower()) for token in backend.get_added_tokens_decoder().values()):
            return None  # matched before WordPiece sees the word
        vocab = backend.get_vocab(with_added_tokens=False)
        if model.unk_token not in vocab:
            return None
        return cls(vocab, model.unk_token, model.continuing_subword_prefix, model.max_input_chars_per_word,
                   bool(normalizer.lowercase))

    def __call__(self, word: str) -> Optional[List[int]]:
        if not _plain(word):
            return None
        if self.lowercase:
            word = word.lower()
        if len(word) > self.max_chars:
            return list(self.unk)
        vocab, ids, start, n = self.vocab, [], 0, len(word)
        while start < n:  # the longest piece in the vocabulary first, as WordPiece does
            end = n
            while end > start:
                token = vocab.get(word[start:end] if start == 0 else self.prefix + word[start:end])
                if token is not None:
                    ids.append(token)
                    break
                end -= 1
            else:
                return list(self.unk)  # a piece with no match: the whole word is unknown
            start = end
        return ids


def _plain(word: str) -> bool:
    return word.isascii() and word.isalnum()


def ascii_wordpiece(tokenizer, backend) -> Optional[Callable[[str], Optional[List[int]]]]:
    """`AsciiWordPiece.of(backend)` for a tokenizer (the `transformers` one `backend` belongs to), built once per
    tokenizer and size (tokens added since rebuild it): streaming encoders are made per text in the evaluation
    suites, and reading a vocabulary takes ~10 ms."""
    size = len(tokenizer)
    try:
        cached = _CACHE.get(tokenizer)
    except TypeError:  # not weak-referenceable: build it each time
        return AsciiWordPiece.of(backend)
    if cached is None or cached[0] != size:
        cached = _CACHE[tokenizer] = (size, AsciiWordPiece.of(backend))
    return cached[1]

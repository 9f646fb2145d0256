"""The real built-in teacher: its embeddings equal sentence-transformers' encode, pooling is read from
its files, and the batched path equals one call per text."""

import json

import pytest
import torch

from tf2rnn_hf.data.teacher import Teacher, pool, read_pooling, resolve_teacher_path

TEXTS = ["The quick brown fox jumps over the lazy dog.", "Hello", "Streams of text arrive one keystroke at a time",
         "a", "Unicode: café naïve — ok?"]


def test_matches_sentence_transformers(teacher):
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(resolve_teacher_path("built-in"), device="cpu").encode(
        TEXTS, convert_to_tensor=True, normalize_embeddings=False)
    ours = teacher.encode(TEXTS)
    assert ours.shape == (len(TEXTS), 384)
    assert (ours - reference.cpu()).abs().max() <= 1e-5


def test_batched_equals_one_call_per_text(teacher):
    ids = [teacher.wrap(teacher.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in TEXTS]
    batched = teacher.embed_batched(ids, token_budget=16)
    single = torch.cat([teacher.embed_ids([s]) for s in ids])
    assert (batched - single).abs().max() <= 1e-5


def test_pooling_read_from_sentence_transformers_files(tmp_path):
    settings = read_pooling(resolve_teacher_path("built-in"))
    assert settings == {"pooling": "mean", "normalize": True, "max_length": 256}
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    assert read_pooling(str(tmp_path)) == {"pooling": "cls", "normalize": False, "max_length": None}
    assert read_pooling(str(tmp_path / "1_Pooling"))["pooling"] == "mean"  # no modules.json: mean + L2


def test_pool_modes_by_hand():
    states = torch.tensor([[[1.0, 0.0], [3.0, 2.0], [9.0, 9.0]]])
    mask = torch.tensor([[1, 1, 0]])
    assert torch.equal(pool(states, mask, "mean"), torch.tensor([[2.0, 1.0]]))
    assert torch.equal(pool(states, mask, "cls"), torch.tensor([[1.0, 0.0]]))
    assert torch.equal(pool(states, mask, "lasttoken"), torch.tensor([[3.0, 2.0]]))


def test_bf16_teacher_is_close_to_fp32(teacher):
    fast = Teacher("built-in", bf16=True)
    cos = torch.nn.functional.cosine_similarity(fast.encode(TEXTS), teacher.encode(TEXTS))
    assert cos.min() > 0.995


def test_special_ids_exclude_unknown(teacher):
    tok = teacher.tokenizer
    assert set(teacher.special_ids()) == {tok.cls_token_id, tok.sep_token_id, tok.pad_token_id}
    assert tok.unk_token_id not in teacher.special_ids()


def test_unknown_teacher_path_fails_clearly(tmp_path):
    with pytest.raises(OSError):
        Teacher(str(tmp_path / "no-such-teacher"))


def test_bf16_only_where_the_device_computes_it_natively(teacher, monkeypatch):
    """bf16 autocast on a CPU without native bf16 is emulated (6.5x slower than fp32 on an AVX2 EPYC): the
    trajectories' default follows the CPU, and the cache records what was decided."""
    from tf2rnn_hf.data import teacher as teacher_module
    from tf2rnn_hf.data import trajectories

    monkeypatch.setattr(teacher_module, "cpu_flags", lambda: "flags : fpu avx2 fma")
    assert teacher_module.fast_bf16("cpu") is False
    assert trajectories.resolve(trajectories.TrajectorySettings(), teacher).bf16 is False
    monkeypatch.setattr(teacher_module, "cpu_flags", lambda: "flags : fpu avx2 avx512f avx512_bf16")
    assert teacher_module.fast_bf16("cpu") is True
    settings = trajectories.TrajectorySettings()
    assert trajectories.resolve(settings, teacher).bf16 is True and settings.bf16 is None
    assert trajectories.resolve(trajectories.TrajectorySettings(bf16=False), teacher).bf16 is False
    with_bf16 = trajectories.cache_root(teacher, settings)
    monkeypatch.setattr(teacher_module, "cpu_flags", lambda: "flags : avx2")
    assert trajectories.cache_root(teacher, settings) != with_bf16  # the decision is in the fingerprint

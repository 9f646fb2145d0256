"""Running a student: the bulk encoder, streams that update per keystroke, and int8 quantization with
its native step kernel."""

from .encode import encode_texts
from .quantization import is_quantized, quantize_int8
from .streaming import BatchStreamingEncoder, StreamingEncoder, keystroke_embeddings

__all__ = ["BatchStreamingEncoder", "StreamingEncoder", "encode_texts", "is_quantized", "keystroke_embeddings",
           "quantize_int8"]

"""A stand-in for Kimi-K2.5's media processor, copied next to the tiny target for vLLM (which builds Kimi-K2.5's
multimodal processing info, and with it this processor, even for text-only runs). The real checkpoint ships its
own processor as remote code; the tiny model serves token ids only, so the work methods refuse."""

from typing import Any

from transformers.image_processing_utils import BaseImageProcessor


class TinyKimiK25MediaProcessor(BaseImageProcessor):
    model_input_names = ["pixel_values", "grid_thws"]
    num_frames_per_chunk = 4

    def media_tokens_calculator(self, chunk: Any) -> int:
        return 1

    def preprocess(self, images: Any, **kwargs: Any) -> Any:  # vLLM passes its vision chunks
        raise NotImplementedError("the tiny Kimi-K2.5 model serves text only")

    def split_video_chunks(self, video: Any) -> Any:
        raise NotImplementedError("the tiny Kimi-K2.5 model serves text only")

#!/usr/bin/env python3
"""Export the real CLIP ViT-B/32 encoders to ONNX for Strata image search.

Run on a machine with internet access (it downloads the OpenAI weights through open_clip), then copy
the output directory to the image-search pods (IMAGE_SEARCH_MODEL_DIR) or upload it to a Strata bucket
(IMAGE_SEARCH_MODEL_S3_URL=s3://bucket/prefix). Strata never downloads models at run time.

    pip install torch open_clip_torch onnx
    python hack/clip/export-clip.py /path/to/clip-vit-b32

Writes (the same interface as `npm run make-test-clip`):
    image_encoder.onnx   pixel_values [N,3,224,224] float32 -> image_embeds [N,512]
    text_encoder.onnx    input_ids    [N,77] int64          -> text_embeds  [N,512]
    merges.txt           CLIP's BPE merges (the first 48894 of bpe_simple_vocab_16e6)
    vocab.json           token -> id (byte tokens, byte tokens + </w>, merges, <|startoftext|>, <|endoftext|>)
Embeddings are not normalised in the graphs; the service L2-normalises them.
"""
import gzip
import json
import os
import sys

import open_clip
import torch


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(2**8):
        if b not in bs:
            bs.append(b)
            cs.append(2**8 + n)
            n += 1
    return [chr(c) for c in cs]


class ImageEncoder(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixel_values):
        return self.model.encode_image(pixel_values)


class TextEncoder(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model.encode_text(input_ids)


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    model, _, _ = open_clip.create_model_and_transforms("ViT-B-32", pretrained="openai")
    model.eval()

    with torch.no_grad():
        torch.onnx.export(
            ImageEncoder(model), torch.randn(1, 3, 224, 224), os.path.join(out_dir, "image_encoder.onnx"),
            input_names=["pixel_values"], output_names=["image_embeds"],
            dynamic_axes={"pixel_values": {0: "batch"}, "image_embeds": {0: "batch"}}, opset_version=17,
        )
        tokens = open_clip.tokenize(["a photo of a cat"])  # int64 [1,77]
        torch.onnx.export(
            TextEncoder(model), tokens, os.path.join(out_dir, "text_encoder.onnx"),
            input_names=["input_ids"], output_names=["text_embeds"],
            dynamic_axes={"input_ids": {0: "batch"}, "text_embeds": {0: "batch"}}, opset_version=17,
        )

    # The BPE vocabulary exactly as CLIP's SimpleTokenizer builds it.
    bpe_path = os.path.join(os.path.dirname(open_clip.tokenizer.__file__), "bpe_simple_vocab_16e6.txt.gz")
    merges = gzip.open(bpe_path).read().decode("utf-8").split("\n")[1 : 49152 - 256 - 2 + 1]
    with open(os.path.join(out_dir, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: clip-vit-b32\n" + "\n".join(merges) + "\n")
    vocab = bytes_to_unicode()
    vocab = vocab + [v + "</w>" for v in vocab]
    vocab += ["".join(m.split(" ")) for m in merges]
    vocab += ["<|startoftext|>", "<|endoftext|>"]
    with open(os.path.join(out_dir, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({t: i for i, t in enumerate(vocab)}, f, ensure_ascii=False)
    print(f"wrote CLIP ViT-B/32 ONNX encoders and tokenizer files to {out_dir}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: export-clip.py <output-dir>")
    main(sys.argv[1])

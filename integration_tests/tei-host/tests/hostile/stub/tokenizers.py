"""A stand-in for the `tokenizers` package in tei-host's hostile-client tests (tests/hostile/): a byte
tokenizer, each UTF-8 byte of a text one id (byte + 3, so ids 3..258 of the qwen3_tiny fixture's
1000), no special tokens. It has the calls src/tokenizer_worker.py makes, so the host runs its real
worker pool on it without the package or a real model."""
import json


class _Encoding:
    def __init__(self, ids):
        self.ids = ids


class Tokenizer:
    @staticmethod
    def from_file(path):
        with open(path) as f:
            spec = json.load(f)
        if spec.get("model") != "bytes":
            raise ValueError("not a byte tokenizer: %r" % spec)
        return Tokenizer()

    def get_vocab_size(self):
        return 259

    def encode_batch(self, texts, add_special_tokens=True):
        return [_Encoding([b + 3 for b in t.encode("utf-8")]) for t in texts]

    def token_to_id(self, token):
        ids = token.encode("utf-8")
        return ids[0] + 3 if len(ids) == 1 else None

#!/usr/bin/env python3
"""`radixmlp generate`'s bad inputs on a fixture (issue 31, points 5 and 6; standard library only):
a --tokenizer whose token ids are negative, past the model's vocabulary or not integers is refused
with a message naming the token and id (an added token of id -1 was a SIGSEGV, one of 2^63-1 an
exit 1 without a word), and a good one decodes byte-level pieces into "text"; the library's
errors (a token id past the vocabulary, a prompt past the maximum position, a model without an LM
head) reach stderr as the library said them, not as an empty "radixmlp: "; a bad eos_token_id in
the model's generation_config.json and a bad --eos list are named; a FIFO as --tokenizer or as
generation_config.json is refused, not waited on (issue 31, point 3).

    cli_generate_errors.py RADIXMLP FIXTURES_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from cli_checks import Checks

VOCAB = 1000  # qwen3_tiny's


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f)
    return path


def main(radixmlp, fixtures):
    check = Checks()
    model = os.path.join(fixtures, "qwen3_tiny")
    with tempfile.TemporaryDirectory() as tmp:
        prompts = os.path.join(tmp, "in.jsonl")
        with open(prompts, "w") as f:
            f.write('{"input_ids": [1, 2, 3]}\n{"input_ids": [1, 2, 4]}\n')

        def generate(*args, model=model, input=prompts):
            return [radixmlp, "generate", "--model", model, "--input", input, "--max-new-tokens", "3", *args]

        # Point 5: every token id of a tokenizer.json is one of the model's, or refused by name.
        pieces = {f"t{i}": i for i in range(VOCAB)}
        pieces["\u0120x"] = 5  # byte-level: U+0120 stands for a space
        del pieces["t5"]
        bad = [
            ("added", {"id": -1, "content": "<neg>"}, "added_tokens[0]: token '<neg>' has id -1"),
            ("added", {"id": 2**63 - 1, "content": "<huge>"}, "token '<huge>' has id 9223372036854775807"),
            ("added", {"id": VOCAB, "content": "<past>"}, f"token '<past>' has id {VOCAB}, not one of the model's"),
            ("added", {"id": "7", "content": "<str>"}, "token '<str>' has id not an integer"),
            ("added", {"id": 7}, "added_tokens[0] has no \"content\" string"),
            ("vocab", ("t-1", -1), "model.vocab: token 't-1' has id -1"),
            ("vocab", ("big", 2**63 - 1), "model.vocab: token 'big' has id 9223372036854775807"),
        ]
        for kind, extra, text in bad:
            vocab, added = dict(pieces), []
            if kind == "added":
                added.append(extra)
            else:
                vocab[extra[0]] = extra[1]
            path = write_json(os.path.join(tmp, "tokenizer.json"), {"model": {"vocab": vocab}, "added_tokens": added})
            check.refused(generate("--tokenizer", path), "radixmlp: --tokenizer " + path + ": ", rc=1)
            check.refused(generate("--tokenizer", path), text, rc=1)
        path = write_json(os.path.join(tmp, "good.json"),
                          {"model": {"vocab": pieces}, "added_tokens": [{"id": 9, "content": "<nine>"}]})
        done = subprocess.run(generate("--tokenizer", path), capture_output=True, text=True, timeout=60)
        check(done.returncode == 0, f"a good tokenizer: rc={done.returncode}, {done.stderr.strip()!r}")
        for line in done.stdout.splitlines() if done.returncode == 0 else []:
            row = json.loads(line)
            want = "".join(" x" if i == 5 else "<nine>" if i == 9 else f"t{i}" for i in row["generated_ids"])
            check(row["text"] == want, f"text {row['text']!r} of ids {row['generated_ids']}, want {want!r}")

        # Point 6: the library's message, said before rmlp_generate_end clears it.
        long_prompt = os.path.join(tmp, "long.jsonl")
        with open(long_prompt, "w") as f:
            f.write(json.dumps({"input_ids": list(range(1, 600))}) + "\n")
        past_vocab = os.path.join(tmp, "past_vocab.jsonl")
        with open(past_vocab, "w") as f:
            f.write('{"input_ids": [1, 2, 99999]}\n')
        for cmd, text in [
            (generate(input=past_vocab), "radixmlp: rmlp_generate_begin: input_ids[2]=99999 >= vocab_size=1000"),
            (generate(input=long_prompt), "radixmlp: rmlp_generate_begin: position_ids[512]=512 >= "
                                          "max_position_embeddings=512"),
            (generate(model=os.path.join(fixtures, "qwen3_embedding_noprefix")),
             "radixmlp: rmlp_generate_begin: the model has no LM head"),
        ]:
            check.refused(cmd, text, rc=1)

        # eos_token_id of the model's generation_config.json, and --eos.
        copy = os.path.join(tmp, "model")
        os.mkdir(copy)
        for name in ("config.json", "model.safetensors"):
            shutil.copyfile(os.path.join(model, name), os.path.join(copy, name))
        for eos in (-1, [2, "x"], list(range(17))):
            write_json(os.path.join(copy, "generation_config.json"), {"eos_token_id": eos})
            check.refused(generate(model=copy), "generation_config.json: eos_token_id", rc=1)
        write_json(os.path.join(copy, "generation_config.json"), {"eos_token_id": [2, 3]})
        done = subprocess.run(generate(model=copy), capture_output=True, text=True, timeout=60)
        check(done.returncode == 0, f"eos_token_id [2, 3]: rc={done.returncode}, {done.stderr.strip()!r}")
        for value, text in [("1,,2", "--eos expects whole numbers"), ("-1", "--eos expects a whole number"),
                            (",".join(["1"] * 17), "--eos takes at most 16 numbers"), ("", "--eos expects")]:
            check.refused(generate("--eos", value), text, rc=2)

        # Issue 31, point 3: a FIFO (no writer) where a JSON file belongs is refused, never waited on.
        fifo = os.path.join(tmp, "fifo.json")
        os.mkfifo(fifo)
        check.refused(generate("--tokenizer", fifo), f"radixmlp: --tokenizer {fifo}: not a regular file", rc=1,
                      timeout=30)
        os.remove(os.path.join(copy, "generation_config.json"))
        os.mkfifo(os.path.join(copy, "generation_config.json"))
        check.refused(generate(model=copy), "generation_config.json: not a regular file; give --eos", rc=1, timeout=30)
    return check.summary()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))

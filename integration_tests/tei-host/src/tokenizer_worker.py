# tokenizer_worker.py: one tokenization worker of tei-host (src/tokenizer.rs runs it with `python -c`):
# the `tokenizers` package on the model's tokenizer.json, the project's tokenizer path for the real
# model (integration_tests/real_model). Reads one JSON request per line on stdin, writes one JSON
# answer per line on stdout:
#   {"encode": [text, ...]}        -> {"ids": [[id, ...], ...]}   (add_special_tokens as TEI: true)
#   {"token_to_id": [token, ...]}  -> {"ids": [id or null, ...]}
# and {"error": message} when the request fails. The first line it writes is
# {"ready": true, "vocab_size": n}, or {"error": ...} when the tokenizer cannot be loaded.
import json
import sys


def main():
    try:
        from tokenizers import Tokenizer
        tokenizer = Tokenizer.from_file(sys.argv[1])
    except Exception as e:  # the host shows this message and stops
        print(json.dumps({"error": "%s: %s" % (type(e).__name__, e)}), flush=True)
        return 1
    print(json.dumps({"ready": True, "vocab_size": tokenizer.get_vocab_size()}), flush=True)
    for line in sys.stdin:
        try:
            request = json.loads(line)
            if "encode" in request:
                answer = {"ids": [e.ids for e in tokenizer.encode_batch(request["encode"], add_special_tokens=True)]}
            elif "token_to_id" in request:
                answer = {"ids": [tokenizer.token_to_id(t) for t in request["token_to_id"]]}
            else:
                answer = {"error": "unknown request %r" % sorted(request)}
        except Exception as e:
            answer = {"error": "%s: %s" % (type(e).__name__, e)}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/bin/sh
# The Python the hostile-client tests give tei-host (--python): python3 with the byte tokenizer of
# stub/ as its `tokenizers` package.
PYTHONPATH="$(dirname "$0")/stub${PYTHONPATH:+:$PYTHONPATH}" exec python3 "$@"

/*
 * test_model_load_bad.c: the model loader (model/) on bad checkpoints this test writes
 * (model_load_writer.h): one table row per bad input (safetensors header, config.json, tensors,
 * index.json), each with its exact status and a message naming the file, key or tensor (FIFOs and
 * folders where files belong, a tensor in two shards, hidden_act null); missing biases; the LM
 * head when config.json ties it and the file has its own (lm_head.h). Each row goes to
 * docs/errors.md's table (scripts/bad_input_table.py). The valid checkpoints are
 * test_model_load.c's, values that are not finite test_model_load_finite.c's. Run under
 * ASan/LSan, this also checks that no error path leaks.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>

#include "model_load_writer.h"

/* ---- bad inputs ----------------------------------------------------------------------------- */

static void test_bad_files(void) {
    stw w = {0};
    stw_json config = {0};
    build_tensors(&QWEN3, 42, &w);
    build_config(&QWEN3, &config);
    expect_fail("missing folder", at("no_such_folder", ""), RMLP_ERR_IO, "no_such_folder: No such file", NULL);
    st_file *file = (st_file *)&file;
    CHECK(st_open(at("no_such_file.safetensors", ""), &file) == RMLP_ERR_IO && file == NULL, "st_open: %s",
          rmlp_last_error());

    make_dir("short");
    stw_json_write(&config, at("short", "config.json"));
    stw_write_bytes(at("short", "model.safetensors"), "\x02\0\0\0\0", 5);
    expect_fail("file of 5 bytes", at("short", ""), RMLP_ERR_FORMAT, "short/model.safetensors: 5 bytes is shorter",
                NULL);
    stw_write_bytes(at("short", "model.safetensors"), "", 0);
    expect_fail("empty file", at("short", ""), RMLP_ERR_FORMAT, "short/model.safetensors: 0 bytes is shorter", NULL);

    make_dir("no_tensors");
    stw_json_write(&config, at("no_tensors", "config.json"));
    expect_fail("folder without tensors", at("no_tensors", ""), RMLP_ERR_IO,
                "no_tensors: holds neither model.safetensors nor model.safetensors.index.json", NULL);

    make_dir("no_config");
    stw_write(&w, at("no_config", "model.safetensors"), 1);
    expect_fail("config.json missing", at("no_config", ""), RMLP_ERR_IO, "no_config/config.json: No such file", NULL);
    expect_fail("config.json missing (file path)", at("no_config", "model.safetensors"), RMLP_ERR_IO,
                "no_config/config.json: No such file", NULL);

    /* Files that are FIFOs (no writer: opening one for reading would block forever) or folders. */
    make_dir("fifo_config");
    stw_write(&w, at("fifo_config", "model.safetensors"), 1);
    CHECK(mkfifo(at("fifo_config", "config.json"), 0600) == 0, "mkfifo config.json");
    expect_fail("config.json a FIFO", at("fifo_config", ""), RMLP_ERR_IO,
                "fifo_config/config.json: not a regular file", NULL);
    make_dir("fifo_index");
    stw_json_write(&config, at("fifo_index", "config.json"));
    CHECK(mkfifo(at("fifo_index", "model.safetensors.index.json"), 0600) == 0, "mkfifo index");
    expect_fail("model.safetensors.index.json a FIFO (opened by path)",
                at("fifo_index", "model.safetensors.index.json"), RMLP_ERR_IO,
                "fifo_index/model.safetensors.index.json: not a regular file", NULL);
    CHECK(mkfifo(at("fifo_index", "model.safetensors"), 0600) == 0, "mkfifo safetensors");
    expect_fail("model.safetensors a FIFO (opened by path)", at("fifo_index", "model.safetensors"), RMLP_ERR_IO,
                "fifo_index/model.safetensors: not a regular file", NULL);
    make_dir("dir_config");
    make_dir("dir_config/config.json");
    stw_write(&w, at("dir_config", "model.safetensors"), 1);
    expect_fail("config.json a folder", at("dir_config", ""), RMLP_ERR_IO, "dir_config/config.json: not a regular file",
                NULL);
    stw_free(&w);
    stw_json_free(&config);
}

typedef struct header_case {
    const char *name;
    const char *header;
    uint64_t header_len; /* 0: strlen(header) */
    uint64_t data_len;
    rmlp_status want;
    const char *msg;
} header_case;

#define T4 "\"dtype\":\"F32\",\"shape\":[4]"
static const header_case header_cases[] = {
    {"header length 0", "", 0, 64, RMLP_ERR_FORMAT, "header length 0 is too short"},
    {"header length 1", "{", 0, 64, RMLP_ERR_FORMAT, "header length 1 is too short"},
    {"header length beyond the file", "{}", 999999, 0, RMLP_ERR_FORMAT,
     "header length 999999 exceeds the file size 10"},
    {"header length over 100 MiB", "{}", 200u << 20, 201u << 20, RMLP_ERR_FORMAT,
     "header length 209715200 exceeds the limit of 104857600 bytes"},
    {"header not JSON", "{\"t\": ", 0, 64, RMLP_ERR_FORMAT, "header is not valid JSON"},
    {"header with trailing garbage", "{} x", 0, 64, RMLP_ERR_FORMAT, "header is not valid JSON"},
    {"header JSON not an object", "[1, 2]", 0, 64, RMLP_ERR_FORMAT, "header is an array, not a JSON object"},
    {"duplicate tensor", "{\"t\":{" T4 ",\"data_offsets\":[0,16]},\"t\":{" T4 ",\"data_offsets\":[16,32]}}", 0, 64,
     RMLP_ERR_FORMAT, "duplicate object key"},
    {"entry not an object", "{\"t\": 3}", 0, 64, RMLP_ERR_FORMAT, "tensor 't' is an integer, not an object"},
    {"missing dtype", "{\"t\":{\"shape\":[4],\"data_offsets\":[0,16]}}", 0, 64, RMLP_ERR_FORMAT,
     "tensor 't' has no string dtype"},
    {"missing shape", "{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,16]}}", 0, 64, RMLP_ERR_FORMAT,
     "tensor 't' has no shape array"},
    {"missing data_offsets", "{\"t\":{" T4 "}}", 0, 64, RMLP_ERR_FORMAT,
     "tensor 't' has no data_offsets array of 2 numbers"},
    {"data_offsets of 3", "{\"t\":{" T4 ",\"data_offsets\":[0,16,16]}}", 0, 64, RMLP_ERR_FORMAT,
     "tensor 't' has no data_offsets array of 2 numbers"},
    {"unsupported dtype", "{\"t\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 0, 64, RMLP_ERR_MODEL,
     "tensor 't' has dtype I64, only F32, F16 and BF16 are supported"},
    {"shape x size != byte range", "{\"t\":{\"dtype\":\"F32\",\"shape\":[5],\"data_offsets\":[0,16]}}", 0, 64,
     RMLP_ERR_FORMAT, "tensor 't': dtype F32 x shape [5] does not match data_offsets [0, 16] (16 bytes)"},
    {"shape product overflows",
     "{\"t\":{\"dtype\":\"BF16\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,0]}}", 0, 64,
     RMLP_ERR_FORMAT, "does not match data_offsets [0, 0]"},
    {"range past the end", "{\"t\":{\"dtype\":\"F32\",\"shape\":[32],\"data_offsets\":[0,128]}}", 0, 64,
     RMLP_ERR_FORMAT, "tensor 't': data_offsets [0, 128] run past the end of the 64-byte data section"},
    {"overlapping tensors", "{\"a\":{" T4 ",\"data_offsets\":[0,16]},\"b\":{" T4 ",\"data_offsets\":[8,24]}}", 0, 64,
     RMLP_ERR_FORMAT, "tensors 'a' and 'b' overlap"},
    {"tensor inside another",
     "{\"big\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]},\"c\":{" T4 ",\"data_offsets\":[32,48]},"
     "\"d\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[4,8]}}",
     0, 64, RMLP_ERR_FORMAT, "tensors 'big' and 'd' overlap"},
    {"negative shape", "{\"t\":{\"dtype\":\"F32\",\"shape\":[-4],\"data_offsets\":[0,16]}}", 0, 64, RMLP_ERR_FORMAT,
     "tensor 't': shape[0] is not a non-negative integer"},
    {"fractional shape", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2,2.0],\"data_offsets\":[0,16]}}", 0, 64,
     RMLP_ERR_FORMAT, "tensor 't': shape[1] is not a non-negative integer"},
    {"negative offset", "{\"t\":{" T4 ",\"data_offsets\":[-16,0]}}", 0, 64, RMLP_ERR_FORMAT,
     "tensor 't': data_offsets are not non-negative integers"},
    {"fractional offset", "{\"t\":{" T4 ",\"data_offsets\":[0,16.0]}}", 0, 64, RMLP_ERR_FORMAT,
     "tensor 't': data_offsets are not non-negative integers"},
    {"offsets reversed", "{\"t\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[16,0]}}", 0, 64, RMLP_ERR_FORMAT,
     "tensor 't': data_offsets [16, 0] begin after they end"},
    {"too many dimensions", "{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 0, 64,
     RMLP_ERR_FORMAT, "tensor 't' has 9 dimensions, at most 8 are supported"},
    {"__metadata__ not an object", "{\"__metadata__\": [\"pt\"]}", 0, 64, RMLP_ERR_FORMAT,
     "__metadata__ is an array, not an object"},
    {"__metadata__ value not a string", "{\"__metadata__\": {\"format\": 1}}", 0, 64, RMLP_ERR_FORMAT,
     "__metadata__ 'format' is an integer, not a string"},
    {"trailing bytes after the last tensor", "{\"t\":{" T4 ",\"data_offsets\":[0,16]}}", 0, 17, RMLP_ERR_FORMAT,
     "1 trailing byte after the last tensor 't' (the tensors end at byte 16 of the 17-byte data section)"},
    {"data section without tensors", "{\"__metadata__\": {\"format\": \"pt\"}}", 0, 8, RMLP_ERR_FORMAT,
     "8 trailing bytes after a header without tensors"},
    {"gap between tensors", "{\"b\":{" T4 ",\"data_offsets\":[20,36]},\"a\":{" T4 ",\"data_offsets\":[0,16]}}", 0, 36,
     RMLP_ERR_FORMAT, "bytes [16, 20) of the data section, before tensor 'b', belong to no tensor"},
    {"first tensor not at offset 0", "{\"t\":{" T4 ",\"data_offsets\":[8,24]}}", 0, 24, RMLP_ERR_FORMAT,
     "bytes [0, 8) of the data section, before tensor 't', belong to no tensor"},
    {"empty tensor inside another",
     "{\"a\":{" T4 ",\"data_offsets\":[0,16]},\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]}}", 0,
     16, RMLP_ERR_FORMAT, "tensors 'a' and 'e' overlap"},
};

static void test_bad_headers(void) {
    stw_json config = {0};
    build_config(&QWEN3, &config);
    make_dir("header");
    stw_json_write(&config, at("header", "config.json"));
    for (size_t i = 0; i < sizeof header_cases / sizeof header_cases[0]; i++) {
        const header_case *h = &header_cases[i];
        stw_write_raw(at("header", "model.safetensors"), h->header_len ? h->header_len : strlen(h->header), h->header,
                      h->data_len);
        expect_fail(h->name, at("header", ""), h->want, h->msg, "header/model.safetensors: ");
    }
    /* A valid header with no tensors opens (and then lacks the embedding). */
    stw_write_raw(at("header", "model.safetensors"), 2, "{}", 0);
    expect_fail("no tensors", at("header", ""), RMLP_ERR_MODEL, "missing tensor 'model.embed_tokens.weight'", NULL);
    stw_json_free(&config);
}

typedef struct config_case {
    const char *name;
    const char *key, *value, *key2, *value2; /* raw JSON values; NULL removes the key */
    rmlp_status want;
    const char *msg;
} config_case;

static const config_case config_cases[] = {
    {"missing vocab_size", "vocab_size", NULL, NULL, NULL, RMLP_ERR_MODEL, "missing key 'vocab_size'"},
    {"missing max_position_embeddings", "max_position_embeddings", NULL, NULL, NULL, RMLP_ERR_MODEL,
     "missing key 'max_position_embeddings'"},
    {"null num_hidden_layers", "num_hidden_layers", "null", NULL, NULL, RMLP_ERR_MODEL,
     "missing key 'num_hidden_layers'"},
    {"missing model_type", "model_type", NULL, NULL, NULL, RMLP_ERR_MODEL, "missing key 'model_type'"},
    {"hidden_size a string", "hidden_size", "\"16\"", NULL, NULL, RMLP_ERR_FORMAT,
     "'hidden_size' is a string, not an integer"},
    {"hidden_size fractional", "hidden_size", "16.5", NULL, NULL, RMLP_ERR_FORMAT,
     "'hidden_size' is a fractional number, not an integer"},
    {"hidden_size 0", "hidden_size", "0", NULL, NULL, RMLP_ERR_FORMAT, "'hidden_size' = 0 is not between 1 and 2^32-1"},
    {"hidden_size negative", "hidden_size", "-16", NULL, NULL, RMLP_ERR_FORMAT, "'hidden_size' = -16 is not between"},
    {"hidden_size 2^32", "hidden_size", "4294967296", NULL, NULL, RMLP_ERR_FORMAT,
     "'hidden_size' = 4294967296 is not between"},
    {"model_type a number", "model_type", "3", NULL, NULL, RMLP_ERR_FORMAT, "'model_type' is an integer, not a string"},
    {"unsupported model_type", "model_type", "\"gpt2\"", NULL, NULL, RMLP_ERR_MODEL,
     "model_type 'gpt2' is not supported"},
    {"rope_scaling dynamic", "rope_scaling", "{\"rope_type\": \"dynamic\", \"factor\": 4.0}", NULL, NULL,
     RMLP_ERR_MODEL, "rope_scaling.rope_type 'dynamic' is not supported: its frequencies depend on the sequence's "
     "length"},
    {"rope_scaling linear without factor", "rope_scaling", "{\"type\": \"linear\"}", NULL, NULL, RMLP_ERR_MODEL,
     "missing key 'rope_scaling.factor'"},
    {"rope_scaling an array", "rope_scaling", "[1]", NULL, NULL, RMLP_ERR_FORMAT,
     "'rope_scaling' is an array, not an object"},
    {"rope_scaling partial rotation", "rope_scaling", "{\"type\": \"linear\", \"factor\": 2, "
     "\"partial_rotary_factor\": 0.5}", NULL, NULL, RMLP_ERR_MODEL, "RoPE on part of a head is not supported"},
    {"hidden_act relu", "hidden_act", "\"relu\"", NULL, NULL, RMLP_ERR_MODEL,
     "hidden_act 'relu' is not supported (silu, gelu and gelu_pytorch_tanh are)"},
    {"hidden_act a number", "hidden_act", "1", NULL, NULL, RMLP_ERR_FORMAT, "'hidden_act' is an integer, not a string"},
    {"hidden_act null", "hidden_act", "null", NULL, NULL, RMLP_ERR_MODEL,
     "config/config.json: hidden_act is null (transformers builds no activation from it; silu, gelu and "
     "gelu_pytorch_tanh are supported)"},
    {"use_sliding_window (Llama)", "use_sliding_window", "true", "model_type", "\"llama\"", RMLP_ERR_MODEL,
     "use_sliding_window true is not supported"},
    {"layer_types shorter than num_hidden_layers", "layer_types", "[\"full_attention\"]", NULL, NULL, RMLP_ERR_MODEL,
     "layer_types has 1 entries but num_hidden_layers is 2"},
    {"layer_types longer than num_hidden_layers", "layer_types", "[\"full_attention\", \"full_attention\"]",
     "num_hidden_layers", "1", RMLP_ERR_MODEL, "layer_types has 2 entries but num_hidden_layers is 1"},
    {"mlp_bias a string", "mlp_bias", "\"true\"", NULL, NULL, RMLP_ERR_FORMAT, "'mlp_bias' is a string, not a boolean"},
    {"use_sliding_window a string", "use_sliding_window", "\"no\"", NULL, NULL, RMLP_ERR_FORMAT,
     "'use_sliding_window' is a string, not a boolean"},
    {"tie_word_embeddings a string", "tie_word_embeddings", "\"true\"", NULL, NULL, RMLP_ERR_FORMAT,
     "'tie_word_embeddings' is a string, not a boolean"},
    {"attention_bias a number", "attention_bias", "0", NULL, NULL, RMLP_ERR_FORMAT,
     "'attention_bias' is an integer, not a boolean"},
    {"kv heads do not divide heads", "num_key_value_heads", "3", NULL, NULL, RMLP_ERR_MODEL,
     "num_key_value_heads 3 does not divide num_attention_heads 4"},
    {"head_dim not derivable", "head_dim", "null", "num_attention_heads", "6", RMLP_ERR_MODEL,
     "no head_dim, and hidden_size 16 is not a multiple of num_attention_heads 6"},
    {"head_dim a string", "head_dim", "\"8\"", NULL, NULL, RMLP_ERR_FORMAT, "'head_dim' is a string, not an integer"},
    {"missing rms_norm_eps", "rms_norm_eps", NULL, NULL, NULL, RMLP_ERR_MODEL, "missing key 'rms_norm_eps'"},
    {"rms_norm_eps a string", "rms_norm_eps", "\"1e-6\"", NULL, NULL, RMLP_ERR_FORMAT,
     "'rms_norm_eps' is a string, not a number"},
    {"rms_norm_eps negative", "rms_norm_eps", "-1", NULL, NULL, RMLP_ERR_FORMAT, "'rms_norm_eps' = -1 is not positive"},
    {"rope_theta 0", "rope_theta", "0.0", NULL, NULL, RMLP_ERR_FORMAT, "'rope_theta' = 0 is not positive"},
    {"rope_parameters longrope", "rope_parameters", "{\"rope_theta\": 1e6, \"rope_type\": \"longrope\", \"factor\": 4}",
     NULL, NULL, RMLP_ERR_MODEL, "rope_parameters.rope_type 'longrope' is not supported: its frequencies depend on"},
    {"rope_parameters of an unknown type", "rope_parameters", "{\"rope_type\": \"spiral\"}", NULL, NULL,
     RMLP_ERR_MODEL, "rope_parameters.rope_type 'spiral' is not supported (default, linear, llama3 and yarn are)"},
    {"rope_parameters llama3 without high_freq_factor", "rope_parameters", "{\"rope_type\": \"llama3\", \"factor\": 8, "
     "\"low_freq_factor\": 1}", NULL, NULL, RMLP_ERR_MODEL, "missing key 'rope_parameters.high_freq_factor'"},
    {"rope_parameters yarn, beta_fast a string", "rope_parameters", "{\"rope_type\": \"yarn\", \"factor\": 4, "
     "\"beta_fast\": \"32\"}", NULL, NULL, RMLP_ERR_FORMAT, "'rope_parameters.beta_fast' is a string, not a number"},
    {"rope_parameters theta a string", "rope_parameters", "{\"rope_theta\": \"1e6\"}", NULL, NULL, RMLP_ERR_FORMAT,
     "'rope_parameters.rope_theta' is a string, not a number"},
    {"rope_parameters an array", "rope_parameters", "[]", NULL, NULL, RMLP_ERR_FORMAT,
     "'rope_parameters' is an array, not an object"},
    {"sliding attention layer without a window", "layer_types", "[\"full_attention\", \"sliding_attention\"]", NULL,
     NULL, RMLP_ERR_MODEL, "layer_types[1] is \"sliding_attention\" but the config has no sliding_window"},
    {"chunked attention layer", "layer_types", "[\"full_attention\", \"chunked_attention\"]", NULL, NULL,
     RMLP_ERR_MODEL, "layer_types[1] is not \"full_attention\" or \"sliding_attention\""},
    {"sliding layer (Llama)", "layer_types", "[\"full_attention\", \"sliding_attention\"]", "model_type", "\"llama\"",
     RMLP_ERR_MODEL, "layer_types[1] is \"sliding_attention\", which transformers' llama ignores"},
    /* Sizes that disagree with the tensors are the weights' to report. */
    {"vocab_size disagrees with the embedding", "vocab_size", "31", NULL, NULL, RMLP_ERR_MODEL,
     "tensor 'model.embed_tokens.weight' has shape [32, 16], config.json calls for [31, 16]"},
    {"head_dim disagrees with q_proj", "head_dim", "4", NULL, NULL, RMLP_ERR_MODEL,
     "tensor 'model.layers.0.self_attn.q_proj.weight' has shape [32, 16], config.json calls for [16, 16]"},
};

static void test_bad_configs(void) {
    stw w = {0};
    stw_json base = {0};
    build_tensors(&QWEN3, 42, &w);
    build_config(&QWEN3, &base);
    write_checkpoint("config", &w, &base, 1);
    const char *path = at("config", "config.json");
    char path_copy[512];
    snprintf(path_copy, sizeof path_copy, "%s", path);
    for (size_t i = 0; i < sizeof config_cases / sizeof config_cases[0]; i++) {
        const config_case *k = &config_cases[i];
        stw_json config;
        stw_json_copy(&config, &base);
        stw_json_set(&config, k->key, k->value);
        if (k->key2) stw_json_set(&config, k->key2, k->value2);
        stw_json_write(&config, path_copy);
        expect_fail(k->name, at("config", ""), k->want, k->msg,
                    strncmp(k->msg, "tensor", 6) == 0 ? NULL : "config/config.json: ");
        stw_json_free(&config);
    }
    /* Qwen's sliding layers as transformers derives them without layer_types (three edits each):
     * what the derivation reads, of the wrong type or range. */
    static const struct {
        const char *name, *max_window_layers, *msg;
        rmlp_status want;
    } sliding[] = {
        {"use_sliding_window, max_window_layers negative", "-1", "'max_window_layers' = -1 is not between 0 and 2^32-1",
         RMLP_ERR_FORMAT},
        {"use_sliding_window, max_window_layers a string", "\"2\"", "'max_window_layers' is a string, not an integer",
         RMLP_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof sliding / sizeof sliding[0]; i++) {
        stw_json config;
        stw_json_copy(&config, &base);
        stw_json_set(&config, "use_sliding_window", "true");
        stw_json_set(&config, "layer_types", NULL);
        stw_json_set(&config, "sliding_window", NULL); /* absent: transformers' default, 4096 */
        stw_json_set(&config, "max_window_layers", sliding[i].max_window_layers);
        stw_json_write(&config, path_copy);
        expect_fail(sliding[i].name, at("config", ""), sliding[i].want, sliding[i].msg, "config/config.json: ");
        stw_json_free(&config);
    }
    static const struct {
        const char *name, *text, *msg;
    } texts[] = {
        {"config.json not JSON", "{\"model_type\": ", "config/config.json: not valid JSON"},
        {"config.json an array", "[{\"model_type\": \"qwen3\"}]", "config/config.json: not a JSON object"},
        {"config.json repeats a key", "{\"model_type\": \"qwen3\", \"model_type\": \"qwen2\"}",
         "config/config.json: not valid JSON: duplicate object key"},
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        stw_write_bytes(path_copy, texts[i].text, strlen(texts[i].text));
        expect_fail(texts[i].name, at("config", ""), RMLP_ERR_FORMAT, texts[i].msg, NULL);
    }
    rmlp_model_config c;
    memset(&c, 0xff, sizeof c);
    CHECK(config_read("rmlp_model_load", path_copy, &c) == RMLP_ERR_FORMAT && c.hidden_size == 0,
          "config not cleared on error");
    stw_free(&w);
    stw_json_free(&base);
}

typedef struct tensor_case {
    const char *name;
    const char *remove; /* a tensor to remove, when given */
    const char *tensor; /* a tensor to add or replace, when given: zeros of (rows[, cols]) in dtype */
    uint64_t rows, cols;
    const char *dtype;
    const char *key, *value; /* config.json edit, when key is given */
    rmlp_status want;
    const char *msg, *msg2;
} tensor_case;

static const tensor_case tensor_cases[] = {
    {"missing up_proj", "model.layers.1.mlp.up_proj.weight", NULL, 0, 0, NULL, NULL, NULL, RMLP_ERR_MODEL,
     "missing tensor 'model.layers.1.mlp.up_proj.weight'", NULL},
    {"missing embedding", "model.embed_tokens.weight", NULL, 0, 0, NULL, NULL, NULL, RMLP_ERR_MODEL,
     "missing tensor 'model.embed_tokens.weight'", NULL},
    {"missing q_norm (Qwen3)", "model.layers.0.self_attn.q_norm.weight", NULL, 0, 0, NULL, NULL, NULL, RMLP_ERR_MODEL,
     "missing tensor 'model.layers.0.self_attn.q_norm.weight'", NULL},
    {"missing bias (Qwen2)", NULL, NULL, 0, 0, NULL, "model_type", "\"qwen2\"", RMLP_ERR_MODEL,
     "missing tensor 'model.layers.0.self_attn.q_proj.bias'", NULL},
    {"k_proj rows", NULL, "model.layers.0.self_attn.k_proj.weight", 17, HIDDEN, "F32", NULL, NULL, RMLP_ERR_MODEL,
     "tensor 'model.layers.0.self_attn.k_proj.weight' has shape [17, 16], config.json calls for [16, 16]", NULL},
    {"o_proj transposed", NULL, "model.layers.1.self_attn.o_proj.weight", 32, HIDDEN, "F32", NULL, NULL, RMLP_ERR_MODEL,
     "tensor 'model.layers.1.self_attn.o_proj.weight' has shape [32, 16], config.json calls for [16, 32]", NULL},
    {"embedding with an extra row", NULL, "model.embed_tokens.weight", VOCAB + 1, HIDDEN, "BF16", NULL, NULL,
     RMLP_ERR_MODEL, "tensor 'model.embed_tokens.weight' has shape [33, 16], config.json calls for [32, 16]", NULL},
    {"norm of 2 dimensions", NULL, "model.layers.0.self_attn.k_norm.weight", 1, HEAD_DIM, "F32", NULL, NULL,
     RMLP_ERR_MODEL, "tensor 'model.layers.0.self_attn.k_norm.weight' has shape [1, 8], config.json calls for [8]",
     NULL},
    {"lm_head shape", NULL, "lm_head.weight", VOCAB, HIDDEN + 1, "F16", NULL, NULL, RMLP_ERR_MODEL,
     "tensor 'lm_head.weight' has shape [32, 17], config.json calls for [32, 16]", NULL},
    {"intermediate_size disagrees", NULL, NULL, 0, 0, NULL, "intermediate_size", "25", RMLP_ERR_MODEL,
     "tensor 'model.layers.0.mlp.gate_proj.weight' has shape [24, 16], config.json calls for [25, 16]", NULL},
    {"more layers than written", NULL, NULL, 0, 0, NULL, "num_hidden_layers", "3", RMLP_ERR_MODEL,
     "missing tensor 'model.layers.2.input_layernorm.weight'", NULL},
    {"unsupported dtype in an unused tensor", NULL, "model.rotary_emb.inv_freq", 4, 0, "I64", NULL, NULL,
     RMLP_ERR_MODEL, "tensor 'model.rotary_emb.inv_freq' has dtype I64", "tensors/model.safetensors: "},
    {"mixed prefixes", "model.embed_tokens.weight", "embed_tokens.weight", VOCAB, HIDDEN, "F32", NULL, NULL,
     RMLP_ERR_MODEL, "missing tensor 'norm.weight'", NULL},
    {"missing bias (Qwen3 attention_bias)", NULL, NULL, 0, 0, NULL, "attention_bias", "true", RMLP_ERR_MODEL,
     "missing tensor 'model.layers.0.self_attn.q_proj.bias'", NULL},
};

static void test_bad_tensors(void) {
    stw_json base = {0};
    build_config(&QWEN3, &base);
    stw_json_set(&base, "layer_types", NULL); /* so num_hidden_layers may change alone */
    for (size_t i = 0; i < sizeof tensor_cases / sizeof tensor_cases[0]; i++) {
        const tensor_case *k = &tensor_cases[i];
        stw w = {0};
        stw_json config;
        build_tensors(&QWEN3, 42, &w);
        stw_json_copy(&config, &base);
        if (k->key) stw_json_set(&config, k->key, k->value);
        if (k->remove) CHECK(stw_remove(&w, k->remove), "%s: no %s to remove", k->name, k->remove);
        if (k->tensor) {
            uint64_t shape[2] = {k->rows, k->cols};
            size_t size = strcmp(k->dtype, "F32") == 0 ? 4 : strcmp(k->dtype, "I64") == 0 ? 8 : 2;
            stw_add(&w, k->tensor, k->dtype, k->cols ? 2 : 1, shape, NULL, size * k->rows * (k->cols ? k->cols : 1));
        }
        write_checkpoint("tensors", &w, &config, 1);
        expect_fail(k->name, at("tensors", ""), k->want, k->msg, k->msg2);
        stw_free(&w);
        stw_json_free(&config);
    }
    stw_json_free(&base);
}

/* A Llama checkpoint with every bias (attention_bias and mlp_bias): each bias is required. */
static void test_missing_biases(void) {
    spec s = QWEN3;
    s.model_type = "llama", s.qk_norm = 0, s.bias = s.o_bias = s.mlp_bias = 1;
    static const char *const removed[] = {"model.layers.1.self_attn.o_proj.bias", "model.layers.0.mlp.up_proj.bias",
                                          "model.layers.1.mlp.down_proj.bias"};
    for (size_t i = 0; i < sizeof removed / sizeof removed[0]; i++) {
        stw w = {0};
        stw_json config = {0};
        build_tensors(&s, 42, &w);
        build_config(&s, &config);
        stw_json_set(&config, "attention_bias", "true");
        stw_json_set(&config, "mlp_bias", "true");
        CHECK(stw_remove(&w, removed[i]), "no %s to remove", removed[i]);
        write_checkpoint("biases", &w, &config, 1);
        char what[128], msg[96];
        snprintf(what, sizeof what, "missing %s (Llama, attention_bias and mlp_bias)", removed[i]);
        snprintf(msg, sizeof msg, "missing tensor '%s'", removed[i]);
        expect_fail(what, at("biases", ""), RMLP_ERR_MODEL, msg, NULL);
        stw_free(&w);
        stw_json_free(&config);
    }
}

typedef struct index_case {
    const char *name;
    const char *map_key, *map_value; /* weight_map edit (raw JSON; NULL removes) */
    const char *index_text;          /* replaces the index, when given */
    rmlp_status want;
    const char *msg, *msg2;
} index_case;

static const index_case index_cases[] = {
    {"index names a missing shard", "model.norm.weight", "\"model-00003-of-00003.safetensors\"", NULL, RMLP_ERR_IO,
     "index/model-00003-of-00003.safetensors: No such file", NULL},
    {"shard name with '/'", "model.norm.weight", "\"../by_file/model.safetensors\"", NULL, RMLP_ERR_FORMAT,
     "weight_map['model.norm.weight'] = '../by_file/model.safetensors' is not a file name in the checkpoint's folder",
     "index/model.safetensors.index.json: "},
    {"empty shard name", "model.norm.weight", "\"\"", NULL, RMLP_ERR_FORMAT, "weight_map['model.norm.weight'] = ''",
     NULL},
    {"shard name not a string", "model.norm.weight", "3", NULL, RMLP_ERR_FORMAT,
     "weight_map['model.norm.weight'] is an integer, not a file name", NULL},
    {"tensor not in its shard", "model.embed_tokens.weight", "\"model-00002-of-00002.safetensors\"", NULL,
     RMLP_ERR_MODEL, "weight_map puts tensor 'model.embed_tokens.weight' in ", "model-00002-of-00002.safetensors"},
    {"a tensor in two shards", "duplicate", NULL, NULL, RMLP_ERR_MODEL, "tensor 'model.embed_tokens.weight' is in "
     "both model-00001-of-00002.safetensors and model-00002-of-00002.safetensors (weight_map names "
     "model-00001-of-00002.safetensors); a checkpoint holds each tensor once", NULL},
    {"index not JSON", NULL, NULL, "{\"weight_map\": {", RMLP_ERR_FORMAT,
     "index/model.safetensors.index.json: not valid JSON", NULL},
    {"index without weight_map", NULL, NULL, "{\"metadata\": {}}", RMLP_ERR_FORMAT,
     "index/model.safetensors.index.json: no weight_map object", NULL},
    {"weight_map an array", NULL, NULL, "{\"weight_map\": []}", RMLP_ERR_FORMAT, "no weight_map object", NULL},
};

static void test_bad_index(void) {
    stw w = {0};
    stw_json config = {0};
    build_tensors(&QWEN3, 42, &w);
    build_config(&QWEN3, &config);
    for (size_t i = 0; i < sizeof index_cases / sizeof index_cases[0]; i++) {
        const index_case *k = &index_cases[i];
        write_sharded("index", &w, k->map_key, k->map_value, k->index_text);
        stw_json_write(&config, at("index", "config.json"));
        expect_fail(k->name, at("index", ""), k->want, k->msg, k->msg2);
    }
    stw_free(&w);
    stw_json_free(&config);
}

int main(void) {
    writer_begin();
    test_bad_files();
    test_bad_headers();
    test_bad_configs();
    test_bad_tensors();
    test_missing_biases();
    test_bad_index();
    return writer_end();
}

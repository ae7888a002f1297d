/*
 * test_arch_table.c: the architecture table of model/arch.h is the one the loader reads. For
 * every row: its model_type and its id look each other up; a config.json of that model_type
 * reads as the row says (the biases it reads or always has, q/k norm, the tie_word_embeddings
 * default, how it declares sliding windows), stated here from the row's facts rather than through
 * arch_set_layer_flags; bench/tiny_model.c writes a checkpoint of it that loads, and the load
 * report names its model_type; the message for an unknown model_type lists every row. So a row
 * added to the table is exercised end to end with no change here.
 * Usage: test_arch_table         (the checks)
 *        test_arch_table --list  (prints "<id> <model_type>" per row, for tests/check_arch_table.py,
 *                                 which checks the Rust and Python copies of the list against it)
 */
#define _POSIX_C_SOURCE 200809L

#include <stdbool.h>
#include <sys/stat.h>

#include "model/arch.h"
#include "model/config.h"
#include "bench/tiny_model.h"
#include "st_writer.h"
#include "test_util.h"

static char *root;

/* Writes root/<name>.json: a valid config.json of model_type with `extra` (", \"key\": value..."). */
static const char *write_config(const char *name, const char *model_type, const char *extra) {
    static char path[1024];
    char json[1024];
    snprintf(path, sizeof path, "%s/%s.json", root, name);
    snprintf(json, sizeof json,
             "{\"model_type\": \"%s\", \"vocab_size\": 32, \"hidden_size\": 16, \"intermediate_size\": 24, "
             "\"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 8, "
             "\"max_position_embeddings\": 64, \"rms_norm_eps\": 1e-6%s}",
             model_type, extra);
    stw_write_bytes(path, json, strlen(json));
    return path;
}

static void test_lookups(void) {
    size_t n;
    const arch_info *table = arch_table(&n);
    CHECK(n >= 1, "the table has rows");
    for (size_t i = 0; i < n; i++) {
        const arch_info *row = &table[i];
        CHECK(row->id >= 1 && row->model_type != NULL && row->model_type[0] != '\0', "row %zu: id %d", i, row->id);
        CHECK(arch_by_model_type(row->model_type) == row, "row %zu: '%s' looks up another row", i, row->model_type);
        const arch_info *first = arch_by_id(row->id);
        CHECK(first != NULL && first->id == row->id && first <= row, "row %zu: id %d looks up its first row", i,
              row->id);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(table[j].model_type, row->model_type) != 0, "rows %zu and %zu share model_type '%s'", j, i,
                  row->model_type);
    }
    CHECK(arch_by_id(0) == NULL && arch_by_id(-1) == NULL && arch_by_id(1000) == NULL, "ids outside the table");
    CHECK(arch_by_model_type("") == NULL && arch_by_model_type("gpt2") == NULL &&
              arch_by_model_type(table[0].model_type + 1) == NULL,
          "model_types outside the table");
    char upper[64];
    snprintf(upper, sizeof upper, "%s", table[0].model_type);
    upper[0] = (char)(upper[0] - 'a' + 'A');
    CHECK(arch_by_model_type(upper) == NULL, "'%s': model_type is matched exactly, as transformers does", upper);
}

/* The unknown model_type's message lists every row, in order; arch_model_types cuts short safely. */
static void test_message(void) {
    size_t n;
    const arch_info *table = arch_table(&n);
    char want[512] = "(", got[512], small[6];
    for (size_t i = 0; i < n; i++) {
        strcat(want, i ? ", " : "");
        strcat(want, table[i].model_type);
    }
    strcat(want, ")");
    rmlp_model_config c;
    const char *path = write_config("unknown", "gpt2", "");
    rmlp_status status = config_read("rmlp_model_load", path, &c);
    const char *message = rmlp_last_error();
    CHECK(status == RMLP_ERR_MODEL && strstr(message, "model_type 'gpt2' is not supported") != NULL &&
              strstr(message, want) != NULL,
          "status %d, message \"%s\" (want the list %s)", status, message, want);
    CHECK(c.architecture == 0, "a refused config is zeroed");
    arch_model_types(got, sizeof got);
    CHECK(strlen(got) == strlen(want) - 2 && strncmp(got, want + 1, strlen(got)) == 0, "arch_model_types: '%s'", got);
    arch_model_types(small, sizeof small);
    CHECK(strlen(small) == sizeof small - 1 && strncmp(small, got, sizeof small - 1) == 0, "cut short: '%s'", small);
}

/* config.json of the row's model_type, with attention_bias and mlp_bias absent, false or true. */
static void test_config_flags(const arch_info *row) {
    static const char *const flag[] = {NULL, "false", "true"};
    for (int a = 0; a < 3; a++)
        for (int m = 0; m < 3; m++) {
            char extra[128] = "";
            if (flag[a]) snprintf(extra, sizeof extra, ", \"attention_bias\": %s", flag[a]);
            if (flag[m]) snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ", \"mlp_bias\": %s", flag[m]);
            rmlp_model_config c;
            rmlp_status status = config_read("rmlp_model_load", write_config("flags", row->model_type, extra), &c);
            bool attention_bias = a == 2, mlp_bias = m == 2;
            if (!CHECK(status == RMLP_OK, "%s%s: %s", row->model_type, extra, rmlp_last_error())) continue;
            CHECK(c.architecture == row->id && c.qk_norm == row->qk_norm && c.tie_word_embeddings == row->tied_default,
                  "%s%s: architecture %d qk_norm %d tied %d", row->model_type, extra, c.architecture, c.qk_norm,
                  c.tie_word_embeddings);
            CHECK(c.attention_bias == (row->qkv_bias || (row->reads_attention_bias && attention_bias)) &&
                      c.o_proj_bias == (row->reads_attention_bias && attention_bias) &&
                      c.mlp_bias == (row->reads_mlp_bias && mlp_bias),
                  "%s%s: biases q/k/v %d o %d mlp %d", row->model_type, extra, c.attention_bias, c.o_proj_bias,
                  c.mlp_bias);
        }
    rmlp_model_config c;
    rmlp_status status =
        config_read("rmlp_model_load", write_config("tied", row->model_type, ", \"tie_word_embeddings\": true"), &c);
    CHECK(status == RMLP_OK && c.tie_word_embeddings, "%s: tie_word_embeddings true: %s", row->model_type,
          rmlp_last_error());
}

/* config.json's windows as the row's kind reads them (arch.h), into each layer's window: want
 * (2 layers) the windows expected, or NULL for a refusal naming `refusal`. */
static void expect_windows(const arch_info *row, const char *what, const char *extra, const uint32_t *want,
                           const char *refusal) {
    rmlp_model_config c;
    model_ext ext;
    rmlp_status status =
        config_read_reported("rmlp_model_load", write_config("windows", row->model_type, extra), &c, &ext, NULL);
    if (want == NULL) {
        CHECK(status == RMLP_ERR_MODEL && strstr(rmlp_last_error(), refusal) != NULL, "%s: %s: refused naming '%s': "
              "status %d, %s", row->model_type, what, refusal, status, rmlp_last_error());
    } else if (CHECK(status == RMLP_OK && ext.n_layers == 2, "%s: %s: %s", row->model_type, what, rmlp_last_error())) {
        CHECK(ext.layers[0].window == want[0] && ext.layers[1].window == want[1], "%s: %s: windows %u, %u, want %u, %u",
              row->model_type, what, ext.layers[0].window, ext.layers[1].window, want[0], want[1]);
        uint32_t config_window = want[1] ? want[1] : want[0];
        CHECK(c.sliding_window == config_window && ext.any_window == (config_window != 0), "%s: %s: sliding_window %u, "
              "want %u", row->model_type, what, c.sliding_window, config_window);
    }
    model_ext_free(&ext);
}

/* use_sliding_window, sliding_window, max_window_layers and layer_types by the row's kind of windows:
 * Qwen's per layer (transformers' __post_init__), Mistral's every layer (absent: 4096), Llama's none,
 * Gemma 2 and 3's by layer type (absent: 4096 in every layer but each window_pattern-th; null
 * refused where a layer slides; use_sliding_window and max_window_layers not read). */
static void test_config_windows(const arch_info *row) {
    static const uint32_t none[] = {0, 0}, second[] = {0, 8}, first5[] = {5, 0}, all8[] = {8, 8};
    static const uint32_t all4096[] = {4096, 4096};
    bool per_layer = row->windows == ARCH_WINDOWS_PER_LAYER, every = row->windows == ARCH_WINDOWS_ALL;
    bool by_type = row->windows == ARCH_WINDOWS_LAYER_TYPES;
    /* the two layers by the row's pattern: layer i slides unless i + 1 is a multiple of it */
    uint32_t pattern8[2], pattern4096[2];
    for (uint32_t i = 0; i < 2; i++) {
        bool slides = by_type && (i + 1) % row->window_pattern != 0;
        pattern8[i] = slides ? 8 : 0, pattern4096[i] = slides ? 4096 : 0;
    }
    const char *use_refused = "use_sliding_window true is not supported", *null_refused = "but sliding_window is null";
    expect_windows(row, "use_sliding_window, every layer below max_window_layers",
                   ", \"use_sliding_window\": true, \"sliding_window\": 8, \"max_window_layers\": 2",
                   per_layer ? none : by_type ? pattern8 : NULL, use_refused);
    expect_windows(row, "use_sliding_window, layer 1 past max_window_layers",
                   ", \"use_sliding_window\": true, \"sliding_window\": 8, \"max_window_layers\": 1",
                   per_layer ? second : by_type ? pattern8 : NULL, use_refused);
    expect_windows(row, "use_sliding_window, sliding_window null", ", \"use_sliding_window\": true, \"sliding_window\": "
                   "null, \"max_window_layers\": 0", per_layer ? none : NULL, by_type ? null_refused : use_refused);
    expect_windows(row, "layer_types", ", \"use_sliding_window\": true, \"sliding_window\": 5, \"max_window_layers\": 2, "
                   "\"layer_types\": [\"sliding_attention\", \"attention\"]", per_layer || by_type ? first5 : NULL,
                   per_layer ? "" : use_refused);
    expect_windows(row, "layer_types without use_sliding_window", ", \"sliding_window\": 5, \"layer_types\": "
                   "[\"sliding_attention\", \"full_attention\"]", by_type ? first5 : NULL,
                   per_layer ? "but the config has no sliding_window" : "which transformers'");
    /* Llama: transformers' cache keeps a window wherever sliding_window is set, so it is refused */
    expect_windows(row, "sliding_window 8", ", \"sliding_window\": 8",
                   every ? all8 : per_layer ? none : by_type ? pattern8 : NULL, "sliding_window is set");
    expect_windows(row, "sliding_window absent", "", every ? all4096 : by_type ? pattern4096 : none, "");
    expect_windows(row, "sliding_window null", ", \"sliding_window\": null", by_type ? NULL : none, null_refused);
}

static void test_config_keys(const arch_info *row) {
    rmlp_model_config c;
    char *report = NULL;
    const char *path = write_config("keys", row->model_type, ", \"zz_not_a_key\": 1, \"attention_bias\": false, "
                                    "\"mlp_bias\": false, \"auto_map\": {\"AutoModel\": \"m.M\"}");
    rmlp_status status = config_read_reported("rmlp_model_load", path, &c, NULL, &report);
    if (CHECK(status == RMLP_OK && report != NULL, "%s: keys: %s", row->model_type, rmlp_last_error())) {
        CHECK(strstr(report, "'zz_not_a_key'") != NULL &&
                  (strstr(report, "'attention_bias'") == NULL) == row->reads_attention_bias &&
                  (strstr(report, "'mlp_bias'") == NULL) == row->reads_mlp_bias &&
                  strstr(report, "auto_map names custom code for AutoModel ('m.M')") != NULL,
              "%s: report %s", row->model_type, report);
    }
    free(report);
    /* (Gemma 3 reads RoPE per layer type only: flat keys of rope_parameters are ignored there) */
    static const char *const refused[][2] = {{", \"is_causal\": false", "is_causal"},
                                             {", \"attention_chunk_size\": 8", "attention_chunk_size"},
                                             {", \"quantization_config\": {}", "quantization_config"},
                                             {", \"rope_parameters\": {\"type\": \"dynamic\", \"factor\": 2}", "rope_parameters.type"}};
    static const char *const per_type[2] = {", \"rope_parameters\": {\"full_attention\": {\"type\": \"dynamic\"}}",
                                            "rope_parameters.full_attention.type"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const char *const *what = i == 3 && row->local_rope ? per_type : refused[i];
        status = config_read("rmlp_model_load", write_config("refused", row->model_type, what[0]), &c);
        CHECK(status == RMLP_ERR_MODEL && strstr(rmlp_last_error(), what[1]) != NULL, "%s%s: status %d, %s",
              row->model_type, what[0], status, rmlp_last_error());
    }
}

/* Replaces the first `from` in the file at path by `to` (same length or shorter). */
static void edit_file(const char *path, const char *from, const char *to) {
    char text[4096];
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[n] = '\0';
    char *at = strstr(text, from);
    if (!CHECK(at != NULL, "%s holds '%s'", path, from)) return;
    memmove(at + strlen(to), at + strlen(from), strlen(at + strlen(from)) + 1);
    memcpy(at, to, strlen(to));
    stw_write_bytes(path, text, strlen(text));
}

/* tiny_model writes the row's checkpoint with every bias flag set (and a sliding_window where it
 * applies to every layer, as a config.json of it holds); it loads with the row's layer flags and
 * nothing to report, and with one layer fewer in config.json the report names the row's model_type. */
static void test_load(const arch_info *row) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", root, row->model_type);
    rmlp_model_config cfg = {.architecture = row->id, .vocab_size = 32, .hidden_size = 16, .intermediate_size = 24,
                             .num_hidden_layers = 2, .num_attention_heads = 2, .num_key_value_heads = 1,
                             .head_dim = 8, .max_position_embeddings = 64, .rms_norm_eps = 1e-6, .rope_theta = 1e6,
                             .attention_bias = true, .mlp_bias = true, .qk_norm = row->qk_norm,
                             .sliding_window = row->windows == ARCH_WINDOWS_ALL ? 64 : 0};
    if (!CHECK(mkdir(dir, 0700) == 0 && tiny_model_write(dir, &cfg, 3) == 0, "%s: tiny_model_write", row->model_type)) return;
    rmlp_model *model = NULL;
    rmlp_model_config got;
    const char *report = NULL;
    rmlp_status status = rmlp_model_load(dir, NULL, &model);
    if (CHECK(status == RMLP_OK, "%s: load: %s", row->model_type, rmlp_last_error())) {
        rmlp_model_get_config(model, &got);
        rmlp_model_load_report(model, &report);
        CHECK(got.architecture == row->id && got.qk_norm == row->qk_norm && report[0] == '\0' &&
                  got.attention_bias == (row->qkv_bias || row->reads_attention_bias) &&
                  got.o_proj_bias == row->reads_attention_bias && got.mlp_bias == row->reads_mlp_bias,
              "%s: loaded architecture %d, biases q/k/v %d o %d mlp %d, report %s", row->model_type, got.architecture,
              got.attention_bias, got.o_proj_bias, got.mlp_bias, report);
    }
    rmlp_model_free(model);
    model = NULL;
    char config[1100], want[128];
    snprintf(config, sizeof config, "%s/config.json", dir);
    edit_file(config, "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 1");
    snprintf(want, sizeof want, "not used by a %s model of 1 layer as", row->model_type);
    status = rmlp_model_load(dir, NULL, &model);
    if (CHECK(status == RMLP_OK, "%s: load of one layer: %s", row->model_type, rmlp_last_error())) {
        rmlp_model_load_report(model, &report);
        CHECK(strstr(report, want) != NULL, "%s: report '%s' (want '%s')", row->model_type, report, want);
    }
    rmlp_model_free(model);
    tiny_model_remove(dir);
}

static void test_tiny_model_refuses_unknown(void) {
    rmlp_model_config cfg = {.architecture = 0, .vocab_size = 32, .hidden_size = 16, .intermediate_size = 24,
                             .num_hidden_layers = 1, .num_attention_heads = 2, .num_key_value_heads = 1,
                             .head_dim = 8, .max_position_embeddings = 64, .rms_norm_eps = 1e-6, .rope_theta = 1e6};
    CHECK(tiny_model_write(root, &cfg, 3) == -1, "tiny_model_write of architecture 0");
}

int main(int argc, char **argv) {
    size_t n;
    const arch_info *table = arch_table(&n);
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < n; i++) printf("%d %s\n", table[i].id, table[i].model_type);
        return 0;
    }
    root = stw_mkdtemp();
    test_lookups();
    test_message();
    for (size_t i = 0; i < n; i++) {
        test_config_flags(&table[i]);
        test_config_windows(&table[i]);
        test_config_keys(&table[i]);
        test_load(&table[i]);
    }
    test_tiny_model_refuses_unknown();
    stw_rmtree(root);
    free(root);
    return tu_summary();
}

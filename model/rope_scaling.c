/*
 * rope_scaling.c: rope_scaling.h's frequencies. Where transformers computes on fp32 tensors this
 * does in float, operation for operation (a Python scalar meeting a tensor is rounded to fp32
 * first; `x / tensor` is the tensor's reciprocal times x, as torch's __rtruediv__ computes it);
 * where it computes with Python floats (wavelength bounds, yarn's correction range and mscale)
 * this does in double.
 */
#include "rope_scaling.h"

#include <math.h>

#define PI 3.141592653589793 /* math.pi */

#include "model_ext.h"

/* linear: the default frequencies over factor. */
static void linear(const rope_spec *s, uint32_t half, float *inv) {
    for (uint32_t i = 0; i < half; i++) inv[i] = inv[i] / (float)s->factor;
}

/* llama3 (Llama 3.1): low frequencies (wavelength above original_max / low_freq_factor) over
 * factor, high ones (below original_max / high_freq_factor) kept, those between interpolated. */
static void llama3(const rope_spec *s, uint32_t half, float *inv) {
    float low_wavelen = (float)(s->original_max / s->low_freq_factor);
    float high_wavelen = (float)(s->original_max / s->high_freq_factor);
    float factor = (float)s->factor, two_pi = (float)(2 * PI), old = (float)s->original_max;
    float low = (float)s->low_freq_factor, span = (float)(s->high_freq_factor - s->low_freq_factor);
    for (uint32_t i = 0; i < half; i++) {
        float wavelen = 1.0f / inv[i] * two_pi;
        float scaled = wavelen > low_wavelen ? inv[i] / factor : inv[i];
        float smooth = (1.0f / wavelen * old - low) / span;
        float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
        bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
        inv[i] = medium ? smoothed : scaled;
    }
}

/* yarn's dimension at which num_rotations full turns fit in original_max positions. */
static double correction_dim(double num_rotations, double dim, double base, double original_max) {
    return dim * log(original_max / (num_rotations * 2 * PI)) / (2 * log(base));
}

static double mscale_of(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * log(scale) + 1.0; }

/* yarn: per dimension, between the default frequency (extrapolation) and it over factor
 * (interpolation) by a ramp over the correction range; the attention factor from factor. */
static void yarn(const rope_spec *s, uint32_t head_dim, float *inv, float *attention_factor) {
    uint32_t half = head_dim / 2;
    double dim = head_dim;
    double low = correction_dim(s->beta_fast, dim, s->theta, s->original_max);
    double high = correction_dim(s->beta_slow, dim, s->theta, s->original_max);
    if (s->truncate) low = floor(low), high = ceil(high);
    low = low > 0 ? low : 0, high = high < dim - 1 ? high : dim - 1;
    if (low == high) high += 0.001; /* transformers' guard against a zero-width ramp */
    float lo = (float)low, width = (float)(high - low), factor = (float)s->factor;
    for (uint32_t i = 0; i < half; i++) {
        float pos_freq = powf((float)s->theta, (float)(2 * i) / (float)head_dim);
        float extrapolation = 1.0f / pos_freq, interpolation = 1.0f / (factor * pos_freq);
        float ramp = ((float)i - lo) / width;
        ramp = ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp;
        float extrapolation_factor = 1.0f - ramp;
        inv[i] = interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
    }
    double af = s->has_attention_factor ? s->attention_factor
                : s->mscale != 0 && s->mscale_all_dim != 0
                    ? mscale_of(s->factor, s->mscale) / mscale_of(s->factor, s->mscale_all_dim)
                    : mscale_of(s->factor, 1.0);
    *attention_factor = (float)af;
}

void rope_scaling_frequencies(const rope_spec *spec, uint32_t head_dim, float *inv_freq, float *attention_factor) {
    *attention_factor = 1.0f;
    if (spec->kind == ROPE_YARN) {
        yarn(spec, head_dim, inv_freq, attention_factor);
        return;
    }
    model_rope_default(spec->theta, head_dim, inv_freq);
    if (spec->kind == ROPE_LINEAR) linear(spec, head_dim / 2, inv_freq);
    if (spec->kind == ROPE_LLAMA3) llama3(spec, head_dim / 2, inv_freq);
}

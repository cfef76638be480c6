/* Rotary position embeddings, Hugging Face's rotate_half convention (Llama, Qwen): a head of d
 * channels is two halves, x1 = x[0, d/2) and x2 = x[d/2, d); pair j is (x1[j], x2[j]) at angle
 * pos * inv_freq[j]:
 *   q_embed = q*cos + rotate_half(q)*sin,  rotate_half(q) = cat(-q2, q1)
 *   forward:  x1' = x1*c + (-x2)*s;  x2' = x2*c + x1*s
 *   backward: the transpose (rotation by -angle), in place: dx1' = dx1*c + dx2*s;
 *             dx2' = dx2*c - dx1*s
 *             each FLOPs 3*N*heads*d; bytes 4*(2*N*heads*d + T*d) (x read+written once, the cos
 *             and sin rows of T positions), N = B*T rows.
 * The tables are float32 as HF builds them (inv_freq, then freqs = pos * inv_freq in float,
 * then cos and sin of that float), but every elementary function is minidc's own: base^e is
 * exp(e log base) in double (mdc_log and rope_exp below), cos and sin are mdc_rope_sincos below,
 * both rounded to float once, so the tables are the same bits on every machine and compiler.
 * They are not charged (built once, outside the step). */
#include <stdint.h>

#include "internal.h"
#include "minidc/numerics.h"

/* e^x in double for |x| <= 1000 (beyond: +inf, 0, or NaN for NaN): x = n ln2 + r, |r| <= ln2/2
 * (ln2 in two parts, the first with 32 bits so n*LN2_HI is exact for |n| < 2^21), degree-13
 * Taylor polynomial of e^r (truncation < 5e-18 relative), times 2^n as two exact powers of two.
 * Relative error about 3e-16 where the result is normal. */
static double rope_exp(double x) {
    if (!(x <= 1000.0 && x >= -1000.0)) return x > 0 ? INFINITY : x < 0 ? 0.0 : x + x;
    const double big = 6755399441055744.0; /* 1.5 * 2^52: adding it rounds to an integer */
    double kn = (x * 1.4426950408889634 + big) - big;
    double r = (x - kn * 0.6931471803691238) - kn * 1.9082149292705877e-10;
    double p = 1.6059043836821613e-10; /* 1/13! */
    p = p * r + 2.08767569878681e-09;
    p = p * r + 2.505210838544172e-08;
    p = p * r + 2.755731922398589e-07;
    p = p * r + 2.7557319223985893e-06;
    p = p * r + 2.48015873015873e-05;
    p = p * r + 0.0001984126984126984;
    p = p * r + 0.001388888888888889;
    p = p * r + 0.008333333333333333;
    p = p * r + 0.041666666666666664;
    p = p * r + 0.16666666666666666;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    int64_t n = (int64_t)kn, n1 = n / 2, n2 = n - n1; /* |n1|, |n2| <= 722: normal powers */
    uint64_t b1 = (uint64_t)(n1 + 1023) << 52, b2 = (uint64_t)(n2 + 1023) << 52;
    double s1, s2;
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    return p * s1 * s2;
}

/* sin and cos of x in double. Cody-Waite reduction x = k pi/2 + r with pi/2 in three parts:
 * P1 (27 bits) and P2 (25 bits) make k*P1 and k*P2 exact for |k| < 2^26, so x - k*P1 is exact and
 * r carries an absolute error of about 2^-53 (P1 + P2 + P3 is within 5e-35 of pi/2); then
 * Taylor polynomials on |r| <= pi/4 through r^17 (sin) and r^18 (cos), truncation < 1e-19, and
 * the quadrant k mod 4. Absolute error below 5e-16 for |x| < 2^26 (measured against glibc's sin
 * and cos: 2.2e-16 on 1e5 angles in [-2e6, 2e6] and 2000 multiples of pi/2 up to 1.3e6 of them);
 * the float tables built from it equal the correctly rounded float cos and sin of their angles.
 * Beyond 2^26 k*P1 is rounded and the error grows to about |x| 2^-53; above 2^50, and for inf
 * and NaN, both are NaN. */
void mdc_rope_sincos(double x, double *sin_x, double *cos_x) {
    if (!(x <= 0x1p50 && x >= -0x1p50)) {
        *sin_x = *cos_x = NAN;
        return;
    }
    const double big = 6755399441055744.0;
    double kd = (x * 0.6366197723675814 + big) - big;
    double r = (x - kd * 1.570796325802803) - kd * 9.920935739593517e-10;
    r = r - kd * 5.721188726109832e-18;
    double z = r * r;
    double ps = 2.8114572543455206e-15; /* 1/17! */
    ps = ps * z - 7.647163731819816e-13;
    ps = ps * z + 1.6059043836821613e-10;
    ps = ps * z - 2.505210838544172e-08;
    ps = ps * z + 2.7557319223985893e-06;
    ps = ps * z - 0.0001984126984126984;
    ps = ps * z + 0.008333333333333333;
    ps = ps * z - 0.16666666666666666;
    double sr = r + r * z * ps;
    double pc = 1.5619206968586225e-16; /* 1/18! */
    pc = pc * z - 4.779477332387385e-14;
    pc = pc * z + 1.1470745597729725e-11;
    pc = pc * z - 2.08767569878681e-09;
    pc = pc * z + 2.755731922398589e-07;
    pc = pc * z - 2.48015873015873e-05;
    pc = pc * z + 0.001388888888888889;
    pc = pc * z - 0.041666666666666664;
    pc = pc * z + 0.5;
    double cr = 1.0 - z * pc;
    switch ((int)((int64_t)kd & 3)) {
    case 0: *sin_x = sr, *cos_x = cr; break;
    case 1: *sin_x = cr, *cos_x = -sr; break;
    case 2: *sin_x = -sr, *cos_x = -cr; break;
    default: *sin_x = -cr, *cos_x = sr; break;
    }
}

/* HF's _compute_default_rope_parameters and _compute_llama3_parameters in float32 torch ops:
 *   inv_freq = 1.0 / (base ** (arange(0, d, 2).float() / d))
 *   wavelen = 2*pi / inv_freq                       (torch: inv_freq.reciprocal() * 2pi)
 *   low, high = old / low_freq_factor, old / high_freq_factor   (Python doubles; compared in float)
 *   smooth = (old / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
 *   smoothed = (1 - smooth) * inv_freq / factor + smooth * inv_freq
 *   wavelen < high: inv_freq;  wavelen > low: inv_freq / factor;  otherwise smoothed.
 * A Python scalar meets a float32 tensor rounded to float, and `scalar / tensor` is
 * tensor.reciprocal() * scalar (torch's __rtruediv__), so both are written that way here.
 * base ** e is exp(e log base) in double rounded to float (within about
 * (|log base| + 1) 6e-16 relative before that rounding: correctly rounded unless that close to a
 * midpoint, where torch's powf may differ by an ulp); the base is rounded to float first, as
 * torch's pow of a Python scalar and a float tensor does. */
void mdc_rope_inv_freq(float *inv_freq, int d, double theta, const mdc_rope_llama3 *llama3) {
    double lb = mdc_log((double)(float)theta);
    for (int i = 0; i < d / 2; i++) {
        float e = (float)(2 * i) / (float)d;
        float p = (float)rope_exp((double)e * lb);
        inv_freq[i] = 1.0f / p;
    }
    if (!llama3) return;
    float factor = llama3->factor, lo = llama3->low_freq_factor, hi = llama3->high_freq_factor;
    double old = llama3->original_max_position_embeddings;
    float low_wavelen = (float)(old / lo), high_wavelen = (float)(old / hi);
    float span = (float)((double)hi - (double)lo), oldf = (float)old, twopi = (float)(2.0 * 3.141592653589793);
    for (int i = 0; i < d / 2; i++) {
        float f = inv_freq[i];
        float wavelen = (1.0f / f) * twopi;
        if (wavelen < high_wavelen) continue;
        if (wavelen > low_wavelen) {
            inv_freq[i] = f / factor;
            continue;
        }
        float smooth = ((1.0f / wavelen) * oldf - lo) / span;
        inv_freq[i] = (1.0f - smooth) * f / factor + smooth * f;
    }
}

/* Row p: angle = (float)pos * inv_freq[j] rounded to float (HF's float32 matmul of the position
 * ids and inv_freq with K = 1), then its cos and sin rounded to float. */
void mdc_rope_table(float *cos_t, float *sin_t, const float *inv_freq, int d, const int *pos, int pos0, int P) {
    int h = d / 2;
#pragma omp parallel for schedule(static)
    for (int p = 0; p < P; p++) {
        float fp = (float)(pos ? pos[p] : pos0 + p);
        for (int j = 0; j < h; j++) {
            float a = fp * inv_freq[j];
            double s, c;
            mdc_rope_sincos((double)a, &s, &c);
            cos_t[(size_t)p * h + j] = (float)c;
            sin_t[(size_t)p * h + j] = (float)s;
        }
    }
}

/* dir +1: forward; -1: backward (the transpose). */
static void rope_apply(float *x, int ld, int heads, int d, const float *cos_t, const float *sin_t, int B, int T,
                       int dir) {
    int h = d / 2, n = B * T;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < n; r++) {
        const float *c = cos_t + (size_t)(r % T) * h, *s = sin_t + (size_t)(r % T) * h;
        for (int hd = 0; hd < heads; hd++) {
            float *x1 = x + (size_t)r * ld + (size_t)hd * d, *x2 = x1 + h;
            if (dir > 0)
                for (int j = 0; j < h; j++) {
                    float a = x1[j], b = x2[j];
                    x1[j] = a * c[j] + (-b) * s[j];
                    x2[j] = b * c[j] + a * s[j];
                }
            else
                for (int j = 0; j < h; j++) {
                    float a = x1[j], b = x2[j];
                    x1[j] = a * c[j] + b * s[j];
                    x2[j] = b * c[j] - a * s[j];
                }
        }
    }
}

static double rope_flops(int heads, int d, int B, int T) { return 3.0 * B * T * heads * d; }
static double rope_bytes(int heads, int d, int B, int T) { return 4.0 * (2.0 * B * T * heads * d + (double)T * d); }

void mdc_rope_forward(mdc_device *dev, float *x, int ld, int heads, int d, const float *cos_t, const float *sin_t,
                      int B, int T) {
    if (!mdc_dev_dry(dev)) rope_apply(x, ld, heads, d, cos_t, sin_t, B, T, 1);
    mdc_k_charge(dev, rope_flops(heads, d, B, T), rope_bytes(heads, d, B, T));
}

void mdc_rope_backward(mdc_device *dev, float *dx, int ld, int heads, int d, const float *cos_t, const float *sin_t,
                       int B, int T) {
    if (!mdc_dev_dry(dev)) rope_apply(dx, ld, heads, d, cos_t, sin_t, B, T, -1);
    mdc_k_charge(dev, rope_flops(heads, d, B, T), rope_bytes(heads, d, B, T));
}

/* One keystroke of a `tova_attention` student (the teacher's layers over a bounded key/value cache) at
 * batch 1, in one call: token + position embedding -> per layer int8 Q/K/V, attention over [sink, cached
 * slots, itself], TOVA eviction, int8 output projection and feed-forward, post-norms -> running mean ->
 * int8 readout (+ running token mean) -> L2 normalisation. The arithmetic mirrors
 * `TOVAAttentionCell._step_all` with every nn.Linear in int8.h's int8.
 *
 * The state is 3L + 2 arrays (per layer keys [S, H], values [S, H], fill [S]; then count [1], pooled [H]),
 * or 3L + 3 with position-weighted pooling (the total weight [1] before count), passed as pointer lists.
 * The new state is written to `out` (which may alias `in`): a stream's earlier states stay valid, as deletes
 * pop back to them. A step writes one key and value row per layer: with `rows` ([L, 2, H]) and `slots` ([L])
 * given, it also writes those rows and their slots there, and `out`'s keys and values may be NULL, so the
 * step never copies the cache (the streaming encoder keeps states as rows over the state they stepped from).
 * With `out`'s keys and values aliasing `in`'s (a cache changed in place) and `replaced` ([L, 2, H]) given, the
 * rows the step overwrites are written there first, so the caller can undo the step.
 * Buffers are caller-owned; nothing here allocates (but for pool.h's helper thread, started once).
 */
#include <string.h>

#include "int8.h"
#include "pool.h"

typedef struct {
    int32_t H, L, heads, S, P, I, O, residual, weighted;
    int32_t upper_open;   /* tail_open_tokens W: > 1 puts the upper layers' open block (3 entries) after the layers' */
    float eps, pool_exp;  /* weighted: step n's top-layer output weighs (n + 1) ** pool_exp in the mean */
    const float *table, *position;                  /* [V, H], [P, H] */
    const float *emb_bias, *emb_norm_w, *emb_norm_b; /* [H] */
    const int8_t *w_qkv; const float *s_qkv; const int32_t *r_qkv; const float *b_qkv; /* [L, 3H, H] */
    const int8_t *w_out; const float *s_out; const int32_t *r_out; const float *b_out; /* [L, H, H] */
    const int8_t *w_up; const float *s_up; const int32_t *r_up; const float *b_up;     /* [L, I, H] */
    const int8_t *w_down; const float *s_down; const int32_t *r_down; const float *b_down; /* [L, H, I] */
    const float *norm1_w, *norm1_b, *norm2_w, *norm2_b; /* [L, H]: attention_norm, output_norm */
    const float *sink_key, *sink_value;                 /* [L, H] */
    const float *sink_output;                           /* [H] */
    const int8_t *w_o; const float *s_o; const int32_t *r_o; const float *b_o; /* readout [O, H] */
    /* Where not NULL, the same products' weights in int4 (int8.h's gemv4_rows; their s_, r_ and b_ above are the
     * int4 rows' scales and sums), read instead of the int8 ones: [layers read as int4, rows, cols / 2] bytes each. */
    const uint8_t *w4_qkv, *w4_out, *w4_up, *w4_down, *w4_o;
    /* Where not NULL (with w4_), those int4 weights' scales per 128 columns, in place of s_ and r_ (gemv4_groups):
     * [layers read as int4, rows, cols / 128] each. */
    const float *g_qkv, *g_out, *g_up, *g_down, *g_o;
    /* Bit l set where layer l reads that product as int4: its weights are the next of w4_'s (and g_'s) layers, else
     * the next of w_'s. A product of one form in every layer holds the one array ([L, ...]); one whose layers mix
     * (a student trained with some kept off the int4 grid, --weight_keep cell.layers.N) holds each layer in one of
     * the two, in layer order. s_, r_ and b_ hold every layer, each in the form it is read. */
    uint32_t l4_qkv, l4_out, l4_up, l4_down;
} tf2rnn_tova_params;

/* Index of the state's first entry after the layers' (and, with tail_open_tokens, the upper layers' open block):
 * [total,] count, pooled. */
static inline int pool_base(const tf2rnn_tova_params *p) { return 3 * p->L + (p->upper_open > 1 ? 3 : 0); }

/* How many of the layers below l have their bit set in `mask`: a layer's place in its form's array. */
static inline int64_t layers_below(uint32_t mask, int l) { return __builtin_popcount(mask & ((1u << l) - 1u)); }

#define TF2RNN_READS4(p, name, l) ((p)->w4_##name && ((p)->l4_##name >> (l) & 1u))
/* Layer l's weights of a product of `size` weights a layer: int8, int4, and the int4 weights' scales per 128 columns,
 * each NULL where that layer does not read it (gemv_split's first three weight arguments). */
#define TF2RNN_WEIGHTS(p, name, l, size) \
    (TF2RNN_READS4(p, name, l) ? NULL : (p)->w_##name + layers_below(~(p)->l4_##name, l) * (size)), \
    (TF2RNN_READS4(p, name, l) ? (p)->w4_##name + layers_below((p)->l4_##name, l) * (size) / 2 : NULL), \
    (TF2RNN_READS4(p, name, l) && (p)->g_##name ? (p)->g_##name + layers_below((p)->l4_##name, l) * (size) / 128 : NULL)

static void layer_norm(float *x, const float *w, const float *b, int n, float eps) {
    float mean = 0.f, var = 0.f;
    for (int k = 0; k < n; ++k) mean += x[k];
    mean /= (float)n;
    for (int k = 0; k < n; ++k) var += (x[k] - mean) * (x[k] - mean);
    float inv = 1.f / sqrtf(var / (float)n + eps);
    for (int k = 0; k < n; ++k) x[k] = (x[k] - mean) * inv * w[k] + b[k];
}

#if defined(__AVX2__) && defined(__FMA__)
/* exp(y) for y <= 0, eight at a time: 2^m * e^r with |r| <= ln2 / 2 (Cephes' polynomial, ~1 ulp); y below -87,
 * where 2^m would leave the normal range, gives exp(-87). */
static inline __m256 exp8_nonpositive(__m256 y) {
    const __m256 one = _mm256_set1_ps(1.f);
    y = _mm256_max_ps(y, _mm256_set1_ps(-87.f));
    __m256 m = _mm256_round_ps(_mm256_mul_ps(y, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(m, _mm256_set1_ps(0.693359375f), y);
    r = _mm256_fnmadd_ps(m, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 e = _mm256_fmadd_ps(_mm256_set1_ps(1.9875691500e-4f), r, _mm256_set1_ps(1.3981999507e-3f));
    e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(8.3334519073e-3f));
    e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(4.1665795894e-2f));
    e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(1.6666665459e-1f));
    e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(5.0000001201e-1f));
    e = _mm256_fmadd_ps(_mm256_mul_ps(e, r), r, _mm256_add_ps(r, one));
    __m256i pow2 = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(m), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(e, _mm256_castsi256_ps(pow2));
}
#endif

/* Exact (erf) GELU in place. libm's erff is a scalar call per element (6-12% of a keystroke); with AVX2 and
 * FMA, eight at a time: Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7) with the exp above. Its output is
 * quantised to 8 bits next, so this is exact for the kernel's purposes. */
static void gelu(float *u, int n) {
    int k = 0;
#if defined(__AVX2__) && defined(__FMA__)
    const __m256 sign = _mm256_set1_ps(-0.f), one = _mm256_set1_ps(1.f), half = _mm256_set1_ps(.5f);
    for (; k + 8 <= n; k += 8) {
        __m256 x = _mm256_loadu_ps(u + k), z = _mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f));
        __m256 az = _mm256_andnot_ps(sign, z);
        __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), az, one));
        __m256 poly = _mm256_fmadd_ps(_mm256_set1_ps(1.061405429f), t, _mm256_set1_ps(-1.453152027f));
        poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(1.421413741f));
        poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(-0.284496736f));
        poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(0.254829592f));
        poly = _mm256_mul_ps(poly, t);
        __m256 e = exp8_nonpositive(_mm256_xor_ps(_mm256_mul_ps(az, az), sign));  /* exp(-z^2) */
        __m256 erf = _mm256_or_ps(_mm256_fnmadd_ps(poly, e, one), _mm256_and_ps(z, sign));  /* erf(|z|) * sign(z) */
        _mm256_storeu_ps(u + k, _mm256_mul_ps(_mm256_mul_ps(half, x), _mm256_add_ps(one, erf)));
    }
#endif
    for (; k < n; ++k) u[k] = 0.5f * u[k] * (1.f + erff(u[k] * 0.70710678118654752f));
}

/* Softmax of each head's n scores in place (w[h * stride + e], h0 <= h < h1). */
static void softmax_heads(float *w, int n, int h0, int h1, int stride) {
    for (int h = h0; h < h1; ++h) {
        float *wh = w + h * stride, m = -INFINITY, sum = 0.f;
        int e = 0;
#if defined(__AVX2__) && defined(__FMA__)
        /* expf is a scalar call per score (at 128 slots and 12 heads a fifth of the attention), and a running
         * fmaxf a serial chain. */
        __m256 vmax = _mm256_set1_ps(-INFINITY);
        for (; e + 8 <= n; e += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(wh + e));
        float top[8];
        _mm256_storeu_ps(top, vmax);
        for (int k = 0; k < 8; ++k) m = fmaxf(m, top[k]);
#endif
        for (; e < n; ++e) m = fmaxf(m, wh[e]);
        e = 0;
#if defined(__AVX2__) && defined(__FMA__)
        __m256 vsum = _mm256_setzero_ps();
        for (; e + 8 <= n; e += 8) {
            __m256 x = exp8_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(wh + e), _mm256_set1_ps(m)));
            _mm256_storeu_ps(wh + e, x);
            vsum = _mm256_add_ps(vsum, x);
        }
        float part[8];
        _mm256_storeu_ps(part, vsum);
        sum = ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
#endif
        for (; e < n; ++e) { wh[e] = expf(wh[e] - m); sum += wh[e]; }
        const float inv = 1.f / sum;
        for (e = 0; e < n; ++e) wh[e] *= inv;
    }
}

#if defined(__AVX512F__)
/* Four vectors' sums at once: [sum(a0), sum(a1), sum(a2), sum(a3)]. */
static inline __m128 reduce4_ps(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    __m512 r01 = _mm512_add_ps(_mm512_unpacklo_ps(a0, a1), _mm512_unpackhi_ps(a0, a1));
    __m512 r23 = _mm512_add_ps(_mm512_unpacklo_ps(a2, a3), _mm512_unpackhi_ps(a2, a3));
    __m512 r = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(r01), _mm512_castps_pd(r23))),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(r01), _mm512_castps_pd(r23))));
    /* the upper half through AVX512F's 64-bit extract (extractf32x8 needs AVX512DQ) */
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(r),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(r), 1)));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* `attend` for heads of 32 lanes (MiniLM's): each head's query and key rows are two vectors, four heads' dot
 * products are reduced at once, and the mix keeps four heads' outputs in registers over the entries (the scalar
 * form's per-head loops ran at ~29 us for 130 entries and 12 heads on one core; session 38, experiments.md). */
static void attend32(const float *qv, const float *const *kp, const float *const *vp, int n, int h0, int h1,
                     float scale, float *w, int stride, float *mixed) {
    for (int e = 0; e < n; ++e) {
        const float *kk = kp[e];
        int h = h0;
        for (; h + 4 <= h1; h += 4) {
            __m512 t[4];
            for (int k = 0; k < 4; ++k) {
                const float *a = qv + (h + k) * 32, *b = kk + (h + k) * 32;
                t[k] = _mm512_fmadd_ps(_mm512_loadu_ps(a + 16), _mm512_loadu_ps(b + 16),
                                       _mm512_mul_ps(_mm512_loadu_ps(a), _mm512_loadu_ps(b)));
            }
            float dots[4];
            _mm_storeu_ps(dots, _mm_mul_ps(reduce4_ps(t[0], t[1], t[2], t[3]), _mm_set1_ps(scale)));
            for (int k = 0; k < 4; ++k) w[(h + k) * stride + e] = dots[k];
        }
        for (; h < h1; ++h) {
            const float *a = qv + (int64_t)h * 32, *b = kk + (int64_t)h * 32;
            __m512 t = _mm512_fmadd_ps(_mm512_loadu_ps(a + 16), _mm512_loadu_ps(b + 16),
                                       _mm512_mul_ps(_mm512_loadu_ps(a), _mm512_loadu_ps(b)));
            __m512 z = _mm512_setzero_ps();
            float dots[4];
            _mm_storeu_ps(dots, _mm_mul_ps(reduce4_ps(t, z, z, z), _mm_set1_ps(scale)));
            w[h * stride + e] = dots[0];
        }
    }
    softmax_heads(w, n, h0, h1, stride);
    int h = h0;
    for (; h + 4 <= h1; h += 4) {
        __m512 acc[8];
        for (int k = 0; k < 8; ++k) acc[k] = _mm512_setzero_ps();
        for (int e = 0; e < n; ++e) {
            const float *ve = vp[e] + (int64_t)h * 32;
            for (int k = 0; k < 4; ++k) {
                const __m512 we = _mm512_set1_ps(w[(h + k) * stride + e]);
                acc[2 * k] = _mm512_fmadd_ps(we, _mm512_loadu_ps(ve + 32 * k), acc[2 * k]);
                acc[2 * k + 1] = _mm512_fmadd_ps(we, _mm512_loadu_ps(ve + 32 * k + 16), acc[2 * k + 1]);
            }
        }
        for (int k = 0; k < 8; ++k) _mm512_storeu_ps(mixed + h * 32 + 16 * k, acc[k]);
    }
    for (; h < h1; ++h) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0;
        for (int e = 0; e < n; ++e) {
            const float *ve = vp[e] + (int64_t)h * 32;
            const __m512 we = _mm512_set1_ps(w[h * stride + e]);
            a0 = _mm512_fmadd_ps(we, _mm512_loadu_ps(ve), a0);
            a1 = _mm512_fmadd_ps(we, _mm512_loadu_ps(ve + 16), a1);
        }
        _mm512_storeu_ps(mixed + h * 32, a0);
        _mm512_storeu_ps(mixed + h * 32 + 16, a1);
    }
}
#endif

#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
/* attend32 in eight lanes, for AVX2 hosts: a head's 32 lanes are four vectors, four heads' dot products are reduced at
 * once, and the mix keeps two heads' outputs in registers over the entries (the scalar form took ~12 us a layer at 33
 * entries and 12 heads on a Zen 3 core; session 63, experiments.md). */
static inline __m128 reduce4_ps8(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));  /* per lane: [a0, a1, a2, a3] */
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

static void attend32(const float *qv, const float *const *kp, const float *const *vp, int n, int h0, int h1,
                     float scale, float *w, int stride, float *mixed) {
    for (int e = 0; e < n; ++e) {
        const float *kk = kp[e];
        int h = h0;
        for (; h + 4 <= h1; h += 4) {
            __m256 t[4];
            for (int k = 0; k < 4; ++k) {
                const float *a = qv + (h + k) * 32, *b = kk + (h + k) * 32;
                __m256 u = _mm256_mul_ps(_mm256_loadu_ps(a), _mm256_loadu_ps(b));
                u = _mm256_fmadd_ps(_mm256_loadu_ps(a + 8), _mm256_loadu_ps(b + 8), u);
                u = _mm256_fmadd_ps(_mm256_loadu_ps(a + 16), _mm256_loadu_ps(b + 16), u);
                t[k] = _mm256_fmadd_ps(_mm256_loadu_ps(a + 24), _mm256_loadu_ps(b + 24), u);
            }
            float dots[4];
            _mm_storeu_ps(dots, _mm_mul_ps(reduce4_ps8(t[0], t[1], t[2], t[3]), _mm_set1_ps(scale)));
            for (int k = 0; k < 4; ++k) w[(h + k) * stride + e] = dots[k];
        }
        for (; h < h1; ++h) {
            const float *a = qv + (int64_t)h * 32, *b = kk + (int64_t)h * 32;
            __m256 u = _mm256_mul_ps(_mm256_loadu_ps(a), _mm256_loadu_ps(b));
            for (int d = 8; d < 32; d += 8) u = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d), u);
            const __m256 z = _mm256_setzero_ps();
            float dots[4];
            _mm_storeu_ps(dots, _mm_mul_ps(reduce4_ps8(u, z, z, z), _mm_set1_ps(scale)));
            w[h * stride + e] = dots[0];
        }
    }
    softmax_heads(w, n, h0, h1, stride);
    int h = h0;
    for (; h + 2 <= h1; h += 2) {
        __m256 acc[8];
        for (int k = 0; k < 8; ++k) acc[k] = _mm256_setzero_ps();
        for (int e = 0; e < n; ++e) {
            const float *ve = vp[e] + (int64_t)h * 32;
            for (int k = 0; k < 2; ++k) {
                const __m256 we = _mm256_set1_ps(w[(h + k) * stride + e]);
                for (int c = 0; c < 4; ++c)
                    acc[4 * k + c] = _mm256_fmadd_ps(we, _mm256_loadu_ps(ve + 32 * k + 8 * c), acc[4 * k + c]);
            }
        }
        for (int k = 0; k < 8; ++k) _mm256_storeu_ps(mixed + h * 32 + 8 * k, acc[k]);
    }
    for (; h < h1; ++h) {
        __m256 acc[4];
        for (int c = 0; c < 4; ++c) acc[c] = _mm256_setzero_ps();
        for (int e = 0; e < n; ++e) {
            const float *ve = vp[e] + (int64_t)h * 32;
            const __m256 we = _mm256_set1_ps(w[h * stride + e]);
            for (int c = 0; c < 4; ++c) acc[c] = _mm256_fmadd_ps(we, _mm256_loadu_ps(ve + 8 * c), acc[c]);
        }
        for (int c = 0; c < 4; ++c) _mm256_storeu_ps(mixed + h * 32 + 8 * c, acc[c]);
    }
}
#endif

/* One query's softmax attention over n entries (keys kp[e], values vp[e]) for heads h0 <= h < h1: the weights into
 * w[h * stride + e], the mix into mixed [H]. Scores entry by entry for every head: the dot products over a
 * head's D lanes run in 8 partial sums the compiler vectorises (a single running sum is a serial chain it may
 * not reorder). */
static void attend(const float *qv, const float *const *kp, const float *const *vp, int n, int h0, int h1, int D,
                   float scale, float *w, int stride, float *mixed) {
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
    if (D == 32) {
        attend32(qv, kp, vp, n, h0, h1, scale, w, stride, mixed);
        return;
    }
#endif
    for (int e = 0; e < n; ++e) {
        const float *kk = kp[e];
        for (int h = h0; h < h1; ++h) {
            const float *a = qv + h * D, *b = kk + h * D;
            float part[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f}, dot = 0.f;
            int d = 0;
            for (; d + 8 <= D; d += 8)
                for (int j = 0; j < 8; ++j) part[j] += a[d + j] * b[d + j];
            for (; d < D; ++d) dot += a[d] * b[d];
            dot += ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
            w[h * stride + e] = dot * scale;
        }
    }
    softmax_heads(w, n, h0, h1, stride);
    for (int h = h0; h < h1; ++h) {
        const float *wh = w + h * stride;
        float *mh = mixed + h * D;
        for (int d = 0; d < D; ++d) mh[d] = 0.f;
        for (int e = 0; e < n; ++e) {
            const float we = wh[e], *ve = vp[e] + h * D;
            for (int d = 0; d < D; ++d) mh[d] += we * ve[d];
        }
    }
}

/* x[j] = layer_norm(x[j] + delta[j]) for n rows of H: a residual and its post-norm. */
static void add_norm(float *x, const float *delta, int n, int H, const float *w, const float *b, float eps) {
    for (int j = 0; j < n; ++j) {
        float *xj = x + (int64_t)j * H;
        for (int k = 0; k < H; ++k) xj[k] += delta[(int64_t)j * H + k];
        layer_norm(xj, w, b, H, eps);
    }
}

/* Attention split between this thread and pool.h's helper, by heads (int8.h's gemv_split splits products by rows). */
/* r queries (q [r, 3H], their Q first) over the same n entries: weights into w [r, heads, stride], mixes [r, H]. */
typedef struct {
    const float *q; const float *const *kp; const float *const *vp; int r, n, heads, D, H, stride; float scale;
    float *w, *mixed;
} attend_job;

static void attend_part(void *ctx, int part, int parts) {
    const attend_job *a = ctx;
    const int h0 = part * a->heads / parts, h1 = (part + 1) * a->heads / parts;
    for (int j = 0; j < a->r; ++j)
        attend(a->q + (int64_t)j * 3 * a->H, a->kp, a->vp, a->n, h0, h1, a->D, a->scale,
               a->w + (int64_t)j * a->heads * a->stride, a->stride, a->mixed + (int64_t)j * a->H);
}

static void attend_split(int two, const float *q, const float *const *kp, const float *const *vp, int r, int n,
                         int heads, int D, float scale, float *w, int stride, float *mixed) {
    attend_job a = {q, kp, vp, r, n, heads, D, heads * D, stride, scale, w, mixed};
    run_split(two, attend_part, &a);
}

/* The rest of a layer after its attention, in place on n tokens' x [n, H] (their attention mixes `mixed` [n, H]):
 * int8 output projection, residual, attention_norm, int8 feed-forward (GELU), residual, output_norm, each
 * projection one gemv_batch over the n tokens. `q` holds n * max(H, I) bytes, tmp [n, H] and up [n, I] are scratch. */
static void finish_layer(const tf2rnn_tova_params *p, int two, int l, int n, float *x, const float *mixed,
                         uint8_t *q, float *tmp, float *up) {
    const int H = p->H, I = p->I;
    const int64_t HH = (int64_t)H * H, IH = (int64_t)I * H;
    float sc[n];
    for (int j = 0; j < n; ++j) sc[j] = quantize_u8(mixed + (int64_t)j * H, H, q + (int64_t)j * H);
    gemv_split(two, TF2RNN_WEIGHTS(p, out, l, HH), p->s_out + l * H, p->r_out + l * H,
               p->b_out + l * H, q, sc, n, H, H, tmp);
    add_norm(x, tmp, n, H, p->norm1_w + l * H, p->norm1_b + l * H, p->eps);
    for (int j = 0; j < n; ++j) sc[j] = quantize_u8(x + (int64_t)j * H, H, q + (int64_t)j * H);
    gemv_split(two, TF2RNN_WEIGHTS(p, up, l, IH), p->s_up + (int64_t)l * I, p->r_up + (int64_t)l * I,
               p->b_up + (int64_t)l * I, q, sc, n, I, H, up);
    for (int j = 0; j < n; ++j) gelu(up + (int64_t)j * I, I);  /* per token: its bits do not depend on n */
    for (int j = 0; j < n; ++j) sc[j] = quantize_u8(up + (int64_t)j * I, I, q + (int64_t)j * I);
    gemv_split(two, TF2RNN_WEIGHTS(p, down, l, IH), p->s_down + l * H, p->r_down + l * H,
               p->b_down + l * H, q, sc, n, H, I, tmp);
    add_norm(x, tmp, n, H, p->norm2_w + l * H, p->norm2_b + l * H, p->eps);
}

/* Token + position embedding of n tokens into x [n, H] (position pos[j], clamped to the table). */
static void tova_embed(const tf2rnn_tova_params *p, int n, const int64_t *tokens, const long *pos, float *x) {
    const int H = p->H;
    for (int j = 0; j < n; ++j) {
        const long at = pos[j] > p->P - 1 ? p->P - 1 : pos[j];
        const float *tok = p->table + tokens[j] * H, *posv = p->position + at * H;
        float *xj = x + (int64_t)j * H;
        for (int k = 0; k < H; ++k) xj[k] = tok[k] + posv[k] + p->emb_bias[k];
        layer_norm(xj, p->emb_norm_w, p->emb_norm_b, H, p->eps);
    }
}

/* Layers l0 <= l < l1 of one causal step of n streams, in place on their inputs x [n, H] (each stream's state
 * in[j], out[j]: tf2rnn_tova_step's arguments, by absolute layer; rows[j], slots[j], replaced[j] by layer - l0). */
static void tova_layers(const tf2rnn_tova_params *p, int two, int n, int l0, int l1, float *x,
                        float *const *const *in, float *const *const *out, float *const *rows,
                        int32_t *const *slots, float *const *replaced) {
    const int H = p->H, S = p->S, I = p->I, heads = p->heads, D = H / heads;
    const float scale = 1.f / sqrtf((float)D);
    float qkv[n * 3 * H], mixed[n * H], tmp[n * H], up[n * I], w[heads * (S + 2)], sx[n];
    const float *kp[S + 2], *vp[S + 2];
    int slot_of[S + 2];
    uint8_t q[n * (I > H ? I : H)];

    for (int l = l0; l < l1; ++l) {
        const int64_t HH = (int64_t)H * H;
        for (int j = 0; j < n; ++j) sx[j] = quantize_u8(x + (int64_t)j * H, H, q + (int64_t)j * H);
        gemv_split(two, TF2RNN_WEIGHTS(p, qkv, l, 3 * HH), p->s_qkv + 3 * l * H,
                   p->r_qkv + 3 * l * H, p->b_qkv + 3 * l * H, q, sx, n, 3 * H, H, qkv);
        for (int j = 0; j < n; ++j) {
            const float *keys = in[j][3 * l], *values = in[j][3 * l + 1], *fill = in[j][3 * l + 2];
            float *keys_out = out[j][3 * l], *values_out = out[j][3 * l + 1], *fill_out = out[j][3 * l + 2];
            const float *qv = qkv + (int64_t)j * 3 * H, *kv = qv + H, *vv = qv + 2 * H;
            const float *sk = p->sink_key + (int64_t)l * H, *sv = p->sink_value + (int64_t)l * H;
            /* What the query attends to: the sink, the filled slots, itself (unfilled slots weigh 0: skipped). */
            int e = 0, used = 0;
            kp[e] = sk; vp[e] = sv; slot_of[e++] = -1;
            for (int s = 0; s < S; ++s) {
                if (!(fill[s] > 0.f)) continue;
                kp[e] = keys + (int64_t)s * H; vp[e] = values + (int64_t)s * H; slot_of[e++] = s;
                ++used;
            }
            kp[e] = kv; vp[e] = vv; slot_of[e++] = S;
            attend_split(two, qv, kp, vp, 1, e, heads, D, scale, w, S + 2, mixed + (int64_t)j * H);
            /* TOVA: a full cache drops the slot the current query weighs least (averaged over heads). */
            int target = used < S ? used : S - 1;
            if (used >= S) {
                float best = INFINITY;
                for (int k = 1; k < e - 1; ++k) {
                    float sw = 0.f;
                    for (int h = 0; h < heads; ++h) sw += w[h * (S + 2) + k];
                    sw /= (float)heads;
                    if (sw < best) { best = sw; target = slot_of[k]; }
                }
            }
            if (keys_out != NULL && keys_out != keys) {
                /* A new state: filled rows copied, the rest zero (as the state they come from holds them), so a
                 * short prefix copies its few rows rather than the whole cache. */
                for (int s = 0; s < S; ++s) {
                    float *ko = keys_out + (int64_t)s * H, *vo = values_out + (int64_t)s * H;
                    if (fill[s] > 0.f) {
                        memcpy(ko, keys + (int64_t)s * H, sizeof(float) * H);
                        memcpy(vo, values + (int64_t)s * H, sizeof(float) * H);
                    } else {
                        memset(ko, 0, sizeof(float) * H);
                        memset(vo, 0, sizeof(float) * H);
                    }
                }
            }
            if (fill_out != fill) memcpy(fill_out, fill, sizeof(float) * (size_t)S);
            if (keys_out != NULL) {
                if (replaced[j] != NULL) {
                    memcpy(replaced[j] + 2 * (int64_t)(l - l0) * H, keys_out + (int64_t)target * H, sizeof(float) * H);
                    memcpy(replaced[j] + (2 * (int64_t)(l - l0) + 1) * H, values_out + (int64_t)target * H,
                           sizeof(float) * H);
                }
                memcpy(keys_out + (int64_t)target * H, kv, sizeof(float) * H);
                memcpy(values_out + (int64_t)target * H, vv, sizeof(float) * H);
            }
            if (rows[j] != NULL) {
                memcpy(rows[j] + 2 * (int64_t)(l - l0) * H, kv, sizeof(float) * H);
                memcpy(rows[j] + (2 * (int64_t)(l - l0) + 1) * H, vv, sizeof(float) * H);
                slots[j][l - l0] = target;
            }
            fill_out[target] = 1.f;
        }
        finish_layer(p, two, l, n, x, mixed, q, tmp, up);
    }
}

/* The running (weighted) mean after n streams' top-layer outputs x [n, H], then the readout: each stream's
 * embedding. tok[j]: the token vector added to the running token sum (NULL: none, the sum is complete). */
static void tova_pool(const tf2rnn_tova_params *p, int n, const float *x, const float *const *tok,
                      float *const *const *in, float *const *const *out, const float *const *tsum,
                      const int64_t *const *seen, float *const *tsum_out, float *const *emb) {
    const int H = p->H, I = p->I, O = p->O;
    const int base = pool_base(p), tail = base + (p->weighted ? 1 : 0);  /* index of count; pooled follows */
    uint8_t q[I > H ? I : H];
    for (int j = 0; j < n; ++j) {
        /* Running (weighted) mean of the top layer with the sink's output (the zero state has seen nothing; the
         * sink weighs 1). */
        const float count = in[j][tail][0], *pooled = in[j][tail + 1], *xj = x + (int64_t)j * H;
        float *pooled_out = out[j][tail + 1];
        const float total = count > 0.f ? (p->weighted ? in[j][base][0] : count + 1.f) : 1.f;
        const float weight = p->weighted ? powf(count + 2.f, p->pool_exp) : 1.f;
        for (int k = 0; k < H; ++k) {
            float sum = count > 0.f ? pooled[k] * total : p->sink_output[k];
            pooled_out[k] = (sum + weight * xj[k]) / (total + weight);
        }
        if (p->weighted) out[j][base][0] = total + weight;
        out[j][tail][0] = count + 1.f;
        readout_normalize(p->w_o, p->w4_o, p->g_o, p->s_o, p->r_o, p->b_o, pooled_out, H, O, p->residual,
                          tok == NULL ? NULL : tok[j], tsum[j], seen[j], tsum_out[j], q, emb[j]);
    }
}

/* The causal step of n <= TF2RNN_CHUNK streams at once, each over its own state (in[j], out[j], ...: the arguments of
 * tf2rnn_tova_step per stream). The products run once over all n tokens, so each weight block is read once per
 * chunk rather than once per stream; each stream's attention, eviction and writes are its own. Per stream the
 * arithmetic is the one-stream step's: the same bits whatever n. */
#define TF2RNN_CHUNK 8
static void tova_step_chunk(const tf2rnn_tova_params *p, int two, int n, const int64_t *tokens,
                            float *const *const *in, float *const *const *out, float *const *rows,
                            int32_t *const *slots, float *const *replaced, const float *const *tsum,
                            const int64_t *const *seen, float *const *tsum_out, float *const *emb) {
    const int H = p->H, tail = pool_base(p) + (p->weighted ? 1 : 0);
    float x[n * H];
    long pos[n];
    const float *tok[n];
    for (int j = 0; j < n; ++j) {
        pos[j] = (long)in[j][tail][0] + 1;
        tok[j] = p->table + tokens[j] * H;
    }
    tova_embed(p, n, tokens, pos, x);
    tova_layers(p, two, n, 0, p->L, x, in, out, rows, slots, replaced);
    tova_pool(p, n, x, tok, in, out, tsum, seen, tsum_out, emb);
}

/* One causal keystroke. tsum/seen: the model's running token sum and tokens seen including this one (used with
 * `residual`). */
void tf2rnn_tova_step(const tf2rnn_tova_params *p, int64_t token, float *const *in, float *const *out,
                      float *rows, int32_t *slots, float *replaced, const float *tsum, const int64_t *seen,
                      float *tsum_out, float *emb) {
    const int two = pool_claim();
    tova_step_chunk(p, two, 1, &token, &in, &out, &rows, &slots, &replaced, &tsum, &seen, &tsum_out, &emb);
    pool_release(two);
}

/* One causal keystroke of each of n streams (a server's round): stream j's arguments are tf2rnn_tova_step's,
 * each an entry of these arrays. The same result per stream as n calls of tf2rnn_tova_step, bit for bit. */
void tf2rnn_tova_step_many(const tf2rnn_tova_params *p, int32_t n, const int64_t *tokens, float *const *const *in,
                           float *const *const *out, float *const *rows, int32_t *const *slots,
                           float *const *replaced, const float *const *tsum, const int64_t *const *seen,
                           float *const *tsum_out, float *const *emb) {
    const int two = pool_claim();
    for (int j = 0; j < n; j += TF2RNN_CHUNK) {
        const int m = n - j < TF2RNN_CHUNK ? n - j : TF2RNN_CHUNK;
        tova_step_chunk(p, two, m, tokens + j, in + j, out + j, rows + j, slots + j, replaced + j, tsum + j,
                        seen + j, tsum_out + j, emb + j);
    }
    pool_release(two);
}

/* Copies in[i] to out[i] ([n] floats) where they differ: the entries a step leaves as they were, in a new state. */
static void keep_entry(float *const *in, float *const *out, int i, int n) {
    if (out[i] != in[i]) memcpy(out[i], in[i], sizeof(float) * (size_t)n);
}

/* `tail_layers` (TOVAAttentionCell.step_lower, then held_pooled): one token of the current word through layers
 * [0, K) only, at position count + 1 + held_n (count: the tokens the upper layers have read); the word's earlier
 * outputs (held_in [held_n, H], NULL with none) and this token's layer-K output go to held_out [held_n + 1, H] (which
 * may alias held_in), then the embedding with the word's tokens through the adapter in place of their top-layer
 * outputs: the adapter (int8 per row: `aw`, `as`, `ar`, `ab` as int8.h's gemv reads them) maps the tokens' weighted
 * mean, times their total weight (it is affine). As in tf2rnn_tova_step, `out`'s lower keys and values may be new or
 * `in`'s (in place, with `rows` [K, 2, H], `slots` [K] and `replaced` [K, 2, H] written where not NULL); the upper
 * layers' entries and the pooling's are copied to `out` where its pointers differ from `in`'s. */
void tf2rnn_tova_step_deferred(const tf2rnn_tova_params *p, int64_t token, int32_t K, int32_t held_n,
                               const float *held_in, float *held_out, const int8_t *aw, const float *as,
                               const int32_t *ar, const float *ab, float *const *in, float *const *out, float *rows,
                               int32_t *slots, float *replaced, const float *tsum, const int64_t *seen, float *tsum_out,
                               float *emb) {
    const int H = p->H, I = p->I, S = p->S, L = p->L, base = pool_base(p), tail = base + (p->weighted ? 1 : 0);
    float x[H], u[H], y[H];
    uint8_t q[I > H ? I : H];
    const float count = in[tail][0], *pooled = in[tail + 1];
    const long pos = (long)count + 1 + held_n;
    const int two = pool_claim();
    tova_embed(p, 1, &token, &pos, x);
    tova_layers(p, two, 1, 0, K, x, &in, &out, &rows, &slots, &replaced);
    pool_release(two);
    for (int l = K; l < L; ++l) keep_entry(in, out, 3 * l + 2, S);  /* the upper fills; their caches are not read */
    if (p->upper_open > 1) {  /* the upper layers' open block, its count and output sum */
        keep_entry(in, out, 3 * L, (p->upper_open - 1) * H);
        keep_entry(in, out, 3 * L + 1, 1);
        keep_entry(in, out, 3 * L + 2, H);
    }
    if (p->weighted) keep_entry(in, out, base, 1);
    keep_entry(in, out, tail, 1);
    keep_entry(in, out, tail + 1, H);
    if (held_n && held_out != held_in) memcpy(held_out, held_in, sizeof(float) * (size_t)held_n * H);
    memcpy(held_out + (int64_t)held_n * H, x, sizeof(float) * H);
    /* The word's tokens' mean, step n weighing (n + 1) ** pool_exp as in the pooled mean (tova_pool). */
    float wsum = 0.f;
    for (int k = 0; k < H; ++k) u[k] = 0.f;
    for (int j = 0; j <= held_n; ++j) {
        const float wj = p->weighted ? powf(count + 2.f + (float)j, p->pool_exp) : 1.f;
        const float *hj = held_out + (int64_t)j * H;
        for (int k = 0; k < H; ++k) u[k] += wj * hj[k];
        wsum += wj;
    }
    for (int k = 0; k < H; ++k) u[k] /= wsum;
    const float su = quantize_u8(u, H, q);
    gemv(aw, NULL, NULL, as, ar, ab, q, su, H, H, y);
    const float total = count > 0.f ? (p->weighted ? in[base][0] : count + 1.f) : 1.f;
    for (int k = 0; k < H; ++k) {
        const float sum = count > 0.f ? pooled[k] * total : p->sink_output[k];
        u[k] = (sum + wsum * y[k]) / (total + wsum);
    }
    readout_normalize(p->w_o, p->w4_o, p->g_o, p->s_o, p->r_o, p->b_o, u, H, p->O, p->residual, p->table + token * H,
                      tsum, seen, tsum_out, q, emb);
}

/* `tail_layers` (TOVAAttentionCell.step_upper): a finished word's n held layer-K outputs (held [n, H]) through layers
 * [K, L) and into the pooled mean, token by token, then the embedding (the token sum `tsum` already holds the word).
 * `out`'s upper layers' and pooling's entries are written from `in`'s (keys and values new, or `in`'s in place with
 * token j's rows, slots and replaced rows at rows + j (L - K) 2 H, slots + j (L - K), replaced + j (L - K) 2 H where
 * not NULL); the lower layers' fills are copied where `out`'s pointers differ, their caches neither read nor written. */
void tf2rnn_tova_commit(const tf2rnn_tova_params *p, int32_t K, int32_t n, const float *held, float *const *in,
                        float *const *out, float *rows, int32_t *slots, float *replaced, const float *tsum,
                        const int64_t *seen, float *emb) {
    const int H = p->H, U = p->L - K;
    float x[H];
    float *no_tsum_out = NULL;
    for (int l = 0; l < K; ++l) keep_entry(in, out, 3 * l + 2, p->S);
    const int two = pool_claim();
    for (int j = 0; j < n; ++j) {
        float *const *from = j ? out : in;  /* then in place on the new state */
        float *rj = rows ? rows + (int64_t)j * U * 2 * H : NULL;
        float *pj = replaced ? replaced + (int64_t)j * U * 2 * H : NULL;
        int32_t *sj = slots ? slots + (int64_t)j * U : NULL;
        memcpy(x, held + (int64_t)j * H, sizeof(float) * H);
        tova_layers(p, two, 1, K, p->L, x, &from, &out, &rj, &sj, &pj);
        tova_pool(p, 1, x, NULL, &from, &out, &tsum, &seen, &no_tsum_out, &emb);
    }
    pool_release(two);
}

/* Layer l of an open block (`TOVAAttentionCell._block_layers`), in place on its r tokens' inputs x [r, H]: each query
 * attends to [sink, filled slots, the r block tokens] (both ways among them). With `commit` (r is the block's W) the
 * block enters the cache, each token where `_block_layers` puts it: in order while slots are free, else the slot the
 * block's queries weigh least, heads and queries averaged. As in tf2rnn_tova_step, `keys_out` may be a new cache, NULL
 * (only `rows` [r, 2, H] and `slots` [r] are written) or `keys` (in place, each overwritten row first saved to
 * `replaced` [r, 2, H]); rows, slots and replaced, where not NULL, are written only by a commit. */
static void block_layer(const tf2rnn_tova_params *p, int two, int l, int r, int commit, float *x, const float *keys,
                        const float *values, const float *fill, float *keys_out, float *values_out, float *fill_out,
                        float *rows, int32_t *slots, float *replaced) {
    const int H = p->H, S = p->S, I = p->I, heads = p->heads, D = H / heads, stride = S + r + 1;
    const float scale = 1.f / sqrtf((float)D);
    const int64_t HH = (int64_t)H * H;
    float qkv[r * 3 * H], mixed[r * H], tmp[r * H], up[r * I], w[r * heads * stride], slot_weight[S], sc[r];
    const float *kp[S + r + 1], *vp[S + r + 1];
    int slot_of[S + r + 1];
    uint8_t q[r * (I > H ? I : H)];

    for (int j = 0; j < r; ++j) sc[j] = quantize_u8(x + (int64_t)j * H, H, q + (int64_t)j * H);
    gemv_split(two, TF2RNN_WEIGHTS(p, qkv, l, 3 * HH), p->s_qkv + 3 * l * H,
               p->r_qkv + 3 * l * H, p->b_qkv + 3 * l * H, q, sc, r, 3 * H, H, qkv);
    int n = 0;
    kp[n] = p->sink_key + (int64_t)l * H; vp[n] = p->sink_value + (int64_t)l * H; slot_of[n++] = -1;
    for (int s = 0; s < S; ++s) {
        if (!(fill[s] > 0.f)) continue;
        kp[n] = keys + (int64_t)s * H; vp[n] = values + (int64_t)s * H; slot_of[n++] = s;
    }
    const int cached = n;
    for (int j = 0; j < r; ++j) {
        kp[n] = qkv + (int64_t)j * 3 * H + H; vp[n] = qkv + (int64_t)j * 3 * H + 2 * H; slot_of[n++] = S + j;
    }
    attend_split(two, qkv, kp, vp, r, n, heads, D, scale, w, stride, mixed);
    finish_layer(p, two, l, r, x, mixed, q, tmp, up);
    if (keys_out != NULL && keys_out != keys) {
        memcpy(keys_out, keys, sizeof(float) * (size_t)S * H);
        memcpy(values_out, values, sizeof(float) * (size_t)S * H);
    }
    if (fill_out != fill) memcpy(fill_out, fill, sizeof(float) * (size_t)S);
    if (!commit) return;
    for (int s = 0; s < S; ++s) slot_weight[s] = INFINITY;
    for (int e = 1; e < cached; ++e) {
        float sw = 0.f;
        for (int j = 0; j < r; ++j)
            for (int h = 0; h < heads; ++h) sw += w[((int64_t)j * heads + h) * stride + e];
        slot_weight[slot_of[e]] = sw / (float)(heads * r);
    }
    for (int j = 0; j < r; ++j) {
        int used = 0, target = 0;
        for (int s = 0; s < S; ++s) used += fill_out[s] > 0.f;
        if (used < S) {
            target = used;
        } else {
            float best = INFINITY;
            for (int s = 0; s < S; ++s)
                if (slot_weight[s] < best) { best = slot_weight[s]; target = s; }
        }
        const float *kj = qkv + (int64_t)j * 3 * H + H, *vj = kj + H;
        const int64_t at = (int64_t)j * 2 * H;
        if (keys_out != NULL) {
            if (replaced != NULL) {
                memcpy(replaced + at, keys_out + (int64_t)target * H, sizeof(float) * H);
                memcpy(replaced + at + H, values_out + (int64_t)target * H, sizeof(float) * H);
            }
            memcpy(keys_out + (int64_t)target * H, kj, sizeof(float) * H);
            memcpy(values_out + (int64_t)target * H, vj, sizeof(float) * H);
        }
        if (rows != NULL) {
            memcpy(rows + at, kj, sizeof(float) * H);
            memcpy(rows + at + H, vj, sizeof(float) * H);
            slots[j] = target;
        }
        fill_out[target] = 1.f;
        slot_weight[target] = INFINITY;
    }
}

/* One step of a student with open tokens (`TOVAAttentionCell._step_open`): the r = open + 1 newest tokens (the
 * held input vectors, then this token's) run through every layer (block_layer); when r == W the block enters the
 * cache. State: the layers' 3L arrays, held [W - 1, H], open count [1], then as above ([total,] count, pooled). As
 * with tf2rnn_tova_step, `out`'s keys and values may be a new cache, NULL (only `rows` [L, W, 2, H] and `slots`
 * [L, W] are written) or `in`'s (in place, the overwritten rows first saved to `replaced` [L, W, 2, H]); rows, slots
 * and replaced are written only by a step that commits its block.
 */
void tf2rnn_tova_open_step(const tf2rnn_tova_params *p, int64_t token, int32_t W, float *const *in,
                           float *const *out, float *rows, int32_t *slots, float *replaced, const float *tsum,
                           const int64_t *seen, float *tsum_out, float *emb) {
    const int H = p->H, I = p->I, O = p->O, L = p->L;
    const int held_at = 3 * L, tail = 3 * L + 2 + (p->weighted ? 1 : 0);  /* index of count; pooled follows */
    const float count = in[tail][0], *held = in[held_at];
    const int r0 = (int)in[held_at + 1][0], r = r0 + 1, commit = r == W;
    float x[W * H];
    uint8_t q[I > H ? I : H];

    const int two = pool_claim();
    const float *tok = p->table + token * H;
    for (int j = 0; j < r; ++j) {
        const float *v = j < r0 ? held + (int64_t)j * H : tok;
        long pos = (long)count + 1 + j;
        if (pos > p->P - 1) pos = p->P - 1;
        const float *posv = p->position + pos * H;
        float *xj = x + (int64_t)j * H;
        for (int k = 0; k < H; ++k) xj[k] = v[k] + posv[k] + p->emb_bias[k];
        layer_norm(xj, p->emb_norm_w, p->emb_norm_b, H, p->eps);
    }
    for (int l = 0; l < L; ++l) {
        const int64_t at = (int64_t)l * W;
        block_layer(p, two, l, r, commit, x, in[3 * l], in[3 * l + 1], in[3 * l + 2], out[3 * l], out[3 * l + 1],
                    out[3 * l + 2], rows ? rows + at * 2 * H : NULL, slots ? slots + at : NULL,
                    replaced ? replaced + at * 2 * H : NULL);
    }

    /* The committed tokens' (weighted) mean with the open tokens' current outputs. */
    const float *pooled = in[tail + 1];
    const float stored = p->weighted ? in[3 * L + 2][0] : 0.f;
    const float total = count > 0.f ? (p->weighted ? stored : count + 1.f) : 1.f;
    float mean[H], added = 0.f;
    for (int k = 0; k < H; ++k) mean[k] = count > 0.f ? pooled[k] * total : p->sink_output[k];
    for (int j = 0; j < r; ++j) {
        const float weight = p->weighted ? powf(count + 2.f + (float)j, p->pool_exp) : 1.f;
        const float *xj = x + (int64_t)j * H;
        for (int k = 0; k < H; ++k) mean[k] += weight * xj[k];
        added += weight;
    }
    for (int k = 0; k < H; ++k) mean[k] /= total + added;
    float *held_out = out[held_at];
    memset(held_out, 0, sizeof(float) * (size_t)(W - 1) * H);
    if (!commit) {
        if (r0 > 0) memcpy(held_out, held, sizeof(float) * (size_t)r0 * H);
        memcpy(held_out + (int64_t)r0 * H, tok, sizeof(float) * H);
    }
    out[held_at + 1][0] = commit ? 0.f : (float)r;
    if (p->weighted) out[3 * L + 2][0] = commit ? total + added : stored;
    out[tail][0] = commit ? count + (float)W : count;
    memcpy(out[tail + 1], commit ? mean : pooled, sizeof(float) * H);
    pool_release(two);

    readout_normalize(p->w_o, p->w4_o, p->g_o, p->s_o, p->r_o, p->b_o, mean, H, O, p->residual, tok, tsum, seen,
                      tsum_out, q, emb);
}

/* The pooled mean's weights of the W positions of a block after `committed` tokens (step n weighs (n + 1) ** pool_exp,
 * the block's first step being committed + 1). */
static void block_weights(const tf2rnn_tova_params *p, float committed, int W, float *weight) {
    for (int i = 0; i < W; ++i) weight[i] = p->weighted ? powf(committed + 2.f + (float)i, p->pool_exp) : 1.f;
}

/* `tail_layers` with `tail_open_tokens` W (TOVAAttentionCell._step_upper_open): a finished word's n held layer-K
 * outputs (held [n, H]) join the upper layers' open block; each block of W that fills runs through layers [K, L) and
 * enters their caches (block_layer), and the block left open runs through them once more for the output: the
 * (weighted) mean of the committed tokens' top-layer outputs and the open block's current ones. Then the embedding
 * (the token sum `tsum` already holds the word). State after the layers': the open block's layer-K outputs [W - 1, H],
 * their count [1] and weighted top-layer output sum [H] (which the pooled mean holds until the block commits), then
 * [total,] count (the tokens the upper layers have read, the open ones included), pooled. `out`'s upper layers' and
 * later entries are new or `in`'s (in place); the lower layers' fills are copied where `out`'s pointers differ, their
 * caches neither read nor written. The b-th block committed writes, where not NULL, its rows to rows + b (L - K) W 2 H
 * ([L - K, W, 2, H]), their slots to slots + b (L - K) W and, in place, the rows they replace to replaced + b (L - K)
 * W 2 H, as tf2rnn_tova_open_step's block: tf2rnn_tova_restore undoes each block, the last first. */
void tf2rnn_tova_commit_open(const tf2rnn_tova_params *p, int32_t K, int32_t n, const float *held, float *const *in,
                             float *const *out, float *rows, int32_t *slots, float *replaced, const float *tsum,
                             const int64_t *seen, float *emb) {
    const int H = p->H, S = p->S, I = p->I, L = p->L, W = p->upper_open, at = 3 * L, base = pool_base(p);
    const int tail = base + (p->weighted ? 1 : 0);
    const float count = in[tail][0], *pooled = in[tail + 1], *open_in = in[at + 2];
    int before = (int)in[at + 1][0];
    float block[W * H], x[W * H], weight[W], done_sum[H], open_sum[H];
    uint8_t q[I > H ? I : H];

    for (int l = 0; l < K; ++l) keep_entry(in, out, 3 * l + 2, S);
    for (int l = K; l < L; ++l) {  /* then every block runs in place on `out` */
        keep_entry(in, out, 3 * l, S * H);
        keep_entry(in, out, 3 * l + 1, S * H);
        keep_entry(in, out, 3 * l + 2, S);
    }
    memcpy(block, in[at], sizeof(float) * (size_t)before * H);
    float committed = count - (float)before;  /* tokens in the upper layers' caches, a multiple of W */
    block_weights(p, committed, W, weight);
    const float total = count > 0.f ? (p->weighted ? in[base][0] : count + 1.f) : 1.f;
    float done_total = total;
    for (int i = 0; i < before; ++i) done_total -= weight[i];
    for (int k = 0; k < H; ++k) {
        done_sum[k] = (count > 0.f ? pooled[k] * total : p->sink_output[k]) - open_in[k];
        open_sum[k] = 0.f;
    }
    const int two = pool_claim();
    int64_t blocks = 0;
    for (int j = 0; j < n; ++j) {
        memcpy(block + (int64_t)before * H, held + (int64_t)j * H, sizeof(float) * H);
        const int r = before + 1, commit = r == W;
        if (commit || j == n - 1) {  /* else nothing reads the upper layers yet */
            memcpy(x, block, sizeof(float) * (size_t)r * H);
            for (int l = K; l < L; ++l) {
                const int64_t at = (blocks * (L - K) + l - K) * W;
                block_layer(p, two, l, r, commit, x, out[3 * l], out[3 * l + 1], out[3 * l + 2], out[3 * l],
                            out[3 * l + 1], out[3 * l + 2], rows ? rows + at * 2 * H : NULL, slots ? slots + at : NULL,
                            replaced ? replaced + at * 2 * H : NULL);
            }
            blocks += commit;
            for (int k = 0; k < H; ++k) {
                float sum = 0.f;
                for (int i = 0; i < r; ++i) sum += weight[i] * x[(int64_t)i * H + k];
                if (commit) {
                    done_sum[k] += sum;
                    open_sum[k] = 0.f;
                } else {
                    open_sum[k] = sum;
                }
            }
            if (commit) {
                for (int i = 0; i < W; ++i) done_total += weight[i];
                committed += (float)W;
                block_weights(p, committed, W, weight);
            }
        }
        before = commit ? 0 : r;
    }
    pool_release(two);
    float open_total = 0.f, mean[H];
    for (int i = 0; i < before; ++i) open_total += weight[i];
    for (int k = 0; k < H; ++k) mean[k] = (done_sum[k] + open_sum[k]) / (done_total + open_total);
    memset(out[at], 0, sizeof(float) * (size_t)(W - 1) * H);
    memcpy(out[at], block, sizeof(float) * (size_t)before * H);
    out[at + 1][0] = (float)before;
    memcpy(out[at + 2], open_sum, sizeof(float) * H);
    if (p->weighted) out[base][0] = done_total + open_total;
    out[tail][0] = committed + (float)before;
    memcpy(out[tail + 1], mean, sizeof(float) * H);
    readout_normalize(p->w_o, p->w4_o, p->g_o, p->s_o, p->r_o, p->b_o, mean, H, p->O, p->residual, NULL, tsum, seen,
                      NULL, q, emb);
}

/* Undo an in-place step on a live cache `kv` ([L, 2, S, H]: each layer's keys, then values): put back the rows it
 * replaced (`replaced` [L, W, 2, H]) in the slots it wrote (`slots` [L, W]). A delete's pop, one call a step. */
void tf2rnn_tova_restore(float *kv, int32_t L, int32_t W, int32_t S, int32_t H, const int32_t *slots,
                         const float *replaced) {
    for (int l = 0; l < L; ++l)
        for (int j = 0; j < W; ++j) {
            const int64_t slot = slots[l * W + j];
            const float *row = replaced + ((int64_t)l * W + j) * 2 * H;
            memcpy(kv + ((int64_t)(2 * l) * S + slot) * H, row, sizeof(float) * H);
            memcpy(kv + ((int64_t)(2 * l + 1) * S + slot) * H, row + H, sizeof(float) * H);
        }
}

/* 1 where int4 products run vectorised (AVX512-VNNI or AVX2): the Python side packs a student's int4 weights only then. */
int tf2rnn_int4_products(void) { return int4_products_fast(); }

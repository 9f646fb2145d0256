/* One keystroke of a one-layer GRU student at batch 1, in one call: token vector -> int8 GRU step ->
 * int8 readout (+ running token mean) -> L2 normalisation.
 *
 * Weights are int8 with one fp32 scale per output row; activations are quantised per call to uint8 with
 * one scale (x + 128), so each dot product is a u8 x s8 sum: AVX512-VNNI's vpdpbusd where the compiler
 * targets it (built with -march=native), a loop the compiler vectorises otherwise. The 128 offset is
 * removed with the precomputed row sums. Buffers are caller-owned; nothing here allocates or keeps state.
 */
#include <math.h>
#include <stdint.h>
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
#include <immintrin.h>
#endif

typedef struct {
    int32_t E, H, O, residual;
    const float *table;                                                        /* [V, E] */
    const int8_t *w_ih; const float *s_ih; const int32_t *r_ih; const float *b_ih; /* [3H, E] */
    const int8_t *w_hh; const float *s_hh; const int32_t *r_hh; const float *b_hh; /* [3H, H] */
    const int8_t *w_o;  const float *s_o;  const int32_t *r_o;  const float *b_o;  /* [O, H] */
} tf2rnn_gru_params;

static float quantize_u8(const float *x, int n, uint8_t *out) {
    float m = 0.f;
    for (int j = 0; j < n; ++j) m = fmaxf(m, fabsf(x[j]));
    float scale = m > 0.f ? m / 127.f : 1.f, inv = 1.f / scale;
    for (int j = 0; j < n; ++j) out[j] = (uint8_t)((int)lrintf(x[j] * inv) + 128);
    return scale;
}

static int32_t dot_u8s8(const uint8_t *x, const int8_t *w, int n) {
    int j = 0;
    int32_t acc = 0;
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
    __m512i v = _mm512_setzero_si512();
    for (; j + 64 <= n; j += 64)
        v = _mm512_dpbusd_epi32(v, _mm512_loadu_si512((const void *)(x + j)), _mm512_loadu_si512((const void *)(w + j)));
    acc = _mm512_reduce_add_epi32(v);
#endif
    for (; j < n; ++j) acc += (int32_t)x[j] * (int32_t)w[j];
    return acc;
}

/* y[i] = s[i] * sx * (sum_j w[i,j] * (xu[j] - 128)) + b[i] */
static void gemv(const int8_t *w, const float *s, const int32_t *rowsum, const float *b,
                 const uint8_t *xu, float sx, int rows, int cols, float *y) {
    int i = 0;
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
    /* Four rows at a time: one row's chain of dependent dot products leaves the unit idle for its latency. */
    if (cols % 64 == 0) {
        for (; i + 4 <= rows; i += 4) {
            const int8_t *w0 = w + (int64_t)i * cols;
            __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
            for (int j = 0; j < cols; j += 64) {
                __m512i xv = _mm512_loadu_si512((const void *)(xu + j));
                a0 = _mm512_dpbusd_epi32(a0, xv, _mm512_loadu_si512((const void *)(w0 + j)));
                a1 = _mm512_dpbusd_epi32(a1, xv, _mm512_loadu_si512((const void *)(w0 + cols + j)));
                a2 = _mm512_dpbusd_epi32(a2, xv, _mm512_loadu_si512((const void *)(w0 + 2 * cols + j)));
                a3 = _mm512_dpbusd_epi32(a3, xv, _mm512_loadu_si512((const void *)(w0 + 3 * cols + j)));
            }
            int32_t acc[4] = {_mm512_reduce_add_epi32(a0), _mm512_reduce_add_epi32(a1),
                              _mm512_reduce_add_epi32(a2), _mm512_reduce_add_epi32(a3)};
            for (int k = 0; k < 4; ++k)
                y[i + k] = (float)(acc[k] - 128 * rowsum[i + k]) * s[i + k] * sx + b[i + k];
        }
    }
#endif
    for (; i < rows; ++i) {
        int32_t acc = dot_u8s8(xu, w + (int64_t)i * cols, cols) - 128 * rowsum[i];
        y[i] = (float)acc * s[i] * sx + b[i];
    }
}

static inline float sigmoid(float v) { return 1.f / (1.f + expf(-v)); }

/* seen: tokens including this one. h_out [H], tsum_out [O] (unused without the residual), emb [O]. */
void tf2rnn_gru_step(const tf2rnn_gru_params *p, int64_t token, const float *h, const float *tsum,
                     const int64_t *seen, float *h_out, float *tsum_out, float *emb) {
    const int E = p->E, H = p->H, O = p->O;
    const float *x = p->table + token * E;
    float gi[3 * H], gh[3 * H];
    uint8_t q[E > H ? E : H];

    float sx = quantize_u8(x, E, q);
    gemv(p->w_ih, p->s_ih, p->r_ih, p->b_ih, q, sx, 3 * H, E, gi);
    float sh = quantize_u8(h, H, q);
    gemv(p->w_hh, p->s_hh, p->r_hh, p->b_hh, q, sh, 3 * H, H, gh);
    for (int k = 0; k < H; ++k) { /* PyTorch's gate order: r, z, n */
        float r = sigmoid(gi[k] + gh[k]);
        float z = sigmoid(gi[H + k] + gh[H + k]);
        float n = tanhf(gi[2 * H + k] + r * gh[2 * H + k]);
        h_out[k] = (1.f - z) * n + z * h[k];
    }
    float so = quantize_u8(h_out, H, q);
    gemv(p->w_o, p->s_o, p->r_o, p->b_o, q, so, O, H, emb);
    if (p->residual) {
        float inv_seen = 1.f / (float)(*seen);
        for (int k = 0; k < O; ++k) {
            tsum_out[k] = tsum[k] + x[k];
            emb[k] += tsum_out[k] * inv_seen;
        }
    }
    float norm = 0.f;
    for (int k = 0; k < O; ++k) norm += emb[k] * emb[k];
    float inv = 1.f / fmaxf(sqrtf(norm), 1e-12f);
    for (int k = 0; k < O; ++k) emb[k] *= inv;
}

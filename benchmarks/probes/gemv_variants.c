// The int8 gemvs of one six-layer keystroke (per layer 1152x384, 384x384, 1536x384, 384x1536: 10.6 MB of
// weights, L3-resident in a loop) in AVX2 variants, each checked against int8.h's gemv and timed (best and
// median of 200 rounds). A probe that prints, for choosing the kernel's gemv.
// gcc -O3 -march=native benchmarks/probes/gemv_variants.c -o /tmp/gemv_variants -lm && /tmp/gemv_variants
// (-DLAYERS=2 for the default's two layers, 3.5 MB.)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../src/tf2rnn_hf/inference/kernels/int8.h"
#include "timing.h"

#ifndef LAYERS
#define LAYERS 6
#endif
#define H 384
#define I 1536

// y[i + k] for four rows from their 32-bit accumulators (minus the 128 offset's row sums where `r` is given).
static void store4(__m256i a0, __m256i a1, __m256i a2, __m256i a3, const float *s, const int32_t *r, const float *b,
                   float sx, float *y) {
    __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), _mm256_hadd_epi32(a2, a3));
    __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    int32_t acc[4];
    _mm_storeu_si128((__m128i *)acc, sum);
    for (int k = 0; k < 4; ++k) y[k] = (float)(acc[k] - (r ? 128 * r[k] : 0)) * s[k] * sx + b[k];
}

// A: the kernel's gemv before this probe: |w| and sign(w) * x per row, two vpsignb per 32 bytes and row.
static void gemv_sign_per_row(const int8_t *w, const float *s, const float *b, const uint8_t *xu, float sx,
                              int rows, int cols, float *y) {
    int8_t xs[cols];
    for (int j = 0; j < cols; ++j) xs[j] = (int8_t)(xu[j] ^ 0x80);
    const __m256i ones = _mm256_set1_epi16(1);
#define DOT(acc, wp) do { __m256i wv = _mm256_loadu_si256((const __m256i *)(wp)); \
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), \
              _mm256_sign_epi8(xv, wv)), ones)); } while (0)
    for (int i = 0; i + 4 <= rows; i += 4) {
        const int8_t *w0 = w + (int64_t)i * cols;
        __m256i a[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                        _mm256_setzero_si256()};
        for (int j = 0; j < cols; j += 32) {
            __m256i xv = _mm256_loadu_si256((const __m256i *)(xs + j));
            for (int k = 0; k < 4; ++k) DOT(a[k], w0 + k * cols + j);
        }
        store4(a[0], a[1], a[2], a[3], s + i, NULL, b + i, sx, y + i);
    }
#undef DOT
}

// B (int8.h's gemv since, four rows at a time) with eight rows at a time: |x| once per column block, shared by
// the rows, and sign(w, x) per row: one vpsignb per 32 bytes and row, the same integer sums as A.
static void gemv_abs_hoisted8(const int8_t *w, const float *s, const float *b, const uint8_t *xu, float sx,
                              int rows, int cols, float *y) {
    int8_t xs[cols];
    uint8_t ax[cols];
    for (int j = 0; j < cols; ++j) {
        xs[j] = (int8_t)(xu[j] ^ 0x80);
        ax[j] = (uint8_t)abs(xs[j]);
    }
    const __m256i ones = _mm256_set1_epi16(1);
    for (int i = 0; i + 8 <= rows; i += 8) {
        const int8_t *w0 = w + (int64_t)i * cols;
        __m256i a[8];
        for (int k = 0; k < 8; ++k) a[k] = _mm256_setzero_si256();
        for (int j = 0; j < cols; j += 32) {
            __m256i xv = _mm256_loadu_si256((const __m256i *)(xs + j));
            __m256i av = _mm256_loadu_si256((const __m256i *)(ax + j));
            for (int k = 0; k < 8; ++k)
                a[k] = _mm256_add_epi32(a[k], _mm256_madd_epi16(_mm256_maddubs_epi16(av, _mm256_sign_epi8(
                    _mm256_loadu_si256((const __m256i *)(w0 + k * cols + j)), xv)), ones));
        }
        store4(a[0], a[1], a[2], a[3], s + i, NULL, b + i, sx, y + i);
        store4(a[4], a[5], a[6], a[7], s + i + 4, NULL, b + i + 4, sx, y + i + 4);
    }
}

// C: weights in 7 bits ([-63, 63]) so vpmaddubsw takes the unsigned activations (xu in [1, 255]) directly:
// 2 * 255 * 63 < 32767 cannot saturate. The 128 offset comes off with the row sums. Different numerics.
static void gemv_w7(const int8_t *w, const float *s, const int32_t *rowsum, const float *b, const uint8_t *xu,
                    float sx, int rows, int cols, float *y) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int i = 0; i + 4 <= rows; i += 4) {
        const int8_t *w0 = w + (int64_t)i * cols;
        __m256i a[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                        _mm256_setzero_si256()};
        for (int j = 0; j < cols; j += 32) {
            __m256i xv = _mm256_loadu_si256((const __m256i *)(xu + j));
            for (int k = 0; k < 4; ++k)
                a[k] = _mm256_add_epi32(a[k], _mm256_madd_epi16(_mm256_maddubs_epi16(xv, _mm256_loadu_si256(
                    (const __m256i *)(w0 + k * cols + j))), ones));
        }
        store4(a[0], a[1], a[2], a[3], s + i, rowsum + i, b + i, sx, y + i);
    }
}

typedef struct { int rows, cols; int8_t *w, *w7; float *s, *b; int32_t *r, *r7; } mat;

int main(void) {
    const int shapes[4][2] = {{3 * H, H}, {H, H}, {I, H}, {H, I}};
    mat m[LAYERS * 4];
    srand(1);
    long bytes = 0;
    for (int k = 0; k < LAYERS * 4; ++k) {
        mat *a = &m[k];
        a->rows = shapes[k % 4][0], a->cols = shapes[k % 4][1];
        long n = (long)a->rows * a->cols;
        a->w = aligned_alloc(64, n), a->w7 = aligned_alloc(64, n);
        a->s = malloc(sizeof(float) * a->rows), a->b = malloc(sizeof(float) * a->rows);
        a->r = malloc(sizeof(int32_t) * a->rows), a->r7 = malloc(sizeof(int32_t) * a->rows);
        for (int i = 0; i < a->rows; ++i) {
            int32_t sum = 0, sum7 = 0;
            for (int j = 0; j < a->cols; ++j) {
                int v = rand() % 255 - 127;
                a->w[(long)i * a->cols + j] = (int8_t)v, sum += v;
                int v7 = (v * 63 + (v > 0 ? 63 : -63)) / 127;
                a->w7[(long)i * a->cols + j] = (int8_t)v7, sum7 += v7;
            }
            a->s[i] = 1e-3f, a->b[i] = 0.f, a->r[i] = sum, a->r7[i] = sum7;
        }
        bytes += n;
    }
    float x[I], y0[3 * H + I], y1[3 * H + I];
    uint8_t xu[I];
    for (int j = 0; j < I; ++j) x[j] = (float)(rand() % 2001 - 1000) / 1000.f;
    float sx = quantize_u8(x, I, xu);
    // Exactness: A and B against int8.h's gemv on every shape.
    for (int k = 0; k < 4; ++k) {
        mat *a = &m[k];
        gemv(a->w, NULL, NULL, a->s, a->r, a->b, xu, sx, a->rows, a->cols, y0);
        for (int v = 0; v < 2; ++v) {
            if (v == 0) gemv_sign_per_row(a->w, a->s, a->b, xu, sx, a->rows, a->cols, y1);
            else gemv_abs_hoisted8(a->w, a->s, a->b, xu, sx, a->rows, a->cols, y1);
            for (int i = 0; i < a->rows; ++i)
                if (y0[i] != y1[i]) { printf("MISMATCH shape %d row %d: %g vs %g\n", k, i, y0[i], y1[i]); return 1; }
        }
    }
    printf("%.1f MB of int8 weights; A and B equal int8.h's gemv on every shape\n", bytes / 1e6);
    const char *names[] = {"int8.h gemv (B: hoisted |x|)", "A: two vpsignb per row", "B with 8 rows",
                           "C: 7-bit weights, u8 activations"};
    for (int round = 0; round < 2; ++round)  /* twice: the host's phase moves every figure */
    for (int v = 0; v < 4; ++v) {
        double t[200];
        for (int r = 0; r < 200; ++r) {
            double t0 = now();
            for (int k = 0; k < LAYERS * 4; ++k) {
                mat *a = &m[k];
                if (v == 0) gemv(a->w, NULL, NULL, a->s, a->r, a->b, xu, sx, a->rows, a->cols, y0);
                else if (v == 1) gemv_sign_per_row(a->w, a->s, a->b, xu, sx, a->rows, a->cols, y0);
                else if (v == 2) gemv_abs_hoisted8(a->w, a->s, a->b, xu, sx, a->rows, a->cols, y0);
                else gemv_w7(a->w7, a->s, a->r7, a->b, xu, sx, a->rows, a->cols, y0);
            }
            t[r] = now() - t0;
        }
        qsort(t, 200, sizeof(double), cmp);
        printf("%-32s best %6.1f us  median %6.1f us  (%.1f GB/s at the median)\n", names[v], t[0] * 1e6,
               t[100] * 1e6, bytes / t[100] / 1e9);
    }
    return 0;
}

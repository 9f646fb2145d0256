// What 4-bit weights would buy the default student's keystroke: the int8 gemvs of one two-layer keystroke (per layer
// 1152x384, 384x384, 1536x384, 384x1536, then the 384x384 readout: 3.7 MB of int8 weights, 1.8 MB in int4) timed in
// int8.h's gemv and in three int4 gemvs (per row: int8.h's gemv4_rows, AVX512-VNNI or AVX2; per 128 columns:
// int8.h's gemv4_groups, AVX2; per 64 columns: AVX512-VNNI only), on one thread and split by rows over two (each
// thread its half of
// every product, a spin barrier per keystroke: no pool.h, so an upper bound on what two threads gain). Weights stay
// resident in a loop, as between a typist's keystrokes. Each int4 product is checked first: per row, it equals
// int8.h's gemv of the same values bit for bit; per 128 and 64 columns, a double-precision reference to 1e-5.
//   int4 per row: one scale a row, int8.h's gemv4_rows (post-training it cost the six-layer student 0.07 final
//     cosine, so it needs quantisation-aware training: --weight_bits 4); the nibbles are the weights plus 8.
//   int4 per 128 columns: int8.h's gemv4_groups, the fused step's for --weight_group 128 (session 72), each block's
//     integer sum less its nibble offset converted and scaled in fp32.
//   int4 per 64 columns: a scale a row and 64 columns (post-training between per 128 and per 32 columns' 0.015-0.021
//     final cosine), its products summed in fp32 per group.
// A probe that prints, for deciding whether an int4 kernel is worth its training: the speed of the products only;
// the keystroke also spends time on attention, norms and Python (keystroke_overhead.py).
// gcc -O3 -march=native -pthread benchmarks/probes/int4_gemv.c -o /tmp/int4_gemv -lm && /tmp/int4_gemv
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../src/tf2rnn_hf/inference/kernels/int8.h"
#include "timing.h"

#if !defined(__AVX2__)
int main(void) {
    printf("int4_gemv needs AVX2 (this CPU or compiler lacks it)\n");
    return 0;
}
#else
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
#define G64 1  /* the per-64-column variant is written for AVX512-VNNI only */
#else
#define G64 0
#endif

#define LAYERS 2
#define H 384
#define I 1536
#define MATS (LAYERS * 4 + 1)
#define ROUNDS 400

typedef struct {
    int rows, cols;
    int8_t *w8;          // the int4 values [-8, 7] as int8 [rows, cols] (int8.h's gemv runs on these)
    uint8_t *w4;         // packed: per row and 128 columns, 64 bytes; byte b = (w[j + b] + 8) | (w[j + 64 + b] + 8) << 4
    float *s, *b;        // per-row scale, bias
    float *sg;           // per-row per-64-column scale [rows, cols / 64]
    float *g128;         // per-row per-128-column scale [rows, cols / 128]
    float *k;            // per row: -128 * sum_g sg * (sum of the group's weights), the g64 product's offset term
    int32_t *rowsum;     // sum of each row's weights
} mat;

// The per-row int4 product: int8.h's gemv4_rows, the fused step's since this probe.
static void gemv_int4_row(const mat *m, const uint8_t *xu, float sx, float *y, int i0, int i1) {
    gemv4_rows(m->w4, m->s, m->rowsum, m->b, xu, &sx, 1, m->rows, m->cols, y, i0, i1);
}

#if G64
// The per-64-column product: each group's integer sum starts from -8 * its activations' sums (lane by lane, computed
// once per call), is converted and scaled in fp32; the weights' offset term is the row's precomputed `k`.
static void gemv_int4_g64(const mat *m, const uint8_t *xu, float sx, float *y, int i0, int i1) {
    const int cols = m->cols, half = cols / 2, groups = cols / 64;
    int32_t cv[I / 4];  // lane sums of -8 * xu over each 4 columns
    for (int l = 0; l < cols / 4; ++l) cv[l] = -8 * (xu[4 * l] + xu[4 * l + 1] + xu[4 * l + 2] + xu[4 * l + 3]);
    const __m512i low = _mm512_set1_epi8(0x0F);
    for (int i = i0; i + 8 <= i1; i += 8) {
        const uint8_t *w0 = m->w4 + (int64_t)i * half;
        __m512 f[8];
        for (int k = 0; k < 8; ++k) f[k] = _mm512_setzero_ps();
        for (int j = 0; j < cols; j += 128) {
            __m512i xl = _mm512_loadu_si512((const void *)(xu + j)), xh = _mm512_loadu_si512((const void *)(xu + j + 64));
            __m512i cl = _mm512_loadu_si512((const void *)(cv + j / 4)), ch = _mm512_loadu_si512((const void *)(cv + j / 4 + 16));
            for (int k = 0; k < 8; ++k) {
                const float *sg = m->sg + (int64_t)(i + k) * groups + j / 64;
                __m512i v = _mm512_loadu_si512((const void *)(w0 + k * half + j / 2));
                __m512i tl = _mm512_dpbusd_epi32(cl, xl, _mm512_and_si512(v, low));
                __m512i th = _mm512_dpbusd_epi32(ch, xh, _mm512_and_si512(_mm512_srli_epi16(v, 4), low));
                f[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(tl), _mm512_set1_ps(sg[0]), f[k]);
                f[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(th), _mm512_set1_ps(sg[1]), f[k]);
            }
        }
        for (int k = 0; k < 8; ++k) y[i + k] = (_mm512_reduce_add_ps(f[k]) + m->k[i + k]) * sx + m->b[i + k];
    }
}

#endif

// The per-128-column product: int8.h's gemv4_groups.
static void gemv_int4_g128(const mat *m, const uint8_t *xu, float sx, float *y, int i0, int i1) {
    gemv4_groups(m->w4, m->g128, m->b, xu, &sx, 1, m->rows, m->cols, y, i0, i1);
}

static void gemv_int8_rows(const mat *m, const uint8_t *xu, float sx, float *y, int i0, int i1) {
    gemv_rows(m->w8, m->s, m->rowsum, m->b, xu, &sx, 1, m->rows, m->cols, y, i0, i1);
}

typedef void (*product)(const mat *, const uint8_t *, float, float *, int, int);
#if G64
static const product variants[] = {gemv_int8_rows, gemv_int4_row, gemv_int4_g128, gemv_int4_g64};
#else
static const product variants[] = {gemv_int8_rows, gemv_int4_row, gemv_int4_g128};
#endif
#define VARIANTS ((int)(sizeof(variants) / sizeof(variants[0])))
static const char *names[] = {"int8 (int8.h's gemv)", "int4 per row", "int4 per 128 columns", "int4 per 64 columns"};

static mat m[MATS];
static uint8_t xu_h[H], xu_i[I];
static float sx_h, sx_i;

// One keystroke's products (rows [part / parts] of each), into y.
static void keystroke(int v, int part, int parts, float *y) {
    for (int k = 0; k < MATS; ++k) {
        const mat *a = &m[k];
        int mid = a->rows / 16 * 8;  // a multiple of eight: the blocks stay whole
        int i0 = parts == 1 ? 0 : part ? mid : 0, i1 = parts == 1 ? a->rows : part ? a->rows : mid;
        variants[v](a, a->cols == H ? xu_h : xu_i, a->cols == H ? sx_h : sx_i, y, i0, i1);
    }
}

// Two threads: a round starts when both have arrived at the round's barrier; thread 0 times from there to the next.
static atomic_int arrived;
static int helper_variant;
static void barrier(int round) {
    atomic_fetch_add(&arrived, 1);
    while (atomic_load(&arrived) < 2 * (round + 1)) {}
}
static void *helper(void *arg) {
    (void)arg;
    float y[3 * H + I];
    for (int r = 0; r < ROUNDS + 1; ++r) {
        barrier(r);
        if (r < ROUNDS) keystroke(helper_variant, 1, 2, y);
    }
    return NULL;
}

static void timed(int v, int threads, double *best, double *median) {
    double t[ROUNDS];
    float y[3 * H + I];
    if (threads == 1) {
        for (int r = 0; r < ROUNDS; ++r) {
            double t0 = now();
            keystroke(v, 0, 1, y);
            t[r] = now() - t0;
        }
    } else {
        pthread_t th;
        atomic_store(&arrived, 0);
        helper_variant = v;
        pthread_create(&th, NULL, helper, NULL);
        barrier(0);
        for (int r = 0; r < ROUNDS; ++r) {
            double t0 = now();
            keystroke(v, 0, 2, y);
            barrier(r + 1);
            t[r] = now() - t0;
        }
        pthread_join(th, NULL);
    }
    qsort(t, ROUNDS, sizeof(double), cmp);
    *best = t[0], *median = t[ROUNDS / 2];
}

int main(void) {
    const int shapes[4][2] = {{3 * H, H}, {H, H}, {I, H}, {H, I}};
    srand(1);
    long n8 = 0;
    for (int k = 0; k < MATS; ++k) {
        mat *a = &m[k];
        a->rows = k < LAYERS * 4 ? shapes[k % 4][0] : H, a->cols = k < LAYERS * 4 ? shapes[k % 4][1] : H;
        int rows = a->rows, cols = a->cols, groups = cols / 64;
        a->w8 = aligned_alloc(64, (size_t)rows * cols), a->w4 = aligned_alloc(64, (size_t)rows * cols / 2);
        a->s = malloc(sizeof(float) * rows), a->b = malloc(sizeof(float) * rows), a->k = malloc(sizeof(float) * rows);
        a->sg = malloc(sizeof(float) * rows * groups), a->rowsum = malloc(sizeof(int32_t) * rows);
        a->g128 = malloc(sizeof(float) * rows * (cols / 128));
        for (int q = 0; q < rows * (cols / 128); ++q) a->g128[q] = 1e-3f * (1 + rand() % 100) / 50.f;
        for (int i = 0; i < rows; ++i) {
            int32_t sum = 0;
            float kk = 0.f;
            for (int g = 0; g < groups; ++g) {
                int32_t gsum = 0;
                a->sg[(long)i * groups + g] = 1e-3f * (1 + rand() % 100) / 50.f;
                for (int j = 64 * g; j < 64 * (g + 1); ++j) {
                    int v = rand() % 16 - 8;
                    a->w8[(long)i * cols + j] = (int8_t)v, gsum += v;
                }
                sum += gsum, kk += -128.f * a->sg[(long)i * groups + g] * (float)gsum;
            }
            a->s[i] = 1e-3f, a->b[i] = (float)(rand() % 200 - 100) / 1000.f, a->rowsum[i] = sum, a->k[i] = kk;
            for (int j = 0; j < cols; j += 128)
                for (int b = 0; b < 64; ++b)
                    a->w4[(long)i * cols / 2 + j / 2 + b] = (uint8_t)((a->w8[(long)i * cols + j + b] + 8) |
                                                                    ((a->w8[(long)i * cols + j + 64 + b] + 8) << 4));
        }
        n8 += (long)rows * cols;
    }
    float x[I];
    for (int j = 0; j < I; ++j) x[j] = (float)(rand() % 2001 - 1000) / 1000.f;
    sx_h = quantize_u8(x, H, xu_h), sx_i = quantize_u8(x, I, xu_i);
    // Exactness, every shape: per row against int8.h's gemv bit for bit, per 64 columns against double sums.
    float y0[3 * H + I], y1[3 * H + I];
    for (int k = 0; k < 4; ++k) {
        const mat *a = &m[k];
        const uint8_t *xu = a->cols == H ? xu_h : xu_i;
        float sx = a->cols == H ? sx_h : sx_i;
        gemv_int8_rows(a, xu, sx, y0, 0, a->rows);
        gemv_int4_row(a, xu, sx, y1, 0, a->rows);
        for (int i = 0; i < a->rows; ++i)
            if (y0[i] != y1[i]) { printf("MISMATCH int4 per row, shape %d row %d: %g vs %g\n", k, i, y0[i], y1[i]); return 1; }
        gemv_int4_g128(a, xu, sx, y1, 0, a->rows);
        for (int i = 0; i < a->rows; ++i) {
            double ref = 0.;
            for (int j = 0; j < a->cols; ++j)
                ref += (double)a->g128[(long)i * (a->cols / 128) + j / 128] * a->w8[(long)i * a->cols + j] *
                       ((int)xu[j] - 128);
            ref = ref * sx + a->b[i];
            if (fabs(ref - y1[i]) > 1e-5 * (1. + fabs(ref))) {
                printf("MISMATCH int4 per 128 columns, shape %d row %d: %g vs %.7g\n", k, i, y1[i], ref);
                return 1;
            }
        }
#if G64
        gemv_int4_g64(a, xu, sx, y1, 0, a->rows);
        for (int i = 0; i < a->rows; ++i) {
            double ref = 0.;
            for (int j = 0; j < a->cols; ++j)
                ref += (double)m[k].sg[(long)i * (a->cols / 64) + j / 64] * a->w8[(long)i * a->cols + j] * ((int)xu[j] - 128);
            ref = ref * sx + a->b[i];
            if (fabs(ref - y1[i]) > 1e-5 * (1. + fabs(ref))) {
                printf("MISMATCH int4 per 64 columns, shape %d row %d: %g vs %.7g\n", k, i, y1[i], ref);
                return 1;
            }
        }
#endif
    }
    printf("%.2f MB of int8 weights a keystroke (%.2f MB as int4); int4 per row equals int8.h's gemv bit for bit, "
           "int4 per 128 columns%s its double-precision reference, on every shape\n", n8 / 1e6, n8 / 2e6,
           G64 ? " and per 64 columns" : "");
    for (int round = 0; round < 2; ++round)  // twice: the host's phase moves every figure
        for (int threads = 1; threads <= 2; ++threads)
            for (int v = 0; v < VARIANTS; ++v) {
                double best, median;
                timed(v, threads, &best, &median);
                printf("%-22s %d thread%s  best %6.1f us  median %6.1f us\n", names[v], threads, threads > 1 ? "s" : " ",
                       best * 1e6, median * 1e6);
            }
    return 0;
}
#endif

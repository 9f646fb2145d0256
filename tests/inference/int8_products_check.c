/* The keystroke kernels' products (int8.h) against integer sums, and their attention against double precision, for
 * tests/inference/test_int8_products.py, which builds this file once per instruction set the CPU runs (no SIMD, AVX2,
 * native): quantize_u8 and the int8 and int4 products (one scale a row or one per 128 columns) must give the same
 * bytes and sums on every path, since which path runs depends only on the CPU. With unit scales (powers of two per
 * 128 columns) and no bias each product's output is its integer sum converted to float, so equality is exact; the
 * fp32 attention is held to 1e-5. Prints "ok" and exits 0, or names the first
 * mismatch and exits 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/tf2rnn_hf/inference/kernels/tova_step.c"  /* int8.h, and the static attend */

static float quantize_reference(const float *x, int n, uint8_t *out) {
    float m = 0.f;
    for (int j = 0; j < n; ++j) m = fmaxf(m, fabsf(x[j]));
    float scale = m > 0.f ? m / 127.f : 1.f, inv = 1.f / scale;
    for (int j = 0; j < n; ++j) out[j] = (uint8_t)((int)lrintf(x[j] * inv) + 128);
    return scale;
}

static int check_quantize(void) {
    static float x[2048];
    static uint8_t a[2048], b[2048];
    const int sizes[] = {384, 1536, 128, 44, 33, 7, 1};
    for (int t = 0; t < 700; ++t) {
        const int n = sizes[t % 7], kind = t / 7 % 4;
        for (int j = 0; j < n; ++j) {
            float v = (float)(rand() % 200001 - 100000) / 1000.f;
            if (kind == 1) v = (float)(rand() % 255 - 127) + ((j & 1) ? 0.5f : 0.f);  /* halves: rounding ties */
            if (kind == 2) v = 0.f;
            if (kind == 3) v *= 1e-30f;
            x[j] = v;
        }
        if (kind == 1) x[0] = 127.f;  /* scale 1: the halves stay ties after the multiply */
        if (quantize_u8(x, n, a) != quantize_reference(x, n, b) || memcmp(a, b, (size_t)n)) {
            printf("quantize_u8 differs: %d values, case %d\n", n, kind);
            return 1;
        }
    }
    return 0;
}

/* Rows x cols with n activation vectors; int4 codes in [-7, 7] packed as pack_int4 does, else int8 in [-127, 127];
 * `groups`: the int4 codes with a scale per 128 columns, powers of two so that the fp32 sum of the scaled blocks is
 * still exact. */
static int check_product(int rows, int cols, int n, int int4, int groups) {
    int8_t *w = malloc((size_t)rows * cols);
    uint8_t *w4 = malloc((size_t)rows * cols / 2 + 1), *xu = malloc((size_t)n * cols);
    float *s = malloc(sizeof(float) * rows), *b = malloc(sizeof(float) * rows), *y = malloc(sizeof(float) * n * rows);
    float *g = malloc(sizeof(float) * (rows * cols / 128 + 1));
    for (int k = 0; k < rows * cols / 128; ++k) g[k] = (float)(1 << (rand() % 4)) / 2.f;  /* 0.5, 1, 2 or 4 */
    int32_t *rowsum = malloc(sizeof(int32_t) * rows);
    float sx[16];
    for (int i = 0; i < rows; ++i) {
        rowsum[i] = 0, s[i] = 1.f, b[i] = 0.f;
        for (int j = 0; j < cols; ++j) {
            int v = int4 ? rand() % 15 - 7 : rand() % 255 - 127;
            if (i == 0) v = int4 ? 7 : 127;  /* the largest sums the paths must not saturate on */
            w[(int64_t)i * cols + j] = (int8_t)v, rowsum[i] += v;
        }
        if (int4)
            for (int j = 0; j < cols; j += 128)
                for (int k = 0; k < 64; ++k)
                    w4[(int64_t)i * cols / 2 + j / 2 + k] = (uint8_t)((w[(int64_t)i * cols + j + k] + 8) |
                                                                      ((w[(int64_t)i * cols + j + 64 + k] + 8) << 4));
    }
    for (int v = 0; v < n; ++v) {
        sx[v] = 1.f;
        for (int j = 0; j < cols; ++j) xu[(int64_t)v * cols + j] = (uint8_t)(v == 0 ? 255 : 1 + rand() % 255);
    }
    gemv_batch(int4 ? NULL : w, int4 ? w4 : NULL, groups ? g : NULL, s, rowsum, b, xu, sx, n, rows, cols, y);
    int bad = 0;
    for (int v = 0; v < n && !bad; ++v)
        for (int i = 0; i < rows && !bad; ++i) {
            double acc = 0.;
            for (int k = 0; k < (groups ? cols / 128 : 1); ++k) {
                const int j0 = groups ? k * 128 : 0, j1 = groups ? j0 + 128 : cols;
                int64_t block = 0;
                for (int j = j0; j < j1; ++j)
                    block += (int64_t)w[(int64_t)i * cols + j] * ((int)xu[(int64_t)v * cols + j] - 128);
                acc += (double)block * (groups ? g[(int64_t)i * (cols / 128) + k] : 1.);
            }
            if (y[(int64_t)v * rows + i] != (float)acc) {
                printf("int%d product%s differs: %dx%d, vector %d of %d, row %d: %.1f against %.1f\n", int4 ? 4 : 8,
                       groups ? " (a scale per 128 columns)" : "", rows, cols, v, n, i, y[(int64_t)v * rows + i], acc);
                bad = 1;
            }
        }
    free(w), free(w4), free(xu), free(s), free(b), free(y), free(rowsum), free(g);
    return bad;
}

/* One query's softmax attention over n entries of `heads` heads of D lanes (heads h0 <= h < h1), as attend. */
static int check_attention(int n, int heads, int D, int h0, int h1) {
    const int H = heads * D, stride = n + 3;
    float *q = malloc(sizeof(float) * H), *kv = malloc(sizeof(float) * 2 * n * H), *w = malloc(sizeof(float) * heads * stride);
    float *mixed = malloc(sizeof(float) * H);
    const float **kp = malloc(sizeof(float *) * n), **vp = malloc(sizeof(float *) * n);
    for (int j = 0; j < H; ++j) q[j] = (float)(rand() % 2001 - 1000) / 500.f, mixed[j] = 0.f;
    for (int j = 0; j < 2 * n * H; ++j) kv[j] = (float)(rand() % 2001 - 1000) / 500.f;
    for (int e = 0; e < n; ++e) kp[e] = kv + (int64_t)e * H, vp[e] = kv + (int64_t)(n + e) * H;
    const float scale = 1.f / sqrtf((float)D);
    attend(q, kp, vp, n, h0, h1, D, scale, w, stride, mixed);
    int bad = 0;
    for (int h = h0; h < h1 && !bad; ++h) {
        double score[512], top = -1e300, sum = 0.;
        for (int e = 0; e < n; ++e) {
            double dot = 0.;
            for (int d = 0; d < D; ++d) dot += (double)q[h * D + d] * kp[e][h * D + d];
            score[e] = dot * scale, top = score[e] > top ? score[e] : top;
        }
        for (int e = 0; e < n; ++e) sum += exp(score[e] - top);
        for (int d = 0; d < D && !bad; ++d) {
            double ref = 0.;
            for (int e = 0; e < n; ++e) ref += exp(score[e] - top) / sum * vp[e][h * D + d];
            if (fabs(ref - mixed[h * D + d]) > 1e-5 * (1. + fabs(ref))) {
                printf("attention differs: %d entries, %d heads of %d, head %d lane %d: %.7f against %.7f\n", n, heads,
                       D, h, d, mixed[h * D + d], ref);
                bad = 1;
            }
        }
    }
    free(q), free(kv), free(w), free(mixed), free(kp), free(vp);
    return bad;
}

int main(void) {
    srand(1);
    if (check_quantize()) return 1;
    /* MiniLM's heads of 32 (the vectorised path; all heads, a part as a helper thread takes, a head count off the
     * blocks of four and two) and other widths (the compiler's loop) */
    const int attention[][5] = {{33, 12, 32, 0, 12}, {1, 12, 32, 0, 12}, {130, 12, 32, 6, 12}, {17, 7, 32, 0, 7},
                                {9, 3, 64, 0, 3}, {5, 4, 20, 1, 4}};
    for (int k = 0; k < 6; ++k)
        if (check_attention(attention[k][0], attention[k][1], attention[k][2], attention[k][3], attention[k][4]))
            return 1;
    const int shapes[][3] = {{1152, 384, 1}, {384, 1536, 1}, {1536, 384, 3}, {44, 128, 2}, {6, 256, 1}, {5, 96, 2}};
    for (int k = 0; k < 6; ++k)
        for (int kind = 0; kind < 3; ++kind) {  /* int8, int4, int4 with a scale per 128 columns */
            if (kind && shapes[k][1] % 128) continue;  /* int4 packs by 128 columns */
            if (check_product(shapes[k][0], shapes[k][1], shapes[k][2], kind > 0, kind == 2)) return 1;
        }
    printf("ok\n");
    return 0;
}

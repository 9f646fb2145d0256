/* The keystroke kernels' products (int8.h) against integer sums, for tests/inference/test_int8_products.py, which
 * builds this file once per instruction set the CPU runs (no SIMD, AVX2, native): quantize_u8 and the int8 and int4
 * products must give the same bytes and sums on every path, since which path runs depends only on the CPU.
 * With unit scales and no bias each product's output is its integer sum converted to float, so equality is exact.
 * Prints "ok" and exits 0, or names the first mismatch and exits 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/tf2rnn_hf/inference/kernels/int8.h"

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

/* Rows x cols with n activation vectors; int4 codes in [-7, 7] packed as pack_int4 does, else int8 in [-127, 127]. */
static int check_product(int rows, int cols, int n, int int4) {
    int8_t *w = malloc((size_t)rows * cols);
    uint8_t *w4 = malloc((size_t)rows * cols / 2 + 1), *xu = malloc((size_t)n * cols);
    float *s = malloc(sizeof(float) * rows), *b = malloc(sizeof(float) * rows), *y = malloc(sizeof(float) * n * rows);
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
    gemv_batch(int4 ? NULL : w, int4 ? w4 : NULL, s, rowsum, b, xu, sx, n, rows, cols, y);
    int bad = 0;
    for (int v = 0; v < n && !bad; ++v)
        for (int i = 0; i < rows && !bad; ++i) {
            int64_t acc = 0;
            for (int j = 0; j < cols; ++j)
                acc += (int64_t)w[(int64_t)i * cols + j] * ((int)xu[(int64_t)v * cols + j] - 128);
            if (y[(int64_t)v * rows + i] != (float)acc) {
                printf("int%d product differs: %dx%d, vector %d of %d, row %d: %.1f against %lld\n", int4 ? 4 : 8,
                       rows, cols, v, n, i, y[(int64_t)v * rows + i], (long long)acc);
                bad = 1;
            }
        }
    free(w), free(w4), free(xu), free(s), free(b), free(y), free(rowsum);
    return bad;
}

int main(void) {
    srand(1);
    if (check_quantize()) return 1;
    const int shapes[][3] = {{1152, 384, 1}, {384, 1536, 1}, {1536, 384, 3}, {44, 128, 2}, {6, 256, 1}, {5, 96, 2}};
    for (int k = 0; k < 6; ++k)
        for (int int4 = 0; int4 < 2; ++int4) {
            if (int4 && shapes[k][1] % 128) continue;  /* int4 packs by 128 columns */
            if (check_product(shapes[k][0], shapes[k][1], shapes[k][2], int4)) return 1;
        }
    printf("ok\n");
    return 0;
}

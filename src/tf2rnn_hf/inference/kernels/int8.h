/* Int8 matrix-vector products shared by the keystroke kernels.
 *
 * Weights are int8 with one fp32 scale per output row; activations are quantised per call to uint8 with
 * one scale (x + 128), so each dot product is a u8 x s8 sum: AVX512-VNNI's vpdpbusd where the compiler
 * targets it (built with -march=native), AVX2's vpmaddubsw on signed values where only that is there, a loop
 * the compiler vectorises otherwise. The 128 offset is removed with the precomputed row sums.
 *
 * A student trained through int4 weights (`--weight_bits 4`) has each row on a 4-bit grid: those products read half
 * the bytes from `w4` (see gemv4_rows), with the same arithmetic otherwise; with `--weight_group 128` each 128 columns
 * of a row on their own grid, one scale each (`g`, gemv4_groups).
 */
#ifndef TF2RNN_INT8_H
#define TF2RNN_INT8_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "pool.h"
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

static float quantize_u8(const float *x, int n, uint8_t *out) {
    float m = 0.f;
    int j = 0;
#if defined(__AVX512F__)
    /* Sixteen at a time (the scalar lrintf loop is not vectorised): the same max and the same round-to-nearest-even,
     * so the same bytes. */
    __m512 vm = _mm512_setzero_ps();
    for (; j + 16 <= n; j += 16) vm = _mm512_max_ps(vm, _mm512_abs_ps(_mm512_loadu_ps(x + j)));
    m = _mm512_reduce_max_ps(vm);
#elif defined(__AVX2__)
    /* Eight at a time, as above: on AVX2 hosts the scalar loops took ~17 us of a layer's ~60 us step (four calls,
     * 2.5 us at 384 floats and 9.6 at 1,536; experiments.md, session 63). */
    const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 vm = _mm256_setzero_ps();
    for (; j + 8 <= n; j += 8) vm = _mm256_max_ps(vm, _mm256_and_ps(_mm256_loadu_ps(x + j), magnitude));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vm), _mm256_extractf128_ps(vm, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m = _mm_cvtss_f32(_mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1)));
#endif
    for (; j < n; ++j) m = fmaxf(m, fabsf(x[j]));
    float scale = m > 0.f ? m / 127.f : 1.f, inv = 1.f / scale;
    j = 0;
#if defined(__AVX512F__)
    const __m512 vinv = _mm512_set1_ps(inv);
    const __m512i offset = _mm512_set1_epi32(128);
    for (; j + 16 <= n; j += 16) {
        __m512i v = _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + j), vinv)), offset);
        _mm_storeu_si128((__m128i *)(out + j), _mm512_cvtepi32_epi8(v));  /* within [1, 255]: no saturation */
    }
#elif defined(__AVX2__)
    const __m256 vinv = _mm256_set1_ps(inv);
    const __m256i offset = _mm256_set1_epi32(128), order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
#define TF2RNN_Q8(k) _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * (k)), vinv)), offset)
    for (; j + 32 <= n; j += 32) {
        /* Packing works within 128-bit lanes: the 32-bit groups come out as a0 b0 c0 d0 a1 b1 c1 d1 (each four
         * bytes), which `order` puts back. Values within [1, 255]: no saturation. */
        __m256i p = _mm256_packus_epi16(_mm256_packus_epi32(TF2RNN_Q8(0), TF2RNN_Q8(1)),
                                        _mm256_packus_epi32(TF2RNN_Q8(2), TF2RNN_Q8(3)));
        _mm256_storeu_si256((__m256i *)(out + j), _mm256_permutevar8x32_epi32(p, order));
    }
#undef TF2RNN_Q8
#endif
    for (; j < n; ++j) out[j] = (uint8_t)((int)lrintf(x[j] * inv) + 128);
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

#if defined(__AVX512F__) && defined(__AVX512VNNI__)
/* Four accumulators' sums at once: [sum(a0), sum(a1), sum(a2), sum(a3)]. */
static inline __m128i reduce4(__m512i a0, __m512i a1, __m512i a2, __m512i a3) {
    __m512i r01 = _mm512_add_epi32(_mm512_unpacklo_epi32(a0, a1), _mm512_unpackhi_epi32(a0, a1));
    __m512i r23 = _mm512_add_epi32(_mm512_unpacklo_epi32(a2, a3), _mm512_unpackhi_epi32(a2, a3));
    __m512i r = _mm512_add_epi32(_mm512_unpacklo_epi64(r01, r23), _mm512_unpackhi_epi64(r01, r23));
    __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(r), _mm512_extracti64x4_epi64(r, 1));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* y[i + k] = (acc[k] - 128 * rowsum[i + k]) * s[i + k] * sx + b[i + k] for k < 4: the scalar tail's arithmetic. */
static inline void scale4(__m128i acc, const float *s, const int32_t *rowsum, const float *b, float sx, float *y,
                          int i) {
    acc = _mm_sub_epi32(acc, _mm_slli_epi32(_mm_loadu_si128((const __m128i *)(rowsum + i)), 7));
    __m128 v = _mm_mul_ps(_mm_cvtepi32_ps(acc), _mm_loadu_ps(s + i));
    _mm_storeu_ps(y + i, _mm_fmadd_ps(v, _mm_set1_ps(sx), _mm_loadu_ps(b + i)));
}

/* gemv_rows' rows i <= r < i + R (R = 8 or 4) for every vector, from R accumulators. Always inlined, so that R is a
 * constant and the accumulators stay in registers (left to gcc, 384-column products ran ~1.3x slower in a probe). */
__attribute__((always_inline)) static inline void rows_block_vnni(
    const int8_t *w, const float *s, const int32_t *rowsum, const float *b, const uint8_t *xu, const float *sx, int n,
    int rows, int cols, float *y, int i, int R) {
    const int8_t *w0 = w + (int64_t)i * cols;
    for (int v = 0; v < n; ++v) {
        const uint8_t *xv0 = xu + (int64_t)v * cols;
        __m512i a[8];
        for (int k = 0; k < R; ++k) a[k] = _mm512_setzero_si512();
        for (int j = 0; j < cols; j += 64) {
            __m512i xv = _mm512_loadu_si512((const void *)(xv0 + j));
            for (int k = 0; k < R; ++k)
                a[k] = _mm512_dpbusd_epi32(a[k], xv, _mm512_loadu_si512((const void *)(w0 + k * cols + j)));
        }
        for (int k = 0; k < R; k += 4)
            scale4(reduce4(a[k], a[k + 1], a[k + 2], a[k + 3]), s, rowsum, b, sx[v], y + (int64_t)v * rows, i + k);
    }
}
#endif

#if defined(__AVX2__)
/* y[i + k] = (sum(a_k) - offset) * s[i + k] * sx + b[i + k] for the four rows i..i+3 of the AVX2 products, from their
 * 32-bit accumulators (horizontal sums of the four at once). */
static inline void store4_avx2(__m256i a0, __m256i a1, __m256i a2, __m256i a3, int32_t offset, const float *s,
                               const float *b, float sx, float *y, int i) {
    __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), _mm256_hadd_epi32(a2, a3));  /* per lane: rows 0..3 */
    __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    int32_t acc[4];
    _mm_storeu_si128((__m128i *)acc, sum);
    for (int k = 0; k < 4; ++k) y[i + k] = (float)(acc[k] - offset) * s[i + k] * sx + b[i + k];
}
#endif

/* y[v, i] = s[i] * sx[v] * (sum_j w[i,j] * (xu[v, j] - 128)) + b[i] for n activation vectors xu [n, cols] against
 * the same weights (y [n, rows]), rows i0 <= i < i1 (i0 a multiple of four, so that two threads can share one
 * product). Each block of eight (or four) rows is read once and then, from L1, serves every vector:
 * reading the six layers' 10.6 MB again per open token cost an open-token step about a quarter of its time (3.46 ->
 * 2.57 ms with this, experiments.md, session 25). */
static void gemv_rows(const int8_t *w, const float *s, const int32_t *rowsum, const float *b,
                      const uint8_t *xu, const float *sx, int n, int rows, int cols, float *y, int i0, int i1) {
    int i = i0;
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
    /* Eight rows at a time (one row's chain of dependent dot products leaves the unit idle for its latency), their
     * sums reduced four accumulators at once and scaled four rows at once: with 384 columns a row is six vpdpbusd,
     * and reducing each accumulator on its own cost more than its dot product (a layer's gemvs ran at 35-60 GB/s
     * from L1/L2 against 100-130 with this; session 38, experiments.md). */
    if (cols % 64 == 0) {
        for (; i + 8 <= i1; i += 8) rows_block_vnni(w, s, rowsum, b, xu, sx, n, rows, cols, y, i, 8);
        for (; i + 4 <= i1; i += 4) rows_block_vnni(w, s, rowsum, b, xu, sx, n, rows, cols, y, i, 4);
    }
#elif defined(__AVX2__)
    /* Without VNNI: vpmaddubsw on |x| and sign(x) * w, both within [-127, 127], so its 16-bit pair sums
     * (<= 2 * 127 * 127) cannot saturate; vpmaddwd widens them to 32 bits. |x| is shared by every row, so
     * each row's 32 bytes take one vpsignb (taking |w| and sign(w) * x per row took two: ~7% of the gemvs,
     * benchmarks/probes/gemv_variants.c). Four rows at a time. */
    if (cols % 32 == 0) {
        int8_t xs[n * cols];
        uint8_t ax[n * cols];
        for (int j = 0; j < n * cols; ++j) {
            xs[j] = (int8_t)(xu[j] ^ 0x80);  /* xu - 128 */
            ax[j] = (uint8_t)(xs[j] < 0 ? -xs[j] : xs[j]);
        }
        const __m256i ones = _mm256_set1_epi16(1);
#define TF2RNN_DOT32(acc, wp) acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(av, \
        _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(wp)), xv)), ones))
        for (; i + 4 <= i1; i += 4) {
            const int8_t *w0 = w + (int64_t)i * cols;
            for (int v = 0; v < n; ++v) {
                const int8_t *xs0 = xs + (int64_t)v * cols;
                const uint8_t *ax0 = ax + (int64_t)v * cols;
                __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
                for (int j = 0; j < cols; j += 32) {
                    __m256i xv = _mm256_loadu_si256((const __m256i *)(xs0 + j));
                    __m256i av = _mm256_loadu_si256((const __m256i *)(ax0 + j));
                    TF2RNN_DOT32(a0, w0 + j);
                    TF2RNN_DOT32(a1, w0 + cols + j);
                    TF2RNN_DOT32(a2, w0 + 2 * cols + j);
                    TF2RNN_DOT32(a3, w0 + 3 * cols + j);
                }
                store4_avx2(a0, a1, a2, a3, 0, s, b, sx[v], y + (int64_t)v * rows, i);
            }
        }
#undef TF2RNN_DOT32
    }
#endif
    for (; i < i1; ++i)
        for (int v = 0; v < n; ++v) {
            int32_t acc = dot_u8s8(xu + (int64_t)v * cols, w + (int64_t)i * cols, cols) - 128 * rowsum[i];
            y[(int64_t)v * rows + i] = (float)acc * s[i] * sx[v] + b[i];
        }
}

/* Int4 weights packed per row and 128 columns into 64 bytes: byte b holds w[j + b] + 8 (low nibble) and
 * w[j + 64 + b] + 8 (high), w in [-8, 7], one scale a row, `rowsum` their sums. The sum over xu * (w + 8) less
 * 8 * sum(xu) is gemv_rows' accumulator, so the result has the same bits as gemv_rows on the unpacked weights. */
static inline int int4_weight(const uint8_t *w4, int cols, int i, int j) {
    const uint8_t byte = w4[(int64_t)i * (cols / 2) + j / 128 * 64 + j % 64];
    return (j % 128 < 64 ? byte & 15 : byte >> 4) - 8;
}

#if defined(__AVX2__)
/* One row's 128 columns of int4 nibbles (w + 8 in [1, 15], 64 bytes at `wp` as gemv4_rows reads them) against signed
 * activations (xu - 128, 32 columns in each of x0..x3) as eight 32-bit sums: the nibbles are vpmaddubsw's unsigned
 * operand, and its 16-bit pair sums (<= 2 * 15 * 127) leave room to add the block's four in 16 bits before one
 * vpmaddwd widens them (int8's AVX2 product takes one per 32 columns). */
__attribute__((always_inline)) static inline __m256i nibbles128_avx2(const uint8_t *wp, __m256i x0, __m256i x1,
                                                                    __m256i x2, __m256i x3) {
    const __m256i low = _mm256_set1_epi8(0x0F);
    const __m256i lo = _mm256_loadu_si256((const __m256i *)wp), hi = _mm256_loadu_si256((const __m256i *)(wp + 32));
    const __m256i p = _mm256_add_epi16(
        _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_and_si256(lo, low), x0),
                         _mm256_maddubs_epi16(_mm256_and_si256(hi, low), x1)),
        _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(lo, 4), low), x2),
                         _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(hi, 4), low), x3)));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}
#endif

static void gemv4_rows(const uint8_t *w4, const float *s, const int32_t *rowsum, const float *b,
                       const uint8_t *xu, const float *sx, int n, int rows, int cols, float *y, int i0, int i1) {
    int i = i0;
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
    /* Eight rows at a time as gemv_rows, each 64 bytes unpacked into two 64-column vectors (an and, a shift and an
     * and): int8's two vpdpbusd per 128 columns from half the bytes (benchmarks/probes/int4_gemv.c). */
    if (cols % 128 == 0) {
        const int half = cols / 2;
        const __m512i low = _mm512_set1_epi8(0x0F);
        int32_t sum_xu[n];  /* each vector's, once: the offset the nibbles' + 8 adds */
        for (int v = 0; v < n; ++v) {
            sum_xu[v] = 0;
            for (int j = 0; j < cols; ++j) sum_xu[v] += xu[(int64_t)v * cols + j];
        }
        for (; i + 8 <= i1; i += 8) {
            const uint8_t *w0 = w4 + (int64_t)i * half;
            for (int v = 0; v < n; ++v) {
                const uint8_t *xv0 = xu + (int64_t)v * cols;
                __m512i a[8];
                for (int k = 0; k < 8; ++k) a[k] = _mm512_setzero_si512();
                for (int j = 0; j < cols; j += 128) {
                    __m512i xl = _mm512_loadu_si512((const void *)(xv0 + j));
                    __m512i xh = _mm512_loadu_si512((const void *)(xv0 + j + 64));
                    for (int k = 0; k < 8; ++k) {
                        __m512i wv = _mm512_loadu_si512((const void *)(w0 + k * half + j / 2));
                        a[k] = _mm512_dpbusd_epi32(a[k], xl, _mm512_and_si512(wv, low));
                        a[k] = _mm512_dpbusd_epi32(a[k], xh, _mm512_and_si512(_mm512_srli_epi16(wv, 4), low));
                    }
                }
                const __m128i off = _mm_set1_epi32(8 * sum_xu[v]);
                for (int k = 0; k < 8; k += 4)
                    scale4(_mm_sub_epi32(reduce4(a[k], a[k + 1], a[k + 2], a[k + 3]), off), s, rowsum, b, sx[v],
                           y + (int64_t)v * rows, i + k);
            }
        }
    }
#elif defined(__AVX2__)
    /* Without VNNI the nibbles themselves are vpmaddubsw's unsigned operand against the signed activations (xu - 128):
     * no vpsignb (nibbles128_avx2). The sum over xs * (w + 8) less 8 * sum(xs) is sum(xs * w), which is gemv_rows'
     * accumulator less 128 * rowsum: the same integers, so the same bits. Four rows at a time, as int8's. */
    if (cols % 128 == 0) {
        const int half = cols / 2;
        int8_t xs[n * cols];
        int32_t sum_xs[n];
        for (int v = 0; v < n; ++v) {
            sum_xs[v] = 0;
            for (int j = 0; j < cols; ++j) {
                xs[(int64_t)v * cols + j] = (int8_t)(xu[(int64_t)v * cols + j] ^ 0x80);  /* xu - 128 */
                sum_xs[v] += xs[(int64_t)v * cols + j];
            }
        }
        for (; i + 4 <= i1; i += 4) {
            const uint8_t *w0 = w4 + (int64_t)i * half;
            for (int v = 0; v < n; ++v) {
                const int8_t *xs0 = xs + (int64_t)v * cols;
                __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
                for (int j = 0; j < cols; j += 128) {
                    const __m256i x0 = _mm256_loadu_si256((const __m256i *)(xs0 + j)),
                                  x1 = _mm256_loadu_si256((const __m256i *)(xs0 + j + 32)),
                                  x2 = _mm256_loadu_si256((const __m256i *)(xs0 + j + 64)),
                                  x3 = _mm256_loadu_si256((const __m256i *)(xs0 + j + 96));
                    a0 = _mm256_add_epi32(a0, nibbles128_avx2(w0 + j / 2, x0, x1, x2, x3));
                    a1 = _mm256_add_epi32(a1, nibbles128_avx2(w0 + half + j / 2, x0, x1, x2, x3));
                    a2 = _mm256_add_epi32(a2, nibbles128_avx2(w0 + 2 * half + j / 2, x0, x1, x2, x3));
                    a3 = _mm256_add_epi32(a3, nibbles128_avx2(w0 + 3 * half + j / 2, x0, x1, x2, x3));
                }
                store4_avx2(a0, a1, a2, a3, 8 * sum_xs[v], s, b, sx[v], y + (int64_t)v * rows, i);
            }
        }
    }
#endif
    for (; i < i1; ++i)
        for (int v = 0; v < n; ++v) {
            const uint8_t *xv0 = xu + (int64_t)v * cols;
            int32_t acc = 0;
            for (int j = 0; j < cols; ++j) acc += (int32_t)xv0[j] * int4_weight(w4, cols, i, j);
            y[(int64_t)v * rows + i] = (float)(acc - 128 * rowsum[i]) * s[i] * sx[v] + b[i];
        }
}

/* gemv4_rows with one scale per 128 columns (`g` [rows, cols / 128], `--weight_group 128`) in place of one a row:
 * y[v, i] = sx[v] * sum_k g[i, k] * (sum_{j in block k} w[i,j] * (xu[v, j] - 128)) + b[i] (`s` and `rowsum` unread).
 * A block's integer sum is exact as gemv4_rows' is; the blocks' scaled sums add in fp32, so results differ from an
 * fp64 reference by rounding only (exact where the scales are powers of two, as int8_products_check.c sets them).
 * One path for AVX2 and AVX512 hosts alike: nibbles128_avx2 per block, its eight 32-bit lanes less
 * the block's nibble offset (8 * its activation sum, in lane 0) converted to fp32 and accumulated times the block's
 * scale; ~one conversion and one FMA per row and 128 columns more than one scale a row. */
static void gemv4_groups(const uint8_t *w4, const float *g, const float *b, const uint8_t *xu, const float *sx, int n,
                         int rows, int cols, float *y, int i0, int i1) {
    const int blocks = cols / 128;
    int i = i0;
#if defined(__AVX2__) && defined(__FMA__)
    if (cols % 128 == 0) {
        const int half = cols / 2;
        int8_t xs[n * cols];
        __m256i offset[n * blocks];  /* lane 0: 8 * the block's sum of xs, what its nibbles' + 8 adds */
        for (int v = 0; v < n; ++v)
            for (int k = 0; k < blocks; ++k) {
                int32_t sum = 0;
                for (int j = k * 128; j < (k + 1) * 128; ++j) {
                    xs[(int64_t)v * cols + j] = (int8_t)(xu[(int64_t)v * cols + j] ^ 0x80);  /* xu - 128 */
                    sum += xs[(int64_t)v * cols + j];
                }
                offset[v * blocks + k] = _mm256_setr_epi32(8 * sum, 0, 0, 0, 0, 0, 0, 0);
            }
        for (; i + 4 <= i1; i += 4) {
            const uint8_t *w0 = w4 + (int64_t)i * half;
            const float *g0 = g + (int64_t)i * blocks;
            for (int v = 0; v < n; ++v) {
                const int8_t *xs0 = xs + (int64_t)v * cols;
                __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
                for (int k = 0, j = 0; k < blocks; ++k, j += 128) {
                    const __m256i x0 = _mm256_loadu_si256((const __m256i *)(xs0 + j)),
                                  x1 = _mm256_loadu_si256((const __m256i *)(xs0 + j + 32)),
                                  x2 = _mm256_loadu_si256((const __m256i *)(xs0 + j + 64)),
                                  x3 = _mm256_loadu_si256((const __m256i *)(xs0 + j + 96)),
                                  off = offset[v * blocks + k];
#define TF2RNN_BLOCK(acc, r) acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32( \
        nibbles128_avx2(w0 + (r) * half + j / 2, x0, x1, x2, x3), off)), _mm256_set1_ps(g0[(r) * blocks + k]), acc)
                    TF2RNN_BLOCK(a0, 0);
                    TF2RNN_BLOCK(a1, 1);
                    TF2RNN_BLOCK(a2, 2);
                    TF2RNN_BLOCK(a3, 3);
#undef TF2RNN_BLOCK
                }
                __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));  /* per lane: rows 0..3 */
                float acc[4];
                _mm_storeu_ps(acc, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
                for (int r = 0; r < 4; ++r) y[(int64_t)v * rows + i + r] = acc[r] * sx[v] + b[i + r];
            }
        }
    }
#endif
    for (; i < i1; ++i)
        for (int v = 0; v < n; ++v) {
            const uint8_t *xv0 = xu + (int64_t)v * cols;
            float acc = 0.f;
            for (int k = 0; k < blocks; ++k) {
                int32_t block = 0;
                for (int j = k * 128; j < (k + 1) * 128; ++j)
                    block += ((int32_t)xv0[j] - 128) * int4_weight(w4, cols, i, j);
                acc += (float)block * g[(int64_t)i * blocks + k];
            }
            y[(int64_t)v * rows + i] = acc * sx[v] + b[i];
        }
}

/* Whether gemv4_rows runs vectorised here (AVX512-VNNI or AVX2): the kernels' callers pack int4 weights only then
 * (elsewhere int8's product is the faster). */
static inline int int4_products_fast(void) {
#if (defined(__AVX512F__) && defined(__AVX512VNNI__)) || defined(__AVX2__)
    return 1;
#else
    return 0;
#endif
}

/* Rows i0 <= i < i1 of n vectors' product: gemv_rows, or where the weights are int4 (`w4` not NULL) gemv4_rows, or
 * gemv4_groups where they have a scale per 128 columns (`g` not NULL). */
static inline void gemv_batch_rows(const int8_t *w, const uint8_t *w4, const float *g, const float *s,
                                   const int32_t *rowsum, const float *b, const uint8_t *xu, const float *sx, int n,
                                   int rows, int cols, float *y, int i0, int i1) {
    if (w4 && g)
        gemv4_groups(w4, g, b, xu, sx, n, rows, cols, y, i0, i1);
    else if (w4)
        gemv4_rows(w4, s, rowsum, b, xu, sx, n, rows, cols, y, i0, i1);
    else
        gemv_rows(w, s, rowsum, b, xu, sx, n, rows, cols, y, i0, i1);
}

static void gemv_batch(const int8_t *w, const uint8_t *w4, const float *g, const float *s, const int32_t *rowsum,
                       const float *b, const uint8_t *xu, const float *sx, int n, int rows, int cols, float *y) {
    gemv_batch_rows(w, w4, g, s, rowsum, b, xu, sx, n, rows, cols, y, 0, rows);
}

/* gemv_batch split between this thread and pool.h's helper by rows (pool_claim's `two`), the same bits either way. */
typedef struct {
    const int8_t *w; const uint8_t *w4; const float *g, *s; const int32_t *rowsum; const float *b; const uint8_t *xu;
    const float *sx; int n, rows, cols; float *y;
} gemv_job;

static inline void gemv_part(void *ctx, int part, int parts) {
    const gemv_job *j = ctx;
    const int mid = parts == 1 ? j->rows : j->rows / 8 * 4;  /* a multiple of four: gemv_rows' blocks stay whole */
    gemv_batch_rows(j->w, j->w4, j->g, j->s, j->rowsum, j->b, j->xu, j->sx, j->n, j->rows, j->cols, j->y,
                    part ? mid : 0, part ? j->rows : mid);
}

/* gemv_batch (int4 weights from `w4` where not NULL, their scales per 128 columns from `g` where not NULL) split by
 * rows as above. */
static inline void gemv_split(int two, const int8_t *w, const uint8_t *w4, const float *g, const float *s,
                              const int32_t *rowsum, const float *b, const uint8_t *xu, const float *sx, int n,
                              int rows, int cols, float *y) {
    gemv_job j = {w, w4, g, s, rowsum, b, xu, sx, n, rows, cols, y};
    run_split(two, gemv_part, &j);
}

/* One activation vector: y[i] = s[i] * sx * (sum_j w[i,j] * (xu[j] - 128)) + b[i] (int4 weights from `w4`, scaled per
 * 128 columns by `g`). */
static void gemv(const int8_t *w, const uint8_t *w4, const float *g, const float *s, const int32_t *rowsum,
                 const float *b, const uint8_t *xu, float sx, int rows, int cols, float *y) {
    gemv_batch(w, w4, g, s, rowsum, b, xu, &sx, 1, rows, cols, y);
}

/* The model's tail after the cell: emb = normalize(readout(h) [+ running token mean]). `q` holds >= H
 * bytes; tsum_out gets tsum + tok (used with `residual`; tok NULL: tsum is complete, tsum_out unwritten), `seen`
 * counts tokens including this one. */
static void readout_normalize(const int8_t *w, const uint8_t *w4, const float *g, const float *s,
                              const int32_t *rowsum, const float *b, const float *h, int H, int O, int residual,
                              const float *tok, const float *tsum, const int64_t *seen, float *tsum_out, uint8_t *q,
                              float *emb) {
    float sh = quantize_u8(h, H, q);
    gemv(w, w4, g, s, rowsum, b, q, sh, O, H, emb);
    if (residual) {
        float inv_seen = 1.f / (float)(*seen);
        for (int k = 0; k < O; ++k) {
            if (tok) tsum_out[k] = tsum[k] + tok[k];
            emb[k] += (tok ? tsum_out[k] : tsum[k]) * inv_seen;
        }
    }
    float norm = 0.f;
    for (int k = 0; k < O; ++k) norm += emb[k] * emb[k];
    float inv = 1.f / fmaxf(sqrtf(norm), 1e-12f);
    for (int k = 0; k < O; ++k) emb[k] *= inv;
}

#endif

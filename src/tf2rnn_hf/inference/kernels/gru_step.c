/* One keystroke of a one-layer GRU student at batch 1, in one call: token vector -> int8 GRU step ->
 * int8 readout (+ running token mean) -> L2 normalisation.
 * The int8 arithmetic is int8.h's. Buffers are caller-owned; nothing here allocates or keeps state (but for
 * pool.h's helper thread, started once).
 */
#include "int8.h"

typedef struct {
    int32_t E, H, O, residual;
    const float *table;                                                        /* [V, E] */
    const int8_t *w_ih; const float *s_ih; const int32_t *r_ih; const float *b_ih; /* [3H, E] */
    const int8_t *w_hh; const float *s_hh; const int32_t *r_hh; const float *b_hh; /* [3H, H] */
    const int8_t *w_o;  const float *s_o;  const int32_t *r_o;  const float *b_o;  /* [O, H] */
} tf2rnn_gru_params;

static inline float sigmoid(float v) { return 1.f / (1.f + expf(-v)); }

/* seen: tokens including this one. h_out [H], tsum_out [O] (unused without the residual), emb [O]. */
void tf2rnn_gru_step(const tf2rnn_gru_params *p, int64_t token, const float *h, const float *tsum,
                     const int64_t *seen, float *h_out, float *tsum_out, float *emb) {
    const int E = p->E, H = p->H, O = p->O;
    const float *x = p->table + token * E;
    float gi[3 * H], gh[3 * H];
    uint8_t q[E > H ? E : H];

    /* The two products split with pool.h's helper by rows: each core reads half of the 2.7 MB of GRU-768's weights
     * (one core's whole share streamed from L3). */
    const int two = pool_claim();
    float sx = quantize_u8(x, E, q);
    gemv_split(two, p->w_ih, NULL, NULL, p->s_ih, p->r_ih, p->b_ih, q, &sx, 1, 3 * H, E, gi);
    float sh = quantize_u8(h, H, q);
    gemv_split(two, p->w_hh, NULL, NULL, p->s_hh, p->r_hh, p->b_hh, q, &sh, 1, 3 * H, H, gh);
    pool_release(two);
    for (int k = 0; k < H; ++k) { /* PyTorch's gate order: r, z, n */
        float r = sigmoid(gi[k] + gh[k]);
        float z = sigmoid(gi[H + k] + gh[H + k]);
        float n = tanhf(gi[2 * H + k] + r * gh[2 * H + k]);
        h_out[k] = (1.f - z) * n + z * h[k];
    }
    readout_normalize(p->w_o, NULL, NULL, p->s_o, p->r_o, p->b_o, h_out, H, O, p->residual, x, tsum, seen, tsum_out, q,
                      emb);
}

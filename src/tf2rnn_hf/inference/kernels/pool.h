/* A second thread for a keystroke: `run_split(two, task, ctx)` runs task(ctx, 0, 2) here and task(ctx, 1, 2) on
 * a helper thread where the keystroke claimed it (`pool_claim`), else task(ctx, 0, 1) alone. Each part writes
 * its own outputs with the same arithmetic, so results do not depend on the thread count.
 *
 * A keystroke is a chain of ~30 small products (six layers' Q/K/V, attention, output and feed-forward), tens of
 * microseconds each, about what waking a sleeping thread takes: so within a keystroke the helper spins between
 * tasks, and between keystrokes (a typist's are ~100 ms apart) it sleeps on a condition variable, woken by
 * `tf2rnn_pool_prewake` as the keystroke's Python part starts (the streaming encoder calls it), so that its
 * wake-up overlaps that work. A prewoken helper that no keystroke claims spins at most 1 ms, then sleeps, and so
 * does the helper after each keystroke. A keystroke never waits for a helper that is still asleep: on a 2-core VM a
 * woken thread took ~10 ms to be scheduled after a typist's idle gap, so the keystroke runs the helper's parts itself.
 * One keystroke at a time uses the helper (others, from other threads, run alone); `tf2rnn_set_threads(1)` turns
 * it off (the Python side follows torch.get_num_threads()).
 */
#ifndef TF2RNN_POOL_H
#define TF2RNN_POOL_H

typedef void (*tf2rnn_task)(void *ctx, int part, int parts);

/* pool.c: one helper for the whole library, whichever kernel's keystroke claims it. Hidden: not among the library's
 * exported symbols. */
#define TF2RNN_INTERNAL __attribute__((visibility("hidden")))

/* Claims the helper for one keystroke (starting it on first use) and wakes it: 1, or 0 where the keystroke
 * runs alone (one thread asked for, another keystroke holding the helper, or no thread to be had). */
TF2RNN_INTERNAL int pool_claim(void);
/* Ends a keystroke's claim: the helper goes back to sleep. */
TF2RNN_INTERNAL void pool_release(int claimed);
/* task(ctx, 0, 2) here and task(ctx, 1, 2) on the helper where `claimed` (here too where the helper is still asleep
 * once this thread's part is done: a woken thread can take milliseconds to be scheduled), else task(ctx, 0, 1). */
TF2RNN_INTERNAL void run_split(int claimed, tf2rnn_task task, void *ctx);

#endif

/* What the C probes time with: a monotonic clock in seconds, and qsort's comparison of doubles (for medians). */
#ifndef TF2RNN_PROBE_TIMING_H
#define TF2RNN_PROBE_TIMING_H
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif

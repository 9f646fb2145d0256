// Read bandwidth of an int8 weight stream the size of the six-layer student's gemvs (10.6 MB), 1 and 2 threads.
// gcc -O3 -march=native -pthread benchmarks/probes/read_bandwidth.c -o /tmp/read_bandwidth && /tmp/read_bandwidth
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define N (10600000L)
static int8_t *w;
typedef struct { long lo, hi; long long out; } job;
static void *run(void *p) {
  job *j = p; __m256i acc = _mm256_setzero_si256();
  for (long i = j->lo; i < j->hi; i += 32) acc = _mm256_add_epi8(acc, _mm256_loadu_si256((const __m256i *)(w + i)));
  long long s = 0; int8_t t[32]; _mm256_storeu_si256((__m256i *)t, acc); for (int k = 0; k < 32; ++k) s += t[k];
  j->out = s; return NULL;
}
static double now() { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main() {
  w = aligned_alloc(64, N); for (long i = 0; i < N; ++i) w[i] = (int8_t)i;
  for (int threads = 1; threads <= 2; ++threads) {
    double best = 1e9;
    for (int r = 0; r < 200; ++r) {
      job jobs[2]; pthread_t th[2]; double t0 = now();
      for (int k = 0; k < threads; ++k) { jobs[k].lo = N / 32 / threads * k * 32; jobs[k].hi = k == threads - 1 ? N / 32 * 32 : N / 32 / threads * (k + 1) * 32; }
      for (int k = 1; k < threads; ++k) pthread_create(&th[k], NULL, run, &jobs[k]);
      run(&jobs[0]);
      for (int k = 1; k < threads; ++k) pthread_join(th[k], NULL);
      double dt = now() - t0; if (dt < best) best = dt;
    }
    printf("%d thread(s): best %.0f us for 10.6 MB (%.1f GB/s)\n", threads, best * 1e6, N / best / 1e9);
  }
}

/* The keystroke kernels' helper thread (pool.h says how it is used). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TF2RNN_RELAX() _mm_pause()
#else
#define TF2RNN_RELAX() ((void)0)
#endif

#include "pool.h"

static struct {
    pthread_mutex_t owner;  /* held by the keystroke using the helper */
    pthread_mutex_t lock;   /* with `wake`: the helper's sleep */
    pthread_cond_t wake;
    atomic_uint posted, done;  /* task numbers: posted by the owner, done by the helper */
    atomic_uint taken;         /* the last task number claimed, by the helper or by the owner running its part */
    atomic_int held;           /* tf2rnn_pool_hold: the helper takes no task, as one not yet scheduled */
    atomic_int resting;        /* no keystroke holds the helper: it sleeps */
    atomic_int sleeping, started, threads;
    atomic_llong spin_until;   /* after a prewake or a keystroke: the helper spins until then (ns), unclaimed */
    atomic_llong waited;       /* ns keystrokes spent waiting for the helper to finish its part */
    tf2rnn_task task;
    void *ctx;
} tf2rnn_pool = {.owner = PTHREAD_MUTEX_INITIALIZER, .lock = PTHREAD_MUTEX_INITIALIZER,
                 .wake = PTHREAD_COND_INITIALIZER};

/* Tasks the helper has run in this process (what a test reads to see that it works). */
unsigned tf2rnn_helper_tasks(void) { return atomic_load(&tf2rnn_pool.done); }

/* For tests: while `held`, the helper takes no task, as a helper the OS has not scheduled yet, so each keystroke runs
 * the helper's parts itself (run_split). */
void tf2rnn_pool_hold(int held) { atomic_store(&tf2rnn_pool.held, held != 0); }

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Nanoseconds keystrokes have waited for the helper's part in this process: its wake-up and any imbalance
 * (benchmarks/probes/idle_keystroke.py). */
long long tf2rnn_helper_waited_ns(void) { return atomic_load(&tf2rnn_pool.waited); }

/* How many threads a keystroke may use (1 or 2; more count as 2). */
void tf2rnn_set_threads(int threads) { atomic_store(&tf2rnn_pool.threads, threads > 1 ? 2 : 1); }

/* How long a prewoken helper waits for its keystroke's claim before it sleeps again. */
#define TF2RNN_PREWAKE_NS 1000000LL

static int pool_spinning(void) {
    return !atomic_load(&tf2rnn_pool.resting) || now_ns() < atomic_load(&tf2rnn_pool.spin_until);
}

static void *pool_helper(void *first) {
    unsigned seen = (unsigned)(uintptr_t)first;
    for (;;) {
        unsigned posted;
        while ((posted = atomic_load(&tf2rnn_pool.posted)) == seen) {
            if (pool_spinning()) {
                TF2RNN_RELAX();
                continue;
            }
            pthread_mutex_lock(&tf2rnn_pool.lock);
            atomic_store(&tf2rnn_pool.sleeping, 1);
            while (atomic_load(&tf2rnn_pool.posted) == seen && !pool_spinning())
                pthread_cond_wait(&tf2rnn_pool.wake, &tf2rnn_pool.lock);
            atomic_store(&tf2rnn_pool.sleeping, 0);
            pthread_mutex_unlock(&tf2rnn_pool.lock);
        }
        seen = posted;
        /* Whoever takes the task number first runs the part: the keystroke takes it where the helper was still
         * asleep (run_split), and a helper that wakes late finds it taken. */
        unsigned open = posted - 1;
        if (!atomic_load(&tf2rnn_pool.held) && atomic_compare_exchange_strong(&tf2rnn_pool.taken, &open, posted)) {
            tf2rnn_pool.task(tf2rnn_pool.ctx, 1, 2);
            atomic_store(&tf2rnn_pool.done, posted);
        }
    }
    return NULL;
}

static void pool_wake(void) {
    if (atomic_load(&tf2rnn_pool.sleeping)) {
        pthread_mutex_lock(&tf2rnn_pool.lock);
        pthread_cond_signal(&tf2rnn_pool.wake);
        pthread_mutex_unlock(&tf2rnn_pool.lock);
    }
}

/* A forked child has no helper thread (and may hold copies of locked mutexes): it starts afresh. */
static void pool_after_fork(void) {
    pthread_mutex_init(&tf2rnn_pool.owner, NULL);
    pthread_mutex_init(&tf2rnn_pool.lock, NULL);
    pthread_cond_init(&tf2rnn_pool.wake, NULL);
    atomic_store(&tf2rnn_pool.started, 0);
    atomic_store(&tf2rnn_pool.sleeping, 0);
    atomic_store(&tf2rnn_pool.spin_until, 0);
    atomic_store(&tf2rnn_pool.done, atomic_load(&tf2rnn_pool.posted));
    atomic_store(&tf2rnn_pool.taken, atomic_load(&tf2rnn_pool.posted));
}

static void pool_register_fork(void) { pthread_atfork(NULL, NULL, pool_after_fork); }

int pool_claim(void) {
    if (atomic_load(&tf2rnn_pool.threads) < 2 || pthread_mutex_trylock(&tf2rnn_pool.owner) != 0) return 0;
    atomic_store(&tf2rnn_pool.resting, 0);
    if (!atomic_load(&tf2rnn_pool.started)) {
        static pthread_once_t registered = PTHREAD_ONCE_INIT;
        pthread_once(&registered, pool_register_fork);
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int failed = pthread_create(&thread, &attr, pool_helper,
                                    (void *)(uintptr_t)atomic_load(&tf2rnn_pool.posted));
        pthread_attr_destroy(&attr);
        if (failed) {
            atomic_store(&tf2rnn_pool.resting, 1);
            pthread_mutex_unlock(&tf2rnn_pool.owner);
            return 0;
        }
        atomic_store(&tf2rnn_pool.started, 1);
    }
    pool_wake();
    return 1;
}

/* A keystroke's Python part (tokenising, its checkpoints) runs before its native call: waking the helper as it
 * starts overlaps the helper's wake-up (~10 us on a 2-core VM) with that work instead of the first product. The
 * helper then spins until the keystroke claims it, or for TF2RNN_PREWAKE_NS where none does (a keystroke that steps
 * nothing), and sleeps again. Only where a keystroke may use two threads and the helper has started. */
void tf2rnn_pool_prewake(void) {
    if (atomic_load(&tf2rnn_pool.threads) < 2 || !atomic_load(&tf2rnn_pool.started)) return;
    atomic_store(&tf2rnn_pool.spin_until, now_ns() + TF2RNN_PREWAKE_NS);
    pool_wake();
}

void pool_release(int claimed) {
    if (!claimed) return;
    /* The helper spins a while longer, so that a keystroke right behind this one (a batch of streams, a paste) finds it
     * awake rather than running its parts alone; a typist's next keystroke, ~100 ms on, finds it asleep. */
    atomic_store(&tf2rnn_pool.spin_until, now_ns() + TF2RNN_PREWAKE_NS);
    atomic_store(&tf2rnn_pool.resting, 1);
    pthread_mutex_unlock(&tf2rnn_pool.owner);
}

void run_split(int claimed, tf2rnn_task task, void *ctx) {
    if (!claimed) {
        task(ctx, 0, 1);
        return;
    }
    tf2rnn_pool.task = task;
    tf2rnn_pool.ctx = ctx;
    const unsigned posted = atomic_load(&tf2rnn_pool.posted) + 1;
    atomic_store(&tf2rnn_pool.posted, posted);
    task(ctx, 0, 2);
    const long long start = now_ns();
    int own = 0;
    while (atomic_load(&tf2rnn_pool.done) != posted) {
        /* A helper still asleep holds the keystroke up until the OS schedules it: on a 2-core VM after a typist's
         * idle gap that took ~11 ms (student-speed-v35 to -v45's two-thread idle keystrokes, against ~0.6 ms on one
         * thread). Its part runs here instead, unless it has taken it. */
        unsigned open = posted - 1;
        if ((atomic_load(&tf2rnn_pool.sleeping) || atomic_load(&tf2rnn_pool.held)) &&
            atomic_compare_exchange_strong(&tf2rnn_pool.taken, &open, posted)) {
            own = 1;
            break;
        }
        TF2RNN_RELAX();
    }
    atomic_fetch_add(&tf2rnn_pool.waited, now_ns() - start);
    if (own) task(ctx, 1, 2);
}

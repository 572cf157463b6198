/*
 * The block launcher of the cython backend: runs a CPU kernel's parallel block loop on a small
 * pool of threads owned by the dispatcher (no OpenMP runtime is linked into kernels).
 *
 * Why not OpenMP: torch ships its own libgomp, and every kernel linked with -fopenmp shares it.
 * libgomp's threads spin-wait (hundreds of thousands of iterations) at the end of every parallel
 * region, and the thread that started the region waits at a barrier for every team member to
 * arrive. On a busy machine a spinning team member is descheduled, and each call then waits for
 * the scheduler to run it again: milliseconds for a kernel that takes microseconds.
 *
 * This pool never spins and never waits for a thread that has not started:
 *   - workers sleep on a condition variable; the caller publishes a job and wakes at most
 *     team - 1 of them, then claims chunks of blocks itself (an atomic counter; guided sizes, see tl_claim);
 *   - a worker joins a job only by claiming its first chunk under the pool's lock, so every
 *     worker the caller waits for holds work; workers that wake late find the job closed;
 *   - once the caller runs out of chunks it closes the job and waits only for the workers that
 *     are still running chunks they claimed.
 * A second caller (another Python thread) finding the pool busy runs its blocks serially. After
 * fork() the child starts with no workers. The team size is the caller's choice: the dispatcher
 * passes torch.get_num_threads().
 *
 * Parallel only while it pays: each parallel run compares its wall time with the CPU time its
 * chunks took (what a serial run would need). When it gained less than 10% (the machine is busy,
 * a helper was descheduled, or the kernel is too small), later runs of the same block function
 * go serial for a back-off window (TL_POOL_BACKOFF_MIN_NS, doubling up to TL_POOL_BACKOFF_MAX_NS
 * while the probes keep failing), then parallel is tried again.
 */
#ifndef TL_CY_POOL_H
#define TL_CY_POOL_H

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>

#define TL_POOL_MAX_THREADS 64
#define TL_POOL_BACKOFF_MIN_NS 50000000LL    /* 50 ms */
#define TL_POOL_BACKOFF_MAX_NS 2000000000LL  /* 2 s */
#define TL_POOL_ADAPT_SLOTS 64

typedef int32_t (*tl_blocks_fn)(void *args, int64_t begin, int64_t end);
typedef int32_t (*tl_block_launcher_fn)(int64_t blocks, int64_t work, tl_blocks_fn fn, void *args);

typedef struct {
  tl_blocks_fn fn;
  void *args;
  int64_t blocks, chunk; /* chunk: the smallest claim */
  int team;
  int64_t next;   /* next block to claim (atomic) */
  int32_t rc;     /* the first failed chunk's return code, kept whole: it says which check failed (atomic) */
  int active;     /* workers running chunks of this job (under the pool lock) */
  int64_t cpu_ns; /* CPU time the workers spent on chunks (atomic) */
} tl_job;

/* back-off state of one block function (slots shared by hash; only the pool's owner writes) */
typedef struct {
  int64_t serial_until_ns;
  int64_t backoff_ns;
} tl_adapt;

static tl_adapt tl_adapt_slots[TL_POOL_ADAPT_SLOTS];

/* counters (for tests and benchmarks): parallel runs, those that did not pay, serial runs */
static int64_t tl_pool_stat_parallel, tl_pool_stat_unpaid, tl_pool_stat_serial;

static int64_t tl_clock_ns(clockid_t clock) {
  struct timespec ts;
  if (clock_gettime(clock, &ts) != 0) return 0;
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

typedef struct {
  pthread_mutex_t lock;
  pthread_cond_t wake; /* workers wait here for a job */
  pthread_cond_t idle; /* the caller waits here for the job's workers to finish */
  int threads;         /* workers started */
  int tickets;         /* workers that may still join the current job */
  int busy;            /* a caller owns the pool (atomic) */
  tl_job *job;         /* the open job, or NULL */
} tl_pool;

static tl_pool tl_the_pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
                              0, 0, 0, NULL};
static pthread_once_t tl_pool_once = PTHREAD_ONCE_INIT;

/* claims the next chunk of blocks, [returned value, *end); returns a value >= job->blocks when
 * none is left. Guided: a chunk is the blocks left over twice the team, at least job->chunk, so
 * the first chunks are large (few claims, long runs of adjacent blocks) and the last ones small
 * (a helper that wakes late still takes a fair share). */
static int64_t tl_claim(tl_job *job, int64_t *end) {
  int64_t b = __atomic_load_n(&job->next, __ATOMIC_RELAXED);
  for (;;) {
    int64_t size, e;
    if (b >= job->blocks) return b;
    size = (job->blocks - b) / (2 * (int64_t)job->team);
    if (size < job->chunk) size = job->chunk;
    e = job->blocks - b > size ? b + size : job->blocks;
    if (__atomic_compare_exchange_n(&job->next, &b, e, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
      *end = e;
      return b;
    }
  }
}

/* runs the claimed chunk [b, e), then claims and runs chunks until none is left */
static void tl_run_chunks(tl_job *job, int64_t b, int64_t e) {
  while (b < job->blocks) {
    int32_t rc = job->fn(job->args, b, e), none = 0;
    if (rc != 0) __atomic_compare_exchange_n(&job->rc, &none, rc, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    b = tl_claim(job, &e);
  }
}

static void *tl_pool_worker(void *unused) {
  tl_pool *P = &tl_the_pool;
  (void)unused;
  pthread_mutex_lock(&P->lock);
  for (;;) {
    tl_job *job;
    int64_t b, e = 0;
    while (P->job == NULL || P->tickets <= 0) pthread_cond_wait(&P->wake, &P->lock);
    job = P->job;
    P->tickets--;
    b = tl_claim(job, &e);
    if (b >= job->blocks) continue; /* nothing left: do not join */
    job->active++;
    pthread_mutex_unlock(&P->lock);
    {
      int64_t c0 = tl_clock_ns(CLOCK_THREAD_CPUTIME_ID);
      tl_run_chunks(job, b, e);
      __atomic_fetch_add(&job->cpu_ns, tl_clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0, __ATOMIC_RELAXED);
    }
    pthread_mutex_lock(&P->lock);
    if (--job->active == 0 && P->job != job) pthread_cond_broadcast(&P->idle);
  }
  return NULL;
}

static void tl_pool_after_fork_child(void) {
  tl_pool *P = &tl_the_pool;
  pthread_mutex_init(&P->lock, NULL);
  pthread_cond_init(&P->wake, NULL);
  pthread_cond_init(&P->idle, NULL);
  P->threads = 0;
  P->tickets = 0;
  P->busy = 0;
  P->job = NULL;
}

static void tl_pool_before_fork(void) { pthread_mutex_lock(&tl_the_pool.lock); }
static void tl_pool_after_fork_parent(void) { pthread_mutex_unlock(&tl_the_pool.lock); }

static void tl_pool_init(void) {
  pthread_atfork(tl_pool_before_fork, tl_pool_after_fork_parent, tl_pool_after_fork_child);
}

/* starts workers until `want` exist (under the lock); returns how many exist */
static int tl_pool_grow(tl_pool *P, int want) {
  sigset_t all, old;
  if (want > TL_POOL_MAX_THREADS) want = TL_POOL_MAX_THREADS;
  if (P->threads >= want) return P->threads;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* workers never take the program's signals */
  while (P->threads < want) {
    pthread_t t;
    pthread_attr_t attr;
    int ok;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    ok = pthread_create(&t, &attr, tl_pool_worker, NULL) == 0;
    pthread_attr_destroy(&attr);
    if (!ok) break;
    P->threads++;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return P->threads;
}

/* runs blocks [0, blocks) on the caller and up to team - 1 workers; returns the first failed rc */
static int32_t tl_pool_run(int team, int64_t blocks, tl_blocks_fn fn, void *args) {
  tl_pool *P = &tl_the_pool;
  tl_adapt *adapt = &tl_adapt_slots[((uintptr_t)fn >> 4) % TL_POOL_ADAPT_SLOTS];
  tl_job job;
  int helpers, i;
  int64_t t0, c0, caller_cpu, wall;
  pthread_once(&tl_pool_once, tl_pool_init);
  t0 = team < 2 || blocks < 2 ? 0 : tl_clock_ns(CLOCK_MONOTONIC);
  if (t0 == 0 || t0 < __atomic_load_n(&adapt->serial_until_ns, __ATOMIC_RELAXED) ||
      __atomic_exchange_n(&P->busy, 1, __ATOMIC_ACQUIRE)) {
    __atomic_fetch_add(&tl_pool_stat_serial, 1, __ATOMIC_RELAXED);
    return fn(args, 0, blocks);
  }
  __atomic_fetch_add(&tl_pool_stat_parallel, 1, __ATOMIC_RELAXED);
  job.fn = fn;
  job.args = args;
  job.blocks = blocks;
  job.team = team;
  job.chunk = blocks / ((int64_t)team * 64);
  if (job.chunk < 1) job.chunk = 1;
  job.next = 0;
  job.rc = 0;
  job.active = 0;
  job.cpu_ns = 0;
  pthread_mutex_lock(&P->lock);
  helpers = tl_pool_grow(P, team - 1);
  if (helpers > team - 1) helpers = team - 1;
  P->job = &job;
  P->tickets = helpers;
  for (i = 0; i < helpers; i++) pthread_cond_signal(&P->wake);
  pthread_mutex_unlock(&P->lock);

  c0 = tl_clock_ns(CLOCK_THREAD_CPUTIME_ID);
  {
    int64_t b, e = 0;
    b = tl_claim(&job, &e);
    tl_run_chunks(&job, b, e);
  }
  caller_cpu = tl_clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;

  pthread_mutex_lock(&P->lock);
  P->job = NULL; /* closed: late workers go back to sleep */
  P->tickets = 0;
  while (job.active > 0) pthread_cond_wait(&P->idle, &P->lock);
  pthread_mutex_unlock(&P->lock);

  /* did it pay? wall time against the CPU time of all chunks (a serial run's length) */
  wall = tl_clock_ns(CLOCK_MONOTONIC) - t0;
  if (wall * 10 > (caller_cpu + job.cpu_ns) * 9) {
    int64_t backoff = adapt->backoff_ns ? adapt->backoff_ns * 2 : TL_POOL_BACKOFF_MIN_NS;
    if (backoff > TL_POOL_BACKOFF_MAX_NS) backoff = TL_POOL_BACKOFF_MAX_NS;
    adapt->backoff_ns = backoff;
    __atomic_fetch_add(&tl_pool_stat_unpaid, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&adapt->serial_until_ns, t0 + wall + backoff, __ATOMIC_RELAXED);
  } else {
    adapt->backoff_ns = 0;
  }
  __atomic_store_n(&P->busy, 0, __ATOMIC_RELEASE);
  return job.rc;
}

/* number of worker threads started (for tests) */
static int tl_pool_threads(void) {
  int n;
  pthread_mutex_lock(&tl_the_pool.lock);
  n = tl_the_pool.threads;
  pthread_mutex_unlock(&tl_the_pool.lock);
  return n;
}

#endif /* TL_CY_POOL_H */

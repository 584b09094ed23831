// SPDX-License-Identifier: MIT
/*
 * The reclaimer: grace periods for replaced images, and who frees them.
 *
 * Through liburcu's call_rcu every replaced image was freed on its reclaim
 * thread, which sleeps 10 ms after each round: at a few hundred thousand
 * publications a second, tens of thousands of images were waiting at any
 * moment, and their frees arrived in bursts on another thread, contending
 * with the writer's allocations for the same arena. Freeing on the writer's
 * own thread, soon after a grace period, makes a full publication about
 * twice as fast (adopt 2.3 -> 1.0 us, controller use at 10k values 133 ->
 * 60-76 us on the reference VM; Documentation/performance.md).
 *
 * So there are two kinds of batches (image.c, rsd__reclaim_flush):
 * - plain batches (images and the small tables they retired) stay with
 *   their manager (m->gpq). The writer asks for a grace period
 *   (rsd__gp_request) and frees the batch itself, on a later writer call,
 *   once rsd__gp_done says that period ended: its objects go back to the
 *   manager's slab (lib/base/slab.h), where the next publications find them;
 * - batches holding memory or device events go to this thread, which frees
 *   them right after their grace period: they must not wait for the
 *   writer's next call.
 *
 * The thread runs one synchronize_rcu() for everything asked so far, then
 * rests 1 ms: each grace period interrupts every thread of the process (the
 * membarrier it uses), so back-to-back periods would slow the writer they
 * serve. One thread per process, started at the first request and ended
 * when the last manager is destroyed (rsd__reclaim_put), so that a program
 * that destroyed its managers leaves no thread of librsd's running: its
 * stack and thread-local blocks are gone before exit, and valgrind finds
 * nothing "possibly lost". The next request starts it again. Locking:
 * rq.lock protects the queue, the thread's state and the counters'
 * writers; `completed` is also read without it (acquire).
 */
#include <stdlib.h>
#include <time.h>

#include "core.h"
#include "rcu_annot.h"

static struct {
	pthread_mutex_t lock;
	pthread_cond_t work;		/* a grace period was asked for */
	pthread_cond_t done;		/* completed advanced */
	struct rsd_image *head, *tail;	/* batches the thread frees, via gp_next */
	uint64_t requested;		/* grace periods asked for */
	atomic_uint_fast64_t completed; /* requests a finished period covers */
	unsigned long managers;		/* live managers (rsd__reclaim_get/put) */
	pthread_t thread;
	bool started; /* thread runs (or is being stopped) */
	bool stop;    /* thread: exit once the queue is empty */
} rq = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.work = PTHREAD_COND_INITIALIZER,
	.done = PTHREAD_COND_INITIALIZER,
};

static pthread_once_t rq_once = PTHREAD_ONCE_INIT;

#define RSD_GP_REST_NS 1000000L

/*
 * One round, entered and left with rq.lock held: one grace period for
 * everything asked so far, then the batches queued until then freed.
 */
static void serve_locked(void)
{
	struct rsd_image *b = rq.head, *next;
	uint64_t target = rq.requested;

	rq.head = rq.tail = NULL;
	pthread_mutex_unlock(&rq.lock);
	/* Every reader that could still see those images has left. */
	rsd__rcu_synchronize();
	for (; b; b = next) {
		next = b->gp_next;
		rsd__image_reclaim(b, false);
	}
	pthread_mutex_lock(&rq.lock);
	atomic_store_explicit(&rq.completed, target, memory_order_release);
	pthread_cond_broadcast(&rq.done);
}

static void *reclaimer(void *unused)
{
	struct timespec rest = { 0, RSD_GP_REST_NS };

	(void)unused;
	pthread_mutex_lock(&rq.lock);
	for (;;) {
		while (atomic_load(&rq.completed) == rq.requested && !rq.stop)
			pthread_cond_wait(&rq.work, &rq.lock);
		if (atomic_load(&rq.completed) == rq.requested)
			break; /* stopped, nothing left */
		serve_locked();
		pthread_mutex_unlock(&rq.lock);
		nanosleep(&rest, NULL);
		pthread_mutex_lock(&rq.lock);
	}
	pthread_mutex_unlock(&rq.lock);
	return NULL;
}

/* In a child after fork() the thread is gone: start afresh (what the
 * parent had queued is the parent's to free). */
static void rq_atfork_child(void)
{
	pthread_mutex_init(&rq.lock, NULL);
	pthread_cond_init(&rq.work, NULL);
	pthread_cond_init(&rq.done, NULL);
	rq.head = rq.tail = NULL;
	rq.requested = 0;
	atomic_store(&rq.completed, 0);
	rq.started = rq.stop = false;
}

static void rq_init(void)
{
	pthread_atfork(NULL, NULL, rq_atfork_child);
}

/* Start the thread once; false if it cannot be. rq.lock held. */
static bool rq_start_locked(void)
{
	if (rq.started)
		return true;
	rq.started = !pthread_create(&rq.thread, NULL, reclaimer, NULL);
	return rq.started;
}

/* Ask for a grace period; with batch, the thread frees it after that
 * period. Returns the request's number, 0 if no thread could be started
 * (the caller then waits for the period itself). */
static uint64_t rq_request(struct rsd_image *batch)
{
	uint64_t seq = 0;

	pthread_once(&rq_once, rq_init);
	pthread_mutex_lock(&rq.lock);
	if (rq_start_locked()) {
		if (batch)
			rsd__gp_queue_append(&rq.head, &rq.tail, batch);
		seq = ++rq.requested;
		pthread_cond_signal(&rq.work);
	}
	pthread_mutex_unlock(&rq.lock);
	return seq;
}

uint64_t rsd__gp_request(void)
{
	uint64_t seq = rq_request(NULL);

	if (!seq) {
		/* No thread (resource limits): the period, here and now. */
		rsd__rcu_synchronize();
	}
	return seq;
}

bool rsd__gp_done(uint64_t seq)
{
	return atomic_load_explicit(&rq.completed, memory_order_acquire) >= seq;
}

void rsd__reclaim_submit(struct rsd_image *batch)
{
	if (rq_request(batch))
		return;
	rsd__rcu_synchronize();
	rsd__image_reclaim(batch, false);
}

void rsd__reclaim_barrier(void)
{
	uint64_t target;

	pthread_once(&rq_once, rq_init);
	pthread_mutex_lock(&rq.lock);
	target = rq.requested;
	while (atomic_load(&rq.completed) < target)
		pthread_cond_wait(&rq.done, &rq.lock);
	pthread_mutex_unlock(&rq.lock);
}

void rsd__reclaim_get(void)
{
	pthread_once(&rq_once, rq_init);
	pthread_mutex_lock(&rq.lock);
	rq.managers++;
	pthread_mutex_unlock(&rq.lock);
}

/*
 * The last manager is gone: end the thread once it has freed what it was
 * given. rq.stop set, it leaves when the queue is empty; a request made
 * meanwhile is still served (the thread checks stop only with nothing to
 * do), or, made after it left, starts a new thread below. Only one caller
 * joins: rq.stop stays set until the join is done.
 */
void rsd__reclaim_put(void)
{
	pthread_t t;

	pthread_mutex_lock(&rq.lock);
	if (--rq.managers || !rq.started || rq.stop) {
		pthread_mutex_unlock(&rq.lock);
		return;
	}
	rq.stop = true;
	t = rq.thread;
	pthread_cond_signal(&rq.work);
	pthread_mutex_unlock(&rq.lock);
	pthread_join(t, NULL);
	pthread_mutex_lock(&rq.lock);
	rq.stop = false;
	rq.started = false;
	/* A manager created meanwhile may have asked for a period already:
	 * a new thread serves it, or, when none starts, this one. */
	if (atomic_load(&rq.completed) != rq.requested && !rq_start_locked())
		serve_locked();
	pthread_mutex_unlock(&rq.lock);
}

/* SPDX-License-Identifier: MIT */
/*
 * librsd's RCU primitives, written so that ThreadSanitizer sees the
 * happens-before edges RCU guarantees (Documentation/reliability.md,
 * "ThreadSanitizer").
 *
 * liburcu 0.13 (Debian bookworm) publishes and dereferences with volatile
 * accesses and barriers in inline assembly, and waits for readers inside a
 * library TSan does not instrument: a TSan build saw every publication as a
 * race (827 reports on the suite). So librsd's own RCU points go through
 * these few names, and in a TSan build:
 *
 *  - rsd__rcu_publish() is a release store and rsd__rcu_deref() an acquire
 *    load of the image pointer: what the writer built before publishing
 *    happens before what a reader reads through the pointer;
 *  - rsd__rcu_read_unlock() releases, and rsd__rcu_synchronize() acquires
 *    after its grace period, one clock (rsd__rcu_gp_clock): everything a
 *    reader did inside its read-side section happens before whatever the
 *    thread that waited out the period does next, the frees of reclaim
 *    included, and before what other threads do after learning of that
 *    period (the reclaimer publishes it through rq.completed, an atomic
 *    TSan sees).
 *
 * The writer's own side needs no annotation: a batch reaches the reclaimer
 * under rq.lock and returns to the writer's slab by a release CAS and an
 * acquire exchange (lib/base/slab.c), all of which TSan understands. The model
 * is slightly stronger than RCU: a section that begins after a grace period
 * began also releases into its end; TSan may then miss a race between such
 * a reader and the reclaimer, never report one that is not there.
 *
 * Outside TSan builds every name expands to the liburcu call it stands for
 * and nothing else.
 *
 * Mutations (tests/tsan/mutations, never in a normal build): each one
 * removes one edge, so the TSan build must report:
 *  RSD_MUTATE_PLAIN_PUBLISH	publication by a plain store;
 *  RSD_MUTATE_NO_READ_SECTION	readers outside any read-side section;
 *  RSD_MUTATE_NO_GRACE_PERIOD	reclamation without waiting for readers.
 */
#ifndef RSD_RCU_ANNOT_H
#define RSD_RCU_ANNOT_H

#ifndef _LGPL_SOURCE
#define _LGPL_SOURCE
#endif
#include <urcu/urcu-memb.h>

#if defined(__SANITIZE_THREAD__)
#define RSD_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RSD_TSAN 1
#endif
#endif
#ifndef RSD_TSAN
#define RSD_TSAN 0
#endif

#if RSD_TSAN
/* The TSan runtime's own interface (sanitizer/tsan_interface.h in LLVM). */
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
/* The clock readers release into and grace periods acquire (image.c). */
extern char rsd__rcu_gp_clock;
#define rsd__rcu_publish(p, v) __atomic_store_n(&(p), (v), __ATOMIC_RELEASE)
#define rsd__rcu_deref(p) __atomic_load_n(&(p), __ATOMIC_ACQUIRE)
#define rsd__tsan_release_gp() __tsan_release(&rsd__rcu_gp_clock)
#define rsd__tsan_acquire_gp() __tsan_acquire(&rsd__rcu_gp_clock)
#else
#define rsd__rcu_publish(p, v) rcu_assign_pointer(p, v)
#define rsd__rcu_deref(p) rcu_dereference(p)
#define rsd__tsan_release_gp() ((void)0)
#define rsd__tsan_acquire_gp() ((void)0)
#endif

#ifdef RSD_MUTATE_PLAIN_PUBLISH
#undef rsd__rcu_publish
#define rsd__rcu_publish(p, v) ((p) = (v))
#endif

static inline void rsd__rcu_read_lock(void)
{
#ifndef RSD_MUTATE_NO_READ_SECTION
	urcu_memb_read_lock();
#endif
}

static inline void rsd__rcu_read_unlock(void)
{
#ifndef RSD_MUTATE_NO_READ_SECTION
	rsd__tsan_release_gp();
	urcu_memb_read_unlock();
#endif
}

/* Wait until every read-side section that began before this call ended. */
static inline void rsd__rcu_synchronize(void)
{
#ifndef RSD_MUTATE_NO_GRACE_PERIOD
	urcu_memb_synchronize_rcu();
	rsd__tsan_acquire_gp();
#endif
}

#endif

// SPDX-License-Identifier: MIT
/*
 * The pageable block cache (see pcache.h for the policy): a small array of
 * held blocks in the order they were freed, searched newest first so that
 * the block reused is the one whose pages are most likely still hot.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "pcache.h"

struct pcache_slot {
	void *ptr;
	uint64_t size; /* the size class: what the block really holds */
};

static struct {
	pthread_mutex_t lock;
	/*
	 * Everything below is protected by lock. slot[0 .. n) are the held
	 * blocks, oldest first; bytes is the sum of their sizes. A block is
	 * either here or owned by exactly one value, never both: alloc removes
	 * it under the lock before returning it, and free adds it only after
	 * its value is gone.
	 */
	struct pcache_slot slot[RSD__PCACHE_MAX_BLOCKS];
	unsigned n;
	uint64_t bytes;
	struct rsd__pcache_stats stats; /* nblocks and bytes filled in on read */
} pc = { .lock = PTHREAD_MUTEX_INITIALIZER };

static pthread_once_t pc_once = PTHREAD_ONCE_INIT;

/* A fork while another thread holds the lock (a reclaimer's free) would
 * leave the child's copy locked forever: hold it across the fork. */
static void pc_lock_fork(void)
{
	pthread_mutex_lock(&pc.lock);
}

static void pc_unlock_fork(void)
{
	pthread_mutex_unlock(&pc.lock);
}

static void pc_init(void)
{
	pthread_atfork(pc_lock_fork, pc_unlock_fork, pc_unlock_fork);
}

static void pc_lock(void)
{
	pthread_once(&pc_once, pc_init);
	pthread_mutex_lock(&pc.lock);
}

static bool cacheable(uint64_t nbytes)
{
	return nbytes >= RSD__PCACHE_MIN_BYTES && nbytes <= RSD__PCACHE_MAX_BYTES;
}

static uint64_t class_of(uint64_t nbytes)
{
	return (nbytes + RSD__PCACHE_CLASS - 1) & ~(RSD__PCACHE_CLASS - 1);
}

/* Remove slot i, keeping the others in order. Called with lock held. */
static void slot_remove(unsigned i)
{
	pc.bytes -= pc.slot[i].size;
	memmove(&pc.slot[i], &pc.slot[i + 1], (pc.n - i - 1) * sizeof(pc.slot[0]));
	pc.n--;
}

int rsd__pcache_alloc(uint64_t nbytes, void **ptr)
{
	uint64_t size = nbytes;
	void *p = NULL;

	if (cacheable(nbytes)) {
		size = class_of(nbytes);
		pc_lock();
		for (unsigned i = pc.n; i-- > 0;) {
			if (pc.slot[i].size == size) {
				p = pc.slot[i].ptr;
				slot_remove(i);
				break;
			}
		}
		if (p)
			pc.stats.hits++;
		else
			pc.stats.misses++;
		pthread_mutex_unlock(&pc.lock);
		if (p) {
			*ptr = p;
			return 0;
		}
	}
	if (size > SIZE_MAX || posix_memalign(&p, 64, (size_t)size))
		return -1;
	*ptr = p;
	return 0;
}

void rsd__pcache_free(void *ptr, uint64_t nbytes)
{
	struct pcache_slot out[RSD__PCACHE_MAX_BLOCKS];
	unsigned nout = 0;
	uint64_t size;

	if (!ptr)
		return;
	if (!cacheable(nbytes)) {
		free(ptr);
		return;
	}
	size = class_of(nbytes);
	pc_lock();
	/* Make room by evicting the oldest; free them after unlocking (a
	 * large free is an munmap). */
	while (pc.n &&
	       (pc.n == RSD__PCACHE_MAX_BLOCKS || pc.bytes + size > RSD__PCACHE_MAX_BYTES)) {
		out[nout++] = pc.slot[0];
		slot_remove(0);
	}
	pc.slot[pc.n++] = (struct pcache_slot){ ptr, size };
	pc.bytes += size;
	pc.stats.puts++;
	pc.stats.evictions += nout;
	pthread_mutex_unlock(&pc.lock);
	for (unsigned i = 0; i < nout; i++)
		free(out[i].ptr);
}

unsigned rsd__pcache_drain(void)
{
	struct pcache_slot out[RSD__PCACHE_MAX_BLOCKS];
	unsigned n;

	pc_lock();
	n = pc.n;
	memcpy(out, pc.slot, n * sizeof(out[0]));
	pc.n = 0;
	pc.bytes = 0;
	pthread_mutex_unlock(&pc.lock);
	for (unsigned i = 0; i < n; i++)
		free(out[i].ptr);
	return n;
}

void rsd__pcache_stats(struct rsd__pcache_stats *out)
{
	pc_lock();
	*out = pc.stats;
	out->nblocks = pc.n;
	out->bytes = pc.bytes;
	pthread_mutex_unlock(&pc.lock);
}

/* Nothing held outlives the library: LeakSanitizer and valgrind see every
 * block freed, and a dlclose'd librsd leaves no memory behind. */
__attribute__((destructor)) static void pcache_exit(void)
{
	rsd__pcache_drain();
}

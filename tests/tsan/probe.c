// SPDX-License-Identifier: MIT
/*
 * Can a ThreadSanitizer program run here? `make check SANITIZE=thread`
 * runs this first, then again under `setarch -R` when it fails: the TSan
 * runtime of GCC 12 refuses to start where the kernel randomizes mappings
 * with more bits than its memory layout allows (vm.mmap_rnd_bits above 28,
 * the default of newer kernels), and without address randomization it
 * starts. Two threads meet at a mutex, so the runtime's thread and lock
 * machinery is exercised too. Built in every build; it does nothing
 * special outside TSan.
 */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int shared;

static void *bump(void *arg)
{
	pthread_mutex_lock(&mu);
	shared++;
	pthread_mutex_unlock(&mu);
	return arg;
}

int main(void)
{
	pthread_t t;

	if (pthread_create(&t, NULL, bump, NULL))
		return 1;
	bump(NULL);
	if (pthread_join(t, NULL))
		return 1;
	printf("tsan probe: %d\n", shared);
	return shared == 2 ? 0 : 1;
}

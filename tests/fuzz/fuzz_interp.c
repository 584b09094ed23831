// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: the model interpreter (tests/model/interp.c) driven by
 * the fuzz bytes instead of a seed; every decision consumes input. A
 * divergence from the reference model aborts, so libFuzzer keeps the input
 * as a crash artifact. `make fuzz FUZZ_SECONDS=N`.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../model/model.c"
#include "../model/model_plan.c"
#include "../model/invariants.c"
#include "../model/interp.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ip_stats st;
	static char why[16384];
	struct ip_opts o = { .seed = 0, .data = data, .len = size };

	if (size < 2 || size > 4096)
		return 0;
	if (ip_run(&o, &st, why, sizeof(why))) {
		fprintf(stderr, "fuzz_interp: divergence from the model:\n%s", why);
		abort();
	}
	return 0;
}

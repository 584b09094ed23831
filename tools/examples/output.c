// SPDX-License-Identifier: MIT
/*
 * Producing results: a step's output adopted into the reservation made
 * for it.
 *
 * The request names the input the step reads and reserves room at cuda:0
 * for the output it writes, so the decision makes room for both. A kernel
 * on the use's consumer stream (here a host function on the simulated
 * device, which runs it in the background like a GPU would) reads the
 * leased input and writes the output. rsd_use_adopt() hands the output to
 * the manager against that reservation while the kernel may still run: its
 * bytes move from reserved to used in one step, and until an event on the
 * stream says the kernel is done the output is filling: nothing drops or
 * moves it, and whoever reads it is ordered after the kernel.
 */
#include <stdio.h>
#include <string.h>

#include <rsd/rsd.h>

#define NBYTES 4096

#define CHECK(call)                                                                    \
	do {                                                                           \
		int err_ = (call);                                                     \
		if (err_) {                                                            \
			fprintf(stderr, "%s: %s\n", #call, rsd_last_error()->message); \
			return 1;                                                      \
		}                                                                      \
	} while (0)

struct kernel {
	const unsigned char *in;
	unsigned char *out;
};

/* The step's work: out[i] = in[i] + 1. */
static void kernel(void *arg)
{
	struct kernel *k = arg;

	for (size_t i = 0; i < NBYTES; i++)
		k->out[i] = (unsigned char)(k->in[i] + 1);
}

/* Print cuda:0's used and reserved bytes against its budget. */
static int print_device(struct rsd_manager *m, const char *when)
{
	struct rsd_location c0 = { RSD_CUDA, 0 };
	struct rsd_snapshot *s;

	CHECK(rsd_snapshot_take(m, &s));
	for (size_t i = 0; i < s->nlocations; i++) {
		const struct rsd_location_snapshot *l = &s->locations[i];

		if (rsd_location_equal(l->location, c0))
			printf("%s: cuda:0 used %llu, reserved %llu of %llu bytes\n", when,
			       (unsigned long long)l->used_bytes,
			       (unsigned long long)l->reserved_bytes,
			       (unsigned long long)l->budget_bytes);
	}
	rsd_snapshot_free(s);
	return 0;
}

int main(void)
{
	struct rsd_location c0 = { RSD_CUDA, 0 };
	/* Exactly the input and the output fit on the device. */
	struct rsd_budget budget = { { RSD_CUDA, 0 }, 2 * (uint64_t)NBYTES };
	struct rsd_simdev_config sc = { .ndevices = 1, .pooled = true };
	struct rsd_manager_config cfg = { .budgets = &budget, .nbudgets = 1 };
	uint64_t n = NBYTES;
	struct rsd_simdev *sd;
	struct rsd_manager *m;
	struct rsd_controller *c;
	struct rsd_resident *in, *out;
	const struct rsd_resident *dev_in, *result;
	struct rsd_handle in_h, out_h;
	struct rsd_use *use;
	struct rsd_lease *lease;
	struct kernel k;
	void *stream;
	size_t bad = 0;

	CHECK(rsd_simdev_create(&sc, &sd));
	rsd_simdev_set_progress(sd, RSD_SIMDEV_BACKGROUND, 1000000);
	cfg.driver = rsd_simdev_ops();
	cfg.driver_ctx = sd;
	CHECK(rsd_manager_create(&cfg, &m));
	CHECK(rsd_controller_create(m, NULL, 0, &c));
	CHECK(rsd_simdev_stream_create(sd, 0, &stream));

	/* The input, in host memory for now. */
	CHECK(rsd_resident_alloc(m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1, &n, NULL, 0,
				 &in));
	for (size_t i = 0; i < NBYTES; i++)
		((unsigned char *)rsd_resident_data(in, 0))[i] = (unsigned char)i;
	CHECK(rsd_adopt(m, in, NULL, RSD_REPLICABLE, &in_h));

	/* The step: its input on cuda:0, and room there for its output. */
	struct rsd_requirement need = { in_h, c0 };
	struct rsd_reservation_spec room = { c0, NBYTES, "result" };
	struct rsd_request step = { .name = "step-1",
				    .requirements = &need,
				    .nrequirements = 1,
				    .reservations = &room,
				    .nreservations = 1 };

	CHECK(rsd_controller_use(c, &step, &stream, 1, NULL, 0, &use));
	CHECK(print_device(m, "entered"));
	CHECK(rsd_use_value(use, in_h, c0, &dev_in));

	/* The output is allocated uncharged; the kernel is queued on the
	 * consumer stream and may still be running when it is adopted. */
	CHECK(rsd_resident_alloc(m, &rsd_resident_type, c0, 1, &n, NULL, 0, &out));
	k = (struct kernel){ rsd_resident_data(dev_in, 0), rsd_resident_data(out, 0) };
	CHECK(rsd_simdev_launch_host_func(sd, stream, kernel, &k));
	CHECK(rsd_use_adopt(use, "result", out, RSD_EXCLUSIVE, stream, &out_h));
	CHECK(print_device(m, "adopted"));

	/* Close: the input's lease and the emptied reservation go; the
	 * output stays, an ordinary value. */
	CHECK(rsd_use_close(use, NULL));
	rsd_use_free(use);

	/* Wait for the kernel (cudaStreamSynchronize on a GPU), let the
	 * manager see it, then read the result on the host. */
	rsd_simdev_stream_complete(sd, stream);
	CHECK(rsd_manager_reap(m));
	CHECK(rsd_move(m, out_h, RSD_LOC_PAGEABLE_HOST, NULL, NULL, NULL));
	CHECK(rsd_acquire(m, &out_h, 1, RSD_LOC_PAGEABLE_HOST, NULL, &lease));
	CHECK(rsd_lease_value(lease, out_h, &result));
	for (size_t i = 0; i < NBYTES; i++)
		bad += ((const unsigned char *)rsd_resident_data(result, 0))[i] !=
		       (unsigned char)(i + 1);
	CHECK(rsd_lease_release(lease, 0));
	rsd_lease_free(lease);
	printf("result: %d bytes, %zu wrong\n", NBYTES, bad);

	CHECK(rsd_discard(m, out_h, NULL));
	CHECK(rsd_discard(m, in_h, NULL));
	rsd_controller_free(c);
	CHECK(rsd_manager_close(m, 0));
	rsd_manager_destroy(m);
	rsd_simdev_stream_destroy(sd, stream);
	rsd_simdev_destroy(sd);
	return bad != 0;
}

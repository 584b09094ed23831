// SPDX-License-Identifier: MIT
/*
 * rsd-demo-mpi: the rsd-demo workload as one rank of an MPI job.
 *
 *   mpirun -np 2 rsd-demo-mpi [rsd-demo options]     (make demo RANKS=2)
 *
 * Every rank owns one manager on its own cuda:<local rank> (the node-local
 * rank, from MPI_COMM_TYPE_SHARED) and runs the workload of rsd-demo.c; each
 * stage then passes a share of its ciphertexts to the next rank of a ring.
 * This file supplies only the MPI side, struct demo_ring; the workload is
 * tools/demo/, linked into rsd-demo as well, which never needs MPI.
 *
 * Buffers are sent as host memory (pinned-host leases). A CUDA-aware MPI
 * could send device buffers directly; the demo stays with host buffers so it
 * runs the same with any MPI.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>

#include "demo/demo.h"

/* MPI counts are ints: a block larger than that goes in pieces. */
#define CHUNK (1u << 30)

static int mpi_failed(int rc, const char *what)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	if (rc == MPI_SUCCESS)
		return 0;
	MPI_Error_string(rc, msg, &len);
	fprintf(stderr, "rsd-demo-mpi: %s: %s\n", what, msg);
	return -1;
}

static int mpi_shift(struct demo_ring *ring, const void *const *out, void *const *in, size_t n,
		     uint64_t len)
{
	int next = (ring->rank + 1) % ring->nranks;
	int prev = (ring->rank + ring->nranks - 1) % ring->nranks;

	for (size_t i = 0; i < n; i++)
		for (uint64_t off = 0; off < len; off += CHUNK) {
			int count = (int)(len - off < CHUNK ? len - off : CHUNK);
			int rc = MPI_Sendrecv((const char *)out[i] + off, count, MPI_BYTE, next, 0,
					      (char *)in[i] + off, count, MPI_BYTE, prev, 0,
					      MPI_COMM_WORLD, MPI_STATUS_IGNORE);

			if (mpi_failed(rc, "MPI_Sendrecv"))
				return -1;
		}
	return 0;
}

static int mpi_sum(struct demo_ring *ring, uint64_t *v, size_t n)
{
	(void)ring;
	return mpi_failed(MPI_Allreduce(MPI_IN_PLACE, v, (int)n, MPI_UINT64_T, MPI_SUM,
					MPI_COMM_WORLD),
			  "MPI_Allreduce");
}

/* Rank 0 gathers every rank's text and prints it; a blank line between. */
static int mpi_print_all(struct demo_ring *ring, const char *text, size_t len)
{
	int mine = (int)len, *lens = NULL, *offs = NULL, total = 0, err = -1;
	char *all = NULL;

	if (ring->rank == 0) {
		lens = calloc((size_t)ring->nranks, sizeof(*lens));
		offs = calloc((size_t)ring->nranks, sizeof(*offs));
		if (!lens || !offs)
			goto out;
	}
	if (mpi_failed(MPI_Gather(&mine, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD),
		       "MPI_Gather"))
		goto out;
	if (ring->rank == 0) {
		for (int r = 0; r < ring->nranks; r++) {
			offs[r] = total;
			total += lens[r];
		}
		all = malloc((size_t)total + 1);
		if (!all)
			goto out;
	}
	if (mpi_failed(MPI_Gatherv(text, mine, MPI_CHAR, all, lens, offs, MPI_CHAR, 0,
				   MPI_COMM_WORLD),
		       "MPI_Gatherv"))
		goto out;
	for (int r = 0; ring->rank == 0 && r < ring->nranks; r++)
		printf("%s%.*s", r ? "\n" : "", lens[r], all + offs[r]);
	fflush(stdout);
	err = 0;
out:
	free(all);
	free(lens);
	free(offs);
	return err;
}

static void mpi_abort(struct demo_ring *ring, int status)
{
	(void)ring;
	fflush(stdout);
	MPI_Abort(MPI_COMM_WORLD, status);
}

int main(int argc, char **argv)
{
	struct demo_ring ring = { .shift = mpi_shift,
				  .sum = mpi_sum,
				  .print_all = mpi_print_all,
				  .abort = mpi_abort };
	MPI_Comm node;
	int rc;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &ring.rank);
	MPI_Comm_size(MPI_COMM_WORLD, &ring.nranks);
	/* The ranks sharing this node, numbered from 0: one GPU each. */
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, ring.rank, MPI_INFO_NULL, &node);
	MPI_Comm_rank(node, &ring.local_rank);
	MPI_Comm_free(&node);
	rc = demo_run(argc, argv, &ring);
	/* Bad usage is the same on every rank: each returns 2 by itself. */
	MPI_Finalize();
	return rc;
}

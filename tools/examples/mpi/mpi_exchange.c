// SPDX-License-Identifier: MIT
/*
 * librsd in a multi-rank MPI job. Every rank owns its own manager; values
 * never cross managers by handle. A value travels as bytes: the sending rank
 * borrows it through a lease and sends its buffer and metadata, the
 * receiving rank allocates a resident, receives into it and adopts it under
 * a handle of its own. Ranks form a ring: rank r receives from r-1 and
 * sends to r+1, so every rank checks what it received against what rank 0
 * created.
 *
 * Each rank's LTTng trace is told apart by its process id (the vpid context
 * of `lttng add-context -u -t vpid`), printed here.
 *
 *   mpirun -np 2 tools/examples/mpi_exchange
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <rsd/rsd.h>

#define NBYTES (256u << 10)

static uint64_t checksum(const unsigned char *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

int main(int argc, char **argv)
{
	struct rsd_manager_config cfg = { .host_only = true };
	struct rsd_manager *m;
	struct rsd_resident *r;
	const struct rsd_resident *v;
	struct rsd_lease *lease;
	struct rsd_handle h;
	uint64_t n = NBYTES, sum, expect;
	char meta[32] = "level=5";
	int rank, size, bad = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (rsd_manager_create(&cfg, &m) ||
	    rsd_resident_alloc(m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1, &n, meta,
			       sizeof(meta), &r)) {
		fprintf(stderr, "rank %d: %s\n", rank, rsd_last_error()->message);
		MPI_Abort(MPI_COMM_WORLD, 1);
		return 1; /* not reached: mpi.h does not mark MPI_Abort noreturn */
	}
	if (rank == 0) {
		for (unsigned i = 0; i < NBYTES; i++)
			((unsigned char *)rsd_resident_data(r, 0))[i] = (unsigned char)(i * 31 + 7);
	} else {
		/* Receive straight into memory the manager will own. */
		MPI_Recv(rsd_resident_data(r, 0), NBYTES, MPI_BYTE, rank - 1, 0, MPI_COMM_WORLD,
			 MPI_STATUS_IGNORE);
		MPI_Recv(meta, sizeof(meta), MPI_CHAR, rank - 1, 1, MPI_COMM_WORLD,
			 MPI_STATUS_IGNORE);
	}
	expect = checksum(rsd_resident_data(r, 0), NBYTES);
	if (rsd_adopt(m, r, NULL, RSD_EXCLUSIVE, &h)) {
		fprintf(stderr, "rank %d: adopt: %s\n", rank, rsd_last_error()->message);
		MPI_Abort(MPI_COMM_WORLD, 1);
		return 1;
	}
	MPI_Bcast(&expect, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
	/* Borrow it to send it on: a lease protects it while MPI reads. */
	if (rsd_acquire(m, &h, 1, RSD_LOC_PAGEABLE_HOST, NULL, &lease) ||
	    rsd_lease_value(lease, h, &v)) {
		fprintf(stderr, "rank %d: lease: %s\n", rank, rsd_last_error()->message);
		MPI_Abort(MPI_COMM_WORLD, 1);
		return 1;
	}
	sum = checksum(rsd_resident_data(v, 0), NBYTES);
	if (rank + 1 < size) {
		MPI_Send(rsd_resident_data(v, 0), NBYTES, MPI_BYTE, rank + 1, 0, MPI_COMM_WORLD);
		MPI_Send(rsd_resident_meta(v, NULL), sizeof(meta), MPI_CHAR, rank + 1, 1,
			 MPI_COMM_WORLD);
	}
	rsd_lease_release(lease, 0);
	rsd_lease_free(lease);
	bad = sum != expect || strcmp(meta, "level=5") != 0;
	printf("rank %d pid %d: manager %llu adopted handle %llu, checksum %s, metadata %s\n", rank,
	       (int)getpid(), (unsigned long long)rsd_manager_id(m), (unsigned long long)h.id,
	       bad ? "MISMATCH" : "ok", meta);
	rsd_manager_close(m, 0);
	rsd_manager_destroy(m);
	MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	MPI_Finalize();
	return bad;
}

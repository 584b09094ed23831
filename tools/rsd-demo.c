// SPDX-License-Identifier: MIT
/*
 * rsd-demo: an encrypted-inference-style workload under a device budget too
 * small for its working set.
 *
 * Values:
 *   ciphertexts  exclusive, must-preserve: adopted once, never regenerated;
 *   rotation keys replicable, reconstructible: a source regenerates each
 *                deterministically from its seed;
 *   weights      replicable plaintext blocks, adopted in pageable memory.
 *
 * Each stage asks the controller for two ciphertexts, one key and one
 * weight block on the device plus a workspace reservation, and queues its
 * kernel on the device's stream; the next stage's request is made while
 * that kernel runs, with rsd_controller_use_async(), so its copies overlap
 * the kernel (--no-prefetch: rsd_controller_use(), waiting for them).
 * The deterministic tiered LRU spills ciphertexts cuda:N -> pinned-host ->
 * pageable-host and drops keys and weights that can be recovered. At the end
 * every ciphertext and key is checked against what its seed says it holds;
 * the exit status says whether anything was lost.
 *
 * The workload lives in tools/demo/ (workload.c, stages.c, report.c) and
 * runs the same as one rank of an MPI job in rsd-demo-mpi, where every stage
 * also hands a share of the rank's ciphertexts to the next rank of a ring
 * and ownership is checked across the whole job. Here there is no ring.
 *
 * Uses the CUDA runtime when a GPU is present, the simulated device
 * otherwise (and says which).
 *
 * rsd-demo --trace FILE replays a key-access trace instead
 * (tools/demo/keytrace.c): the user's own, or the OpenFHE bootstrapping
 * trace in tools/data/fhe-bootstrap/.
 */
#include <string.h>

#include "demo/demo.h"
#include "demo/keytrace.h"

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--trace") || !strncmp(argv[i], "--trace=", 8))
			return kt_main(argc, argv);
	return demo_run(argc, argv, NULL);
}

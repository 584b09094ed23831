// SPDX-License-Identifier: MIT
/*
 * rsd-bench: the pipeline of prefetch.c on a real GPU (case "gpu_pipeline",
 * group "gpu", run by tools/build/gpu-check): one host thread, 32 batches
 * of 64 MiB brought to cuda:0 by the controller, each read by a "kernel"
 * of fixed length on the consumer stream, waiting against prefetching with
 * rsd_controller_use_async(). The kernel is a host function that busy-waits
 * its length on the stream (cudaLaunchHostFunc): it holds the consumer
 * stream as a kernel would and leaves the copy engines free, which is all
 * the figure needs. Skipped without CUDA or a device.
 */
#if RSD_HAVE_CUDA
static void gpu_spin(void *arg)
{
	const struct pf_env *e = arg;
	uint64_t end = bench_now_ns() + e->kernel_ns;

	while (bench_now_ns() < end)
		;
}

static void gpu_pf_kernel(struct pf_env *e, void *ptr, uint64_t nbytes)
{
	(void)ptr, (void)nbytes;
	cuda_ck("cudaLaunchHostFunc", cudaLaunchHostFunc((cudaStream_t)e->cs, gpu_spin, e));
}

static void gpu_pf_open(struct pf_env *e, unsigned n, uint64_t nbytes, uint64_t kernel_ns)
{
	memset(e, 0, sizeof(*e));
	e->ops = rsd_cuda_driver();
	e->cs = gpu_stream(0);
	e->kernel = gpu_pf_kernel;
	pf_open_on(e, n, nbytes, kernel_ns);
}

static void gpu_pf_close(struct pf_env *e)
{
	pf_close_on(e);
	cuda_ck("cudaStreamDestroy", cudaStreamDestroy((cudaStream_t)e->cs));
}
#endif

static void case_gpu_pipeline(void)
{
	const char *why = gpu_unavailable();

	if (why) {
		bench_skip("gpu_pipeline", "prefetch_vs_max", "%s", why);
		return;
	}
#if RSD_HAVE_CUDA
	{
		const uint64_t nbytes = QF(16, 64) * PF_MIB;
		const unsigned n = QF(8u, PF_BATCHES);
		struct pf_runs r;

		pf_measure(gpu_pf_open, gpu_pf_close, n, nbytes, 1.0, &r);
		pf_report("gpu_pipeline", n, nbytes, &r);
	}
#endif
}

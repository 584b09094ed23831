// SPDX-License-Identifier: MIT
/*
 * librsd's NVTX ranges, seen by an NVTX tool.
 *
 * The tool is this program: NVTX 3 looks for a statically linked injection
 * (a strong InitializeInjectionNvtx2_fnptr, which replaces the weak one
 * every file of librsd that includes the NVTX header defines) at the first
 * NVTX call, as it would load Nsight's injection library. Its callbacks
 * record each range pushed (message and payload) and each pop, as
 * Nsight Systems would see them.
 *
 * Only CUDA builds have the ranges (lib/nvtx.h): elsewhere the cases skip.
 * The copy case needs the CUDA driver to see a device (the CUDA runtime
 * double of a CUDA=sim build, or a GPU) and skips otherwise.
 */
#include <atf-c.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <rsd/rsd.h>

#include "../check.h"
#include "adopt.h"
#include "../../lib/nvtx.h"

#if defined(RSD_NVTX) && RSD_NVTX
#define MAX_RANGES 64

static struct {
	char msg[MAX_RANGES][64];
	uint64_t payload[MAX_RANGES];
	int pushed, popped, depth, max_depth;
} seen;

static int NVTX_API tool_push_ex(const nvtxEventAttributes_t *a)
{
	if (seen.pushed < MAX_RANGES) {
		snprintf(seen.msg[seen.pushed], sizeof(seen.msg[0]), "%s",
			 a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : "?");
		seen.payload[seen.pushed] = a->payloadType == NVTX_PAYLOAD_TYPE_UNSIGNED_INT64 ?
						    a->payload.ullValue :
						    0;
	}
	seen.pushed++;
	if (++seen.depth > seen.max_depth)
		seen.max_depth = seen.depth;
	return seen.depth - 1;
}

static int NVTX_API tool_pop(void)
{
	seen.popped++;
	return --seen.depth;
}

static int NVTX_API tool_init(NvtxGetExportTableFunc_t get)
{
	const NvtxExportTableCallbacks *cb = get(NVTX_ETID_CALLBACKS);
	NvtxFunctionTable table = NULL;
	unsigned int size = 0;

	if (!cb || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) ||
	    size <= NVTX_CBID_CORE_RangePop)
		return 0;
	*table[NVTX_CBID_CORE_RangePushEx] = (NvtxFunctionPointer)tool_push_ex;
	*table[NVTX_CBID_CORE_RangePop] = (NvtxFunctionPointer)tool_pop;
	return 1;
}

/* NVTX's static injection: strong, so it wins over librsd's weak ones. */
NvtxInitializeInjectionNvtxFunc_t InitializeInjectionNvtx2_fnptr = tool_init;

static const struct rsd_type t_bytes = { "t_nvtx bytes", &rsd_resident_type };

static struct rsd_handle adopt(struct rsd_manager *m, uint64_t nbytes)
{
	return trace_adopt_bytes(m, &t_bytes, nbytes, 0x3c, RSD_REPLICABLE);
}

/* Runs the plan with the tool's record cleared: it pushed npushed ranges,
 * the plan's first, and popped them all. */
static void run_plan(struct rsd_manager *m, const struct rsd_action *a, size_t n, const char *name,
		     int npushed)
{
	memset(&seen, 0, sizeof(seen));
	RSD_REQUIRE_OK(rsd_execute_actions(m, a, n, name, NULL, 0, NULL, NULL));
	ATF_CHECK_EQ(seen.pushed, npushed);
	ATF_CHECK_EQ(seen.popped, npushed);
	ATF_CHECK_EQ(seen.depth, 0);
	ATF_CHECK_STREQ(seen.msg[0], name);
	ATF_CHECK_EQ(seen.payload[0], 0);
}
#endif

/* A plan's execution is one range named by the plan, closed on return. */
ATF_TC_WITHOUT_HEAD(plan_range);
ATF_TC_BODY(plan_range, tc)
{
#if defined(RSD_NVTX) && RSD_NVTX
	struct rsd_manager_config cfg = { .host_only = true };
	struct rsd_manager *m = NULL;
	struct rsd_action a[2];
	struct rsd_handle h;

	RSD_REQUIRE_OK(rsd_manager_create(&cfg, &m));
	h = adopt(m, 4096);
	a[0] = rsd_action_ensure(h, RSD_LOC_PINNED_HOST);
	a[1] = rsd_action_drop(h, RSD_LOC_PINNED_HOST);
	run_plan(m, a, 2, "prefetch-step-3", 1);

	/* A failed plan (a value it does not know) closes its range too; an
	 * unnamed one has the name rsd_execute_actions() gives it. */
	memset(&seen, 0, sizeof(seen));
	h.id += 1000;
	a[0] = rsd_action_ensure(h, RSD_LOC_PINNED_HOST);
	ATF_CHECK(rsd_execute_actions(m, a, 1, NULL, NULL, 0, NULL, NULL) < 0);
	ATF_CHECK_EQ(seen.pushed, 1);
	ATF_CHECK_EQ(seen.popped, 1);
	ATF_CHECK_STREQ(seen.msg[0], "residency-actions");
	RSD_REQUIRE_OK(rsd_manager_close(m, 0));
	rsd_manager_destroy(m);
#else
	atf_tc_skip("not a CUDA build (or no nvtx3 headers): librsd has no NVTX ranges");
#endif
}

/* Each copy the CUDA driver enqueues is a range named by its direction,
 * its bytes the payload, inside the plan's range. */
ATF_TC_WITHOUT_HEAD(copy_ranges);
ATF_TC_BODY(copy_ranges, tc)
{
#if defined(RSD_NVTX) && RSD_NVTX
	struct rsd_manager_config cfg = { .staging_nbytes = RSD_STAGING_OFF };
	struct rsd_location dev = { RSD_CUDA, 0 };
	struct rsd_manager *m = NULL;
	struct rsd_action a[3];
	struct rsd_handle h;

	if (rsd_cuda_driver()->device_count(NULL) < 1)
		atf_tc_skip("the CUDA driver sees no device (no GPU, not a CUDA=sim build)");
	cfg.driver = rsd_cuda_driver();
	RSD_REQUIRE_OK(rsd_manager_create(&cfg, &m));
	h = adopt(m, 1 << 16);
	/* Up from pageable memory (unstaged), then, with the device copy the
	 * only one left, back down to pinned memory. */
	a[0] = rsd_action_ensure(h, dev);
	a[1] = rsd_action_drop(h, RSD_LOC_PAGEABLE_HOST);
	a[2] = rsd_action_ensure(h, RSD_LOC_PINNED_HOST);
	run_plan(m, a, 3, "to-device", 3);
	ATF_CHECK_EQ(seen.max_depth, 2);
	ATF_CHECK_STREQ(seen.msg[1], "rsd copy H2D (pageable)");
	ATF_CHECK_EQ(seen.payload[1], 1 << 16);
	ATF_CHECK_STREQ(seen.msg[2], "rsd copy D2H");
	ATF_CHECK_EQ(seen.payload[2], 1 << 16);
	RSD_REQUIRE_OK(rsd_manager_close(m, 0));
	rsd_manager_destroy(m);
#else
	atf_tc_skip("not a CUDA build (or no nvtx3 headers): librsd has no NVTX ranges");
#endif
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, copy_ranges);
	ATF_TP_ADD_TC(tp, plan_range);
	return atf_no_error();
}

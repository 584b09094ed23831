// SPDX-License-Identifier: MIT
/*
 * The probe object of the "rsd" provider, linked statically into librsd
 * (Documentation/tracing.md, "How the probes are linked").
 *
 * This is the only translation unit that defines the tracepoints and creates
 * the probes: its constructors register both with liblttng-ust when librsd is
 * loaded, and every other file of librsd only declares them through
 * lib/trace.h. Do not dlclose() a librsd loaded with dlopen(): liblttng-ust
 * keeps pointers into this object (lttng-ust(3), "dynamic linking").
 */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "rsd_tp.h"

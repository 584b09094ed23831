/* SPDX-License-Identifier: MIT */
/*
 * Fault injection: a TESTING interface. librsd has named fault points at
 * the places where a real failure can happen (an allocation, an admission,
 * an acquire); a test arms a point to make one of its future hits fail as
 * that real failure would, and checks that the library unwinds cleanly.
 * Production code never needs these calls; an unarmed library pays one
 * predictable branch per point (Documentation/fault-injection.md has the
 * figures).
 *
 * The points and their subjects (what @match is compared with):
 *
 *   alloc    every allocation librsd makes for its own bookkeeping: records,
 *            images, vector nodes, lease, hold and reservation objects,
 *            reports, explanations, decisions, search state, reclaim
 *            batches, copied labels. Subject: the call site, "file:line"
 *            (e.g. "lib/core/hold.c:162"). A failure here is exactly a
 *            NULL from malloc: the call fails with -RSD_ENOMEM and a
 *            message. Value storage (materializations) and device memory
 *            are not part of it: see "resident", and the simulated
 *            device's rsd_simdev_fail_nth for device memory.
 *   acquire  rsd_acquire, after its arguments are checked and before the
 *            lease changes anything. Subject: the location's name
 *            ("cuda:0", "pinned-host").
 *   reserve  the admission of one reservation, by rsd_reserve and by plan,
 *            scope and controller entry. Subject: the reservation's label.
 *   resident the allocation of a value's storage, by rsd_resident_alloc
 *            and by every transition that makes a new copy, after the
 *            arguments are checked. Subject: the location's name. Fails
 *            with any code (RSD_ENOMEM as the host allocator would,
 *            RSD_EDEVICE as a driver would).
 *
 * Hits are counted only while at least one point is armed, so that an
 * unarmed library does no shared-memory write per allocation. To count a
 * workload's hits without failing it, arm a point at UINT64_MAX.
 */
#ifndef RSD_FAULT_H
#define RSD_FAULT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * rsd_fault_inject() - arm (or disarm) a named fault point
 * @point: the point's name, one of those rsd_fault_points() lists
 * @match: NULL to count every hit of @point, otherwise only hits whose
 *         subject equals this string (copied; compared with strcmp)
 * @nth:   fail the @nth counted hit from now (1 is the very next one); 0
 *         disarms the point
 * @err:   the positive RSD_E* code the failing hit returns negated; must be
 *         RSD_ENOMEM for "alloc" (an allocation can only run out of
 *         memory); ignored when @nth is 0
 *
 * Each point holds one arming: a new call replaces the previous one. The
 * point fires once and is then disarmed again, so the hits after the
 * failing one succeed (an unwinding path that allocates is not failed a
 * second time).
 *
 * Context: any thread; arming is serialized with the hits on a lock, so a
 * hit on another thread sees either the old or the new arming.
 * Return: 0 on success; -RSD_ETYPE if @point is NULL; -RSD_ENOTFOUND if no
 * point has that name; -RSD_EINVAL if @err is not an RSD_E* code, or is not
 * RSD_ENOMEM for "alloc", or @match is blank; -RSD_ENOMEM if @match could
 * not be copied.
 */
int rsd_fault_inject(const char *point, const char *match, uint64_t nth, int err);

/**
 * rsd_fault_hits() - how many times a point was reached while armed
 * @point: the point's name
 *
 * Counts every hit, matching or not, made while any point was armed (not
 * only @point), from the start of the process. A workload's count is the
 * difference of two readings.
 *
 * Context: any thread; a relaxed read, exact once the hitting threads are
 * joined or have returned.
 * Return: the count, or 0 for a NULL or unknown @point.
 */
uint64_t rsd_fault_hits(const char *point);

/**
 * rsd_fault_points() - list the fault points
 * @names: array of @cap pointers to fill with the points' names (static
 *         strings); may be NULL when @cap is 0
 * @cap:   capacity of @names
 *
 * Context: any thread.
 * Return: the number of points (which may exceed @cap: the first @cap are
 * written).
 */
size_t rsd_fault_points(const char **names, size_t cap);

#ifdef __cplusplus
}
#endif
#endif

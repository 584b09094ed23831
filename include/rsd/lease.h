/* SPDX-License-Identifier: MIT */
/*
 * Lifetimes: leases (borrowed reads, GPU-stream aware), holds and named
 * reservations. Release is idempotent; free is the only call that
 * invalidates the pointer. Freeing an unreleased lifetime abandons it
 * (semantics.md §10.9): it is released for you (a lease with
 * RSD_RELEASE_WAIT), with a warning. If that release is refused (a source
 * load is running, or waiting for the consumer streams failed), the object
 * and the manager's storage are kept for the life of the process instead:
 * GPU work may still read the memory.
 */
#ifndef RSD_LEASE_H
#define RSD_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rsd/location.h>
#include <rsd/value.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rsd_lease;
struct rsd_hold;
struct rsd_reservation;

/* Duplicates in h collapse (first occurrence kept). A CUDA location needs
 * a consumer stream; a host location refuses one. */
int rsd_acquire(struct rsd_manager *m, const struct rsd_handle *h, size_t n, struct rsd_location at,
		void *consumer_stream, struct rsd_lease **out);
int rsd_lease_add_consumer_stream(struct rsd_lease *l, void *stream);
/* The exact managed value, validated on every call: ELIFETIME after release,
 * ENOTFOUND for a handle not in the lease, EUNAVAILABLE after a forced close. */
int rsd_lease_value(struct rsd_lease *l, struct rsd_handle h, const struct rsd_resident **out);
size_t rsd_lease_count(const struct rsd_lease *l);
/* The i-th handle in first-occurrence order; -RSD_ELIFETIME once released,
 * -RSD_ENOTFOUND past the end. */
int rsd_lease_handle_at(const struct rsd_lease *l, size_t i, struct rsd_handle *out);
struct rsd_location rsd_lease_location(const struct rsd_lease *l);
bool rsd_lease_active(const struct rsd_lease *l);
#define RSD_RELEASE_WAIT 1u /* block until the consumer streams' events complete */
int rsd_lease_release(struct rsd_lease *l, unsigned flags);
void rsd_lease_free(struct rsd_lease *l);

int rsd_hold(struct rsd_manager *m, const struct rsd_handle *h, size_t n, struct rsd_location at,
	     struct rsd_hold **out);
int rsd_hold_release(struct rsd_hold *hd);
bool rsd_hold_active(const struct rsd_hold *hd);
void rsd_hold_free(struct rsd_hold *hd);

/* Pure accounting at a location: reduces its remaining budget. label is
 * copied and must be non-blank. */
int rsd_reserve(struct rsd_manager *m, struct rsd_location at, uint64_t nbytes, const char *label,
		struct rsd_reservation **out);
int rsd_reservation_release(struct rsd_reservation *r);
bool rsd_reservation_active(const struct rsd_reservation *r);
uint64_t rsd_reservation_nbytes(const struct rsd_reservation *r);
const char *rsd_reservation_label(const struct rsd_reservation *r);
void rsd_reservation_free(struct rsd_reservation *r);

#ifdef __cplusplus
}
#endif
#endif

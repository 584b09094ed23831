// SPDX-License-Identifier: MIT
/* Location records: construction, canonical names, parsing and order. */
#include <stdio.h>
#include <string.h>

#include "../internal.h"

const struct rsd_location RSD_LOC_PAGEABLE_HOST = { RSD_PAGEABLE_HOST, -1 };
const struct rsd_location RSD_LOC_PINNED_HOST = { RSD_PINNED_HOST, -1 };

bool rsd_location_valid(struct rsd_location loc)
{
	switch (loc.kind) {
	case RSD_PAGEABLE_HOST:
	case RSD_PINNED_HOST:
		return loc.device == -1;
	case RSD_CUDA:
		return loc.device >= 0 && loc.device <= RSD_CUDA_MAX_DEVICE;
	}
	return false;
}

int rsd__location_check(struct rsd_location loc, const char *what)
{
	switch (loc.kind) {
	case RSD_PAGEABLE_HOST:
	case RSD_PINNED_HOST:
		/* The record's one spelling of the host is -1; anything else is
		 * not a location record of this kind. */
		if (loc.device == -1)
			return 0;
		return rsd__err(RSD_ETYPE,
				"%s: not a residency location (host kind %d with device %d)", what,
				(int)loc.kind, loc.device);
	case RSD_CUDA:
		if (loc.device >= 0 && loc.device <= RSD_CUDA_MAX_DEVICE)
			return 0;
		return rsd__err(RSD_EINVAL, "%s: CUDA device index %d is outside 0..%d", what,
				loc.device, RSD_CUDA_MAX_DEVICE);
	}
	return rsd__err(RSD_ETYPE, "%s: not a residency location (kind %d)", what, (int)loc.kind);
}

int rsd_cuda_location(int device, struct rsd_location *out)
{
	if (!out)
		return rsd__err(RSD_ETYPE, "rsd_cuda_location: out is NULL");
	if (device < 0 || device > RSD_CUDA_MAX_DEVICE)
		return rsd__err(RSD_EINVAL, "CUDA device index %d is outside 0..%d", device,
				RSD_CUDA_MAX_DEVICE);
	out->kind = RSD_CUDA;
	out->device = device;
	return 0;
}

int rsd_location_make(enum rsd_location_kind kind, int device, struct rsd_location *out)
{
	if (!out)
		return rsd__err(RSD_ETYPE, "rsd_location_make: out is NULL");
	switch (kind) {
	case RSD_PAGEABLE_HOST:
	case RSD_PINNED_HOST:
		/* Any CPU index collapses to the one host identity. */
		out->kind = kind;
		out->device = -1;
		return 0;
	case RSD_CUDA:
		return rsd_cuda_location(device, out);
	}
	return rsd__err(RSD_EINVAL, "unsupported residency location kind %d", (int)kind);
}

int rsd_location_parse(const char *text, struct rsd_location *out)
{
	const char *p;
	long n = 0;

	if (!text || !out)
		return rsd__err(RSD_ETYPE, "rsd_location_parse: NULL argument");
	if (!strcmp(text, "pageable-host")) {
		*out = RSD_LOC_PAGEABLE_HOST;
		return 0;
	}
	if (!strcmp(text, "pinned-host")) {
		*out = RSD_LOC_PINNED_HOST;
		return 0;
	}
	if (strncmp(text, "cuda", 4) != 0)
		return rsd__err(RSD_EINVAL, "unsupported residency location kind in '%s'", text);
	p = text + 4;
	if (*p != ':' || p[1] < '0' || p[1] > '9' || (p[1] == '0' && p[2]))
		return rsd__err(RSD_EINVAL,
				"CUDA residency location '%s' requires an indexed canonical device",
				text);
	for (p++; *p; p++) {
		if (*p < '0' || *p > '9')
			return rsd__err(
				RSD_EINVAL,
				"CUDA residency location '%s' requires an indexed canonical device",
				text);
		if (n <= RSD_CUDA_MAX_DEVICE)
			n = n * 10 + (*p - '0');
	}
	if (n > RSD_CUDA_MAX_DEVICE)
		return rsd__err(RSD_EINVAL,
				"CUDA residency location '%s' is outside cuda:0..cuda:%d", text,
				RSD_CUDA_MAX_DEVICE);
	out->kind = RSD_CUDA;
	out->device = (int)n;
	return 0;
}

const char *rsd_location_name(struct rsd_location loc, char *buf, size_t len)
{
	if (!buf || !len)
		return "";
	if (!rsd_location_valid(loc))
		snprintf(buf, len, "<invalid>");
	else if (loc.kind == RSD_PAGEABLE_HOST)
		snprintf(buf, len, "pageable-host");
	else if (loc.kind == RSD_PINNED_HOST)
		snprintf(buf, len, "pinned-host");
	else
		snprintf(buf, len, "cuda:%d", loc.device);
	return buf;
}

const char *rsd__loc_repr(struct rsd_location loc, char *buf, size_t len)
{
	if (loc.kind == RSD_CUDA)
		snprintf(buf, len,
			 "ResidencyLocation(kind='cuda', device=device(type='cuda', index=%d))",
			 loc.device);
	else
		snprintf(buf, len, "ResidencyLocation(kind='%s', device=device(type='cpu'))",
			 loc.kind == RSD_PINNED_HOST ? "pinned-host" : "pageable-host");
	return buf;
}

bool rsd_location_equal(struct rsd_location a, struct rsd_location b)
{
	return a.kind == b.kind && a.device == b.device;
}

int rsd_location_cmp(struct rsd_location a, struct rsd_location b)
{
	if (a.kind != b.kind)
		return a.kind < b.kind ? -1 : 1;
	if (a.device != b.device)
		return a.device < b.device ? -1 : 1;
	return 0;
}

struct rsd_location rsd__slot_loc(unsigned slot)
{
	struct rsd_location loc = { RSD_CUDA, (int)slot - 2 };

	if (slot == 0)
		return RSD_LOC_PAGEABLE_HOST;
	if (slot == 1)
		return RSD_LOC_PINNED_HOST;
	return loc;
}

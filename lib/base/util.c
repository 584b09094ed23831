// SPDX-License-Identifier: MIT
/* Small helpers: the double-free guard, clock, string checks, the reference's repr
 * quoting. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../internal.h"

void rsd__guard_free(uint32_t *guard, const char *fn, const char *type, const void *obj)
{
	if (rsd__likely(*guard == RSD__LIVE)) {
		*guard = RSD__FREED;
		return;
	}
	fprintf(stderr, "librsd: %s(): %s %s %p\n", fn,
		*guard == RSD__FREED ? "double free of" : "free of a corrupted or foreign", type,
		obj);
	fflush(stderr); /* a redirected stderr may be buffered; abort() flushes nothing */
	abort();
}

uint64_t rsd__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

bool rsd__nonblank(const char *s)
{
	if (!s)
		return false;
	for (; *s; s++)
		if (!isspace((unsigned char)*s))
			return true;
	return false;
}

char *rsd__strdup_at(const char *site, const char *s)
{
	char *d = rsd__fault(RSD__FAULT_ALLOC, site) ? NULL : strdup(s ? s : "");

	if (!d)
		rsd__err(RSD_ENOMEM, "out of memory copying a string");
	return d;
}

/*
 * Python's repr() of a str: single quotes unless the text holds a single
 * quote and no double quote. Multi-byte UTF-8 sequences are printable and
 * pass through unchanged.
 */
char *rsd__quote(const char *s, char *buf, size_t len)
{
	char q = '\'';
	size_t o = 0;

#define PUT(c)                          \
	do {                            \
		if (o + 1 < len)        \
			buf[o++] = (c); \
	} while (0)
	if (!len)
		return buf;
	if (strchr(s, '\'') && !strchr(s, '"'))
		q = '"';
	PUT(q);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		char esc[8];

		if (*p == '\\' || *p == (unsigned char)q) {
			PUT('\\');
			PUT((char)*p);
		} else if (*p == '\t') {
			PUT('\\');
			PUT('t');
		} else if (*p == '\n') {
			PUT('\\');
			PUT('n');
		} else if (*p == '\r') {
			PUT('\\');
			PUT('r');
		} else if (*p < 0x20 || *p == 0x7f) {
			snprintf(esc, sizeof(esc), "\\x%02x", *p);
			for (char *e = esc; *e; e++)
				PUT(*e);
		} else {
			PUT((char)*p);
		}
	}
	PUT(q);
#undef PUT
	buf[o] = '\0';
	return buf;
}

// SPDX-License-Identifier: MIT
/*
 * The storage-owner index: (device, base address) of every installed
 * backing allocation -> its owning (record, location). Open addressing with
 * linear probing and backward-shift deletion (no tombstones), so lookups
 * stay short however many installs and removals happen.
 */
#include <stdlib.h>

#include "core.h"

static size_t key_hash(int device, uintptr_t base)
{
	uint64_t x = (uint64_t)base ^ ((uint64_t)(unsigned)(device + 1) << 56);

	/* splitmix64 finalizer: allocation addresses share low zero bits. */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return (size_t)x;
}

struct rsd_keymap_slot *rsd__keymap_find(struct rsd_keymap *km, int device, const void *base)
{
	uintptr_t b = (uintptr_t)base;

	if (!km->cap)
		return NULL;
	for (size_t i = key_hash(device, b) & (km->cap - 1);; i = (i + 1) & (km->cap - 1)) {
		struct rsd_keymap_slot *s = &km->slots[i];

		if (!s->base)
			return NULL;
		if (s->base == b && s->device == device)
			return s;
	}
}

static void place(struct rsd_keymap_slot *slots, size_t cap, const struct rsd_keymap_slot *src)
{
	size_t i = key_hash(src->device, src->base) & (cap - 1);

	while (slots[i].base)
		i = (i + 1) & (cap - 1);
	slots[i] = *src;
}

static int grow(struct rsd_keymap *km)
{
	size_t cap = km->cap ? km->cap * 2 : 64;
	struct rsd_keymap_slot *slots = rsd__calloc(cap, sizeof(*slots));

	if (!slots)
		return rsd__err(RSD_ENOMEM, "out of memory growing the storage-owner index");
	for (size_t i = 0; i < km->cap; i++)
		if (km->slots[i].base)
			place(slots, cap, &km->slots[i]);
	free(km->slots);
	km->slots = slots;
	km->cap = cap;
	return 0;
}

int rsd__keymap_insert(struct rsd_keymap *km, int device, const void *base, uint64_t owner,
		       struct rsd_location at)
{
	struct rsd_keymap_slot s = { .base = (uintptr_t)base,
				     .owner = (uint32_t)owner,
				     .device = (int8_t)device,
				     .at_slot = (uint8_t)rsd__loc_slot(at) };
	int err;

	if (owner > RSD_KEYMAP_MAX_OWNER)
		return rsd__err(RSD_ENOMEM, "the storage-owner index holds at most %llu values",
				(unsigned long long)RSD_KEYMAP_MAX_OWNER + 1);
	/* Keep the load factor under 1/2. */
	if ((km->count + 1) * 2 > km->cap) {
		err = grow(km);
		if (err)
			return err;
	}
	place(km->slots, km->cap, &s);
	km->count++;
	return 0;
}

void rsd__keymap_remove(struct rsd_keymap *km, int device, const void *base)
{
	struct rsd_keymap_slot *s = rsd__keymap_find(km, device, base);
	size_t i, j, mask = km->cap - 1;

	if (!s)
		return;
	i = (size_t)(s - km->slots);
	km->slots[i].base = 0;
	km->count--;
	/* Shift back later members of the probe run that now have a hole. */
	for (j = (i + 1) & mask; km->slots[j].base; j = (j + 1) & mask) {
		size_t home = key_hash(km->slots[j].device, km->slots[j].base) & mask;

		if (((j - home) & mask) >= ((j - i) & mask)) {
			km->slots[i] = km->slots[j];
			km->slots[j].base = 0;
			i = j;
		}
	}
}

void rsd__keymap_free(struct rsd_keymap *km)
{
	free(km->slots);
	km->slots = NULL;
	km->cap = km->count = 0;
}

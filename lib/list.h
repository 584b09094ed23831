/* SPDX-License-Identifier: MIT */
/*
 * The intrusive doubly-linked list librsd's records use: a struct
 * rsd__list_node sits inside each listed object, and rsd__list_entry()
 * gets from the node back to the object, so listing an object allocates
 * nothing and unlinking it is O(1).
 *
 * Unlike the kernel's circular lists, both ends are NULL and no node ever
 * points at the head. Two things follow that the manager relies on:
 *  - a zero-filled head (calloc, memset) is an empty list, with no init
 *    call to forget;
 *  - a head may be moved or copied with its list (the per-stream queues of
 *    released lease events live in an array that grows by realloc and
 *    shrinks by copying its last element over an emptied one).
 * The price is that unlinking names the list the node is on.
 *
 * No locking here: every list says next to its head which lock protects it.
 */
#ifndef RSD_LIST_H
#define RSD_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct rsd__list_node {
	struct rsd__list_node *next, *prev; /* NULL at the ends */
};

struct rsd__list {
	struct rsd__list_node *first, *last; /* both NULL when empty */
};

/* The object of type `type` whose member `member` is node p. */
#define rsd__container_of(p, type, member) ((type *)(void *)((char *)(p)-offsetof(type, member)))

static inline void rsd__list_init(struct rsd__list *l)
{
	l->first = l->last = NULL;
}

static inline bool rsd__list_empty(const struct rsd__list *l)
{
	return !l->first;
}

/* Link n first (most recent first when every node comes in here). */
static inline void rsd__list_add_head(struct rsd__list *l, struct rsd__list_node *n)
{
	n->prev = NULL;
	n->next = l->first;
	if (l->first)
		l->first->prev = n;
	else
		l->last = n;
	l->first = n;
}

/* Link n last: walking from first visits nodes in the order they came. */
static inline void rsd__list_add_tail(struct rsd__list *l, struct rsd__list_node *n)
{
	n->next = NULL;
	n->prev = l->last;
	if (l->last)
		l->last->next = n;
	else
		l->first = n;
	l->last = n;
}

/* Unlink n from l, the list it is on; its links are cleared. */
static inline void rsd__list_del(struct rsd__list *l, struct rsd__list_node *n)
{
	if (n->prev)
		n->prev->next = n->next;
	else
		l->first = n->next;
	if (n->next)
		n->next->prev = n->prev;
	else
		l->last = n->prev;
	n->next = n->prev = NULL;
}

/* The entry of node p, or NULL for no node (past either end). */
#define rsd__list_entry(p, type, member) ((p) ? rsd__container_of(p, type, member) : (type *)NULL)

#define rsd__list_first_entry(l, type, member) rsd__list_entry((l)->first, type, member)

/* Every entry, first to last; pos must stay on the list meanwhile. */
#define rsd__list_for_each_entry(pos, l, member)                                     \
	for ((pos) = rsd__list_entry((l)->first, __typeof__(*(pos)), member); (pos); \
	     (pos) = rsd__list_entry((pos)->member.next, __typeof__(*(pos)), member))

/* The same, where the body may unlink or free pos (tmp holds the next). */
#define rsd__list_for_each_entry_safe(pos, tmp, l, member)                                 \
	for ((pos) = rsd__list_entry((l)->first, __typeof__(*(pos)), member);              \
	     (pos) &&                                                                      \
	     ((tmp) = rsd__list_entry((pos)->member.next, __typeof__(*(pos)), member), 1); \
	     (pos) = (tmp))

#endif

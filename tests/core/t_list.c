// SPDX-License-Identifier: MIT
/*
 * The intrusive list of lib/list.h: a zero-filled head is empty; entries
 * added at the tail come back in that order and at the head in reverse;
 * unlinking the first, a middle or the last entry keeps both ends and both
 * directions right and clears the node; the safe walk may unlink what it
 * visits; a head copied elsewhere with its list still lists it.
 */
#include <atf-c.h>
#include "../check.h"
#include <stdio.h>
#include <string.h>

#include "list.h"

struct item {
	int tag; /* the node is not the first member: entry must subtract */
	struct rsd__list_node node;
};

/* The tags first to last, and last to first, as "1,2,3|3,2,1". */
static const char *tags(const struct rsd__list *l, char *buf, size_t len)
{
	const struct rsd__list_node *n;
	size_t k = 0;

	buf[0] = '\0';
	for (n = l->first; n && k + 4 < len; n = n->next)
		k += (size_t)snprintf(buf + k, len - k, "%s%d", n == l->first ? "" : ",",
				      rsd__container_of(n, struct item, node)->tag);
	k += (size_t)snprintf(buf + k, len - k, "|");
	for (n = l->last; n && k + 4 < len; n = n->prev)
		k += (size_t)snprintf(buf + k, len - k, "%s%d", n == l->last ? "" : ",",
				      rsd__container_of(n, struct item, node)->tag);
	return buf;
}

ATF_TC_WITHOUT_HEAD(order_and_unlink);
ATF_TC_BODY(order_and_unlink, tc)
{
	struct item it[5];
	struct rsd__list l;
	char buf[64];

	memset(&l, 0, sizeof(l));
	memset(it, 0, sizeof(it));
	ATF_CHECK(rsd__list_empty(&l));
	ATF_CHECK(rsd__list_first_entry(&l, struct item, node) == NULL);
	for (int i = 0; i < 5; i++) {
		it[i].tag = i + 1;
		rsd__list_add_tail(&l, &it[i].node);
	}
	ATF_CHECK(!rsd__list_empty(&l));
	ATF_CHECK_STREQ(tags(&l, buf, sizeof(buf)), "1,2,3,4,5|5,4,3,2,1");
	ATF_CHECK(rsd__list_first_entry(&l, struct item, node) == &it[0]);
	rsd__list_del(&l, &it[2].node); /* middle */
	ATF_CHECK(it[2].node.next == NULL && it[2].node.prev == NULL);
	ATF_CHECK_STREQ(tags(&l, buf, sizeof(buf)), "1,2,4,5|5,4,2,1");
	rsd__list_del(&l, &it[0].node); /* first */
	ATF_CHECK_STREQ(tags(&l, buf, sizeof(buf)), "2,4,5|5,4,2");
	rsd__list_del(&l, &it[4].node); /* last */
	ATF_CHECK_STREQ(tags(&l, buf, sizeof(buf)), "2,4|4,2");
	rsd__list_del(&l, &it[1].node);
	rsd__list_del(&l, &it[3].node);
	ATF_CHECK(rsd__list_empty(&l));
	ATF_CHECK(l.last == NULL);
	/* At the head: most recent first. */
	for (int i = 0; i < 3; i++)
		rsd__list_add_head(&l, &it[i].node);
	ATF_CHECK_STREQ(tags(&l, buf, sizeof(buf)), "3,2,1|1,2,3");
	rsd__list_init(&l);
	ATF_CHECK(rsd__list_empty(&l) && l.last == NULL);
}

ATF_TC_WITHOUT_HEAD(walks);
ATF_TC_BODY(walks, tc)
{
	struct item it[6], *pos, *tmp;
	struct rsd__list l = { NULL, NULL }, moved;
	char buf[64];
	int sum = 0;

	for (int i = 0; i < 6; i++) {
		it[i].tag = i + 1;
		rsd__list_add_tail(&l, &it[i].node);
	}
	rsd__list_for_each_entry(pos, &l, node)
		sum = sum * 10 + pos->tag;
	ATF_CHECK_EQ(sum, 123456);
	ATF_CHECK(pos == NULL); /* a walk ends past the last entry */
	/* Unlink the even ones while walking: del clears the node's links,
	 * and the walk goes on from the next one it kept. */
	rsd__list_for_each_entry_safe(pos, tmp, &l, node)
		if (pos->tag % 2 == 0)
			rsd__list_del(&l, &pos->node);
	ATF_CHECK_STREQ(tags(&l, buf, sizeof(buf)), "1,3,5|5,3,1");
	/* No node points at the head: a copy of it lists the same entries. */
	memcpy(&moved, &l, sizeof(l));
	memset(&l, 0xff, sizeof(l));
	rsd__list_del(&moved, &it[2].node);
	ATF_CHECK_STREQ(tags(&moved, buf, sizeof(buf)), "1,5|5,1");
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, order_and_unlink);
	ATF_TP_ADD_TC(tp, walks);
	return atf_no_error();
}

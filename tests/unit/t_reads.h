/*
 * t_reads.h - count a store's ranged reads of its objstore, for the tests
 * that say how few a get or a put makes (it wraps the store's objstore ops:
 * backend/store/store_internal.h).
 *
 *     t_reads_count(st);      // t_range_reads = 0, then counted
 *     ... a get or a put ...
 *     t_reads_end(st);        // the store's own ops again
 */
#ifndef SNAPFS_T_READS_H
#define SNAPFS_T_READS_H

#include "backend/store/store_internal.h"

static const struct objstore_ops *t_real_ops;
static struct objstore_ops t_counting_ops;
static int t_range_reads;

static inline int t_counted_get_range(struct objstore *os, const char *key, int64_t off, size_t len,
				      void *buf, struct err *e)
{
	t_range_reads++;
	return t_real_ops->get_range(os, key, off, len, buf, e);
}

static inline void t_reads_count(struct store *st)
{
	t_real_ops = st->os->ops;
	t_counting_ops = *t_real_ops;
	t_counting_ops.get_range = t_counted_get_range;
	st->os->ops = &t_counting_ops;
	t_range_reads = 0;
}

static inline void t_reads_end(struct store *st)
{
	st->os->ops = t_real_ops;
}

#endif

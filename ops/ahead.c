/*
 * ahead.c - a sandbox's files read ahead (ahead.h): a fixed table searched
 * whole. 128 slots of short paths cost less to scan than an open costs to
 * cross, and the caller holds its lock for no longer than that scan.
 */
#include "ops/ahead.h"

#include <stdlib.h>
#include <string.h>

/*
 * Shared by every set, so guarded by the lock the callers hold for all of
 * them (ops_agent.c: agents.lock). epochs: the last epoch handed out, so
 * that a set made again for a new container never reuses an old one's.
 * total: the bytes all sets keep, at most AHEAD_TOTAL_MAX, so that a
 * daemon with many idle sandboxes holds no more than that.
 */
static uint64_t epochs;
static size_t total;

static bool fresh(const struct ahead_file *f, int64_t now_ms)
{
	return f->path && now_ms - f->asked_ms < AHEAD_FRESH_MS;
}

void ahead_file_release(struct ahead_file *f)
{
	free(f->path);
	free(f->data);
	*f = (struct ahead_file){0};
}

/* @f leaves @s: the bytes it held are no longer counted. */
static void uncount(struct ahead_set *s, const struct ahead_file *f)
{
	s->bytes -= f->len;
	total -= f->len;
}

static void drop(struct ahead_set *s, struct ahead_file *f)
{
	uncount(s, f);
	ahead_file_release(f);
}

void ahead_prune(struct ahead_set *s, int64_t now_ms)
{
	for (int i = 0; i < AHEAD_KEPT_MAX; i++)
		if (s->v[i].path && !fresh(&s->v[i], now_ms))
			drop(s, &s->v[i]);
}

void ahead_clear(struct ahead_set *s)
{
	for (int i = 0; i < AHEAD_KEPT_MAX; i++)
		if (s->v[i].path)
			drop(s, &s->v[i]);
	s->epoch = ++epochs;
}

uint64_t ahead_epoch(struct ahead_set *s)
{
	if (!s->epoch)
		s->epoch = ++epochs;
	return s->epoch;
}

/* @path's slot in @s, or -1. */
static int find(const struct ahead_set *s, const char *path)
{
	for (int i = 0; i < AHEAD_KEPT_MAX; i++)
		if (s->v[i].path && strcmp(s->v[i].path, path) == 0)
			return i;
	return -1;
}

bool ahead_has(const struct ahead_set *s, const char *path, int64_t now_ms)
{
	int i = find(s, path);
	return i >= 0 && fresh(&s->v[i], now_ms);
}

void ahead_keep(struct ahead_set *s, uint64_t epoch, struct ahead_file *f, int64_t now_ms)
{
	ahead_prune(s, now_ms);
	int old = find(s, f->path), slot = old;
	for (int i = 0; i < AHEAD_KEPT_MAX && slot < 0; i++)
		if (!s->v[i].path)
			slot = i;
	/* The room an older copy of it holds counts: the newer answer replaces it. */
	size_t held = old >= 0 ? s->v[old].len : 0;
	bool newer = old < 0 || f->asked_ms >= s->v[old].asked_ms;
	if (epoch != s->epoch || !fresh(f, now_ms) || slot < 0 || !newer ||
	    f->len > AHEAD_BYTES_MAX - (s->bytes - held) ||
	    f->len > AHEAD_TOTAL_MAX - (total - held)) {
		ahead_file_release(f);
		return;
	}
	if (old >= 0)
		drop(s, &s->v[old]);
	s->v[slot] = *f;
	s->bytes += f->len;
	total += f->len;
	*f = (struct ahead_file){0};
}

bool ahead_take(struct ahead_set *s, const char *path, int64_t now_ms, struct ahead_file *out)
{
	ahead_prune(s, now_ms);
	int i = find(s, path);
	if (i < 0)
		return false;
	uncount(s, &s->v[i]);
	*out = s->v[i];
	s->v[i] = (struct ahead_file){0};
	return true;
}

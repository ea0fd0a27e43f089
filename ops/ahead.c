/*
 * ahead.c - a sandbox's files read ahead (ahead.h): a fixed table searched
 * whole. 128 slots of short paths cost less to scan than an open costs to
 * cross, and the caller holds its lock for no longer than that scan.
 */
#include "ops/ahead.h"

#include <stdlib.h>
#include <string.h>

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

static void drop(struct ahead_set *s, struct ahead_file *f)
{
	s->bytes -= f->len;
	ahead_file_release(f);
}

void ahead_clear(struct ahead_set *s)
{
	for (int i = 0; i < AHEAD_KEPT_MAX; i++)
		if (s->v[i].path)
			drop(s, &s->v[i]);
	s->epoch++;
}

uint64_t ahead_epoch(const struct ahead_set *s)
{
	return s->epoch;
}

static struct ahead_file *find(const struct ahead_set *s, const char *path)
{
	for (int i = 0; i < AHEAD_KEPT_MAX; i++)
		if (s->v[i].path && strcmp(s->v[i].path, path) == 0)
			return (struct ahead_file *)&s->v[i];
	return NULL;
}

bool ahead_has(const struct ahead_set *s, const char *path, int64_t now_ms)
{
	const struct ahead_file *f = find(s, path);
	return f && fresh(f, now_ms);
}

void ahead_keep(struct ahead_set *s, uint64_t epoch, struct ahead_file *f, int64_t now_ms)
{
	struct ahead_file *slot = NULL;
	struct ahead_file *old = find(s, f->path);
	if (old)
		drop(s, old); /* the newer answer wins */
	for (int i = 0; i < AHEAD_KEPT_MAX; i++) {
		if (s->v[i].path && !fresh(&s->v[i], now_ms))
			drop(s, &s->v[i]);
		if (!s->v[i].path && !slot)
			slot = &s->v[i];
	}
	if (epoch != s->epoch || !fresh(f, now_ms) || !slot ||
	    f->len > AHEAD_BYTES_MAX - s->bytes) {
		ahead_file_release(f);
		return;
	}
	*slot = *f;
	s->bytes += f->len;
	*f = (struct ahead_file){0};
}

bool ahead_take(struct ahead_set *s, const char *path, int64_t now_ms, struct ahead_file *out)
{
	struct ahead_file *f = find(s, path);
	if (!f)
		return false;
	bool ok = fresh(f, now_ms);
	if (ok) {
		s->bytes -= f->len;
		*out = *f;
		*f = (struct ahead_file){0};
	} else {
		drop(s, f);
	}
	return ok;
}

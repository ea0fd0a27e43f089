/*
 * store.c - the store's small shared pieces: snapshot ids and object keys,
 * store_parallel() (the worker threads of a put or get), the puts in flight
 * and their pins, the manifest
 * reads and listing, and the totals of the stats file. Open and close are
 * store_open.c's; the chunk index and the pack index codec store_index.c's;
 * the records' tables store_snaps.c's. Everything on struct store here is
 * under st->lock (store_internal.h).
 */
#include "backend/store/store_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/digest_slot.h"
#include "lib/names.h"
#include "lib/strbuf.h"

/* --- ids and keys ----------------------------------------------------------- */

/* A name (lib/names.h) without TMP_MARK (lib/util.h), which marks temp files and objects. */
bool store_id_ok(const char *id)
{
	return name_ok(id) && !strstr(id, TMP_MARK);
}

int store_check_id(const char *id, struct err *e)
{
	if (!store_id_ok(id))
		return err_set(e, EINVAL, "invalid snapshot id \"%.*s\"", NAME_LEN_MAX + 1, id);
	return 0;
}

void store_manifest_key(const char *id, char key[OBJ_KEY_MAX])
{
	/* Cannot truncate: ids are at most NAME_LEN_MAX bytes. */
	snprintf(key, OBJ_KEY_MAX, "manifests/%s.json", id);
}

int store_checked_key(const char *id, char key[OBJ_KEY_MAX], struct err *e)
{
	int rc = store_check_id(id, e);
	if (rc == 0)
		store_manifest_key(id, key);
	return rc;
}

void store_pack_key(const char *name, const char *ext, char key[OBJ_KEY_MAX])
{
	/* Cannot truncate: pack names are at most MANIFEST_PACK_MAX bytes. */
	snprintf(key, OBJ_KEY_MAX, "packs/%s.%s", name, ext);
}

int store_wrap(struct err *e, const char *id, int rc, const struct err *inner)
{
	return err_set(e, -rc, "snapshot %s: %s", id, inner->msg);
}

/* --- threads ---------------------------------------------------------------- */

struct par_thread {
	pthread_t tid;
	void (*fn)(void *arg, unsigned worker);
	void *arg;
	unsigned worker;
	bool started;
	struct cancel *cancel; /* the caller's token (lib/cancel.h) */
};

static void *par_main(void *arg)
{
	struct par_thread *t = arg;
	cancel_bind(t->cancel);
	t->fn(t->arg, t->worker);
	return NULL;
}

void store_parallel(unsigned n, void (*fn)(void *arg, unsigned worker), void *arg)
{
	struct par_thread threads[STORE_WORKERS_MAX] = {0};
	if (n > STORE_WORKERS_MAX)
		n = STORE_WORKERS_MAX;
	/* A thread that cannot start leaves its share to the others: fn pulls its work. */
	for (unsigned i = 1; i < n; i++) {
		threads[i] = (struct par_thread){
		    .fn = fn, .arg = arg, .worker = i, .cancel = cancel_current()};
		threads[i].started =
		    pthread_create(&threads[i].tid, NULL, par_main, &threads[i]) == 0;
	}
	fn(arg, 0);
	for (unsigned i = 1; i < n; i++) {
		if (threads[i].started)
			pthread_join(threads[i].tid, NULL);
	}
}

/* --- puts in flight, room (all under st->lock) ------------------------------ */

struct inflight *store_find_inflight(struct store *st, const char *id)
{
	for (struct inflight *fl = st->inflight; fl; fl = fl->next) {
		if (!strcmp(fl->id, id))
			return fl;
	}
	return NULL;
}

int store_inflight_begin(struct store *st, const char *id, struct inflight **out)
{
	if (store_find_inflight(st, id))
		return -EBUSY;
	struct inflight *fl = calloc(1, sizeof(*fl));
	if (!fl)
		return -ENOMEM;
	snprintf(fl->id, sizeof(fl->id), "%s", id);
	fl->next = st->inflight;
	st->inflight = fl;
	*out = fl;
	return 0;
}

bool store_inflight_pinned(const struct inflight *fl, const struct pack *p)
{
	for (size_t i = 0; i < fl->npinned; i++) {
		if (fl->pinned[i] == p)
			return true;
	}
	return false;
}

int store_inflight_pin(struct inflight *fl, struct pack *p)
{
	if (store_inflight_pinned(fl, p))
		return 0;
	int rc = ALLOC_GROW(fl->pinned, fl->cap, fl->npinned);
	if (rc < 0)
		return rc;
	fl->pinned[fl->npinned++] = p;
	p->pins++;
	return 0;
}

void store_inflight_end(struct store *st, struct inflight *fl)
{
	for (struct inflight **pp = &st->inflight; *pp; pp = &(*pp)->next) {
		if (*pp == fl) {
			*pp = fl->next;
			break;
		}
	}
	for (size_t i = 0; i < fl->npinned; i++)
		fl->pinned[i]->pins--;
	free(fl->pinned);
	free(fl);
}

const char *store_url(const struct store *st)
{
	return st->os->url;
}

/* --- manifests -------------------------------------------------------------- */

int store_get_manifest(struct store *st, const char *id, char **json, struct err *e)
{
	char key[OBJ_KEY_MAX];
	struct err inner = {0};
	int rc = store_checked_key(id, key, e);
	if (rc < 0)
		return rc;
	rc = objstore_get_buf(st->os, key, json, NULL, MANIFEST_BYTES_MAX, &inner);
	if (rc == -ENOENT)
		return err_set(e, ENOENT, "snapshot %s is not in the store", id);
	return rc < 0 ? store_wrap(e, id, rc, &inner) : 0;
}

struct list_ctx {
	int (*fn)(const char *id, int64_t size, void *arg);
	void *arg;
	int rc; /* what fn returned when it stopped the walk */
};

/* "manifests/<id>.json" → fn(id, size); other names in manifests/ are not snapshots. */
static int list_one(const char *key, int64_t size, void *arg)
{
	struct list_ctx *ctx = arg;
	const char *name = key + strlen("manifests/");
	size_t len = strlen(name);
	char id[NAME_LEN_MAX + 1];
	if (strchr(name, '/') || len <= strlen(".json") || strcmp(name + len - 5, ".json"))
		return 0;
	len -= strlen(".json");
	if (len > NAME_LEN_MAX)
		return 0;
	memcpy(id, name, len);
	id[len] = '\0';
	if (!store_id_ok(id))
		return 0;
	ctx->rc = ctx->fn(id, size, ctx->arg);
	return ctx->rc;
}

int store_list_manifests(struct store *st, int (*fn)(const char *id, int64_t size, void *arg),
			 void *arg, struct err *e)
{
	struct list_ctx ctx = {.fn = fn, .arg = arg};
	int rc = objstore_list(st->os, "manifests/", list_one, &ctx, e);
	return ctx.rc ? ctx.rc : rc;
}

/* Totals of numbers manifests gave: they saturate rather than wrap. */
static void add_sat(int64_t *sum, int64_t v)
{
	if (__builtin_add_overflow(*sum, v, sum))
		*sum = INT64_MAX;
}

void store_stats(struct store *st, struct store_stats *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&st->lock);
	out->snapshots = (int64_t)st->nsnaps;
	out->packs = (int64_t)st->npacks;
	out->chunks = (int64_t)st->index.count;
	out->chunk_bytes = st->index.plain_bytes;
	for (size_t i = 0; i < st->npacks; i++) {
		add_sat(&out->stored_bytes, st->packs[i]->bytes);
		add_sat(&out->stored_bytes, st->packs[i]->idx_bytes);
	}
	out->condemned_packs = st->condemned;
	out->grace_ms = st->grace_ms;
	out->get_store_bytes = st->get_store_bytes;
	out->get_local_bytes = st->get_local_bytes;
	for (size_t i = 0; i < st->nsnaps; i++) {
		add_sat(&out->stored_bytes, st->snaps[i].manifest_bytes);
		add_sat(&out->logical_bytes, st->snaps[i].size_bytes);
	}
	for (struct inflight *fl = st->inflight; fl; fl = fl->next)
		out->puts_in_flight++;
	pthread_mutex_unlock(&st->lock);
}

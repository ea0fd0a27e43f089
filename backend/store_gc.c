/*
 * store_gc.c - deleting snapshots and collecting packs, safely when several
 * hosts share the store.
 *
 * A pack may go once no manifest lists it. But another host may be storing
 * a snapshot right now whose manifest, not written yet, will list it: a pack
 * that put wrote, or an older one whose chunks it reuses. No listing of
 * manifests can see that put. So, with a grace period G (store_set_grace()):
 *
 *  1. A pack no manifest lists and no put of this process uses is first
 *     condemned: a marker object trash/<pack>.<token> is written.
 *  2. A host deletes the pack only once it first listed that marker at
 *     least G ago, and the manifests it lists after that still do not list
 *     the pack. A marker whose pack is listed again is deleted (rescued).
 *  3. A put lists trash/ when it starts and uses no chunk of a condemned
 *     pack (it stores such chunks again, in its own packs).
 *  4. A put that is about to write its manifest more than 3G/4 after step 3
 *     lists trash/ again, and fails (ETIMEDOUT) if a pack it uses is
 *     condemned, rather than write a manifest naming a pack that may go.
 *
 * Why this is enough: a marker on a pack the put uses was written after
 * step 3 (before it, step 3 would have seen it; the put's own packs are
 * newer still), so no host deletes that pack before step 3 + G, and the
 * manifest lists it by then: written within 3G/4 (or checked at step 4),
 * leaving G/4 for the manifest's own PUT and for clocks that run at
 * slightly different rates. Only elapsed times on each host's monotonic
 * clock count: wall clocks are never compared, so hosts' clocks need not
 * agree. A host that restarts forgets when it first saw each marker and
 * waits G again.
 *
 * After its pack is deleted a marker stays another G, so that a put on a
 * host whose records lag behind still finds the pack condemned. With G = 0
 * (a store only this process writes) packs go at once and no marker is
 * written.
 *
 * store_collect() runs one pass: sweep what interrupted puts left, list
 * trash/, refresh the records (store_refresh.c), list packs/, then condemn,
 * delete and rescue. The daemon runs a pass at start-up and every
 * store_collect_period_ms(), a delete runs one, and store_gc() one after a
 * put that was the last user of a pack.
 */
#include "backend/store_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/strbuf.h"

/* Temp objects of puts that may still be running are only swept this old. */
#define SWEEP_GRACE_MS (3600 * 1000)
#define MARKER_TOKEN_HEX 16

/* A marker, and when this process first listed (or wrote) it. */
struct marker_seen {
	char key[OBJ_KEY_MAX];
	char pack[MANIFEST_PACK_MAX + 1];
	int64_t first_ms;
	bool listed; /* by the pass running now */
};

/* "trash/<id>/<seq>.<token>" -> "<id>/<seq>"; false for keys that are not markers. */
static bool marker_pack(const char *key, char pack[MANIFEST_PACK_MAX + 1])
{
	const char *name = key + strlen("trash/");
	const char *slash = strchr(name, '/');
	const char *dot = strrchr(name, '.');
	size_t len = dot ? (size_t)(dot - name) : 0;
	if (!str_has_prefix(key, "trash/") || !slash || !dot || dot < slash ||
	    len > MANIFEST_PACK_MAX)
		return false;
	memcpy(pack, name, len);
	pack[len] = '\0';
	return true;
}

/* "packs/<id>/<seq>.pack" or ".idx" -> "<id>/<seq>". */
static bool key_pack(const char *key, char pack[MANIFEST_PACK_MAX + 1])
{
	const char *name = key + strlen("packs/");
	const char *slash = strchr(name, '/');
	const char *dot = strrchr(name, '.');
	size_t len = dot ? (size_t)(dot - name) : 0;
	if (!slash || !dot || dot < slash || len > MANIFEST_PACK_MAX ||
	    (strcmp(dot, ".pack") && strcmp(dot, ".idx")))
		return false;
	memcpy(pack, name, len);
	pack[len] = '\0';
	return true;
}

/* Whether @s is one of the NUL-separated strings of @set. */
static bool in_set(const struct strbuf *set, const char *s)
{
	for (size_t off = 0; off < set->len; off += strlen(set->buf + off) + 1) {
		if (!strcmp(set->buf + off, s))
			return true;
	}
	return false;
}

static int set_add(struct strbuf *set, const char *s)
{
	return in_set(set, s) ? 0 : strbuf_add(set, s, strlen(s) + 1);
}

/* --- what a put asks ------------------------------------------------------- */

static int flag_condemned(const char *key, int64_t size, void *arg)
{
	struct store *st = arg;
	char name[MANIFEST_PACK_MAX + 1];
	(void)size;
	if (!marker_pack(key, name))
		return 0;
	pthread_mutex_lock(&st->lock);
	struct pack *p = store_find_pack(st, name);
	if (p)
		p->condemned = true;
	pthread_mutex_unlock(&st->lock);
	return 0;
}

int store_note_condemned(struct store *st, struct err *e)
{
	if (st->grace_ms == 0)
		return 0;
	return objstore_list(st->os, "trash/", flag_condemned, st, e);
}

static int note_marked(const char *key, int64_t size, void *arg)
{
	char name[MANIFEST_PACK_MAX + 1];
	(void)size;
	return marker_pack(key, name) ? set_add(arg, name) : 0;
}

int store_check_condemned(struct store *st, const char *id, struct pack *const *packs, size_t n,
			  int64_t since_ms, struct err *e)
{
	if (st->grace_ms == 0 || mono_ms() - since_ms < st->grace_ms / 4 * 3)
		return 0;
	_cleanup_strbuf_ struct strbuf marked = STRBUF_INIT;
	struct err inner = {0};
	int rc = objstore_list(st->os, "trash/", note_marked, &marked, &inner);
	if (rc < 0)
		return store_wrap(e, id, rc, &inner);
	for (size_t i = 0; i < n; i++) {
		if (in_set(&marked, packs[i]->name))
			return err_set(
			    e, ETIMEDOUT,
			    "snapshot %s: storing it took longer than 3/4 of the store's "
			    "grace period (%lld s) and pack %s was condemned meanwhile",
			    id, (long long)(st->grace_ms / 1000), packs[i]->name);
	}
	return 0;
}

/* --- one pass --------------------------------------------------------------- */

struct pass {
	struct store *st;
	unsigned flags;
	int64_t now_ms;
	struct strbuf present;	/* NUL-separated names of packs in packs/ */
	struct strbuf condemn;	/* packs to condemn */
	struct strbuf doomed;	/* packs to delete */
	struct strbuf unmark;	/* marker keys to delete */
	struct pack **detached; /* out of st->packs, freed at the end */
	size_t ndetached;
	int64_t condemned; /* packs left condemned */
	int removed;
};

/* Under sync_lock: record the marker @key as listed now. */
static int see_marker(const char *key, int64_t size, void *arg)
{
	struct pass *ps = arg;
	struct store *st = ps->st;
	char name[MANIFEST_PACK_MAX + 1];
	(void)size;
	if (!marker_pack(key, name))
		return 0;
	for (size_t i = 0; i < st->nseen; i++) {
		if (!strcmp(st->seen[i].key, key)) {
			st->seen[i].listed = true;
			return 0;
		}
	}
	int rc = STORE_GROW(st->seen, st->seen_cap, st->nseen);
	if (rc < 0)
		return rc;
	struct marker_seen *m = &st->seen[st->nseen++];
	snprintf(m->key, sizeof(m->key), "%s", key);
	snprintf(m->pack, sizeof(m->pack), "%s", name);
	m->first_ms = ps->now_ms;
	m->listed = true;
	return 0;
}

/* Under sync_lock: list trash/; forget markers no longer there. */
static int list_markers(struct pass *ps, struct err *e)
{
	struct store *st = ps->st;
	for (size_t i = 0; i < st->nseen; i++)
		st->seen[i].listed = false;
	int rc = objstore_list(st->os, "trash/", see_marker, ps, e);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < st->nseen;) {
		if (st->seen[i].listed)
			i++;
		else
			st->seen[i] = st->seen[--st->nseen];
	}
	return 0;
}

static int see_pack(const char *key, int64_t size, void *arg)
{
	struct pass *ps = arg;
	char name[MANIFEST_PACK_MAX + 1];
	(void)size;
	return key_pack(key, name) ? set_add(&ps->present, name) : 0;
}

/* Under st->lock: a put of this process in flight writes the packs of @pack's id. */
static bool kept(const struct pass *ps, const char *pack)
{
	size_t len = strcspn(pack, "/");
	for (const struct inflight *fl = ps->st->inflight; fl; fl = fl->next) {
		if (strlen(fl->id) == len && !strncmp(fl->id, pack, len))
			return true;
	}
	return false;
}

/* Under st->lock: take @p out of the records; its chunks leave the index in decide(). */
static void detach(struct pass *ps, struct pack *p)
{
	struct store *st = ps->st;
	for (size_t i = 0; i < st->npacks; i++) {
		if (st->packs[i] == p) {
			st->packs[i] = st->packs[--st->npacks];
			break;
		}
	}
	p->indexed = false;
	ps->detached[ps->ndetached++] = p;
}

/* Under both locks: the oldest first sight of a marker of @name (INT64_MAX: none). */
static int64_t first_marked(const struct store *st, const char *name)
{
	int64_t first = INT64_MAX;
	for (size_t i = 0; i < st->nseen; i++) {
		if (!strcmp(st->seen[i].pack, name) && st->seen[i].first_ms < first)
			first = st->seen[i].first_ms;
	}
	return first;
}

/* Under both locks: queue the markers of @name for deletion. */
static int unmark_all(struct pass *ps, const char *name)
{
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < ps->st->nseen; i++) {
		if (!strcmp(ps->st->seen[i].pack, name))
			rc = set_add(&ps->unmark, ps->st->seen[i].key);
	}
	return rc;
}

/* Under both locks: what becomes of the pack @name that packs/ holds. */
static int decide_pack(struct pass *ps, const char *name)
{
	struct store *st = ps->st;
	struct pack *p = store_find_pack(st, name);
	int64_t first = first_marked(st, name);
	if (kept(ps, name) || (p && (p->refs > 0 || p->pins > 0))) {
		if (p)
			p->condemned = false;
		return unmark_all(ps, name);
	}
	if (st->grace_ms > 0 && ps->now_ms - first < st->grace_ms) {
		if (p)
			p->condemned = true;
		ps->condemned++;
		return first == INT64_MAX ? set_add(&ps->condemn, name) : 0;
	}
	if (p)
		detach(ps, p);
	/* With no grace period there is no tombstone to keep. */
	int rc = st->grace_ms == 0 ? unmark_all(ps, name) : 0;
	return rc < 0 ? rc : set_add(&ps->doomed, name);
}

/* Under both locks: decide every pack, then the markers and records of packs that are gone. */
static int decide(struct pass *ps)
{
	struct store *st = ps->st;
	int rc = 0;
	ps->detached = calloc(st->npacks + 1, sizeof(*ps->detached));
	if (!ps->detached)
		return -ENOMEM;
	for (size_t off = 0; rc == 0 && off < ps->present.len;
	     off += strlen(ps->present.buf + off) + 1)
		rc = decide_pack(ps, ps->present.buf + off);
	st->condemned = ps->condemned;
	for (size_t i = 0; rc == 0 && i < st->nseen; i++) {
		const struct marker_seen *m = &st->seen[i];
		if (!in_set(&ps->present, m->pack) && ps->now_ms - m->first_ms >= 2 * st->grace_ms)
			rc = set_add(&ps->unmark, m->key);
	}
	for (size_t i = 0; rc == 0 && i < st->npacks;) {
		struct pack *p = st->packs[i];
		if (p->refs == 0 && p->pins == 0 && !in_set(&ps->present, p->name))
			detach(ps, p); /* gone from the store: deleted by another host */
		else
			i++;
	}
	if (ps->ndetached > 0 && chunk_index_drop_unindexed(&st->index) < 0) {
		/* Keep them, and their chunks findable: collected on a later pass. */
		for (size_t i = 0; i < ps->ndetached; i++) {
			ps->detached[i]->indexed = true;
			store_add_pack(st, ps->detached[i]);
		}
		ps->ndetached = 0;
		strbuf_release(&ps->doomed);
		rc = -ENOMEM;
	}
	return rc;
}

/* Under sync_lock: write a marker for every pack to condemn. */
static void write_markers(struct pass *ps)
{
	struct store *st = ps->st;
	for (size_t off = 0; off < ps->condemn.len; off += strlen(ps->condemn.buf + off) + 1) {
		const char *name = ps->condemn.buf + off;
		char token[MARKER_TOKEN_HEX + 1], key[OBJ_KEY_MAX], body[256];
		struct err e = {0};
		int rc = random_hex(token, MARKER_TOKEN_HEX);
		/* Cannot truncate: pack names are at most MANIFEST_PACK_MAX bytes. */
		snprintf(key, sizeof(key), "trash/%s.%s", name, token);
		int len =
		    snprintf(body, sizeof(body), "{\"pack\":\"%s\",\"condemned_at_ms\":%lld}\n",
			     name, (long long)now_ms());
		if (rc == 0)
			rc = objstore_put_buf(st->os, key, body, (size_t)len, &e);
		if (rc == 0)
			rc = see_marker(key, 0, ps);
		if (rc < 0)
			warning("store: cannot condemn pack %s: %s", name,
				e.code ? e.msg : strerror(-rc));
	}
}

static void delete_key(struct pass *ps, const char *key)
{
	struct err e = {0};
	if (objstore_del(ps->st->os, key, &e) == 0)
		ps->removed++;
	else
		warning("store: cannot delete %s: %s", key, e.msg);
}

/* The index first: a pack without one is still found by the next pass. */
static void delete_pack(struct pass *ps, const char *name)
{
	char key[OBJ_KEY_MAX];
	store_pack_key(name, "idx", key);
	delete_key(ps, key);
	store_pack_key(name, "pack", key);
	delete_key(ps, key);
}

static void act(struct pass *ps)
{
	write_markers(ps);
	for (size_t off = 0; off < ps->doomed.len; off += strlen(ps->doomed.buf + off) + 1)
		delete_pack(ps, ps->doomed.buf + off);
	for (size_t off = 0; off < ps->unmark.len; off += strlen(ps->unmark.buf + off) + 1)
		delete_key(ps, ps->unmark.buf + off);
}

/* Temp objects a put may still be writing are never swept: see store_collect() in store.h. */
static int64_t sweep_age(const struct pass *ps)
{
	const struct store *st = ps->st;
	if (st->grace_ms == 0 && (ps->flags & STORE_COLLECT_AT_START))
		return 0;
	return st->grace_ms > SWEEP_GRACE_MS ? st->grace_ms : SWEEP_GRACE_MS;
}

/* Under sync_lock. Trash before manifests: see rule 2 at the top. */
static int run_pass(struct pass *ps, struct err *e)
{
	struct store *st = ps->st;
	bool complete = false;
	int rc = objstore_sweep(st->os, sweep_age(ps), e);
	if (rc < 0)
		return rc;
	ps->removed = rc;
	ps->now_ms = mono_ms();
	rc = list_markers(ps, e);
	if (rc == 0)
		rc = store_refresh_locked(st, NULL, NULL, &complete, e);
	if (rc == 0 && !complete)
		return err_set(e, EIO, "not collecting: some manifest in %s cannot be read",
			       st->os->url);
	if (rc == 0)
		rc = objstore_list(st->os, "packs/", see_pack, ps, e);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&st->lock);
	rc = decide(ps);
	pthread_mutex_unlock(&st->lock);
	if (rc == 0)
		act(ps);
	return rc;
}

int store_collect(struct store *st, unsigned flags, struct err *e)
{
	struct pass ps = {.st = st,
			  .flags = flags,
			  .present = STRBUF_INIT,
			  .condemn = STRBUF_INIT,
			  .doomed = STRBUF_INIT,
			  .unmark = STRBUF_INIT};
	pthread_mutex_lock(&st->sync_lock);
	int rc = run_pass(&ps, e);
	pthread_mutex_unlock(&st->sync_lock);
	for (size_t i = 0; i < ps.ndetached; i++)
		free(ps.detached[i]);
	free(ps.detached);
	strbuf_release(&ps.present);
	strbuf_release(&ps.condemn);
	strbuf_release(&ps.doomed);
	strbuf_release(&ps.unmark);
	if (rc == -EFBIG || rc == -ENOMEM)
		rc = err_set(e, -rc, "too many objects in %s", st->os->url);
	return rc < 0 ? rc : ps.removed;
}

/* --- after a delete or a put ------------------------------------------------ */

void store_gc(struct store *st)
{
	bool unused = false;
	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; !unused && i < st->npacks; i++) {
		const struct pack *p = st->packs[i];
		unused = p->refs == 0 && p->pins == 0 && !p->condemned;
	}
	pthread_mutex_unlock(&st->lock);
	struct err e = {0};
	if (unused && store_collect(st, 0, &e) < 0)
		warning("store: not collecting packs: %s", e.msg);
}

int store_delete_snapshot(struct store *st, const char *id, struct err *e)
{
	int rc = store_check_id(id, e);
	if (rc < 0)
		return rc;
	char key[OBJ_KEY_MAX];
	store_manifest_key(id, key);
	struct err inner = {0};
	rc = objstore_del(st->os, key, &inner);
	if (rc < 0)
		return store_wrap(e, id, rc, &inner);
	pthread_mutex_lock(&st->lock);
	store_forget_snap(st, id);
	pthread_mutex_unlock(&st->lock);
	/* A whole pass, not store_gc(): records of other hosts' deletes may lag. */
	if (store_collect(st, 0, &inner) < 0)
		warning("store: not collecting packs: %s", inner.msg);
	return 0;
}

void store_set_grace(struct store *st, int64_t grace_ms)
{
	st->grace_ms = grace_ms > 0 ? grace_ms : 0;
}

int64_t store_grace_ms(const struct store *st)
{
	return st->grace_ms;
}

int64_t store_collect_period_ms(const struct store *st)
{
	int64_t period = st->grace_ms / 4;
	if (st->grace_ms == 0 || period > STORE_COLLECT_PERIOD_MAX_MS)
		return STORE_COLLECT_PERIOD_MAX_MS;
	return period < 1000 ? 1000 : period;
}

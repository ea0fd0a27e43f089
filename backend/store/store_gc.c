/*
 * store_gc.c - deleting snapshots and collecting packs, safely when several
 * hosts share the store.
 *
 * A pack may go once no manifest lists it. But another host may be storing
 * a snapshot right now whose manifest, not written yet, will list it: a pack
 * that put wrote, or an older one whose chunks it reuses. No listing of
 * manifests can see that put. So, with a grace period G (store_set_grace()):
 *
 *  1. A pack that no manifest lists and no put of this process uses is
 *     first condemned: a marker object trash/<pack>.<token> is written.
 *  2. A host deletes the pack only after it has seen a marker of it for at
 *     least G (from the end of the listing that first showed it, on this
 *     host's monotonic clock), and the manifests it lists after that still
 *     do not list the pack. Only a listed manifest naming the pack rescues
 *     it (its markers are deleted); a put in flight here only keeps this
 *     host from condemning it.
 *  3. A put lists trash/ when it starts (T) and never uses a chunk of a
 *     pack a marker named then, even one it learns of later; it stores
 *     such chunks again, in its own packs.
 *  4. A put that would write its manifest later than T + 3G/4 fails with
 *     ETIMEDOUT instead.
 *
 * Why this is enough: a pack that a put uses had no marker at T, so any
 * marker that leads a host to delete it was written after T, and that host
 * deletes nothing before T + G and lists the manifests after that. The
 * put's manifest was written by then (it started before T + 3G/4; the
 * remaining G/4 is for its PUT and for clocks that run at slightly
 * different rates), so the pack is listed and stays. Only elapsed times on
 * each host's monotonic clock count: no wall clocks are compared, so hosts'
 * clocks need not agree. The objstore must list what was written before
 * the listing began (S3 has since 2020). A host that restarts forgets when
 * it saw each marker and waits G again.
 *
 * After its pack is deleted a marker stays another G, so that a put on a
 * host whose records lag (its refresh failing) still refuses the pack. With
 * G = 0 (a store only this process writes) unused packs go at once, no
 * marker is written and puts have no deadline.
 *
 * A pack that the put of a held snapshot (store_hold.c: a suspended
 * sandbox's) wrote is never condemned, even with no manifest listing it
 * yet: that put may be in flight on any host, and the sandbox has nothing
 * else to resume from. Deleting a held snapshot is refused.
 *
 * store_collect() runs one pass, one at a time (gc_lock): sweep what
 * interrupted puts left; under sync_lock, list trash/, refresh the records
 * (store_refresh.c), list packs/ and decide; then, with sync_lock released
 * so refreshes go on, write markers and delete. The daemon runs a pass at
 * start-up and every store_collect_period_ms(), a delete runs one, and
 * store_gc() runs one after a put that was the last user of a pack.
 */
#include "backend/store/store_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/strset.h"

/* Temp objects of puts that may still be running are only swept this old. */
#define SWEEP_GRACE_MS (3600 * 1000)
#define MARKER_TOKEN_HEX 16

/* A marker, and when this process first saw it. */
struct marker_seen {
	char key[OBJ_KEY_MAX];
	char pack[MANIFEST_PACK_MAX + 1];
	int64_t first_ms; /* mono_ms() when the listing that showed it ended, or its PUT did */
};

/* "<dir>/<id>/<seq>.<ext>" -> "<id>/<seq>"; false for other keys. */
static bool pack_of_key(const char *key, const char *dir, char pack[MANIFEST_PACK_MAX + 1])
{
	if (!str_has_prefix(key, dir))
		return false;
	const char *name = key + strlen(dir);
	const char *slash = strchr(name, '/');
	const char *dot = strrchr(name, '.');
	size_t len = dot ? (size_t)(dot - name) : 0;
	if (!slash || !dot || dot < slash || len > MANIFEST_PACK_MAX)
		return false;
	memcpy(pack, name, len);
	pack[len] = '\0';
	return true;
}

/* --- what a put asks ------------------------------------------------------- */

static int note_marked(const char *key, int64_t size, void *arg)
{
	char name[MANIFEST_PACK_MAX + 1];
	(void)size;
	return pack_of_key(key, "trash/", name) ? strset_add(arg, name) : 0;
}

int store_list_condemned(struct store *st, struct strset *names, struct err *e)
{
	if (st->grace_ms == 0)
		return strset_seal(names);
	int rc = objstore_list(st->os, "trash/", note_marked, names, e);
	if (rc == 0)
		rc = strset_seal(names);
	if (rc == -ENOMEM || rc == -EFBIG)
		return err_set(e, -rc, "too many condemned packs in %s", st->os->url);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; i < st->npacks; i++) {
		if (strset_has(names, st->packs[i]->name))
			st->packs[i]->condemned = true;
	}
	pthread_mutex_unlock(&st->lock);
	return 0;
}

int store_put_deadline(struct store *st, const char *id, int64_t since_ms, struct err *e)
{
	int64_t took = mono_ms() - since_ms;
	if (st->grace_ms == 0 || took <= st->grace_ms / 4 * 3)
		return 0;
	return err_set(e, ETIMEDOUT,
		       "snapshot %s: storing it took %.1f s, longer than 3/4 of the store's grace "
		       "period (%.1f s): other hosts may collect packs it uses (see --gc-grace)",
		       id, (double)took / 1000, (double)st->grace_ms / 1000);
}

/* --- one pass --------------------------------------------------------------- */

struct pass {
	struct store *st;
	unsigned flags;
	int64_t now_ms;
	struct strset listed;	/* ids of the manifests listed */
	struct strset present;	/* names of the packs in packs/ */
	struct strset held;	/* ids of the snapshots held (store_hold.c) */
	struct strbuf condemn;	/* NUL-separated: packs to condemn */
	struct strbuf doomed;	/* packs to delete */
	struct strbuf unmark;	/* marker keys to delete */
	struct pack **detached; /* out of st->packs, freed at the end */
	size_t ndetached;
	int64_t condemned; /* packs left condemned */
	int removed;
};

static int compare_seen(const void *a, const void *b)
{
	return strcmp(((const struct marker_seen *)a)->pack, ((const struct marker_seen *)b)->pack);
}

/* Under gc_lock: the index of @key in st->seen, or st->nseen. */
static size_t seen_find(const struct store *st, const char *key)
{
	for (size_t i = 0; i < st->nseen; i++) {
		if (!strcmp(st->seen[i].key, key))
			return i;
	}
	return st->nseen;
}

/* Under gc_lock: remember marker @key of @pack, first seen at @ms. */
static int seen_add(struct store *st, const char *key, const char *pack, int64_t ms)
{
	int rc = ALLOC_GROW(st->seen, st->seen_cap, st->nseen);
	if (rc < 0)
		return rc;
	struct marker_seen *m = &st->seen[st->nseen++];
	snprintf(m->key, sizeof(m->key), "%s", key);
	snprintf(m->pack, sizeof(m->pack), "%s", pack);
	m->first_ms = ms;
	return 0;
}

static int note_key(const char *key, int64_t size, void *arg)
{
	(void)size;
	return str_has_prefix(key, "trash/") ? strset_add(arg, key) : 0;
}

/*
 * Under gc_lock: list trash/; markers new to this process are seen from the
 * end of the listing, those no longer there are forgotten. Sorted by pack.
 */
static int list_markers(struct pass *ps, struct err *e)
{
	struct store *st = ps->st;
	_cleanup_strset_ struct strset keys = STRSET_INIT, known = STRSET_INIT;
	int rc = objstore_list(st->os, "trash/", note_key, &keys, e);
	if (rc == 0)
		rc = strset_seal(&keys);
	ps->now_ms = mono_ms();
	for (size_t i = 0; i < st->nseen && rc == 0;) {
		if (!strset_has(&keys, st->seen[i].key))
			st->seen[i] = st->seen[--st->nseen];
		else
			rc = strset_add(&known, st->seen[i++].key);
	}
	if (rc == 0)
		rc = strset_seal(&known);
	for (size_t i = 0; i < keys.n && rc == 0; i++) {
		char pack[MANIFEST_PACK_MAX + 1];
		if (!strset_has(&known, keys.v[i]) && pack_of_key(keys.v[i], "trash/", pack))
			rc = seen_add(st, keys.v[i], pack, ps->now_ms);
	}
	if (rc == 0 && st->nseen > 1)
		qsort(st->seen, st->nseen, sizeof(*st->seen), compare_seen);
	return rc;
}

/* Under gc_lock, st->seen sorted: the first marker of @pack, or NULL. */
static const struct marker_seen *first_marker(const struct store *st, const char *pack)
{
	size_t lo = 0, hi = st->nseen;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(st->seen[mid].pack, pack) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < st->nseen && !strcmp(st->seen[lo].pack, pack) ? &st->seen[lo] : NULL;
}

/* Under gc_lock: when this process first saw a marker of @pack (INT64_MAX: none). */
static int64_t first_marked(const struct store *st, const char *pack)
{
	int64_t first = INT64_MAX;
	const struct marker_seen *m = first_marker(st, pack);
	for (; m && m < st->seen + st->nseen && !strcmp(m->pack, pack); m++) {
		if (m->first_ms < first)
			first = m->first_ms;
	}
	return first;
}

/* Under gc_lock: queue the markers of @pack for deletion. */
static int unmark_all(struct pass *ps, const char *pack)
{
	const struct store *st = ps->st;
	const struct marker_seen *m = first_marker(st, pack);
	for (; m && m < st->seen + st->nseen && !strcmp(m->pack, pack); m++)
		strbuf_add(&ps->unmark, m->key, strlen(m->key) + 1);
	return strbuf_error(&ps->unmark);
}

static int see_pack(const char *key, int64_t size, void *arg)
{
	char name[MANIFEST_PACK_MAX + 1];
	(void)size;
	return pack_of_key(key, "packs/", name) ? strset_add(arg, name) : 0;
}

/* Under st->lock: a put of this process in flight writes the packs of @pack's id. */
static bool written_here(const struct store *st, const char *pack)
{
	size_t len = strcspn(pack, "/");
	for (const struct inflight *fl = st->inflight; fl; fl = fl->next) {
		if (strlen(fl->id) == len && !strncmp(fl->id, pack, len))
			return true;
	}
	return false;
}

static int note_held(const char *snap_id, const struct store_holder *who, void *arg)
{
	(void)who;
	return strset_add(arg, snap_id);
}

/* Is @pack one a put of a held snapshot wrote? */
static bool held_pack(const struct pass *ps, const char *pack)
{
	char id[ID_MAX];
	size_t len = strcspn(pack, "/");
	if (len >= sizeof(id))
		return false;
	memcpy(id, pack, len);
	id[len] = '\0';
	return strset_has(&ps->held, id);
}

/* Under st->lock: take @p out of the records; its chunks leave the index in decide(). */
static void detach(struct pass *ps, struct pack *p)
{
	store_remove_pack(ps->st, p);
	p->indexed = false;
	ps->detached[ps->ndetached++] = p;
}

/* Under both locks: what becomes of the pack @name that packs/ holds. */
static int decide_pack(struct pass *ps, const char *name, struct pack *p)
{
	struct store *st = ps->st;
	if (p && p->listed) {
		p->condemned = false;
		return unmark_all(ps, name); /* rescued, if it was condemned */
	}
	if (written_here(st, name) || (p && (p->refs > 0 || p->pins > 0)))
		return 0; /* a put here uses it: its manifest will list it in time */
	if (held_pack(ps, name))
		return 0; /* a suspend's: its put may be in flight on any host */
	int64_t first = first_marked(st, name);
	if (st->grace_ms > 0 && ps->now_ms - first < st->grace_ms) {
		if (p)
			p->condemned = true;
		ps->condemned++;
		if (first == INT64_MAX)
			strbuf_add(&ps->condemn, name, strlen(name) + 1);
		return strbuf_error(&ps->condemn);
	}
	if (p)
		detach(ps, p);
	/* With no grace period there is no tombstone to keep. */
	int rc = st->grace_ms == 0 ? unmark_all(ps, name) : 0;
	if (rc < 0)
		return rc;
	strbuf_add(&ps->doomed, name, strlen(name) + 1);
	return strbuf_error(&ps->doomed);
}

/* Under st->lock: flag the packs of the manifests listed, and those packs/ holds. */
static void flag_packs(struct pass *ps)
{
	struct store *st = ps->st;
	for (size_t i = 0; i < st->npacks; i++) {
		st->packs[i]->listed = false;
		st->packs[i]->present = strset_has(&ps->present, st->packs[i]->name);
	}
	for (size_t i = 0; i < st->nsnaps; i++) {
		const struct snap_rec *rec = &st->snaps[i];
		if (!strset_has(&ps->listed, rec->id))
			continue;
		for (size_t j = 0; j < rec->npacks; j++)
			rec->packs[j]->listed = true;
	}
}

/* Under st->lock: a sorted copy of st->packs, to find packs by name. */
static int compare_pack(const void *a, const void *b)
{
	return strcmp((*(struct pack *const *)a)->name, (*(struct pack *const *)b)->name);
}

static struct pack *find_sorted(struct pack **sorted, size_t n, const char *name)
{
	struct pack key, *keyp = &key;
	snprintf(key.name, sizeof(key.name), "%s", name);
	struct pack **found = bsearch(&keyp, sorted, n, sizeof(*sorted), compare_pack);
	return found ? *found : NULL;
}

/* Under both locks: every pack packs/ holds, then the markers and records of those gone. */
static int decide_all(struct pass *ps, struct pack **sorted, size_t nsorted)
{
	struct store *st = ps->st;
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < ps->present.n; i++)
		rc = decide_pack(ps, ps->present.v[i],
				 find_sorted(sorted, nsorted, ps->present.v[i]));
	for (size_t i = 0; rc == 0 && i < st->nseen; i++) {
		const struct marker_seen *m = &st->seen[i];
		if (!strset_has(&ps->present, m->pack) &&
		    ps->now_ms - m->first_ms >= 2 * st->grace_ms) {
			strbuf_add(&ps->unmark, m->key, strlen(m->key) + 1);
			rc = strbuf_error(&ps->unmark);
		}
	}
	for (size_t i = 0; rc == 0 && i < nsorted; i++) {
		struct pack *p = sorted[i];
		if (!p->present && p->refs == 0 && p->pins == 0)
			detach(ps, p); /* gone from the store: deleted by another host */
	}
	return rc;
}

/* Under both locks. On failure nothing is deleted and the records are as they were. */
static int decide(struct pass *ps)
{
	struct store *st = ps->st;
	size_t n = st->npacks;
	_cleanup_free_ struct pack **sorted = calloc(n + 1, sizeof(*sorted));
	ps->detached = calloc(n + 1, sizeof(*ps->detached));
	if (!sorted || !ps->detached)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		sorted[i] = st->packs[i];
	qsort(sorted, n, sizeof(*sorted), compare_pack);
	flag_packs(ps);
	int rc = decide_all(ps, sorted, n);
	if (rc == 0 && ps->ndetached > 0)
		rc = chunk_index_drop_unindexed(&st->index);
	if (rc < 0) {
		/* Keep them, and their chunks findable: collected on a later pass. */
		for (size_t i = 0; i < ps->ndetached; i++) {
			ps->detached[i]->indexed = true;
			store_add_pack(st, ps->detached[i]); /* room: st->packs held them */
		}
		ps->ndetached = 0;
		strbuf_release(&ps->doomed);
		strbuf_release(&ps->unmark);
		strbuf_release(&ps->condemn);
		return rc;
	}
	st->condemned = ps->condemned;
	return 0;
}

/* Write a marker for every pack to condemn; each is seen from the end of its PUT. */
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
			rc = seen_add(st, key, name, mono_ms());
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

/* Under gc_lock, not sync_lock: the requests of a pass. */
static void act(struct pass *ps)
{
	write_markers(ps);
	for (size_t off = 0; off < ps->doomed.len; off += strlen(ps->doomed.buf + off) + 1)
		delete_pack(ps, ps->doomed.buf + off);
	for (size_t off = 0; off < ps->unmark.len; off += strlen(ps->unmark.buf + off) + 1) {
		delete_key(ps, ps->unmark.buf + off);
		size_t i = seen_find(ps->st, ps->unmark.buf + off);
		if (i < ps->st->nseen)
			ps->st->seen[i] = ps->st->seen[--ps->st->nseen];
	}
}

/* Temp objects a put may still be writing are never swept: see store_collect() in store.h. */
static int64_t sweep_age(const struct pass *ps)
{
	const struct store *st = ps->st;
	if (st->grace_ms == 0 && (ps->flags & STORE_COLLECT_AT_START))
		return 0;
	return st->grace_ms > SWEEP_GRACE_MS ? st->grace_ms : SWEEP_GRACE_MS;
}

/* Under gc_lock and sync_lock: trash/ before manifests/, as rule 2 needs. */
static int survey(struct pass *ps, struct err *e)
{
	struct store *st = ps->st;
	bool complete = false;
	int rc = list_markers(ps, e);
	if (rc == 0)
		rc = store_refresh_locked(st, &ps->listed, &complete, e);
	if (rc == 0 && !complete)
		return err_set(e, EIO, "not collecting: some manifest in %s cannot be read",
			       st->os->url);
	if (rc == 0)
		rc = objstore_list(st->os, "packs/", see_pack, &ps->present, e);
	if (rc == 0)
		rc = strset_seal(&ps->present);
	if (rc == 0)
		rc = store_holds_each(st, note_held, &ps->held, e);
	if (rc == 0)
		rc = strset_seal(&ps->held);
	if (rc == 0) {
		pthread_mutex_lock(&st->lock);
		rc = decide(ps);
		pthread_mutex_unlock(&st->lock);
	}
	return rc;
}

static int run_pass(struct pass *ps, struct err *e)
{
	struct store *st = ps->st;
	int rc = objstore_sweep(st->os, sweep_age(ps), e);
	if (rc < 0)
		return rc;
	ps->removed = rc;
	pthread_mutex_lock(&st->sync_lock);
	rc = survey(ps, e);
	pthread_mutex_unlock(&st->sync_lock);
	if (rc == 0)
		act(ps);
	if (rc == -ENOMEM || rc == -EFBIG)
		rc = err_set(e, -rc, "too many objects in %s to collect", st->os->url);
	return rc;
}

int store_collect(struct store *st, unsigned flags, struct err *e)
{
	struct pass ps = {.st = st,
			  .flags = flags,
			  .listed = STRSET_INIT,
			  .present = STRSET_INIT,
			  .held = STRSET_INIT,
			  .condemn = STRBUF_INIT,
			  .doomed = STRBUF_INIT,
			  .unmark = STRBUF_INIT};
	pthread_mutex_lock(&st->gc_lock);
	int rc = run_pass(&ps, e);
	pthread_mutex_unlock(&st->gc_lock);
	/* Out of the records since decide(): nothing reaches them. */
	for (size_t i = 0; i < ps.ndetached; i++)
		free(ps.detached[i]);
	free(ps.detached);
	strset_release(&ps.listed);
	strset_release(&ps.present);
	strset_release(&ps.held);
	strbuf_release(&ps.condemn);
	strbuf_release(&ps.doomed);
	strbuf_release(&ps.unmark);
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
	char key[OBJ_KEY_MAX];
	struct err inner = {0};
	struct store_holder who;
	int rc = store_checked_key(id, key, e);
	if (rc == 0)
		rc = store_held(st, id, &who, e);
	if (rc > 0)
		return err_set(e, EBUSY,
			       "cannot delete snapshot %s: sandbox %s of host %s is suspended and "
			       "resumes from it",
			       id, who.sandbox, who.host);
	if (rc ==
	    0) /* before the manifest goes: a host that took @id forgets its row only with it */
		rc = store_tombstone_put(st, id, e);
	if (rc < 0)
		return rc;
	rc = objstore_del(st->os, key, &inner);
	if (rc < 0)
		return store_wrap(e, id, rc, &inner);
	pthread_mutex_lock(&st->lock);
	store_records_forget(st, id);
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

int64_t store_collect_period_ms(const struct store *st)
{
	int64_t period = st->grace_ms / 4;
	if (st->grace_ms == 0 || period > STORE_COLLECT_PERIOD_MAX_MS)
		return STORE_COLLECT_PERIOD_MAX_MS;
	return period < 1000 ? 1000 : period;
}

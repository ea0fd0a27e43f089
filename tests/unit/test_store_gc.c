/*
 * Collection across hosts (backend/store/store_gc.c): two stores open on one
 * directory stand for two hosts sharing a bucket, with a short grace period.
 */
#include <errno.h>
#include <unistd.h>
#include <time.h>

#include <pthread.h>
#include <semaphore.h>

#include "backend/store/manifest.h"
#include "backend/store/store.h"
#include "backend/store/store_internal.h" /* to wrap a store's objstore operations */
#include "tests/unit/t.h"
#include "tests/unit/t_dir.h"
#include "tests/unit/t_store.h"

#define GRACE_MS 1500
#define SRC_LEN (2u << 20)

static struct store *open_host(void)
{
	struct store *st = t_store_open("store");
	if (st)
		store_set_grace(st, GRACE_MS);
	return st;
}

static void sleep_ms(int64_t ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

/* What a put's progress callback does once, the first time it is called. */
struct meanwhile {
	struct store *other;
	const char *delete_id; /* the other host deletes this snapshot */
	int64_t then_sleep_ms;
	bool done;
};

static void on_progress(void *arg, int64_t done, int64_t total)
{
	struct meanwhile *m = arg;
	struct err e = {0};
	(void)done;
	(void)total;
	if (!m || m->done)
		return;
	m->done = true;
	CHECK(store_delete_snapshot(m->other, m->delete_id, &e) == 0);
	sleep_ms(m->then_sleep_ms);
}

/* Each test stores data of its own: no pack of an earlier test serves it. */
static void new_source(void)
{
	static unsigned char data[SRC_LEN];
	t_random(data, SRC_LEN);
	t_write("src/pages.img", data, SRC_LEN);
}

static int put(struct store *st, const char *id, struct meanwhile *m, struct store_put_result *res,
	       struct err *e)
{
	char src[PATH_MAX];
	t_path(src, "src");
	cJSON *meta = cJSON_CreateObject();
	cJSON_AddStringToObject(meta, "id", id);
	int rc = store_put_snapshot(st, id, src, meta, on_progress, m, res, e);
	cJSON_Delete(meta);
	return rc;
}

static bool pack_stored(const char *pack)
{
	char rel[PATH_MAX];
	snprintf(rel, sizeof(rel), "store/packs/%s.pack", pack);
	return t_exists(rel);
}

/* Markers of pack "<id>/0000" in trash/. */
static int markers_of(const char *id)
{
	char rel[PATH_MAX];
	snprintf(rel, sizeof(rel), "store/trash/%s", id);
	int n = t_entries(rel);
	return n < 0 ? 0 : n;
}

static bool lists_pack(struct store *st, const char *id, const char *pack)
{
	char *json = NULL;
	struct manifest m;
	struct err e = {0};
	bool found = false;
	if (store_get_manifest(st, id, &json, &e) == 0 && manifest_parse(json, id, &m, &e) == 0) {
		for (size_t i = 0; i < m.npacks; i++)
			found = found || !strcmp(m.packs[i], pack);
		manifest_free(&m);
	}
	free(json);
	return found;
}

static int collect(struct store *st)
{
	struct err e = {0};
	int n = store_collect(st, 0, &e);
	if (n < 0)
		fprintf(stderr, "store_collect: %s\n", e.msg);
	return n;
}

/* A delete condemns; the pack goes a grace period later, its marker another one later. */
static void test_grace(struct store *a)
{
	struct err e = {0};
	new_source();
	CHECK(put(a, "snap-x", NULL, NULL, &e) == 0);
	CHECK(store_delete_snapshot(a, "snap-x", &e) == 0);
	CHECK(pack_stored("snap-x/0000"));
	CHECK(markers_of("snap-x") == 1);
	CHECK(collect(a) == 0);
	CHECK(pack_stored("snap-x/0000"));
	sleep_ms(GRACE_MS + 100);
	CHECK(collect(a) == 2); /* the pack and its index */
	CHECK(!pack_stored("snap-x/0000"));
	CHECK(markers_of("snap-x") == 1); /* kept a while, for hosts whose records lag */
	sleep_ms(GRACE_MS + 100);
	CHECK(collect(a) == 1);
	CHECK(markers_of("snap-x") == 0);
}

/*
 * Host B starts a put that reuses snap-y's pack; meanwhile host A deletes
 * snap-y and condemns the pack. B's manifest, written within the grace
 * period, rescues it: A's next pass keeps the pack and drops the marker.
 */
static void test_rescue(struct store *a, struct store *b)
{
	struct err e = {0};
	new_source();
	CHECK(put(a, "snap-y", NULL, NULL, &e) == 0);
	CHECK(store_refresh(b, NULL, &e) == 0);
	struct meanwhile m = {.other = a, .delete_id = "snap-y"};
	struct store_put_result res = {0};
	CHECK(put(b, "snap-y2", &m, &res, &e) == 0);
	CHECK(m.done);
	CHECK(lists_pack(b, "snap-y2", "snap-y/0000"));
	CHECK(res.stored_bytes < (64 << 10));
	CHECK(markers_of("snap-y") == 1);
	sleep_ms(GRACE_MS + 100);
	collect(a);
	CHECK(pack_stored("snap-y/0000"));
	CHECK(markers_of("snap-y") == 0);
	CHECK(store_verify_snapshot(a, "snap-y2", &e) == 0);
	CHECK(store_delete_snapshot(b, "snap-y2", &e) == 0);
}

/* A put that starts after a pack was condemned stores its chunks again; later puts use those. */
static void test_condemned_not_reused(struct store *a, struct store *b)
{
	struct err e = {0};
	new_source();
	struct store_put_result res = {0};
	CHECK(put(a, "snap-z", NULL, NULL, &e) == 0);
	CHECK(store_refresh(b, NULL, &e) == 0);
	CHECK(store_delete_snapshot(a, "snap-z", &e) == 0);
	/* B has not refreshed: only the marker tells it. */
	CHECK(put(b, "snap-z2", NULL, &res, &e) == 0);
	CHECK(!lists_pack(b, "snap-z2", "snap-z/0000"));
	CHECK(res.stored_bytes > SRC_LEN / 2);
	sleep_ms(GRACE_MS + 100);
	collect(a);
	CHECK(!pack_stored("snap-z/0000"));
	CHECK(store_verify_snapshot(b, "snap-z2", &e) == 0);
	CHECK(put(b, "snap-z3", NULL, &res, &e) == 0);
	CHECK(res.stored_bytes < (64 << 10));
	CHECK(lists_pack(b, "snap-z3", "snap-z2/0000"));
	CHECK(store_delete_snapshot(b, "snap-z2", &e) == 0);
	CHECK(store_delete_snapshot(b, "snap-z3", &e) == 0);
}

/* A put that outlasts 3/4 of the grace writes no manifest: a pack it uses may be condemned. */
static void test_slow_put(struct store *a, struct store *b)
{
	struct err e = {0};
	new_source();
	CHECK(put(a, "snap-w", NULL, NULL, &e) == 0);
	CHECK(store_refresh(b, NULL, &e) == 0);
	struct meanwhile m = {.other = a, .delete_id = "snap-w", .then_sleep_ms = GRACE_MS};
	CHECK(put(b, "snap-w2", &m, NULL, &e) == -ETIMEDOUT);
	CHECK(strstr(e.msg, "snap-w2") != NULL && strstr(e.msg, "grace period") != NULL);
	CHECK(!t_exists("store/manifests/snap-w2.json"));
	sleep_ms(GRACE_MS + 100);
	collect(a);
	CHECK(!pack_stored("snap-w/0000"));
}

/* Packs no manifest lists (another host's put in flight, or a crash): condemned first. */
static void test_orphans(struct store *a)
{
	char dir[PATH_MAX];
	t_path(dir, "store/packs/snap-orphan");
	CHECK(mkdir_p(dir, 0755) == 0);
	t_write("store/packs/snap-orphan/0000.pack", "p", 1);
	t_write("store/packs/snap-orphan/0000.idx", "i", 1);
	CHECK(collect(a) >= 0);
	CHECK(markers_of("snap-orphan") == 1);
	CHECK(pack_stored("snap-orphan/0000"));
	sleep_ms(GRACE_MS + 100);
	CHECK(collect(a) >= 2);
	CHECK(!pack_stored("snap-orphan/0000"));
}

/*
 * A pack condemned before a put starts, that the put learns of only later
 * (a refresh mid-put records its manifest): the put still refuses it.
 */
static void on_progress_refresh(void *arg, int64_t done, int64_t total)
{
	struct store *st = arg;
	struct err e = {0};
	(void)total;
	if (done == 0)
		CHECK(store_refresh(st, NULL, &e) == 0);
}

static void test_learned_mid_put(struct store *a, struct store *b)
{
	struct err e = {0};
	char shown[PATH_MAX], hidden[PATH_MAX], src[PATH_MAX];
	new_source();
	CHECK(put(a, "snap-m", NULL, NULL, &e) == 0);
	/* While its manifest is not there (as if its put were in flight elsewhere)... */
	t_path(shown, "store/manifests/snap-m.json");
	t_path(hidden, "snap-m.json");
	CHECK(rename(shown, hidden) == 0);
	collect(a);
	CHECK(markers_of("snap-m") == 1); /* ...a pass condemns its pack */
	CHECK(rename(hidden, shown) == 0);
	t_path(src, "src");
	cJSON *meta = cJSON_CreateObject();
	CHECK(store_put_snapshot(b, "snap-m2", src, meta, on_progress_refresh, b, NULL, &e) == 0);
	cJSON_Delete(meta);
	CHECK(!lists_pack(b, "snap-m2", "snap-m/0000"));
	CHECK(store_delete_snapshot(b, "snap-m2", &e) == 0);
	CHECK(store_delete_snapshot(a, "snap-m", &e) == 0);
}

/*
 * With no grace, one host: a pass that listed the manifests just before a
 * put wrote its own, and decides only once that put has ended, must not
 * take the put's packs for unused.
 */
static const struct objstore_ops *real_ops;
static struct objstore_ops hooked_ops;
static sem_t pass_listed, pass_go;
static int hook_state; /* 0: waiting for the manifest PUT, 1: pass to pause, 2: done */
static pthread_t pass_thread;
static struct store *race_store;

static int paused_list(struct objstore *os, const char *prefix,
		       int (*fn)(const char *key, int64_t size, void *arg), void *arg,
		       struct err *e)
{
	int rc = real_ops->list(os, prefix, fn, arg, e);
	if (hook_state == 1 && !strcmp(prefix, "manifests/")) {
		hook_state = 2;
		sem_post(&pass_listed);
		sem_wait(&pass_go);
	}
	return rc;
}

static void *run_pass(void *arg)
{
	collect(arg);
	return NULL;
}

static void *release_pass(void *arg)
{
	(void)arg;
	sleep_ms(300); /* the put returns meanwhile */
	sem_post(&pass_go);
	return NULL;
}

static int manifest_put_starts_pass(struct objstore *os, const char *key, const void *data,
				    size_t len, struct err *e)
{
	if (hook_state != 0 || strcmp(key, "manifests/snap-r.json"))
		return real_ops->put_buf(os, key, data, len, e);
	hook_state = 1;
	CHECK(pthread_create(&pass_thread, NULL, run_pass, race_store) == 0);
	sem_wait(&pass_listed);
	int rc = real_ops->put_buf(os, key, data, len, e);
	pthread_t releaser;
	CHECK(pthread_create(&releaser, NULL, release_pass, NULL) == 0);
	pthread_detach(releaser);
	return rc;
}

static void test_refresh_races_put_end(void)
{
	struct err e = {0};
	struct store *st = open_host();
	if (!st)
		return;
	store_set_grace(st, 0);
	race_store = st;
	new_source();
	sem_init(&pass_listed, 0, 0);
	sem_init(&pass_go, 0, 0);
	real_ops = st->os->ops;
	hooked_ops = *real_ops;
	hooked_ops.list = paused_list;
	hooked_ops.put_buf = manifest_put_starts_pass;
	st->os->ops = &hooked_ops;
	CHECK(put(st, "snap-r", NULL, NULL, &e) == 0);
	pthread_join(pass_thread, NULL);
	st->os->ops = real_ops;
	CHECK(hook_state == 2);
	CHECK(pack_stored("snap-r/0000"));
	CHECK(store_verify_snapshot(st, "snap-r", &e) == 0);
	CHECK(store_delete_snapshot(st, "snap-r", &e) == 0);
	CHECK(!pack_stored("snap-r/0000"));
	store_close(st);
	sem_destroy(&pass_listed);
	sem_destroy(&pass_go);
}

/* A manifest that cannot be read might list any pack: nothing is condemned while it is there. */
static void test_unreadable(struct store *a)
{
	struct err e = {0};
	char p[PATH_MAX];
	t_path(p, "store/packs/snap-orphan2");
	CHECK(mkdir_p(p, 0755) == 0);
	t_write("store/packs/snap-orphan2/0000.pack", "p", 1);
	t_path(p, "store/manifests");
	CHECK(mkdir_p(p, 0755) == 0);
	t_write("store/manifests/snap-bad.json", "{not json", 9);
	CHECK(store_collect(a, 0, &e) == -EIO);
	CHECK(strstr(e.msg, "cannot be read") != NULL);
	CHECK(markers_of("snap-orphan2") == 0);
	t_path(p, "store/manifests/snap-bad.json");
	CHECK(unlink(p) == 0);
	CHECK(collect(a) >= 0);
	CHECK(markers_of("snap-orphan2") == 1);
}

/* B's records follow A's manifests: B deduplicates against them, and A's delete keeps B's. */
static void test_refresh(struct store *a, struct store *b)
{
	struct err e = {0};
	new_source();
	struct store_put_result res = {0};
	struct store_stats s;
	CHECK(put(a, "snap-v", NULL, NULL, &e) == 0);
	CHECK(store_refresh(b, NULL, &e) == 0);
	store_stats(b, &s);
	CHECK(s.snapshots >= 1);
	CHECK(put(b, "snap-v2", NULL, &res, &e) == 0);
	CHECK(res.stored_bytes < (64 << 10));
	CHECK(store_delete_snapshot(a, "snap-v", &e) == 0);
	CHECK(markers_of("snap-v") == 0); /* snap-v2 lists it */
	CHECK(store_delete_snapshot(b, "snap-v2", &e) == 0);
	CHECK(markers_of("snap-v") == 1);
	CHECK(store_refresh(a, NULL, &e) == 0);
	store_stats(a, &s);
	CHECK(s.snapshots == 0);
}

int main(void)
{
	if (!t_store_begin("test_store_gc"))
		return 1;
	char dir[PATH_MAX];
	t_path(dir, "src");
	CHECK(mkdir_p(dir, 0755) == 0);
	struct store *a = open_host(), *b = open_host();
	if (a && b) {
		test_grace(a);
		test_rescue(a, b);
		test_condemned_not_reused(a, b);
		test_slow_put(a, b);
		test_orphans(a);
		test_unreadable(a);
		test_learned_mid_put(a, b);
		test_refresh(a, b);
	}
	store_close(a);
	store_close(b);
	test_refresh_races_put_end();
	rm_rf(t_base);
	return t_done();
}

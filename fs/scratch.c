#include "fs/scratch.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util.h"

enum kind { KIND_FILE, KIND_MARK };

struct entry {
	struct entry *next;
	uint64_t id;
	enum kind kind;
	uid_t uid;
	bool named;	 /* in the namespace: lookups find it */
	bool bound;	 /* made over a mark: its close applies it */
	bool dirty;	 /* written since the last scratch_take() */
	unsigned opens;	 /* open files holding it */
	int64_t expires; /* mono_ms() after which an unopened one goes; 0: not while named */
	int64_t mtime_ms;
	char *data;
	size_t len, cap;
	char path[SCRATCH_PATH_MAX];
};

static struct {
	pthread_mutex_t lock;
	struct entry *head;
	uint64_t next_id;
} store = {.lock = PTHREAD_MUTEX_INITIALIZER, .next_id = 1};

static void entry_free(struct entry *e)
{
	free(e->data);
	free(e);
}

/* Unlink and free every entry nothing needs now: expired, or nameless and closed. */
static void prune_locked(void)
{
	const int64_t now = mono_ms();
	for (struct entry **pp = &store.head; *pp;) {
		struct entry *e = *pp;
		bool gone = e->opens == 0 && (!e->named || (e->expires && now >= e->expires));
		if (gone) {
			*pp = e->next;
			entry_free(e);
		} else {
			pp = &e->next;
		}
	}
}

static struct entry *find_named(uid_t uid, const char *path)
{
	for (struct entry *e = store.head; e; e = e->next)
		if (e->named && e->uid == uid && strcmp(e->path, path) == 0)
			return e;
	return NULL;
}

static struct entry *find_id(uint64_t id)
{
	for (struct entry *e = store.head; e; e = e->next)
		if (e->id == id)
			return e;
	return NULL;
}

static void usage_locked(uid_t uid, unsigned *files, size_t *bytes)
{
	*files = 0;
	*bytes = 0;
	for (struct entry *e = store.head; e; e = e->next) {
		if (e->uid != uid)
			continue;
		(*files)++;
		*bytes += e->cap; /* allocated, not written: resize_locked() */
	}
}

/* Unlink @e from the list (not freed). */
static void unlist(struct entry *e)
{
	for (struct entry **pp = &store.head; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			return;
		}
	}
}

/* Take @e's name away: freed now if nothing holds it, else at its last close. */
static void unname(struct entry *e)
{
	e->named = false;
	if (e->opens == 0) {
		unlist(e);
		entry_free(e);
	}
}

static int entry_new(uid_t uid, const char *path, enum kind kind, struct entry **out)
{
	unsigned files;
	size_t bytes;
	usage_locked(uid, &files, &bytes);
	if (files >= SCRATCH_FILES_MAX)
		return -EDQUOT;
	struct entry *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	if (xsnprintf(e->path, sizeof(e->path), "%s", path) < 0) {
		free(e);
		return -ENAMETOOLONG;
	}
	e->id = store.next_id++;
	e->kind = kind;
	e->uid = uid;
	e->named = true;
	e->mtime_ms = now_ms();
	e->next = store.head;
	store.head = e;
	*out = e;
	return 0;
}

int scratch_create(uid_t uid, const char *path, bool bound, uint64_t *id)
{
	pthread_mutex_lock(&store.lock);
	prune_locked();
	struct entry *old = find_named(uid, path), *e = NULL;
	int rc = 0;
	if (bound ? !old || old->kind != KIND_MARK : old != NULL)
		rc = bound ? -ENOENT : -EEXIST;
	if (rc == 0 && bound)
		unname(old); /* the mark's place in the count is the file's */
	if (rc == 0)
		rc = entry_new(uid, path, KIND_FILE, &e);
	if (rc == 0) {
		e->bound = bound;
		e->opens = 1;
		*id = e->id;
	}
	pthread_mutex_unlock(&store.lock);
	return rc;
}

int scratch_lookup(uid_t uid, const char *path, uint64_t *id)
{
	pthread_mutex_lock(&store.lock);
	prune_locked();
	struct entry *e = find_named(uid, path);
	int rc = !e ? 0 : e->kind == KIND_MARK ? -ENOENT : 1;
	if (rc == 1)
		*id = e->id;
	pthread_mutex_unlock(&store.lock);
	return rc;
}

int scratch_mark(uid_t uid, const char *path)
{
	pthread_mutex_lock(&store.lock);
	prune_locked();
	struct entry *e = find_named(uid, path);
	int rc = 0;
	if (e && e->kind == KIND_FILE)
		rc = -EEXIST;
	else if (!e)
		rc = entry_new(uid, path, KIND_MARK, &e);
	if (rc == 0)
		e->expires = mono_ms() + SCRATCH_MARK_MS;
	pthread_mutex_unlock(&store.lock);
	return rc;
}

int scratch_open(uint64_t id)
{
	pthread_mutex_lock(&store.lock);
	struct entry *e = find_id(id);
	if (e)
		e->opens++;
	pthread_mutex_unlock(&store.lock);
	return e ? 0 : -ENOENT;
}

void scratch_close(uint64_t id)
{
	pthread_mutex_lock(&store.lock);
	struct entry *e = find_id(id);
	if (e && e->opens > 0 && --e->opens == 0) {
		if (e->bound && e->named)
			e->named =
			    false; /* applied at its close: it was the control file's for a while */
		else
			e->expires = mono_ms() + SCRATCH_LINGER_MS;
	}
	prune_locked();
	pthread_mutex_unlock(&store.lock);
}

ssize_t scratch_read(uint64_t id, char *buf, size_t size, off_t off)
{
	pthread_mutex_lock(&store.lock);
	struct entry *e = find_id(id);
	ssize_t n = -ENOENT;
	if (e) {
		size_t from = off < 0 ? 0 : (size_t)off < e->len ? (size_t)off : e->len;
		n = (ssize_t)(e->len - from < size ? e->len - from : size);
		if (n > 0)
			memcpy(buf, e->data + from, (size_t)n);
	}
	pthread_mutex_unlock(&store.lock);
	return n;
}

/* What a file of @len bytes is given: a power of two from 4 KiB, at most SCRATCH_FILE_MAX. */
static size_t cap_for(size_t len)
{
	if (len == 0)
		return 0;
	size_t cap = 4096;
	while (cap < len)
		cap *= 2;
	return cap > SCRATCH_FILE_MAX ? SCRATCH_FILE_MAX : cap;
}

/*
 * Make @e @len bytes long (new bytes zero), within the bounds. The bytes
 * counted are the ones allocated (usage_locked() sums cap): a file grown
 * and then truncated gives its memory back, so what a uid holds in the
 * daemon is what its count says.
 */
static int resize_locked(struct entry *e, size_t len)
{
	if (len > SCRATCH_FILE_MAX)
		return -EFBIG;
	size_t cap = cap_for(len);
	if (cap > e->cap || cap < e->cap / 4) {
		unsigned files;
		size_t bytes;
		usage_locked(e->uid, &files, &bytes);
		if (cap > e->cap && bytes - e->cap + cap > SCRATCH_BYTES_MAX)
			return -EDQUOT;
		char *data = cap ? realloc(e->data, cap) : NULL;
		if (cap && !data && cap > e->cap)
			return -ENOMEM;
		if (!cap)
			free(e->data);
		if (data || !cap) { /* a shrink that failed keeps the old block */
			e->data = data;
			e->cap = cap;
		}
	}
	if (len > e->len)
		memset(e->data + e->len, 0, len - e->len);
	e->len = len;
	e->dirty = true;
	e->mtime_ms = now_ms();
	return 0;
}

ssize_t scratch_write(uint64_t id, const char *buf, size_t size, off_t off)
{
	if (off < 0)
		return -EINVAL;
	if ((size_t)off > SCRATCH_FILE_MAX || size > SCRATCH_FILE_MAX - (size_t)off)
		return -EFBIG;
	pthread_mutex_lock(&store.lock);
	struct entry *e = find_id(id);
	int rc = e ? 0 : -ENOENT;
	size_t end = (size_t)off + size;
	if (rc == 0 && end > e->len)
		rc = resize_locked(e, end);
	if (rc == 0 && size) {
		memcpy(e->data + off, buf, size);
		e->dirty = true;
		e->mtime_ms = now_ms();
	}
	pthread_mutex_unlock(&store.lock);
	return rc < 0 ? rc : (ssize_t)size;
}

int scratch_truncate(uint64_t id, off_t size)
{
	if (size < 0)
		return -EINVAL;
	if ((uint64_t)size > SCRATCH_FILE_MAX)
		return -EFBIG;
	pthread_mutex_lock(&store.lock);
	struct entry *e = find_id(id);
	int rc = e ? resize_locked(e, (size_t)size) : -ENOENT;
	pthread_mutex_unlock(&store.lock);
	return rc;
}

int scratch_info(uint64_t id, struct scratch_info *out)
{
	pthread_mutex_lock(&store.lock);
	struct entry *e = find_id(id);
	if (e) {
		out->uid = e->uid;
		out->bound = e->bound;
		out->size = e->len;
		out->mtime_ms = e->mtime_ms;
		memcpy(out->path, e->path, sizeof(out->path));
	}
	pthread_mutex_unlock(&store.lock);
	return e ? 0 : -ENOENT;
}

int scratch_take(uint64_t id, bool only_dirty, struct strbuf *out)
{
	pthread_mutex_lock(&store.lock);
	struct entry *e = find_id(id);
	int rc = !e ? -ENOENT : only_dirty && !e->dirty ? 0 : 1;
	if (rc == 1) {
		strbuf_reset(out);
		strbuf_add(out, e->data ? e->data : "", e->len);
		rc = strbuf_error(out) < 0 ? -ENOMEM : 1;
	}
	if (rc == 1) {
		e->dirty = false;
		if (!only_dirty)
			unname(e);
	}
	pthread_mutex_unlock(&store.lock);
	return rc;
}

int scratch_rename(uid_t uid, const char *from, const char *to)
{
	char path[SCRATCH_PATH_MAX];
	if (xsnprintf(path, sizeof(path), "%s", to) < 0)
		return -ENAMETOOLONG;
	pthread_mutex_lock(&store.lock);
	prune_locked();
	struct entry *e = find_named(uid, from);
	int rc = e && e->kind == KIND_FILE ? 0 : -ENOENT;
	if (rc == 0 && strcmp(from, to) != 0) {
		struct entry *there = find_named(uid, to);
		if (there)
			unname(there);
		memcpy(e->path, path, sizeof(path));
		e->bound = false; /* a name of its own now, applied by nothing but a rename */
	}
	pthread_mutex_unlock(&store.lock);
	return rc;
}

int scratch_unlink(uid_t uid, const char *path)
{
	pthread_mutex_lock(&store.lock);
	prune_locked();
	struct entry *e = find_named(uid, path);
	if (e)
		unname(e);
	pthread_mutex_unlock(&store.lock);
	return e ? 0 : -ENOENT;
}

void scratch_forget_dir(const char *dir)
{
	const size_t len = strlen(dir);
	pthread_mutex_lock(&store.lock);
	for (struct entry *e = store.head, *next; e; e = next) {
		next = e->next; /* unname() may free e */
		if (e->named && strncmp(e->path, dir, len) == 0 && e->path[len] == '/')
			unname(e);
	}
	pthread_mutex_unlock(&store.lock);
}

int scratch_each(uid_t uid, const char *dir, int (*fn)(const char *name, void *arg), void *arg)
{
	char names[SCRATCH_FILES_MAX][SCRATCH_PATH_MAX];
	size_t n = 0, len = strlen(dir);
	pthread_mutex_lock(&store.lock);
	prune_locked();
	for (struct entry *e = store.head; e && n < SCRATCH_FILES_MAX; e = e->next) {
		const char *p = e->path;
		if (e->named && e->kind == KIND_FILE && e->uid == uid &&
		    strncmp(p, dir, len) == 0 && p[len] == '/' && !strchr(p + len + 1, '/'))
			memcpy(names[n++], p + len + 1, strlen(p + len + 1) + 1);
	}
	pthread_mutex_unlock(&store.lock);
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = fn(names[i], arg);
	return rc;
}

void scratch_usage(uid_t uid, unsigned *files, size_t *bytes)
{
	pthread_mutex_lock(&store.lock);
	prune_locked();
	usage_locked(uid, files, bytes);
	pthread_mutex_unlock(&store.lock);
}

void scratch_reset(void)
{
	pthread_mutex_lock(&store.lock);
	while (store.head) {
		struct entry *e = store.head;
		store.head = e->next;
		entry_free(e);
	}
	pthread_mutex_unlock(&store.lock);
}

#include "fs/notify.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/inode.h"
#include "lib/util.h"

#define QUEUE_MAX 256

struct change {
	enum ops_object kind;
	char id[ID_MAX];
};

struct watch {
	struct watch *next;
	const void *key;
	enum ops_object kind;
	char id[ID_MAX];
	struct fuse_pollhandle *ph;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct change queue[QUEUE_MAX]; /* a ring: count entries from head */
	size_t head, count;
	bool overflow; /* changes were dropped: notify everything once */
	bool stop;
	bool started;
	pthread_t thread;
	struct fuse_session *se;
	unsigned link_delay_ms; /* SNAPFS_NOTIFY_LINK_DELAY_MS: tests only */
} nt = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

/*
 * Links whose target the kernel cached at a READLINK and must drop
 * (notify_link_read()), under nt.lock: a ring of inode numbers, each once.
 */
#define LINKS_MAX 4096
static struct {
	fuse_ino_t ring[LINKS_MAX];
	size_t head, count;
	fuse_ino_t busy; /* taken off the ring, its drop under way: 0 for none */
} links;

static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static struct watch *watches;

/* --- the queue -------------------------------------------------------- */

static bool queued(enum ops_object kind, const char *id)
{
	for (size_t i = 0; i < nt.count; i++) {
		const struct change *c = &nt.queue[(nt.head + i) % QUEUE_MAX];
		if (c->kind == kind && strcmp(c->id, id) == 0)
			return true;
	}
	return false;
}

void notify_changed(enum ops_object kind, const char *id, void *arg)
{
	(void)arg;
	pthread_mutex_lock(&nt.lock);
	if (queued(kind, id)) {
		/* Already going to be told: once is enough. */
	} else if (nt.count == QUEUE_MAX || strlen(id) >= ID_MAX) {
		nt.overflow = true;
	} else {
		struct change *c = &nt.queue[(nt.head + nt.count++) % QUEUE_MAX];
		c->kind = kind;
		memcpy(c->id, id, strlen(id) + 1);
	}
	pthread_cond_signal(&nt.cond);
	pthread_mutex_unlock(&nt.lock);
}

/* --- what the notifier does -------------------------------------------- */

static bool watch_matches(const struct watch *w, const struct change *c)
{
	if (!c)
		return true;
	if (c->kind == OPS_OBJ_LIST)
		return strcmp(w->id, c->id) == 0;
	return w->kind == c->kind && strcmp(w->id, c->id) == 0;
}

/* Wake and drop the watches of @c (all of them for NULL). */
static void wake(const struct change *c)
{
	struct watch *fire = NULL;
	pthread_mutex_lock(&watch_lock);
	for (struct watch **pp = &watches; *pp;) {
		struct watch *w = *pp;
		if (watch_matches(w, c)) {
			*pp = w->next;
			w->next = fire;
			fire = w;
		} else {
			pp = &w->next;
		}
	}
	pthread_mutex_unlock(&watch_lock);
	while (fire) {
		struct watch *w = fire;
		fire = w->next;
		fuse_lowlevel_notify_poll(w->ph);
		fuse_pollhandle_destroy(w->ph);
		free(w);
	}
}

static void inval_inode(const char *path)
{
	fuse_ino_t ino = inode_find(path);
	if (ino)
		fuse_lowlevel_notify_inval_inode(nt.se, ino, 0, 0);
}

/* Drop the kernel's entry for @dir/@name, so a deleted object is gone at once. */
static void inval_entry(const char *dir, const char *name)
{
	char path[FS_PATH_MAX];
	fuse_ino_t parent = inode_find(dir);
	if (!parent || xsnprintf(path, sizeof(path), "%s/%s", dir, name) < 0)
		return;
	if (inode_find(path))
		fuse_lowlevel_notify_inval_entry(nt.se, parent, name, strlen(name));
}

static void handle(const struct change *c)
{
	switch (c->kind) {
	case OPS_OBJ_EVENTS:
		inval_inode("events");
		break;
	case OPS_OBJ_ERRORS:
		inval_inode("errors");
		break;
	case OPS_OBJ_SANDBOX:
	case OPS_OBJ_SNAPSHOT:
		wake(c);
		break;
	case OPS_OBJ_LIST:
		wake(c);
		inval_entry("sandboxes", c->id);
		inval_entry("snapshots", c->id);
		break;
	}
}

static bool link_queued(fuse_ino_t ino)
{
	for (size_t i = 0; i < links.count; i++)
		if (links.ring[(links.head + i) % LINKS_MAX] == ino)
			return true;
	return false;
}

bool notify_link_read(fuse_ino_t ino)
{
	pthread_mutex_lock(&nt.lock);
	bool queued = link_queued(ino);
	if (!queued && links.count < LINKS_MAX) {
		links.ring[(links.head + links.count++) % LINKS_MAX] = ino;
		pthread_cond_signal(&nt.cond);
		queued = true;
	}
	pthread_mutex_unlock(&nt.lock);
	return queued;
}

void notify_link_drop(fuse_ino_t ino)
{
	pthread_mutex_lock(&nt.lock);
	struct fuse_session *se = nt.se;
	bool on = nt.started && !nt.stop;
	pthread_mutex_unlock(&nt.lock);
	if (on)
		fuse_lowlevel_notify_inval_inode(se, ino, 0, 0);
}

void notify_links_flush(void)
{
	static pthread_mutex_t one = PTHREAD_MUTEX_INITIALIZER; /* its copy is large */
	static fuse_ino_t todo[LINKS_MAX + 1];
	pthread_mutex_lock(&one);
	pthread_mutex_lock(&nt.lock);
	size_t n = 0;
	/*
	 * Taken off the ring: dropped here, they are not dropped again later
	 * (a later READLINK of the same link then locks a page this drop would
	 * wait for).
	 */
	for (size_t i = 0; i < links.count; i++)
		todo[n++] = links.ring[(links.head + i) % LINKS_MAX];
	links.head = links.count = 0;
	if (links.busy)
		todo[n++] = links.busy;
	struct fuse_session *se = nt.se;
	bool on = nt.started && !nt.stop;
	pthread_mutex_unlock(&nt.lock);
	for (size_t i = 0; on && i < n; i++)
		fuse_lowlevel_notify_inval_inode(se, todo[i], 0, 0);
	pthread_mutex_unlock(&one);
}

static void handle_all(void)
{
	inval_inode("events");
	inval_inode("errors");
	wake(NULL);
}

static void *notifier(void *arg)
{
	(void)arg;
	for (;;) {
		struct change c;
		pthread_mutex_lock(&nt.lock);
		while (!nt.stop && !nt.count && !nt.overflow && !links.count)
			pthread_cond_wait(&nt.cond, &nt.lock);
		bool stop = nt.stop;
		bool all = nt.overflow;
		bool one = false;
		fuse_ino_t link = 0;
		nt.overflow = false;
		if (all)
			nt.count = 0;
		else if (nt.count) {
			c = nt.queue[nt.head];
			nt.head = (nt.head + 1) % QUEUE_MAX;
			nt.count--;
			one = true;
		}
		if (links.count) {
			link = links.ring[links.head];
			links.head = (links.head + 1) % LINKS_MAX;
			links.count--;
			links.busy = link;
		}
		pthread_mutex_unlock(&nt.lock);
		if (stop)
			return NULL;
		if (all)
			handle_all();
		else if (one)
			handle(&c);
		if (link) {
			if (nt.link_delay_ms) /* tests only: a notifier held up (fs/notify.h) */
				usleep((useconds_t)nt.link_delay_ms * 1000);
			fuse_lowlevel_notify_inval_inode(nt.se, link, 0, 0);
			pthread_mutex_lock(&nt.lock);
			links.busy = 0;
			pthread_mutex_unlock(&nt.lock);
		}
	}
}

int notify_start(struct fuse_session *se)
{
	pthread_mutex_lock(&nt.lock);
	nt.se = se;
	nt.stop = false;
	nt.link_delay_ms = (unsigned)env_count("SNAPFS_NOTIFY_LINK_DELAY_MS", 0);
	pthread_mutex_unlock(&nt.lock);
	int rc = -pthread_create(&nt.thread, NULL, notifier, NULL);
	nt.started = rc == 0;
	return rc;
}

void notify_stop(void)
{
	pthread_mutex_lock(&nt.lock);
	nt.stop = true;
	pthread_cond_signal(&nt.cond);
	pthread_mutex_unlock(&nt.lock);
}

void notify_join(void)
{
	if (!nt.started)
		return;
	notify_stop();
	pthread_join(nt.thread, NULL);
	nt.started = false;
	nt.count = 0;
	nt.overflow = false;

	pthread_mutex_lock(&watch_lock);
	struct watch *w = steal_ptr(watches);
	pthread_mutex_unlock(&watch_lock);
	while (w) {
		struct watch *next = w->next;
		fuse_pollhandle_destroy(w->ph);
		free(w);
		w = next;
	}
}

/* --- poll watches ----------------------------------------------------- */

static struct watch *watch_find(const void *key)
{
	for (struct watch *w = watches; w; w = w->next)
		if (w->key == key)
			return w;
	return NULL;
}

void notify_watch(const void *key, enum ops_object kind, const char *id, struct fuse_pollhandle *ph)
{
	pthread_mutex_lock(&watch_lock);
	struct watch *w = watch_find(key);
	if (!w) {
		w = calloc(1, sizeof(*w));
		if (w) {
			w->next = watches;
			watches = w;
		}
	}
	if (w) {
		/* One handle per file: the newest poll replaces the older one. */
		if (w->ph)
			fuse_pollhandle_destroy(w->ph);
		w->key = key;
		w->kind = kind;
		snprintf(w->id, sizeof(w->id), "%s", id);
		w->ph = ph;
	}
	pthread_mutex_unlock(&watch_lock);
	if (!w)
		fuse_pollhandle_destroy(ph);
}

void notify_unwatch(const void *key)
{
	pthread_mutex_lock(&watch_lock);
	struct watch *found = NULL;
	for (struct watch **pp = &watches; *pp; pp = &(*pp)->next) {
		if ((*pp)->key == key) {
			found = *pp;
			*pp = found->next;
			break;
		}
	}
	pthread_mutex_unlock(&watch_lock);
	if (found) {
		fuse_pollhandle_destroy(found->ph);
		free(found);
	}
}

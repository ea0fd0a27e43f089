/*
 * inside.c - sandboxes/<id>/root/ (fs/inside.h): the node table, and each
 * FUSE request translated into an ops_inside_*() call.
 */
#include "fs/inside.h"

#include <errno.h>
#include <linux/fs.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/notify.h"
#include "fs/tree.h"
#include "lib/strbuf.h"
#include "lib/util.h"
#include "ops/ops.h"
#include "runtime/agent/wire.h"

/* What the kernel may keep of an entry or attributes: the sandbox changes them too. */
#define INSIDE_TIMEOUT_S 1.0

struct node {
	fuse_ino_t ino, parent;	  /* parent: an inside number, or root/'s tree number */
	char id[OPS_VIEW_ID_MAX]; /* the sandbox, or a snapshot's view (ops/ops.h) */
	char *name;
	uint64_t nlookup;
	bool detached; /* removed or replaced: no longer found by name */
};

/* The table: by number, and by (parent, name) for the nodes not detached. Under `lock`. */
static struct {
	pthread_mutex_t lock;
	void *by_ino, *by_name;
	fuse_ino_t next;
} table = {.lock = PTHREAD_MUTEX_INITIALIZER, .next = INSIDE_INO_BIT | 1};

static int cmp_ino(const void *a, const void *b)
{
	fuse_ino_t x = ((const struct node *)a)->ino, y = ((const struct node *)b)->ino;
	return x < y ? -1 : x > y;
}

static int cmp_name(const void *a, const void *b)
{
	const struct node *x = a, *y = b;
	if (x->parent != y->parent)
		return x->parent < y->parent ? -1 : 1;
	return strcmp(x->name, y->name);
}

static struct node *by_ino_locked(fuse_ino_t ino)
{
	struct node key = {.ino = ino};
	struct node **n = tfind(&key, &table.by_ino, cmp_ino);
	return n ? *n : NULL;
}

static struct node *by_name_locked(fuse_ino_t parent, const char *name)
{
	struct node key = {.parent = parent, .name = (char *)name};
	struct node **n = tfind(&key, &table.by_name, cmp_name);
	return n ? *n : NULL;
}

static void detach_locked(struct node *n)
{
	if (!n->detached)
		tdelete(n, &table.by_name, cmp_name);
	n->detached = true;
}

static void node_free(void *p)
{
	struct node *n = p;
	free(n->name);
	free(n);
}

static void keep(void *p)
{
	(void)p;
}

bool inside_is_root(const struct fs_node *n)
{
	return n->ent && (n->ent->flags & FS_INSIDE);
}

void inside_fini(void)
{
	pthread_mutex_lock(&table.lock);
	tdestroy(table.by_name, keep);
	tdestroy(table.by_ino, node_free);
	table.by_name = table.by_ino = NULL;
	pthread_mutex_unlock(&table.lock);
}

/* The id root/ @root serves: its sandbox's, or its snapshot's view's (snapshots/<id>/root/). */
static void root_id(const struct fs_node *root, char id[OPS_VIEW_ID_MAX])
{
	if (root->scope == SCOPE_SNAPSHOT)
		snprintf(id, OPS_VIEW_ID_MAX, "%c%.*s", OPS_VIEW_MARK, ID_MAX - 1, root->id);
	else
		snprintf(id, OPS_VIEW_ID_MAX, "%.*s", ID_MAX - 1, root->id);
}

/*
 * The sandbox and the path inside it of @ino (a child of @parent named
 * @name, when @name is set): names joined from root/ down. -ESTALE for a
 * number the kernel forgot; -ENAMETOOLONG past WIRE_PATH_MAX.
 */
static int path_of(fuse_ino_t ino, const struct fs_node *root, const char *name,
		   char id[OPS_VIEW_ID_MAX], char path[WIRE_PATH_MAX + 1])
{
	const char *parts[WIRE_PATH_MAX / 2];
	size_t n = 0, len = 0;
	int rc = 0;
	if (!inside_owns(ino) && !root)
		return -ESTALE;
	if (name)
		parts[n++] = name;
	pthread_mutex_lock(&table.lock);
	if (root && !inside_owns(ino))
		root_id(root, id);
	while (inside_owns(ino) && rc == 0) {
		struct node *nd = by_ino_locked(ino);
		if (!nd || n == sizeof(parts) / sizeof(parts[0]))
			rc = nd ? -ENAMETOOLONG : -ESTALE;
		else {
			parts[n++] = nd->name;
			ino = nd->parent;
			snprintf(id, OPS_VIEW_ID_MAX, "%s", nd->id);
		}
	}
	path[0] = '\0';
	for (size_t i = n; rc == 0 && i-- > 0;) {
		size_t l = strlen(parts[i]);
		if (len + l + 2 > WIRE_PATH_MAX + 1) {
			rc = -ENAMETOOLONG;
			break;
		}
		if (len)
			path[len++] = '/';
		memcpy(path + len, parts[i], l + 1);
		len += l;
	}
	pthread_mutex_unlock(&table.lock);
	return rc;
}

/* Count a lookup of @name under @parent in sandbox @id: its number. */
static int node_ref(fuse_ino_t parent, const char *id, const char *name, fuse_ino_t *ino)
{
	pthread_mutex_lock(&table.lock);
	struct node *n = by_name_locked(parent, name);
	int rc = 0;
	if (!n) {
		n = calloc(1, sizeof(*n));
		char *copy = n ? strdup(name) : NULL;
		if (!copy) {
			free(n);
			pthread_mutex_unlock(&table.lock);
			return -ENOMEM;
		}
		*n = (struct node){.ino = table.next++, .parent = parent, .name = copy};
		snprintf(n->id, sizeof(n->id), "%s", id);
		if (!tsearch(n, &table.by_ino, cmp_ino))
			rc = -ENOMEM;
		else if (!tsearch(n, &table.by_name, cmp_name)) {
			tdelete(n, &table.by_ino, cmp_ino);
			rc = -ENOMEM;
		}
		if (rc < 0)
			node_free(n);
	}
	if (rc == 0) {
		n->nlookup++;
		*ino = n->ino;
	}
	pthread_mutex_unlock(&table.lock);
	return rc;
}

void inside_forget(fuse_ino_t ino, uint64_t nlookup)
{
	pthread_mutex_lock(&table.lock);
	struct node *n = by_ino_locked(ino);
	if (n) {
		n->nlookup -= nlookup < n->nlookup ? nlookup : n->nlookup;
		if (n->nlookup == 0) {
			detach_locked(n);
			tdelete(n, &table.by_ino, cmp_ino);
			node_free(n);
		}
	}
	pthread_mutex_unlock(&table.lock);
}

/* The name under @parent is gone (unlink, rmdir) or replaced (rename onto it). */
static void name_gone(fuse_ino_t parent, const char *name)
{
	pthread_mutex_lock(&table.lock);
	struct node *n = by_name_locked(parent, name);
	if (n)
		detach_locked(n);
	pthread_mutex_unlock(&table.lock);
}

/* The node at (@parent, @name) is now at (@to, @newname). */
static void name_moved(fuse_ino_t parent, const char *name, fuse_ino_t to, const char *newname)
{
	name_gone(to, newname);
	pthread_mutex_lock(&table.lock);
	struct node *n = by_name_locked(parent, name);
	char *copy = n ? strdup(newname) : NULL;
	if (n && copy) {
		tdelete(n, &table.by_name, cmp_name);
		free(n->name);
		n->name = copy;
		n->parent = to;
		if (!tsearch(n, &table.by_name, cmp_name))
			n->detached = true;
	} else if (n) {
		detach_locked(n); /* out of memory: the next lookup makes a new node */
	}
	pthread_mutex_unlock(&table.lock);
}

/* The nodes at (@a, @an) and (@b, @bn) swapped places (RENAME_EXCHANGE). */
static void names_exchanged(fuse_ino_t a, const char *an, fuse_ino_t b, const char *bn)
{
	pthread_mutex_lock(&table.lock);
	struct node *x = by_name_locked(a, an), *y = by_name_locked(b, bn);
	if (x)
		tdelete(x, &table.by_name, cmp_name);
	if (y)
		tdelete(y, &table.by_name, cmp_name);
	if (x && y) {
		char *name = x->name;
		x->name = y->name, y->name = name;
		x->parent = b, y->parent = a;
	} else if (x || y) {
		/* One alone (the other never looked up) takes the other's name. */
		struct node *n = x ? x : y;
		char *name = strdup(x ? bn : an);
		if (name) {
			free(n->name);
			n->name = name;
			n->parent = x ? b : a;
		} else {
			n->detached = true; /* out of memory: its next lookup makes a new node */
		}
	}
	if (x && !x->detached && !tsearch(x, &table.by_name, cmp_name))
		x->detached = true;
	if (y && !y->detached && !tsearch(y, &table.by_name, cmp_name))
		y->detached = true;
	pthread_mutex_unlock(&table.lock);
}

/* Is @ino, or a directory above it, detached (its path no longer its own)? */
static bool node_detached(fuse_ino_t ino)
{
	bool gone = false;
	pthread_mutex_lock(&table.lock);
	for (struct node *n = by_ino_locked(ino); n && !gone; n = by_ino_locked(n->parent))
		gone = n->detached;
	pthread_mutex_unlock(&table.lock);
	return gone;
}

/* --- replies ------------------------------------------------------------------ */

static void who_of(fuse_req_t req, struct caller *who)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	*who = (struct caller){.uid = ctx->uid, .gid = ctx->gid};
}

/* Reply the entry of @name under @parent whose attributes are @st. */
static void reply_entry(fuse_req_t req, fuse_ino_t parent, const char *id, const char *name,
			const struct stat *st)
{
	struct fuse_entry_param ep = {.attr = *st,
				      .generation = 1,
				      .attr_timeout = INSIDE_TIMEOUT_S,
				      .entry_timeout = INSIDE_TIMEOUT_S};
	int rc = node_ref(parent, id, name, &ep.ino);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	ep.attr.st_ino = ep.ino;
	if (fuse_reply_entry(req, &ep) != 0)
		inside_forget(ep.ino, 1);
}

static void reply_attr(fuse_req_t req, fuse_ino_t ino, struct stat *st)
{
	st->st_ino = ino;
	fuse_reply_attr(req, st, INSIDE_TIMEOUT_S);
}

/* The parent's number as the table knows it: root/'s own, or an inside one. */
static fuse_ino_t parent_ino(fuse_ino_t parent, const struct fs_node *root)
{
	return root && !inside_owns(parent) ? root->ino : parent;
}

/* What every request here starts with: who asks, and the sandbox and path it names. */
struct inside_req {
	struct caller who;
	struct err e;
	char id[OPS_VIEW_ID_MAX];
	char path[WIRE_PATH_MAX + 1];
};

/* @r for node @ino (root/ itself when @root), or its child @name when @name is set. */
static int req_begin(fuse_req_t req, fuse_ino_t ino, const struct fs_node *root, const char *name,
		     struct inside_req *r)
{
	who_of(req, &r->who);
	r->e = (struct err){0};
	return path_of(ino, root, name, r->id, r->path);
}

/* @rc, or EROFS for a change asked of a snapshot's view (@id): its files are read-only. */
static int writable(int rc, const char *id)
{
	return rc == 0 && ops_is_view(id) ? -EROFS : rc;
}

/* --- a snapshot's view: requests held until it is restored ------------------------- */

enum held_kind {
	HELD_LOOKUP,
	HELD_GETATTR,
	HELD_READLINK,
	HELD_OPEN,
	HELD_READ,
	HELD_READDIR,
	HELD_READDIRPLUS
};

/* What a held request needs to be made again: the arguments of its inside_*() call. */
struct held_args {
	enum held_kind kind;
	fuse_req_t req;
	fuse_ino_t ino;
	const struct fs_node *root; /* HELD_LOOKUP of root/'s child */
	const char *name;	    /* HELD_LOOKUP */
	size_t size;		    /* HELD_READ, HELD_READDIR(PLUS) */
	off_t off;
	struct fuse_file_info *fi; /* HELD_OPEN, HELD_READ, HELD_READDIR(PLUS) */
};

/* A copy of them, kept until the view is ready (ops_snapview_want()). */
struct held {
	struct held_args a;
	struct fs_node root;
	char name[NAME_MAX + 1];
	struct fuse_file_info fi;
};

static void held_replay(void *arg, int rc)
{
	struct held *h = arg;
	struct held_args *a = &h->a;
	if (rc < 0)
		fuse_reply_err(a->req, -rc);
	else if (a->kind == HELD_LOOKUP)
		inside_lookup(a->req, a->ino, a->root ? &h->root : NULL, h->name);
	else if (a->kind == HELD_GETATTR)
		inside_getattr(a->req, a->ino);
	else if (a->kind == HELD_READLINK)
		inside_readlink(a->req, a->ino);
	else if (a->kind == HELD_OPEN)
		inside_open(a->req, a->ino, &h->fi);
	else if (a->kind == HELD_READ)
		inside_read(a->req, a->size, a->off, &h->fi);
	else if (a->kind == HELD_READDIR)
		inside_readdir(a->req, a->size, a->off, &h->fi);
	else
		inside_readdirplus(a->req, a->size, a->off, &h->fi);
	free(h);
}

static struct held *held_copy(const struct held_args *a)
{
	struct held *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->a = *a;
	if (a->root)
		h->root = *a->root;
	if (a->name)
		snprintf(h->name, sizeof(h->name), "%s", a->name);
	if (a->fi)
		h->fi = *a->fi;
	return h;
}

/*
 * For a request on @id: false when it may go on (a sandbox, or a view that
 * is ready); true when it was answered (an error) or is held, never
 * blocking this thread, until the view is restored: the thread that
 * restored it then makes the request again from @a (a restore takes
 * seconds; an interrupt does not end the wait, the restore's deadline does).
 */
static bool view_wait(const char *id, const struct held_args *a)
{
	struct caller who;
	struct err e = {0};
	if (!ops_is_view(id))
		return false;
	who_of(a->req, &who);
	int rc = ops_snapview_want(&who, id, NULL, NULL, &e);
	if (rc == 1) {
		struct held *h = held_copy(a);
		rc = h ? ops_snapview_want(&who, id, held_replay, h, &e) : -ENOMEM;
		if (h && rc != 1)
			free(h);
	}
	if (rc < 0)
		fuse_reply_err(a->req, -rc);
	return rc != 0;
}

/* The answer of a request that made or found @name under @parent: its entry, or @rc. */
static void reply_made(fuse_req_t req, int rc, fuse_ino_t parent, const struct fs_node *root,
		       const char *id, const char *name, const struct stat *st)
{
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		reply_entry(req, parent_ino(parent, root), id, name, st);
}

/* --- names ----------------------------------------------------------------------- */

void inside_lookup(fuse_req_t req, fuse_ino_t parent, const struct fs_node *root, const char *name)
{
	struct inside_req r;
	struct stat st;
	int rc = req_begin(req, parent, root, name, &r);
	if (rc == 0 && view_wait(r.id, &(struct held_args){HELD_LOOKUP, req, parent, .root = root,
							   .name = name}))
		return;
	if (rc == 0)
		rc = ops_inside_stat(&r.who, r.id, r.path, &st, &r.e);
	reply_made(req, rc, parent, root, r.id, name, &st);
}

void inside_getattr(fuse_req_t req, fuse_ino_t ino)
{
	struct inside_req r;
	struct stat st;
	int rc = req_begin(req, ino, NULL, NULL, &r);
	if (rc == 0 && view_wait(r.id, &(struct held_args){HELD_GETATTR, req, ino, .root = NULL}))
		return;
	if (rc == 0)
		rc = ops_inside_stat(&r.who, r.id, r.path, &st, &r.e);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		reply_attr(req, ino, &st);
}

static void attr_set_of(const struct stat *attr, int to_set, struct ops_inside_attr *set)
{
	*set = (struct ops_inside_attr){.mode = attr->st_mode & 07777,
					.uid = attr->st_uid,
					.gid = attr->st_gid,
					.size = attr->st_size};
	set->what |= to_set & FUSE_SET_ATTR_MODE ? OPS_INSIDE_MODE : 0;
	set->what |= to_set & FUSE_SET_ATTR_UID ? OPS_INSIDE_UID : 0;
	set->what |= to_set & FUSE_SET_ATTR_GID ? OPS_INSIDE_GID : 0;
	set->what |= to_set & FUSE_SET_ATTR_SIZE ? OPS_INSIDE_SIZE : 0;
	if (!(to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)))
		return;
	set->what |= OPS_INSIDE_TIMES;
	set->times[0] = attr->st_atim;
	set->times[1] = attr->st_mtim;
	if (!(to_set & FUSE_SET_ATTR_ATIME))
		set->times[0].tv_nsec = UTIME_OMIT;
	else if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		set->times[0].tv_nsec = UTIME_NOW;
	if (!(to_set & FUSE_SET_ATTR_MTIME))
		set->times[1].tv_nsec = UTIME_OMIT;
	else if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		set->times[1].tv_nsec = UTIME_NOW;
}

void inside_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set)
{
	struct inside_req r;
	struct stat st;
	struct ops_inside_attr set;
	attr_set_of(attr, to_set, &set);
	int rc = writable(req_begin(req, ino, NULL, NULL, &r), r.id);
	if (rc == 0)
		rc = ops_inside_setattr(&r.who, r.id, r.path, &set, &r.e);
	if (rc == 0)
		rc = ops_inside_stat(&r.who, r.id, r.path, &st, &r.e);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		reply_attr(req, ino, &st);
}

/*
 * Renames through root/ against link targets in flight (fs/notify.h,
 * links). A target is rewritten for its link's depth below root/
 * (path_of()), and a rename may change that depth while the agent answers
 * the READLINK. Under its sandbox's gate a rename is counted before it
 * starts (busy, gen), and a READLINK checks that none started since it read
 * its path and queues its drop (notify_link_read()); the rename then drops
 * every queued target (notify_links_flush()) before it answers. So no
 * target made for a depth a rename changed is answered after the rename
 * began, or kept after it ended. Left is the race every READLINK has, kept
 * or not: a walk that read a target just before the kernel moves the
 * entry follows it just after (docs/security.md). A READLINK that waits a
 * second for renames answers EIO (a rename's drop may wait for its page).
 * Gates are per sandbox (hashed): a slow rename in one never holds another.
 */
#define READLINK_TRIES 1000 /* 1 ms apart */
#define GATES 16

static struct gate {
	pthread_mutex_t lock;
	unsigned gen; /* renames begun and ended */
	int busy;     /* renames under way */
} gates[GATES];

static pthread_once_t gates_once = PTHREAD_ONCE_INIT;

static void gates_init(void)
{
	for (int i = 0; i < GATES; i++)
		pthread_mutex_init(&gates[i].lock, NULL);
}

static struct gate *gate_of(const char *id)
{
	pthread_once(&gates_once, gates_init);
	return &gates[fnv1a(id) % GATES];
}

/* The gate's generation once no rename is under way; false after a second of them. */
static bool gate_quiet(struct gate *g, unsigned *gen)
{
	for (int i = 0; i < READLINK_TRIES; i++) {
		pthread_mutex_lock(&g->lock);
		*gen = g->gen;
		bool quiet = !g->busy;
		pthread_mutex_unlock(&g->lock);
		if (quiet)
			return true;
		usleep(1000);
	}
	return false;
}

/*
 * No rename began since @gen: queue @ino's drop (before its answer).
 * *@queued: false when the ring was full (the caller drops it after).
 */
static bool gate_unchanged(struct gate *g, unsigned gen, fuse_ino_t ino, bool *queued)
{
	pthread_mutex_lock(&g->lock);
	bool same = !g->busy && g->gen == gen;
	if (same)
		*queued = notify_link_read(ino);
	pthread_mutex_unlock(&g->lock);
	return same;
}

static void gate_move(struct gate *g, int d)
{
	pthread_mutex_lock(&g->lock);
	g->busy += d;
	g->gen++;
	pthread_mutex_unlock(&g->lock);
}

void inside_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct inside_req r;
	char target[WIRE_PATH_MAX + 1];
	bool queued = true;
	int rc = req_begin(req, ino, NULL, NULL, &r);
	if (rc == 0 && view_wait(r.id, &(struct held_args){HELD_READLINK, req, ino, .root = NULL}))
		return;
	struct gate *g = rc == 0 ? gate_of(r.id) : NULL;
	for (int tries = 0; rc == 0; tries++) {
		unsigned gen;
		if (!gate_quiet(g, &gen) || tries == READLINK_TRIES) {
			rc = -EIO;
			break;
		}
		rc = req_begin(req, ino, NULL, NULL, &r); /* the path, and so the depth, afresh */
		if (rc == 0 && node_detached(ino))
			rc = -ESTALE; /* its path is the one it had: no depth to trust */
		if (rc == 0)
			rc =
			    ops_inside_readlink(&r.who, r.id, r.path, target, sizeof(target), &r.e);
		if (rc < 0 || gate_unchanged(g, gen, ino, &queued))
			break;
	}
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_readlink(req, target);
	if (rc == 0 && !queued)
		notify_link_drop(ino);
}

void inside_mkdir(fuse_req_t req, fuse_ino_t parent, const struct fs_node *root, const char *name,
		  mode_t mode)
{
	struct inside_req r;
	struct stat st;
	int rc = writable(req_begin(req, parent, root, name, &r), r.id);
	if (rc == 0)
		rc = ops_inside_mkdir(&r.who, r.id, r.path, mode, &st, &r.e);
	reply_made(req, rc, parent, root, r.id, name, &st);
}

void inside_remove(fuse_ino_t parent, fuse_req_t req, const struct fs_node *root, const char *name,
		   bool dir)
{
	struct inside_req r;
	int rc = writable(req_begin(req, parent, root, name, &r), r.id);
	if (rc == 0)
		rc = ops_inside_remove(&r.who, r.id, r.path, dir, &r.e);
	if (rc == 0)
		name_gone(parent_ino(parent, root), name);
	fuse_reply_err(req, -rc);
}

void inside_symlink(fuse_req_t req, const char *target, fuse_ino_t parent,
		    const struct fs_node *root, const char *name)
{
	struct inside_req r;
	struct stat st;
	int rc = writable(req_begin(req, parent, root, name, &r), r.id);
	if (rc == 0)
		rc = ops_inside_symlink(&r.who, r.id, target, r.path, &st, &r.e);
	reply_made(req, rc, parent, root, r.id, name, &st);
}

void inside_rename(fuse_req_t req, fuse_ino_t parent, const struct fs_node *root, const char *name,
		   fuse_ino_t newparent, const struct fs_node *newroot, const char *newname,
		   unsigned flags)
{
	char id[OPS_VIEW_ID_MAX], to_id[OPS_VIEW_ID_MAX], from[WIRE_PATH_MAX + 1],
	    to[WIRE_PATH_MAX + 1];
	struct caller who;
	struct err e = {0};
	who_of(req, &who);
	int rc = path_of(parent, root, name, id, from);
	if (rc == 0)
		rc = writable(path_of(newparent, newroot, newname, to_id, to), to_id);
	rc = writable(rc, id);
	/* Within one sandbox's root/: between two, a copy (the kernel's EXDEV makes mv copy). */
	if (rc == 0 && strcmp(id, to_id) != 0)
		rc = -EXDEV;
	if (rc == 0) {
		struct gate *g = gate_of(id);
		gate_move(g, +1);
		rc = ops_inside_rename(&who, id, from, to, flags, &e);
		if (rc == 0 && (flags & RENAME_EXCHANGE))
			names_exchanged(parent_ino(parent, root), name,
					parent_ino(newparent, newroot), newname);
		else if (rc == 0)
			name_moved(parent_ino(parent, root), name, parent_ino(newparent, newroot),
				   newname);
		/* Whatever moved, and every link below it: no target of the old depth is kept. */
		notify_links_flush();
		gate_move(g, -1);
	}
	fuse_reply_err(req, -rc);
}

void inside_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		 const struct fs_node *newroot, const char *newname)
{
	char id[OPS_VIEW_ID_MAX], to_id[OPS_VIEW_ID_MAX], from[WIRE_PATH_MAX + 1],
	    to[WIRE_PATH_MAX + 1];
	struct stat st;
	struct caller who;
	struct err e = {0};
	who_of(req, &who);
	int rc = path_of(ino, NULL, NULL, id, from);
	if (rc == 0)
		rc = writable(path_of(newparent, newroot, newname, to_id, to), to_id);
	rc = writable(rc, id);
	if (rc == 0 && strcmp(id, to_id) != 0)
		rc = -EXDEV;
	if (rc == 0)
		rc = ops_inside_link(&who, id, from, to, &st, &e);
	reply_made(req, rc, newparent, newroot, id, newname, &st);
}

/* --- files ------------------------------------------------------------------------ */

static struct ops_inside_file *file_of(const struct fuse_file_info *fi)
{
	return (struct ops_inside_file *)(uintptr_t)fi->fh;
}

/*
 * Not kept: the sandbox writes its files too, so every open reads them
 * afresh. A file opened write-only skips the page cache (direct_io): each
 * write() is a WRITE to the agent either way (there is no writeback cache;
 * the daemon's write-behind keeps their order, ops_agent.c),
 * and going through the cache only copied the bytes once more and filled
 * pages nobody reads (a 64 MiB `cat >` took a fifth longer); such a file
 * cannot be mmap'd, so nothing is lost. A reader keeps the cache: the
 * kernel reads ahead for it, which small reads (tar's 10 KiB) need. No
 * FLUSH at the close of a file opened read-only: it has nothing to write
 * back or report, and costs no request.
 */
static void open_flags(struct fuse_file_info *fi)
{
	int acc = fi->flags & O_ACCMODE;
	fi->keep_cache = 0;
	fi->direct_io = acc == O_WRONLY;
	/* A writer's close reports a failed write-behind and writes back mmap'd pages: FLUSH. */
	fi->noflush = acc == O_RDONLY;
}

void inside_create(fuse_req_t req, fuse_ino_t parent, const struct fs_node *root, const char *name,
		   mode_t mode, struct fuse_file_info *fi)
{
	char id[OPS_VIEW_ID_MAX], path[WIRE_PATH_MAX + 1];
	struct stat st;
	struct caller who;
	struct err e = {0};
	struct ops_inside_file *f = NULL;
	struct fuse_entry_param ep = {
	    .generation = 1, .attr_timeout = INSIDE_TIMEOUT_S, .entry_timeout = INSIDE_TIMEOUT_S};
	who_of(req, &who);
	int rc = writable(path_of(parent, root, name, id, path), id);
	if (rc == 0)
		rc =
		    ops_inside_open(&who, id, path, fi->flags | O_CREAT, mode & 07777, &f, &st, &e);
	if (rc == 0)
		rc = node_ref(parent_ino(parent, root), id, name, &ep.ino);
	if (rc < 0) {
		ops_inside_close(f);
		fuse_reply_err(req, -rc);
		return;
	}
	ep.attr = st;
	ep.attr.st_ino = ep.ino;
	fi->fh = (uintptr_t)f;
	open_flags(fi);
	if (fuse_reply_create(req, &ep, fi) != 0) {
		inside_forget(ep.ino, 1);
		ops_inside_close(f);
	}
}

void inside_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	char id[OPS_VIEW_ID_MAX], path[WIRE_PATH_MAX + 1];
	struct caller who;
	struct err e = {0};
	struct ops_inside_file *f = NULL;
	who_of(req, &who);
	int rc = path_of(ino, NULL, NULL, id, path);
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC))
		rc = writable(rc, id);
	if (rc == 0 && view_wait(id, &(struct held_args){HELD_OPEN, req, ino, .fi = fi}))
		return;
	if (rc == 0)
		rc = ops_inside_open(&who, id, path, fi->flags & ~O_CREAT, 0, &f, NULL, &e);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uintptr_t)f;
	open_flags(fi);
	if (fuse_reply_open(req, fi) != 0)
		ops_inside_close(f);
}

void inside_read(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct caller who;
	struct err e = {0};
	if (view_wait(ops_inside_file_id(file_of(fi)),
		      &(struct held_args){HELD_READ, req, 0, .size = size, .off = off, .fi = fi}))
		return;
	who_of(req, &who);
	_cleanup_(ops_read_release) struct ops_read r = {0};
	ssize_t got = ops_inside_read(file_of(fi), &who, size, off, &r, &e);
	if (got < 0)
		fuse_reply_err(req, (int)-got);
	else
		fuse_reply_buf(req, r.data, (size_t)got);
}

void inside_write(fuse_req_t req, const char *buf, size_t size, off_t off,
		  struct fuse_file_info *fi)
{
	struct caller who;
	struct err e = {0};
	who_of(req, &who);
	size_t done = 0;
	ssize_t n = 0;
	while (done < size && n >= 0) {
		n = ops_inside_write(file_of(fi), &who, buf + done, size - done, off + (off_t)done,
				     &e);
		if (n == 0)
			break;
		if (n > 0)
			done += (size_t)n;
	}
	if (n < 0 && !done)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, done);
}

void inside_fsync(fuse_req_t req, struct fuse_file_info *fi)
{
	struct caller who;
	struct err e = {0};
	who_of(req, &who);
	fuse_reply_err(req, -ops_inside_fsync(file_of(fi), &who, &e));
}

/* A close: the file's writes the agent has not answered yet are waited for, and their error told.
 */
void inside_flush(fuse_req_t req, struct fuse_file_info *fi)
{
	struct err e = {0};
	fuse_reply_err(req, -ops_inside_flush(file_of(fi), &e));
}

void inside_release(fuse_req_t req, struct fuse_file_info *fi)
{
	ops_inside_close(file_of(fi));
	fuse_reply_err(req, 0);
}

/* --- directories ------------------------------------------------------------------- */

/*
 * An open directory: its listing, made by the read at offset 0. Offsets are
 * entry numbers (0 ".", 1 "..", then the listing's), the same for READDIR
 * and READDIRPLUS, so the kernel may ask in either form.
 */
struct inside_dirh {
	pthread_mutex_t lock;
	fuse_ino_t ino;
	struct fs_node root; /* when ino is root/ itself */
	bool is_root;
	char id[OPS_VIEW_ID_MAX]; /* the sandbox or view listed */
	int64_t listed_ms;	  /* when (mono_ms()): older attributes go to no kernel inode */
	size_t n, alloc;
	struct dir_entry {
		char *name;
		struct stat st; /* st_ino: the number inside the sandbox */
	} * v;
};

static void dirh_clear(struct inside_dirh *dh)
{
	for (size_t i = 0; i < dh->n; i++)
		free(dh->v[i].name);
	free(dh->v);
	dh->v = NULL;
	dh->n = dh->alloc = 0;
}

static int dir_add(const char *name, const struct stat *st, void *arg)
{
	struct inside_dirh *dh = arg;
	if (strlen(name) > NAME_MAX)
		return -ENAMETOOLONG;
	char *copy = ALLOC_GROW(dh->v, dh->alloc, dh->n + 1) == 0 ? strdup(name) : NULL;
	if (!copy)
		return -ENOMEM;
	dh->v[dh->n++] = (struct dir_entry){copy, *st};
	return 0;
}

void inside_opendir(fuse_req_t req, fuse_ino_t ino, const struct fs_node *root,
		    struct fuse_file_info *fi)
{
	struct inside_dirh *dh = calloc(1, sizeof(*dh));
	if (!dh) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_init(&dh->lock, NULL);
	dh->ino = ino;
	if (root && !inside_owns(ino)) {
		dh->root = *root;
		dh->is_root = true;
	}
	fi->fh = (uintptr_t)dh;
	if (fuse_reply_open(req, fi) != 0)
		inside_releasedir(NULL, fi);
}

static int dir_list(fuse_req_t req, struct inside_dirh *dh)
{
	char path[WIRE_PATH_MAX + 1];
	struct caller who;
	struct err e = {0};
	who_of(req, &who);
	dirh_clear(dh);
	int rc = path_of(dh->ino, dh->is_root ? &dh->root : NULL, NULL, dh->id, path);
	if (rc == 0)
		rc = ops_inside_list(&who, dh->id, path, dir_add, dh, &e);
	dh->listed_ms = mono_ms();
	return rc;
}

/*
 * Entries from number @off on into @out (@size bytes): plain records, or
 * with @plus each with its attributes and a lookup counted for it (the
 * kernel then stats none of them: `ls -l`, `cp -r` and `find` ask nothing
 * more of the agent). The numbers counted go into @refs. The length.
 */
static size_t dir_fill(fuse_req_t req, struct inside_dirh *dh, char *out, size_t size, off_t off,
		       bool plus, fuse_ino_t *refs, size_t *nrefs)
{
	size_t len = 0;
	fuse_ino_t parent = dh->is_root ? dh->root.ino : dh->ino;
	/*
	 * A listing read on slowly: past the kernel's own timeout its
	 * attributes are not handed on (a size gone stale would cut the page
	 * cache, a name removed since would come back); the entries go
	 * without, and the kernel looks them up.
	 */
	int64_t age_ms = mono_ms() - dh->listed_ms;
	bool attrs = age_ms < (int64_t)(INSIDE_TIMEOUT_S * 1000);
	/* And the kernel keeps them what is left of that second, no more. */
	double keep_s = attrs ? INSIDE_TIMEOUT_S - (double)age_ms / 1000 : 0;
	for (size_t i = off > 0 ? (size_t)off : 0; i < dh->n + 2; i++) {
		const char *name = i == 0 ? "." : i == 1 ? ".." : dh->v[i - 2].name;
		struct fuse_entry_param ep = {.attr = {.st_ino = 1, .st_mode = S_IFDIR}};
		if (i >= 2)
			ep.attr = dh->v[i - 2].st;
		size_t need = plus ? fuse_add_direntry_plus(req, NULL, 0, name, NULL, 0)
				   : fuse_add_direntry(req, NULL, 0, name, NULL, 0);
		if (need > size - len)
			break;
		if (!plus) {
			fuse_add_direntry(req, out + len, size - len, name, &ep.attr, (off_t)i + 1);
			len += need;
			continue;
		}
		/* "." and ".." carry no entry (number 0): the kernel counts no lookup for them. */
		if (i >= 2 && attrs && node_ref(parent, dh->id, name, &ep.ino) == 0) {
			refs[(*nrefs)++] = ep.ino;
			ep.attr.st_ino = ep.ino;
			ep.generation = 1;
			ep.attr_timeout = ep.entry_timeout = keep_s;
		}
		fuse_add_direntry_plus(req, out + len, size - len, name, &ep, (off_t)i + 1);
		len += need;
	}
	return len;
}

static void dir_read(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi, bool plus)
{
	struct inside_dirh *dh = (struct inside_dirh *)(uintptr_t)fi->fh;
	char id[OPS_VIEW_ID_MAX], path[WIRE_PATH_MAX + 1];
	/* A listing is made at offset 0: of a view, once it is ready. */
	if (off == 0 && path_of(dh->ino, dh->is_root ? &dh->root : NULL, NULL, id, path) == 0 &&
	    view_wait(id, &(struct held_args){plus ? HELD_READDIRPLUS : HELD_READDIR, req, 0,
					      .size = size, .off = off, .fi = fi}))
		return;
	size = size < (1u << 20) ? size : (1u << 20);
	_cleanup_free_ char *out = malloc(size ? size : 1);
	/* A plus record is over 150 bytes: at most this many in one answer. */
	_cleanup_free_ fuse_ino_t *refs = malloc((size / 150 + 1) * sizeof(*refs));
	size_t len = 0, nrefs = 0;
	int rc = out && refs ? 0 : -ENOMEM;
	pthread_mutex_lock(&dh->lock);
	if (rc == 0 && off == 0)
		rc = dir_list(req, dh);
	if (rc == 0)
		len = dir_fill(req, dh, out, size, off, plus, refs, &nrefs);
	pthread_mutex_unlock(&dh->lock);
	/* After the answer the kernel may release @dh: it is not touched again. */
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	if (fuse_reply_buf(req, out, len) != 0)
		for (size_t i = 0; i < nrefs; i++)
			inside_forget(refs[i], 1); /* the kernel never had them */
}

void inside_readdir(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi)
{
	dir_read(req, size, off, fi, false);
}

void inside_readdirplus(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi)
{
	dir_read(req, size, off, fi, true);
}

void inside_releasedir(fuse_req_t req, struct fuse_file_info *fi)
{
	struct inside_dirh *dh = (struct inside_dirh *)(uintptr_t)fi->fh;
	dirh_clear(dh);
	pthread_mutex_destroy(&dh->lock);
	free(dh);
	if (req)
		fuse_reply_err(req, 0);
}

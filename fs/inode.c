#include "fs/inode.h"

#include <errno.h>
#include <pthread.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>

struct inode {
	struct fs_node node;
	uint64_t nlookup;
	bool detached; /* no longer in by_path: see inode_detach() */
};

static struct {
	pthread_mutex_t lock;
	void *by_ino;  /* tsearch tree of struct inode, by node.ino */
	void *by_path; /* the same inodes, by node.path */
	fuse_ino_t next_ino;
} table = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int cmp_ino(const void *a, const void *b)
{
	fuse_ino_t x = ((const struct inode *)a)->node.ino;
	fuse_ino_t y = ((const struct inode *)b)->node.ino;
	return x < y ? -1 : x > y;
}

static int cmp_path(const void *a, const void *b)
{
	return strcmp(((const struct inode *)a)->node.path, ((const struct inode *)b)->node.path);
}

/* Both trees hold the inode or neither does. */
static int insert(struct inode *in)
{
	if (!tsearch(in, &table.by_ino, cmp_ino))
		return -ENOMEM;
	if (!tsearch(in, &table.by_path, cmp_path)) {
		tdelete(in, &table.by_ino, cmp_ino);
		return -ENOMEM;
	}
	return 0;
}

int inode_init(const struct fs_entry *root_entry)
{
	struct inode *root = calloc(1, sizeof(*root));
	if (!root)
		return -ENOMEM;
	root->node.ino = FUSE_ROOT_ID;
	root->node.parent = FUSE_ROOT_ID;
	root->node.ent = root_entry;
	root->nlookup = 1;
	pthread_mutex_lock(&table.lock);
	table.next_ino = FUSE_ROOT_ID + 1;
	int rc = insert(root);
	pthread_mutex_unlock(&table.lock);
	if (rc < 0)
		free(root);
	return rc;
}

static void keep(void *p)
{
	(void)p; /* by_path shares its inodes with by_ino, which frees them */
}

void inode_fini(void)
{
	pthread_mutex_lock(&table.lock);
	tdestroy(table.by_path, keep);
	tdestroy(table.by_ino, free);
	table.by_path = NULL;
	table.by_ino = NULL;
	pthread_mutex_unlock(&table.lock);
}

static struct inode *find_path(const char *path)
{
	struct inode key; /* only node.path is compared */
	snprintf(key.node.path, sizeof(key.node.path), "%s", path);
	struct inode **found = tfind(&key, &table.by_path, cmp_path);
	return found ? *found : NULL;
}

static struct inode *find_ino(fuse_ino_t ino)
{
	struct inode key = {.node.ino = ino};
	struct inode **found = tfind(&key, &table.by_ino, cmp_ino);
	return found ? *found : NULL;
}

static int add_locked(struct fs_node *n)
{
	struct inode *in = find_path(n->path);
	if (in) {
		in->nlookup++;
		n->ino = in->node.ino;
		return 0;
	}
	in = calloc(1, sizeof(*in));
	if (!in)
		return -ENOMEM;
	n->ino = table.next_ino++;
	in->node = *n;
	in->nlookup = 1;
	int rc = insert(in);
	if (rc < 0)
		free(in);
	return rc;
}

int inode_ref(struct fs_node *n)
{
	pthread_mutex_lock(&table.lock);
	int rc = add_locked(n);
	pthread_mutex_unlock(&table.lock);
	return rc;
}

int inode_get(fuse_ino_t ino, struct fs_node *out)
{
	pthread_mutex_lock(&table.lock);
	struct inode *in = find_ino(ino);
	if (in)
		*out = in->node;
	pthread_mutex_unlock(&table.lock);
	return in ? 0 : -ESTALE;
}

fuse_ino_t inode_find(const char *path)
{
	pthread_mutex_lock(&table.lock);
	struct inode *in = find_path(path);
	fuse_ino_t ino = in ? in->node.ino : 0;
	pthread_mutex_unlock(&table.lock);
	return ino;
}

void inode_forget(fuse_ino_t ino, uint64_t nlookup)
{
	pthread_mutex_lock(&table.lock);
	struct inode *in = ino == FUSE_ROOT_ID ? NULL : find_ino(ino);
	if (in) {
		in->nlookup -= nlookup < in->nlookup ? nlookup : in->nlookup;
		if (in->nlookup == 0) {
			/* A detached node's path may name a newer node now: leave that one be. */
			if (!in->detached)
				tdelete(in, &table.by_path, cmp_path);
			tdelete(in, &table.by_ino, cmp_ino);
			free(in);
		}
	}
	pthread_mutex_unlock(&table.lock);
}

/* The first attached node at or under a path, found by a walk of by_path (a walk cannot delete). */
struct subtree {
	const char *path;
	size_t len;
	struct inode *found;
};

static void find_under(const void *nodep, VISIT which, void *arg)
{
	struct subtree *t = arg;
	struct inode *in = *(struct inode *const *)nodep;
	const char *p = in->node.path;
	if (which == postorder || which == endorder || t->found)
		return;
	if (strncmp(p, t->path, t->len) == 0 && (p[t->len] == '\0' || p[t->len] == '/'))
		t->found = in;
}

void inode_detach(const char *path)
{
	struct subtree t = {.path = path, .len = strlen(path)};
	if (t.len == 0)
		return; /* the root is never detached */
	pthread_mutex_lock(&table.lock);
	/* One walk per node: a handful lie under one object, and nothing is allocated. */
	do {
		t.found = NULL;
		twalk_r(table.by_path, find_under, &t);
		if (t.found) {
			tdelete(t.found, &table.by_path, cmp_path);
			t.found->detached = true;
		}
	} while (t.found);
	pthread_mutex_unlock(&table.lock);
}

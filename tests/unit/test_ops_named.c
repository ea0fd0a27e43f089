/*
 * Snapshots by name (ops/ops_view.c, snapshots/by-name/ in the tree): the
 * newest of a name wins (by created_at, then id), another user's are not
 * seen, a name that is no file name is never listed, and a name no
 * snapshot has is -ENOENT. Rows go straight into a registry: no runsc.
 */
#include <errno.h>
#include <string.h>

#include "lib/util.h"
#include "ops/ops_internal.h"
#include "tests/unit/t.h"
#include "tests/unit/t_dir.h"

static void insert(const char *id, const char *name, int64_t at, uid_t owner)
{
	struct snapshot snap = {.state = SNAP_COMPLETED, .created_at = at, .owner_uid = owner};
	snprintf(snap.id, sizeof(snap.id), "%s", id);
	snprintf(snap.name, sizeof(snap.name), "%s", name);
	snprintf(snap.sandbox_id, sizeof(snap.sandbox_id), "web");
	CHECK(registry_snapshot_insert(ops.reg, &snap) == 0);
}

static const char *named(const struct caller *who, const char *name)
{
	static char id[ID_MAX];
	int rc = ops_snapshot_named(who, name, id);
	return rc == 0 ? id : rc == -ENOENT ? "ENOENT" : "error";
}

static int add(const char *name, void *out)
{
	strbuf_addf(out, "%s,", name);
	return strbuf_error(out);
}

static const char *names(const struct caller *who)
{
	static char text[256];
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	CHECK(ops_snapshot_names_each(who, add, &sb) == 0);
	snprintf(text, sizeof(text), "%s", strbuf_str(&sb));
	return text;
}

int main(void)
{
	char path[PATH_MAX];
	if (!t_dir_make("test_ops_named"))
		return 1;
	t_path(path, "registry.db");
	CHECK(registry_open(path, &ops.reg) == 0);
	const struct caller user = {.uid = 4242, .gid = 4242};

	insert("snap-a", "base", 100, 4242);
	insert("snap-b", "base", 300, 4242);
	insert("snap-c", "base", 200, 4242); /* older than b, though inserted later */
	insert("snap-d", "", 400, 4242);     /* no name */
	insert("snap-e", "v1", 500, 4242);
	insert("snap-f", "v1", 500, 4242); /* the same time: the greater id */
	insert("snap-g", "base", 900, 0);  /* root's: newest of all, for root only */
	insert("snap-h", "a/b", 100, 0);   /* another host's name: no file name */
	insert("snap-i", "..", 100, 0);

	CHECK_STR(named(&user, "base"), "snap-b");
	CHECK_STR(named(&access_root, "base"), "snap-g");
	CHECK_STR(named(&user, "v1"), "snap-f");
	CHECK_STR(named(&user, "none"), "ENOENT");
	CHECK_STR(named(&user, ""), "ENOENT");
	CHECK_STR(named(&access_root, "a/b"), "ENOENT");
	CHECK_STR(named(&access_root, ".."), "ENOENT");
	CHECK_STR(named(&access_root, "-"), "ENOENT");
	CHECK_STR(names(&user), "base,v1,");
	CHECK_STR(names(&access_root), "base,v1,");

	/* Deleted, the next newest of the name takes its place. */
	CHECK(registry_snapshot_delete(ops.reg, "snap-b") == 0);
	CHECK_STR(named(&user, "base"), "snap-c");
	registry_close(ops.reg);
	ops.reg = NULL;
	return t_done();
}

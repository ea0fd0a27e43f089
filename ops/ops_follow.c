/*
 * ops_follow.c - the store-identity rules: which store this state follows
 * (recorded on its first use, <state>/store-id; another store is refused
 * with EXDEV and journalled once), and whether a completed row whose
 * manifest the store lacks may be forgotten (follow_may_forget()). Below
 * the reconciliation (ops_reconcile.c) and the sync pass (ops_sync.c),
 * which both ask; calls only the store and the rows.
 *
 * Locks: `followed` and `missing` are touched by the sync pass under its
 * pass_lock (ops_sync.c), and at start-up before the sync thread runs.
 */
#include "ops/ops_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend/store/store.h"
#include "lib/strset.h"

#define STORE_ID_FILE "store-id"

/* --- which store ------------------------------------------------------------ */

static char followed[STORE_ID_MAX]; /* "" until known */
static bool mismatch_said;	    /* the error was journalled this run */

static int followed_path(char path[PATH_MAX])
{
	return xsnprintf(path, PATH_MAX, "%s/%s", ops.state_dir, STORE_ID_FILE) < 0 ? -ENAMETOOLONG
										    : 0;
}

/* Load <state>/store-id: 0, -ENOENT (the registry follows no store yet), or an error. */
static int followed_load(void)
{
	char path[PATH_MAX];
	_cleanup_free_ char *text = NULL;
	if (followed[0])
		return 0;
	int rc = followed_path(path);
	if (rc == 0)
		rc = read_file(path, &text, NULL, STORE_ID_MAX);
	if (rc < 0)
		return rc;
	text[strcspn(text, "\n")] = '\0';
	if (!text[0] || strlen(text) >= STORE_ID_MAX)
		return -EINVAL;
	memcpy(followed, text, strlen(text) + 1);
	return 0;
}

static int followed_save(const char *id)
{
	char path[PATH_MAX], line[STORE_ID_MAX + 1];
	int n = snprintf(line, sizeof(line), "%s\n", id);
	int rc = followed_path(path);
	if (rc == 0)
		rc = write_file_durable(path, line, (size_t)n);
	if (rc == 0)
		memcpy(followed, id, strlen(id) + 1);
	return rc;
}

static void mismatch_report(const struct err *e)
{
	if (mismatch_said) {
		debug("%s", e->msg);
		return;
	}
	mismatch_said = true;
	warning("%s", e->msg);
	ops_report_error(&access_root, OPS_OBJ_LIST, "", "store", e);
}

int ops_store_followed(struct err *e)
{
	char id[STORE_ID_MAX];
	int rc = followed_load();
	if (rc < 0 && rc != -ENOENT)
		return err_set(e, -rc, "cannot read %s/%s: %s", ops.state_dir, STORE_ID_FILE,
			       strerror(-rc));
	bool first = rc == -ENOENT;
	rc = store_identity(ops.store, first, id, e);
	if (rc == -ENOENT) {
		err_set(e, EXDEV,
			"the store %s has no snapfs-store.json, but this state follows store %s: "
			"it is another store (check --store); no snapshot is forgotten",
			store_url(ops.store), followed);
		mismatch_report(e);
		return -EXDEV;
	}
	if (rc < 0)
		return rc;
	if (first) {
		rc = followed_save(id);
		if (rc < 0)
			return err_set(e, -rc, "cannot write %s/%s: %s", ops.state_dir,
				       STORE_ID_FILE, strerror(-rc));
		info("the registry follows store %s (%s)", id, store_url(ops.store));
	}
	if (strcmp(id, followed) != 0) {
		err_set(e, EXDEV,
			"the store %s is %s, but this state follows store %s: it is another store "
			"(check --store); no snapshot is forgotten",
			store_url(ops.store), id, followed);
		mismatch_report(e);
		return -EXDEV;
	}
	mismatch_said = false;
	return 0;
}

/* --- forgetting --------------------------------------------------------------- */

/*
 * Manifests missing without a tombstone, rows kept (warned about once), as
 * of the last pass. Under pass_lock.
 */
static struct strset missing = STRSET_INIT;

int follow_may_forget(const struct snapshot *snap, struct strset *kept)
{
	struct err e = {0};
	/* A held one cannot have been deleted (store.h): its manifest was not listed, that is all.
	 */
	int rc = store_held(ops.store, snap->id, NULL, &e);
	if (rc != 0) {
		if (rc < 0)
			warning("cannot tell whether snapshot %s is held: %s", snap->id, e.msg);
		return rc < 0 ? rc : 0;
	}
	if (!ops_snapshot_taken_here(snap))
		return 1; /* another host's: listed again if its manifest comes back */
	rc = store_tombstone_get(ops.store, snap->id, &e);
	if (rc < 0) {
		warning("cannot tell whether snapshot %s was deleted: %s", snap->id, e.msg);
		return rc;
	}
	if (rc == 0) {
		if (!strset_has(&missing, snap->id))
			warning("snapshot %s: its manifest is missing from the store %s, and no "
				"tombstone says it was deleted: its row is kept",
				snap->id, store_url(ops.store));
		if (kept)
			strset_add(kept, snap->id);
	}
	return rc;
}

void follow_missing_replace(struct strset *fresh)
{
	strset_seal(fresh);
	strset_release(&missing);
	missing = *fresh;
	*fresh = (struct strset)STRSET_INIT;
}

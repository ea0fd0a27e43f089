/*
 * ops_holds.c - a suspend's hold on its snapshot in the store
 * (backend/store/store.h): taken before the checkpoint of a suspend
 * (ops_checkpoint.c), released once the sandbox no longer resumes from it
 * (a failed suspend, a resume in ops_restore.c, a terminate in
 * ops_sandbox.c), and swept at start-up (holds_reconcile()). Below the
 * verbs that take and release them. No lock of its own: the store
 * serialises its holds; rows are read through row_*().
 */
#include "ops/ops_internal.h"

#include <string.h>

#include "backend/store/store.h"
#include "runtime/host.h"

int suspend_hold(const char *sandbox_id, const char *snap_id, struct err *e)
{
	if (store_hold(ops.store, snap_id, host_id(), sandbox_id, e) < 0)
		return err_wrap(e,
				"cannot suspend sandbox %s: cannot hold snapshot %s in the store",
				sandbox_id, snap_id);
	return 0;
}

void suspend_unhold(const char *sandbox_id, const char *snap_id)
{
	struct err e = {0};
	/* One left behind only keeps the snapshot; the next start-up removes it. */
	if (store_unhold(ops.store, snap_id, host_id(), sandbox_id, &e) < 0)
		warning("cannot release the hold of sandbox %s on snapshot %s: %s", sandbox_id,
			snap_id, e.msg);
}

void op_job_end_unhold(void *job, int rc, const char *sandbox_id, const char *snap_id)
{
	char sb_copy[ID_MAX], snap_copy[ID_MAX];
	if (!sandbox_id) {
		op_job_end(job, rc, NULL, 0);
		return;
	}
	/* @job, which may own both ids, is freed by its end. */
	snprintf(sb_copy, sizeof(sb_copy), "%s", sandbox_id);
	snprintf(snap_copy, sizeof(snap_copy), "%s", snap_id);
	op_job_end(job, rc, NULL, 0);
	suspend_unhold(sb_copy, snap_copy);
}

/* This host's hold of @snap_id for a sandbox that no longer resumes from it: released. */
static int hold_stale(const char *snap_id, const struct store_holder *who, void *arg)
{
	struct sandbox sb;
	unsigned needs =
	    STATE_BIT(SB_SUSPENDING) | STATE_BIT(SB_SUSPENDED) | STATE_BIT(SB_RESUMING);
	(void)arg;
	if (strcmp(who->host, host_id()) != 0)
		return 0;
	if (row_sandbox_get(who->sandbox, &sb) == 0 && (needs & STATE_BIT(sb.state)) &&
	    !strcmp(sb.restore_snapshot, snap_id))
		return 0;
	suspend_unhold(who->sandbox, snap_id);
	return 0;
}

void holds_reconcile(void)
{
	struct err e = {0};
	if (store_holds_each(ops.store, hold_stale, NULL, &e) < 0)
		warning("cannot list the store's holds: %s", e.msg);
}

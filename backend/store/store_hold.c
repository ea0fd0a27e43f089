/*
 * store_hold.c - holds: objects that say a sandbox somewhere will be
 * restored from a snapshot, so that no host deletes it (store.h).
 *
 * A hold is holds/<snapshot-id>/<host-id>.<sandbox-id>.json, a small JSON
 * object naming them and when it was written (docs/store.md). The key says
 * everything a reader needs; the body is for people, and never read back:
 * any writer of the bucket may have written it. A host id has no dot
 * ("host-" and hex digits), so the first dot of the leaf ends it.
 */
#include "backend/store/store_internal.h"

#include <errno.h>
#include <string.h>

#define HOLD_PREFIX "holds/"
#define HOLD_SUFFIX ".json"

/* holds/<snap>/ into @key; -EINVAL (@e says which) for an id no key may hold. */
static int hold_dir_key(const char *snap_id, char key[OBJ_KEY_MAX], struct err *e)
{
	int rc = store_check_id(snap_id, e);
	if (rc == 0)
		snprintf(key, OBJ_KEY_MAX, HOLD_PREFIX "%s/", snap_id);
	return rc;
}

/* The hold's key: holds/<snap>/<host>.<sandbox>.json. */
static int hold_key(const char *snap_id, const char *host, const char *sandbox,
		    char key[OBJ_KEY_MAX], struct err *e)
{
	int rc = hold_dir_key(snap_id, key, e);
	if (rc == 0 && (!store_id_ok(host) || strchr(host, '.') || !store_id_ok(sandbox)))
		rc = err_set(e, EINVAL, "cannot hold snapshot %s: invalid holder %.*s.%.*s",
			     snap_id, NAME_LEN_MAX + 1, host, NAME_LEN_MAX + 1, sandbox);
	/* Cannot truncate: three ids of at most NAME_LEN_MAX bytes. */
	if (rc == 0)
		snprintf(key + strlen(key), OBJ_KEY_MAX - strlen(key), "%s.%s" HOLD_SUFFIX, host,
			 sandbox);
	return rc;
}

/* "holds/<snap>/<host>.<sandbox>.json" into its parts; false for any other key. */
static bool hold_of_key(const char *key, char snap[ID_MAX], struct store_holder *who)
{
	const char *name = key + strlen(HOLD_PREFIX);
	const char *slash = str_has_prefix(key, HOLD_PREFIX) ? strchr(name, '/') : NULL;
	const char *dot = slash ? strchr(slash + 1, '.') : NULL;
	size_t leaf = slash ? strlen(slash + 1) : 0;
	if (!dot || leaf <= strlen(HOLD_SUFFIX) ||
	    strcmp(slash + 1 + leaf - strlen(HOLD_SUFFIX), HOLD_SUFFIX) != 0)
		return false;
	size_t nsnap = (size_t)(slash - name), nhost = (size_t)(dot - slash - 1);
	size_t nsb = leaf - nhost - 1 - strlen(HOLD_SUFFIX);
	if (nsnap >= ID_MAX || nhost >= ID_MAX || nsb == 0 || nsb >= ID_MAX)
		return false;
	memcpy(snap, name, nsnap);
	snap[nsnap] = '\0';
	memcpy(who->host, slash + 1, nhost);
	who->host[nhost] = '\0';
	memcpy(who->sandbox, dot + 1, nsb);
	who->sandbox[nsb] = '\0';
	return store_id_ok(snap) && store_id_ok(who->host) && store_id_ok(who->sandbox);
}

int store_hold(struct store *st, const char *snap_id, const char *host, const char *sandbox,
	       struct err *e)
{
	char key[OBJ_KEY_MAX], body[512];
	struct err inner = {0};
	int rc = hold_key(snap_id, host, sandbox, key, e);
	if (rc < 0)
		return rc;
	/* Cannot truncate: ids of at most NAME_LEN_MAX bytes of [a-z0-9._-]. */
	int len = snprintf(body, sizeof(body),
			   "{\"snapshot\":\"%s\",\"host\":\"%s\",\"sandbox\":\"%s\","
			   "\"held_at_ms\":%lld}\n",
			   snap_id, host, sandbox, (long long)now_ms());
	rc = objstore_put_buf(st->os, key, body, (size_t)len, &inner);
	return rc < 0 ? store_wrap(e, snap_id, rc, &inner) : 0;
}

int store_unhold(struct store *st, const char *snap_id, const char *host, const char *sandbox,
		 struct err *e)
{
	char key[OBJ_KEY_MAX];
	struct err inner = {0};
	int rc = hold_key(snap_id, host, sandbox, key, e);
	if (rc == 0)
		rc = objstore_del(st->os, key, &inner);
	return rc < 0 && inner.code ? store_wrap(e, snap_id, rc, &inner) : rc;
}

struct hold_walk {
	int (*fn)(const char *snap_id, const struct store_holder *who, void *arg);
	void *arg;
};

static int hold_seen(const char *key, int64_t size, void *arg)
{
	const struct hold_walk *w = arg;
	char snap[ID_MAX];
	struct store_holder who;
	(void)size;
	/* Anything else under holds/ (a temp object, another writer's) holds nothing. */
	return hold_of_key(key, snap, &who) ? w->fn(snap, &who, w->arg) : 0;
}

static int holds_under(struct store *st, const char *prefix,
		       int (*fn)(const char *snap_id, const struct store_holder *who, void *arg),
		       void *arg, struct err *e)
{
	struct hold_walk w = {fn, arg};
	return objstore_list(st->os, prefix, hold_seen, &w, e);
}

int store_holds_each(struct store *st,
		     int (*fn)(const char *snap_id, const struct store_holder *who, void *arg),
		     void *arg, struct err *e)
{
	return holds_under(st, HOLD_PREFIX, fn, arg, e);
}

static int first_holder(const char *snap_id, const struct store_holder *who, void *arg)
{
	(void)snap_id;
	*(struct store_holder *)arg = *who;
	return 1; /* one is enough */
}

int store_held(struct store *st, const char *snap_id, struct store_holder *who, struct err *e)
{
	char prefix[OBJ_KEY_MAX];
	struct store_holder first = {0};
	struct err inner = {0};
	int rc = hold_dir_key(snap_id, prefix, e);
	if (rc == 0)
		rc = holds_under(st, prefix, first_holder, &first, &inner);
	if (rc < 0 && inner.code)
		return err_set(e, -rc, "cannot tell whether snapshot %s is held: %s", snap_id,
			       inner.msg);
	if (rc < 0)
		return rc;
	if (who)
		*who = first;
	return first.host[0] ? 1 : 0;
}

/*
 * objstore.c - what both object stores share (objstore.h): the key rule,
 * the errno contract, and the local file a put or a get_file writes.
 */
#include "backend/objstore/objstore.h"

#include <errno.h>
#include <string.h>

bool objstore_key_ok(const char *key)
{
	size_t len = strlen(key);
	if (len == 0 || len >= OBJ_KEY_MAX || strstr(key, TMP_MARK) ||
	    strspn(key, "abcdefghijklmnopqrstuvwxyz"
			"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
			"0123456789._/-") != len)
		return false;
	for (const char *comp = key; comp <= key + len;) {
		size_t n = strcspn(comp, "/");
		if (n == 0 || (n == 1 && comp[0] == '.') || (n == 2 && !strncmp(comp, "..", 2)))
			return false;
		comp += n + 1;
	}
	return true;
}

int objstore_io_fail(struct err *e, int code, const char *what, const char *path)
{
	int mapped = (code == ENOSPC || code == EDQUOT) ? ENOSPC : EIO;
	return err_set(e, mapped, "cannot %s %s: %s", what, path, strerror(code));
}

int objstore_durable_fail(struct err *e, int rc, const struct durable_file *d, int missing)
{
	if (!d->what && rc == -ENAMETOOLONG)
		return err_set(e, EINVAL, "path %s is too long", d->path);
	if (!d->what)
		return err_set(e, EIO, "cannot make a temp name: %s", strerror(-rc));
	if (rc == -ENOENT && !strcmp(d->what, "create"))
		return err_set(e, missing, "cannot create %s: %s", d->on, strerror(ENOENT));
	return objstore_io_fail(e, -rc, d->what, d->on);
}

/*
 * store_ident.c - which store this is, and which snapshots were deleted
 * from it on purpose (docs/store.md, "Which store the registry follows").
 *
 *   snapfs-store.json      {"format": 1, "store_id": "store-<32 hex>", "created_at": ms}
 *                          written once, by the first daemon that uses the
 *                          store; a daemon records the id it follows and
 *                          forgets no snapshot row while the store names
 *                          another id, or none (a typo in --store)
 *   tombstones/<id>.json   {"id": ..., "deleted_at": ms}: snapshot <id> was
 *                          deleted (store_delete_snapshot() writes it before
 *                          it removes the manifest), so a host that took it
 *                          may forget its row; a manifest missing without
 *                          one is a fault, not a delete
 * Both are small, bounded when read, and checked before use: any writer of
 * the bucket may have written them.
 */
#include "backend/store/store_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json.h"

#define IDENT_KEY "snapfs-store.json"
#define IDENT_FORMAT 1
#define IDENT_PREFIX "store-"
#define IDENT_HEX 32
#define IDENT_BYTES_MAX 4096 /* the object; ours is under 100 bytes */

static bool ident_ok(const char *id)
{
	size_t n = strlen(IDENT_PREFIX);
	if (strncmp(id, IDENT_PREFIX, n) || strlen(id) != n + IDENT_HEX)
		return false;
	return strspn(id + n, "0123456789abcdef") == IDENT_HEX;
}

/* The id in object text @text into @id; -EIO if it is not an identity object. */
static int ident_parse(const char *url, const char *text, char id[STORE_ID_MAX], struct err *e)
{
	_cleanup_json_ cJSON *j = cJSON_Parse(text);
	const cJSON *sid = cJSON_GetObjectItemCaseSensitive(j, "store_id");
	const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
	if (!cJSON_IsString(sid) || !ident_ok(sid->valuestring) || !cJSON_IsNumber(fmt) ||
	    fmt->valuedouble != IDENT_FORMAT)
		return err_set(e, EIO, "%s %s is not a snapfs store identity", url, IDENT_KEY);
	memcpy(id, sid->valuestring, strlen(sid->valuestring) + 1);
	return 0;
}

static int ident_read(struct store *st, char id[STORE_ID_MAX], struct err *e)
{
	_cleanup_free_ char *text = NULL;
	struct err inner = {0};
	int rc = objstore_get_buf(st->os, IDENT_KEY, &text, NULL, IDENT_BYTES_MAX, &inner);
	if (rc == -ENOENT)
		return err_set(e, ENOENT, "the store %s has no %s", st->os->url, IDENT_KEY);
	if (rc < 0)
		return err_set(e, -rc, "cannot read the store's identity: %s", inner.msg);
	return ident_parse(st->os->url, text, id, e);
}

static int ident_write(struct store *st, struct err *e)
{
	char hex[IDENT_HEX + 1];
	struct err inner = {0};
	_cleanup_strbuf_ struct strbuf text = STRBUF_INIT;
	int rc = random_hex(hex, IDENT_HEX);
	if (rc < 0)
		return err_set(e, -rc, "cannot make a store id: %s", strerror(-rc));
	strbuf_addf(&text, "{\"format\": %d, \"store_id\": \"%s%s\", \"created_at\": %lld}\n",
		    IDENT_FORMAT, IDENT_PREFIX, hex, (long long)now_ms());
	if (strbuf_error(&text) < 0)
		return err_set(e, ENOMEM, "out of memory");
	rc = objstore_put_buf(st->os, IDENT_KEY, strbuf_str(&text), text.len, &inner);
	if (rc < 0)
		return err_set(e, -rc, "cannot write the store's identity: %s", inner.msg);
	info("store %s: identity %s%s written", st->os->url, IDENT_PREFIX, hex);
	return 0;
}

int store_identity(struct store *st, bool create, char id[STORE_ID_MAX], struct err *e)
{
	int rc = ident_read(st, id, e);
	if (rc != -ENOENT || !create)
		return rc;
	err_clear(e);
	rc = ident_write(st, e);
	/* Read back: of two hosts that wrote at once, the last write is the store's id. */
	return rc < 0 ? rc : ident_read(st, id, e);
}

/* --- tombstones -------------------------------------------------------------- */

static void tombstone_key(const char *id, char key[OBJ_KEY_MAX])
{
	/* Cannot truncate: ids are at most NAME_LEN_MAX bytes. */
	snprintf(key, OBJ_KEY_MAX, "tombstones/%s.json", id);
}

int store_tombstone_put(struct store *st, const char *id, struct err *e)
{
	char key[OBJ_KEY_MAX];
	char text[ID_MAX + 64];
	struct err inner = {0};
	int rc = store_check_id(id, e);
	if (rc < 0)
		return rc;
	tombstone_key(id, key);
	int n = snprintf(text, sizeof(text), "{\"id\": \"%s\", \"deleted_at\": %lld}\n", id,
			 (long long)now_ms());
	rc = objstore_put_buf(st->os, key, text, (size_t)n, &inner);
	return rc < 0 ? store_wrap(e, id, rc, &inner) : 0;
}

int store_tombstone_get(struct store *st, const char *id, struct err *e)
{
	char key[OBJ_KEY_MAX];
	_cleanup_free_ char *text = NULL;
	struct err inner = {0};
	int rc = store_check_id(id, e);
	if (rc < 0)
		return rc;
	tombstone_key(id, key);
	rc = objstore_get_buf(st->os, key, &text, NULL, IDENT_BYTES_MAX, &inner);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return store_wrap(e, id, rc, &inner);
	_cleanup_json_ cJSON *j = cJSON_Parse(text);
	const cJSON *named = cJSON_GetObjectItemCaseSensitive(j, "id");
	/* Another writer's object under the key: only one naming @id counts. */
	return cJSON_IsString(named) && strcmp(named->valuestring, id) == 0;
}

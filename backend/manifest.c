#include "backend/manifest.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/strbuf.h"

/* Sizes are JSON numbers (doubles): integers up to 2^53 are exact. */
#define SIZE_MAX_EXACT 9007199254740992.0

static void json_deletep(cJSON **j)
{
	cJSON_Delete(*j);
}
#define _cleanup_json_ _cleanup_(json_deletep)

bool manifest_name_ok(const char *name)
{
	size_t len = strlen(name);
	if (len == 0 || len > MANIFEST_NAME_MAX || name[0] == '.' || strstr(name, ".tmp."))
		return false;
	for (const char *p = name; *p; p++) {
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr("._-", *p)))
			return false;
	}
	return true;
}

static bool sha256_hex_ok(const char *s)
{
	if (strlen(s) != SHA256_HEX_LEN)
		return false;
	return strspn(s, "0123456789abcdef") == SHA256_HEX_LEN;
}

/* Add @item to @obj as @name, replacing a field of the caller's meta of that name. */
static bool set_field(cJSON *obj, const char *name, cJSON *item)
{
	if (!item)
		return false;
	cJSON_DeleteItemFromObjectCaseSensitive(obj, name);
	if (!cJSON_AddItemToObject(obj, name, item)) {
		cJSON_Delete(item);
		return false;
	}
	return true;
}

static cJSON *files_json(const struct manifest_file *files, size_t nfiles)
{
	_cleanup_json_ cJSON *arr = cJSON_CreateArray();
	if (!arr)
		return NULL;
	for (size_t i = 0; i < nfiles; i++) {
		cJSON *f = cJSON_CreateObject();
		if (!f)
			return NULL;
		if (!cJSON_AddItemToArray(arr, f)) {
			cJSON_Delete(f);
			return NULL;
		}
		if (!cJSON_AddStringToObject(f, "name", files[i].name) ||
		    !cJSON_AddNumberToObject(f, "size", (double)files[i].size) ||
		    !cJSON_AddStringToObject(f, "sha256", files[i].sha256))
			return NULL;
	}
	return steal_ptr(arr);
}

int manifest_build(const cJSON *meta, const struct manifest_file *files, size_t nfiles, char **json,
		   size_t *len, struct err *e)
{
	if (!cJSON_IsObject(meta))
		return err_set(e, EINVAL, "snapshot metadata is not a JSON object");
	int64_t total = 0;
	for (size_t i = 0; i < nfiles; i++)
		total += files[i].size;
	_cleanup_json_ cJSON *root = cJSON_Duplicate(meta, true);
	if (!root || !set_field(root, "format", cJSON_CreateNumber(MANIFEST_FORMAT)) ||
	    !set_field(root, "size_bytes", cJSON_CreateNumber((double)total)) ||
	    !set_field(root, "files", files_json(files, nfiles)))
		return err_set(e, ENOMEM, "out of memory building a manifest");
	_cleanup_free_ char *text = cJSON_Print(root);
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	if (!text || strbuf_adds(&sb, text) < 0 || strbuf_adds(&sb, "\n") < 0)
		return err_set(e, ENOMEM, "out of memory building a manifest");
	*json = strbuf_detach(&sb, len);
	return 0;
}

static int parse_file(const cJSON *item, const char *id, struct manifest_file *f, struct err *e)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(item, "name");
	const cJSON *size = cJSON_GetObjectItemCaseSensitive(item, "size");
	const cJSON *sha = cJSON_GetObjectItemCaseSensitive(item, "sha256");
	if (!cJSON_IsString(name) || !manifest_name_ok(name->valuestring))
		return err_set(e, EIO, "snapshot %s: manifest has a file with a bad name", id);
	if (!cJSON_IsNumber(size) || size->valuedouble < 0 || size->valuedouble > SIZE_MAX_EXACT ||
	    size->valuedouble != (double)(int64_t)size->valuedouble)
		return err_set(e, EIO, "snapshot %s: manifest has a bad size for file %s", id,
			       name->valuestring);
	if (!cJSON_IsString(sha) || !sha256_hex_ok(sha->valuestring))
		return err_set(e, EIO, "snapshot %s: manifest has a bad sha256 for file %s", id,
			       name->valuestring);
	memcpy(f->name, name->valuestring, strlen(name->valuestring) + 1);
	f->size = (int64_t)size->valuedouble;
	memcpy(f->sha256, sha->valuestring, SHA256_HEX_LEN + 1);
	return 0;
}

int manifest_parse(const char *json, const char *id, struct manifest_file **files, size_t *nfiles,
		   struct err *e)
{
	_cleanup_json_ cJSON *root = cJSON_Parse(json);
	if (!cJSON_IsObject(root))
		return err_set(e, EIO, "snapshot %s: manifest is not a JSON object", id);
	const cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
	if (!cJSON_IsNumber(format) || format->valuedouble != MANIFEST_FORMAT)
		return err_set(e, EIO, "snapshot %s: unknown manifest format", id);
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "files");
	int n = cJSON_GetArraySize(arr);
	if (!cJSON_IsArray(arr) || n > MANIFEST_FILES_MAX)
		return err_set(e, EIO, "snapshot %s: manifest has no valid file list", id);
	_cleanup_free_ struct manifest_file *out = calloc((size_t)n + 1, sizeof(*out));
	if (!out)
		return err_set(e, ENOMEM, "out of memory reading a manifest");
	size_t i = 0;
	const cJSON *item;
	cJSON_ArrayForEach(item, arr)
	{
		int rc = parse_file(item, id, &out[i++], e);
		if (rc < 0)
			return rc;
	}
	*files = steal_ptr(out);
	*nfiles = i;
	return 0;
}

#include "backend/store/manifest.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "lib/json.h"
#include "lib/limits.h"
#include "lib/strbuf.h"

/* Sizes are JSON numbers (doubles): integers up to 2^53 are exact. */
#define SIZE_MAX_EXACT 9007199254740992.0

bool manifest_name_ok(const char *name)
{
	size_t len = strlen(name);
	if (len == 0 || len > MANIFEST_NAME_MAX || name[0] == '.' || strstr(name, TMP_MARK))
		return false;
	for (const char *p = name; *p; p++) {
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr("._-", *p)))
			return false;
	}
	return true;
}

bool manifest_pack_ok(const char *name)
{
	const char *slash = strchr(name, '/');
	size_t id_len = slash ? (size_t)(slash - name) : 0;
	if (id_len == 0 || id_len > NAME_LEN_MAX || strlen(name) > MANIFEST_PACK_MAX)
		return false;
	for (size_t i = 0; i < id_len; i++) {
		char c = name[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (!alnum && (i == 0 || !strchr("._-", c)))
			return false;
	}
	const char *seq = slash + 1;
	size_t seq_len = strlen(seq);
	return seq_len >= 4 && strspn(seq, "0123456789") == seq_len && !strstr(name, TMP_MARK);
}

void sha256_to_hex(const unsigned char sha[SHA256_LEN], char *hex)
{
	hex_encode(sha, SHA256_LEN, hex);
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static bool sha256_from_hex(const char *hex, unsigned char sha[SHA256_LEN])
{
	if (strlen(hex) != SHA256_HEX_LEN)
		return false;
	for (size_t i = 0; i < SHA256_LEN; i++) {
		int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return false;
		sha[i] = (unsigned char)(hi << 4 | lo);
	}
	return true;
}

/* --- bounds ----------------------------------------------------------------- */

int64_t manifest_zlen_max(int64_t len)
{
	return (int64_t)ZSTD_COMPRESSBOUND((size_t)len);
}

/*
 * At most how many JSON values @json holds, counted without parsing (and
 * stopping past MANIFEST_VALUES_MAX): every value but the outermost is the
 * first in its array or object, after a '[' or '{', or follows a ','.
 * Strings are skipped as cJSON reads them, a backslash escaping the next byte.
 */
static size_t values_at_most(const char *json)
{
	size_t n = 1;
	bool in_string = false;
	for (const char *p = json; *p && n <= MANIFEST_VALUES_MAX; p++) {
		if (in_string && *p == '\\' && p[1])
			p++;
		else if (*p == '"')
			in_string = !in_string;
		else if (!in_string && (*p == '[' || *p == '{' || *p == ','))
			n++;
	}
	return n;
}

/* The text bounds of manifest.h, checked before any parse; @id NULL: a manifest being built. */
static int check_text(const char *json, const char *id, int code, struct err *e)
{
	char what[96];
	if (strnlen(json, MANIFEST_BYTES_MAX + 1) > MANIFEST_BYTES_MAX)
		snprintf(what, sizeof(what), "is longer than %u bytes", MANIFEST_BYTES_MAX);
	else if (values_at_most(json) > MANIFEST_VALUES_MAX)
		snprintf(what, sizeof(what), "has more than %u JSON values", MANIFEST_VALUES_MAX);
	else
		return 0;
	return id ? err_set(e, code, "snapshot %s: manifest %s", id, what)
		  : err_set(e, code, "the manifest %s", what);
}

/* --- build ------------------------------------------------------------------ */

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

static cJSON *packs_json(const struct manifest *m)
{
	_cleanup_json_ cJSON *arr = cJSON_CreateArray();
	for (size_t i = 0; arr && i < m->npacks; i++) {
		cJSON *s = cJSON_CreateString(m->packs[i]);
		if (!s || !cJSON_AddItemToArray(arr, s)) {
			cJSON_Delete(s);
			return NULL;
		}
	}
	return steal_ptr(arr);
}

static void add_chunk(struct strbuf *sb, const struct manifest_chunk *c, bool first)
{
	char hex[SHA256_HEX_LEN + 1];
	const char *sep = first ? "" : ", ";
	if (c->pack == MANIFEST_ZERO) {
		strbuf_addf(sb, "%s[%lld]", sep, (long long)c->len);
		return;
	}
	sha256_to_hex(c->sha256, hex);
	strbuf_addf(sb, "%s[\"%s\", %lld, %d, %lld, %lld]", sep, hex, (long long)c->len,
		    (int)c->pack, (long long)c->off, (long long)c->zlen);
}

/*
 * The files array, written directly: a chunk list as cJSON nodes would take
 * ~400 bytes a chunk, and names need no escaping (manifest_name_ok()).
 */
static void add_files(struct strbuf *sb, const struct manifest *m)
{
	strbuf_adds(sb, ",\n\t\"files\": [");
	for (size_t i = 0; strbuf_error(sb) == 0 && i < m->nfiles; i++) {
		const struct manifest_file *f = &m->files[i];
		strbuf_addf(sb,
			    "%s{\n\t\t\t\"name\": \"%s\",\n\t\t\t\"size\": %lld,\n"
			    "\t\t\t\"chunks\": [",
			    i ? ", " : "", f->name, (long long)f->size);
		for (size_t j = 0; j < f->nchunks; j++)
			add_chunk(sb, &f->chunks[j], j == 0);
		strbuf_adds(sb, "]\n\t\t}");
	}
	strbuf_adds(sb, "]\n}\n");
}

/* What manifest_parse() would refuse to count: -EFBIG. */
static int check_counts(const struct manifest *m, struct err *e)
{
	size_t chunks = 0;
	for (size_t i = 0; i < m->nfiles; i++)
		chunks += m->files[i].nchunks;
	if (m->nfiles > MANIFEST_FILES_MAX || m->npacks > MANIFEST_PACKS_MAX ||
	    chunks > MANIFEST_CHUNKS_MAX)
		return err_set(e, EFBIG,
			       "the manifest would list %zu files, %zu packs and %zu chunks: more "
			       "than %u, %u or %u",
			       m->nfiles, m->npacks, chunks, MANIFEST_FILES_MAX, MANIFEST_PACKS_MAX,
			       MANIFEST_CHUNKS_MAX);
	return 0;
}

int manifest_build(const cJSON *meta, const struct manifest *m, char **json, size_t *len,
		   struct err *e)
{
	if (!cJSON_IsObject(meta))
		return err_set(e, EINVAL, "snapshot metadata is not a JSON object");
	int rc = check_counts(m, e);
	if (rc < 0)
		return rc;
	_cleanup_json_ cJSON *root = cJSON_Duplicate(meta, true);
	cJSON_DeleteItemFromObjectCaseSensitive(root, "files");
	if (!root || !set_field(root, "format", cJSON_CreateNumber(MANIFEST_FORMAT)) ||
	    !set_field(root, "size_bytes", cJSON_CreateNumber((double)m->size_bytes)) ||
	    !set_field(root, "stored_bytes", cJSON_CreateNumber((double)m->stored_bytes)) ||
	    !set_field(root, "packs", packs_json(m)))
		return err_set(e, ENOMEM, "out of memory building a manifest");
	_cleanup_free_ char *text = cJSON_Print(root);
	/* cJSON ends an object with "\n}": files goes in before that brace. */
	size_t text_len = text ? strlen(text) : 0;
	if (text_len < 2 || strcmp(text + text_len - 2, "\n}"))
		return err_set(e, ENOMEM, "out of memory building a manifest");
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	strbuf_add(&sb, text, text_len - 2);
	add_files(&sb, m);
	rc = strbuf_error(&sb);
	if (rc == -EFBIG)
		return err_set(e, EFBIG, "the manifest is larger than %u bytes", STRBUF_MAX);
	if (rc < 0)
		return err_set(e, ENOMEM, "out of memory building a manifest");
	rc = check_text(strbuf_str(&sb), NULL, EFBIG, e);
	if (rc < 0)
		return rc;
	*json = strbuf_detach(&sb, len);
	return 0;
}

/* --- parse ------------------------------------------------------------------ */

int manifest_json(const char *json, const char *id, cJSON **root, struct err *e)
{
	*root = NULL;
	int rc = check_text(json, id, EIO, e);
	if (rc < 0)
		return rc;
	_cleanup_json_ cJSON *j = cJSON_Parse(json);
	if (!cJSON_IsObject(j))
		return err_set(e, EIO, "snapshot %s: manifest is not a JSON object", id);
	*root = steal_ptr(j);
	return 0;
}

static bool int_ok(const cJSON *n, double min)
{
	return cJSON_IsNumber(n) && n->valuedouble >= min && n->valuedouble <= SIZE_MAX_EXACT &&
	       n->valuedouble == (double)(int64_t)n->valuedouble;
}

static int parse_packs(const cJSON *root, const char *id, struct manifest *m, struct err *e)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "packs");
	int n = cJSON_GetArraySize(arr);
	if (!cJSON_IsArray(arr))
		return err_set(e, EIO, "snapshot %s: manifest has no pack list", id);
	if ((size_t)n > MANIFEST_PACKS_MAX)
		return err_set(e, EIO, "snapshot %s: manifest lists more than %u packs", id,
			       MANIFEST_PACKS_MAX);
	m->packs = calloc((size_t)n + 1, sizeof(*m->packs));
	if (!m->packs)
		return err_set(e, ENOMEM, "out of memory reading a manifest");
	const cJSON *item;
	cJSON_ArrayForEach(item, arr)
	{
		if (!cJSON_IsString(item) || !manifest_pack_ok(item->valuestring))
			return err_set(e, EIO, "snapshot %s: manifest has a bad pack name", id);
		memcpy(m->packs[m->npacks++], item->valuestring, strlen(item->valuestring) + 1);
	}
	return 0;
}

/* Why a chunk is refused, for the message; hex is set once its hash was read. */
struct chunk_why {
	char hex[SHA256_HEX_LEN + 1];
	char what[160];
};

/* Fields 1.. of a stored chunk, checked against the pack list and the bounds. */
static bool parse_stored(const cJSON *const f[5], const struct manifest *m,
			 struct manifest_chunk *c, struct chunk_why *why)
{
	int64_t end = 0;
	if (!int_ok(f[1], 1) || !int_ok(f[2], 0) || !int_ok(f[3], 0) || !int_ok(f[4], 1)) {
		snprintf(why->what, sizeof(why->what), "a length, pack or offset is not a count");
		return false;
	}
	c->len = (int64_t)f[1]->valuedouble;
	c->off = (int64_t)f[3]->valuedouble;
	c->zlen = (int64_t)f[4]->valuedouble;
	if (f[2]->valuedouble >= (double)m->npacks)
		snprintf(why->what, sizeof(why->what), "its pack index is out of range");
	else if (c->len > MANIFEST_CHUNK_MAX)
		snprintf(why->what, sizeof(why->what), "its length %lld is above %d",
			 (long long)c->len, MANIFEST_CHUNK_MAX);
	else if (c->zlen > manifest_zlen_max(c->len))
		snprintf(why->what, sizeof(why->what),
			 "its stored length %lld is above %lld, the most %lld bytes take",
			 (long long)c->zlen, (long long)manifest_zlen_max(c->len),
			 (long long)c->len);
	else if (__builtin_add_overflow(c->off, c->zlen, &end) || end > (int64_t)SIZE_MAX_EXACT)
		snprintf(why->what, sizeof(why->what), "it ends past byte 2^53 of its pack");
	else
		c->pack = (int32_t)f[2]->valuedouble;
	return why->what[0] == '\0';
}

/* [LEN] or ["sha", LEN, PACK, OFF, ZLEN]; false (and @why) if it is not a valid chunk. */
static bool parse_chunk(const cJSON *item, const struct manifest *m, struct manifest_chunk *c,
			struct chunk_why *why)
{
	int n = cJSON_GetArraySize(item);
	const cJSON *f[5] = {0};
	memset(c, 0, sizeof(*c));
	*why = (struct chunk_why){0};
	if (!cJSON_IsArray(item) || (n != 1 && n != 5)) {
		snprintf(why->what, sizeof(why->what), "it is not an array of 1 or 5 numbers");
		return false;
	}
	for (int i = 0; i < n; i++)
		f[i] = cJSON_GetArrayItem(item, i);
	if (n == 1) {
		c->pack = MANIFEST_ZERO;
		c->len = int_ok(f[0], 1) ? (int64_t)f[0]->valuedouble : 0;
		if (c->len == 0)
			snprintf(why->what, sizeof(why->what), "its zero run has no valid length");
		return c->len > 0;
	}
	if (!cJSON_IsString(f[0]) || !sha256_from_hex(f[0]->valuestring, c->sha256)) {
		snprintf(why->what, sizeof(why->what), "it has no valid SHA-256");
		return false;
	}
	sha256_to_hex(c->sha256, why->hex);
	return parse_stored(f, m, c, why);
}

/*
 * The chunks of file @f from @chunks: at most @room of them, their lengths
 * adding up to the file's size.
 */
static int parse_chunks(const cJSON *chunks, const char *id, const struct manifest *m,
			struct manifest_file *f, size_t room, struct err *e)
{
	size_t n = (size_t)cJSON_GetArraySize(chunks);
	if (n > room)
		return err_set(e, EIO, "snapshot %s: manifest has more than %u chunks", id,
			       MANIFEST_CHUNKS_MAX);
	f->chunks = calloc(n + 1, sizeof(*f->chunks));
	if (!f->chunks)
		return err_set(e, ENOMEM, "out of memory reading a manifest");
	int64_t total = 0;
	const cJSON *c;
	cJSON_ArrayForEach(c, chunks)
	{
		struct manifest_chunk *chunk = &f->chunks[f->nchunks];
		struct chunk_why why;
		if (!parse_chunk(c, m, chunk, &why))
			return err_set(e, EIO,
				       "snapshot %s: manifest has a bad chunk %zu%s%s%s of %s: %s",
				       id, f->nchunks, why.hex[0] ? " (" : "", why.hex,
				       why.hex[0] ? ")" : "", f->name, why.what);
		if (__builtin_add_overflow(total, chunk->len, &total) || total > f->size)
			return err_set(e, EIO,
				       "snapshot %s: the chunks of %s add up to more than its size",
				       id, f->name);
		f->nchunks++;
	}
	if (total != f->size)
		return err_set(e, EIO, "snapshot %s: the chunks of %s do not add up to its size",
			       id, f->name);
	return 0;
}

static int parse_file(const cJSON *item, const char *id, const struct manifest *m,
		      struct manifest_file *f, size_t room, struct err *e)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(item, "name");
	const cJSON *size = cJSON_GetObjectItemCaseSensitive(item, "size");
	const cJSON *chunks = cJSON_GetObjectItemCaseSensitive(item, "chunks");
	if (!cJSON_IsString(name) || !manifest_name_ok(name->valuestring))
		return err_set(e, EIO, "snapshot %s: manifest has a file with a bad name", id);
	memcpy(f->name, name->valuestring, strlen(name->valuestring) + 1);
	if (!int_ok(size, 0) || !cJSON_IsArray(chunks))
		return err_set(e, EIO, "snapshot %s: manifest has a bad size or chunk list for %s",
			       id, f->name);
	f->size = (int64_t)size->valuedouble;
	return parse_chunks(chunks, id, m, f, room, e);
}

/* The files, their chunks at most MANIFEST_CHUNKS_MAX together, their sizes adding up. */
static int parse_files(const cJSON *root, const char *id, struct manifest *m, struct err *e)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "files");
	int n = cJSON_GetArraySize(arr);
	if (!cJSON_IsArray(arr) || n > MANIFEST_FILES_MAX)
		return err_set(e, EIO, "snapshot %s: manifest has no valid file list", id);
	m->files = calloc((size_t)n + 1, sizeof(*m->files));
	if (!m->files)
		return err_set(e, ENOMEM, "out of memory reading a manifest");
	size_t chunks = 0;
	int64_t total = 0;
	const cJSON *item;
	cJSON_ArrayForEach(item, arr)
	{
		struct manifest_file *f = &m->files[m->nfiles++];
		int rc = parse_file(item, id, m, f, MANIFEST_CHUNKS_MAX - chunks, e);
		if (rc < 0)
			return rc;
		chunks += f->nchunks;
		if (__builtin_add_overflow(total, f->size, &total))
			return err_set(e, EIO, "snapshot %s: manifest's file sizes overflow", id);
	}
	if (total != m->size_bytes)
		return err_set(e, EIO,
			       "snapshot %s: manifest's file sizes do not add up to its size_bytes",
			       id);
	return 0;
}

int manifest_parse(const char *json, const char *id, struct manifest *m, struct err *e)
{
	memset(m, 0, sizeof(*m));
	_cleanup_json_ cJSON *root = NULL;
	int rc = manifest_json(json, id, &root, e);
	if (rc < 0)
		return rc;
	const cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
	if (!cJSON_IsNumber(format) || format->valuedouble != MANIFEST_FORMAT)
		return err_set(e, EIO, "snapshot %s: unknown manifest format", id);
	const cJSON *size = cJSON_GetObjectItemCaseSensitive(root, "size_bytes");
	const cJSON *stored = cJSON_GetObjectItemCaseSensitive(root, "stored_bytes");
	if (!int_ok(size, 0))
		return err_set(e, EIO, "snapshot %s: manifest has no valid size_bytes", id);
	m->size_bytes = (int64_t)size->valuedouble;
	m->stored_bytes = int_ok(stored, 0) ? (int64_t)stored->valuedouble : 0;
	rc = parse_packs(root, id, m, e);
	if (rc == 0)
		rc = parse_files(root, id, m, e);
	if (rc < 0)
		manifest_free(m);
	return rc;
}

void manifest_free(struct manifest *m)
{
	for (size_t i = 0; m->files && i < m->nfiles; i++)
		free(m->files[i].chunks);
	free(m->files);
	free(m->packs);
	memset(m, 0, sizeof(*m));
}

/*
 * fuzz_manifest.c - libFuzzer target for manifest_parse() (backend/store/manifest.c),
 * the JSON that the bucket hands every host (and a donor image's manifest
 * on local disk). The input is the manifest text.
 *
 * What is accepted must keep manifest.h's promises: names safe to join to
 * a directory, pack names safe keys, pack indexes in range, lengths within
 * their bounds (a stored length at most zstd's bound for its plain length)
 * that add up to the file's size without overflow. And
 * manifest_build() of what was parsed must parse back to the same.
 */
#include <cjson/cJSON.h>
#include <zstd.h>

#include "backend/store/manifest.h"
#include "tests/fuzz/fuzz.h"

static void check_chunk(const struct manifest *m, const struct manifest_chunk *c)
{
	FUZZ_CHECK(c->len >= 1);
	if (c->pack == MANIFEST_ZERO)
		return;
	FUZZ_CHECK(c->pack >= 0 && (size_t)c->pack < m->npacks);
	FUZZ_CHECK(c->len <= MANIFEST_CHUNK_MAX);
	FUZZ_CHECK(c->off >= 0 && c->zlen >= 1);
	/* docs/design.md: a stored length never above its plain length plus zstd's bound. */
	FUZZ_CHECK(c->zlen <= (int64_t)ZSTD_COMPRESSBOUND((size_t)c->len));
}

static void check_manifest(const struct manifest *m)
{
	FUZZ_CHECK(m->nfiles <= MANIFEST_FILES_MAX);
	FUZZ_CHECK(m->size_bytes >= 0 && m->stored_bytes >= 0);
	for (size_t i = 0; i < m->npacks; i++)
		FUZZ_CHECK(manifest_pack_ok(m->packs[i]));
	for (size_t i = 0; i < m->nfiles; i++) {
		const struct manifest_file *f = &m->files[i];
		int64_t total = 0;
		FUZZ_CHECK(memchr(f->name, '\0', sizeof(f->name)) && manifest_name_ok(f->name));
		for (size_t j = 0; j < f->nchunks; j++) {
			check_chunk(m, &f->chunks[j]);
			FUZZ_CHECK(!__builtin_add_overflow(total, f->chunks[j].len, &total));
		}
		FUZZ_CHECK(total == f->size);
	}
}

static bool same_manifest(const struct manifest *a, const struct manifest *b)
{
	if (a->nfiles != b->nfiles || a->npacks != b->npacks || a->size_bytes != b->size_bytes ||
	    a->stored_bytes != b->stored_bytes)
		return false;
	for (size_t i = 0; i < a->npacks; i++)
		if (strcmp(a->packs[i], b->packs[i]))
			return false;
	for (size_t i = 0; i < a->nfiles; i++) {
		const struct manifest_file *fa = &a->files[i], *fb = &b->files[i];
		if (strcmp(fa->name, fb->name) || fa->size != fb->size ||
		    fa->nchunks != fb->nchunks ||
		    (fa->nchunks &&
		     memcmp(fa->chunks, fb->chunks, fa->nchunks * sizeof(*fa->chunks))))
			return false;
	}
	return true;
}

/* What manifest_build() writes of @m parses back to @m. */
static void check_round_trip(const struct manifest *m)
{
	cJSON *meta = cJSON_CreateObject();
	char *json = NULL;
	size_t len = 0;
	struct err e = {0};
	struct manifest again;
	if (!meta)
		abort();
	int rc = manifest_build(meta, m, &json, &len, &e);
	cJSON_Delete(meta);
	if (rc == -ENOMEM || rc == -EFBIG) /* a parsed manifest may exceed what a put may build */
		return;
	FUZZ_CHECK(rc == 0 && json && strlen(json) == len);
	FUZZ_CHECK(manifest_parse(json, "snap-fuzz", &again, &e) == 0);
	FUZZ_CHECK(same_manifest(m, &again));
	manifest_free(&again);
	free(json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *json = fuzz_strndup(data, size);
	struct manifest m;
	struct err e = {0};
	int rc = manifest_parse(json, "snap-fuzz", &m, &e);
	if (rc == 0) {
		check_manifest(&m);
		check_round_trip(&m);
		manifest_free(&m);
	} else {
		FUZZ_CHECK(rc == -EIO || rc == -ENOMEM);
		FUZZ_CHECK(e.code == -rc && e.msg[0] != '\0');
	}
	free(json);
	return 0;
}

/*
 * store_open.c - store_open() and store_close(): the objstore the URL names,
 * the records read back (store_records.c) and a first refresh
 * (store_refresh.c). Above every other store file: nothing calls back here.
 */
#include "backend/store/store_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int store_dir(const char *url, const char *state_dir, char dir[PATH_MAX], struct err *e)
{
	if (!url || url[0] == '\0') {
		if (!state_dir || xsnprintf(dir, PATH_MAX, "%s/store", state_dir) < 0)
			return err_set(e, EINVAL, "no store URL and no usable state directory");
		return 0;
	}
	if (str_has_prefix(url, "s3://")) {
		dir[0] = '\0'; /* objstore_s3_open() reads the URL itself */
		return 0;
	}
	if (!str_has_prefix(url, "file:///")) {
		/* Not echoed: an unknown URL might carry credentials. */
		return err_set(e, EINVAL, "store URL must be file:///path or s3://bucket/prefix");
	}
	if (xsnprintf(dir, PATH_MAX, "%s", url + strlen("file://")) < 0)
		return err_set(e, EINVAL, "store path is too long");
	return 0;
}

int store_open(const char *url, const char *state_dir, struct store **out, struct err *e)
{
	char dir[PATH_MAX];
	int rc = store_dir(url, state_dir, dir, e);
	if (rc < 0)
		return rc;
	struct store *st = calloc(1, sizeof(*st));
	if (!st)
		return err_set(e, ENOMEM, "out of memory");
	pthread_mutex_init(&st->lock, NULL);
	pthread_cond_init(&st->checked, NULL);
	pthread_mutex_init(&st->sync_lock, NULL);
	pthread_mutex_init(&st->gc_lock, NULL); /* calloc'd: st->unreadable is empty */
	st->limits = (struct store_limits){.index_chunks = STORE_INDEX_CHUNKS_MAX,
					   .packs = STORE_PACKS_MAX,
					   .pack_refs = STORE_PACK_REFS_MAX};
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	st->workers = cores < 1			  ? 1
		      : cores > STORE_WORKERS_MAX ? STORE_WORKERS_MAX
						  : (unsigned)cores;
	st->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
	if (!st->sha256)
		rc = err_set(e, EIO, "libcrypto has no SHA-256");
	if (rc == 0)
		rc = dir[0] ? objstore_local_open(dir, &st->os, e)
			    : objstore_s3_open(url, &st->os, e);
	bool complete = false;
	if (rc == 0)
		store_records_open(st, state_dir);
	if (rc == 0)
		rc = store_refresh_locked(st, NULL, &complete, e);
	if (rc < 0 && rc != -ENOMEM && st->os) {
		/* Serve anyway: puts and gets fail with the store's own reason until it answers. */
		warning("cannot read the store %s: %s", st->os->url, e->msg);
		err_clear(e);
		rc = 0;
	}
	if (rc < 0) {
		store_close(st);
		return rc;
	}
	*out = st;
	return 0;
}

void store_close(struct store *st)
{
	if (!st)
		return;
	/* Puts and gets have returned: nothing is in flight. */
	store_records_close(st); /* first: it saves the records */
	for (size_t i = 0; i < st->nsnaps; i++)
		free(st->snaps[i].packs);
	for (size_t i = 0; i < st->npacks; i++)
		free(st->packs[i]);
	free(st->snaps);
	free(st->snap_slots);
	free(st->pack_slots);
	free(st->packs);
	chunk_index_free(&st->index);
	EVP_MD_free(st->sha256);
	objstore_close(st->os);
	free(st->seen);
	strbuf_release(&st->unreadable);
	pthread_mutex_destroy(&st->lock);
	pthread_cond_destroy(&st->checked);
	pthread_mutex_destroy(&st->sync_lock);
	pthread_mutex_destroy(&st->gc_lock);
	free(st);
}

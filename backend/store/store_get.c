/*
 * store_get.c - store_get_snapshot(): read the packs' byte ranges the
 * manifest names, decompress and verify every chunk, write the files.
 *
 * Consecutive chunks of one file stored back to back in one pack are read
 * with one ranged get (up to RANGE_MAX). The ranges are jobs that every
 * worker thread takes in turn; each chunk is checked against its SHA-256
 * before it is written, so nothing unverified reaches the files. Zero runs
 * are holes. The files are not fsynced: a restore reads them from the page
 * cache at once, and the runtime's cache drops them after a reboot
 * (runtime/cache.h), so waiting for the disk would only slow every fork.
 *
 * With donors (store_get_snapshot_from()), chunks that local images hold
 * (store_donor.c) are copied from them instead: consecutive ones of a file
 * make a local job, read with one pread a chunk and verified the same way.
 * Donor chunks that do not verify are read from the store, a run of them
 * with one ranged read: a donor can make a get slower, never wrong or failed.
 *
 * The manifest comes from the bucket: manifest_parse() bounds every length
 * (a stored one never above its plain one plus zstd's frame bound), and a
 * job's stored bytes, local or not, fit the read buffer.
 */
#include "backend/store/store_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

/* A job reads at most this much of a pack and writes at most this much of a file. */
#define RANGE_MAX (4u << 20)
#define RBUF_BYTES (RANGE_MAX + ZSTD_COMPRESSBOUND(MANIFEST_CHUNK_MAX))
#define PBUF_BYTES (RANGE_MAX + MANIFEST_CHUNK_MAX)

/* Chunks [first, first + count) of one file, stored back to back in one pack. */
struct range_job {
	size_t file;
	size_t first, count;
	int64_t file_off; /* where the first one goes in the file */
	int64_t plain;	  /* their plain bytes */
	int64_t off, len; /* the range of the pack; a local job: len is what its chunks' stored
			     copies take, read back if the donors' copies fail */
	bool local;	  /* copied from donors */
};

struct get {
	struct store *st;
	const char *id;
	struct manifest m;
	char *json; /* the text of m */
	struct donor_map donors;
	int *fds;
	struct range_job *jobs;
	size_t njobs, cap;
	atomic_size_t next;
	atomic_bool failed;
	_Atomic int64_t store_bytes, local_bytes; /* see struct store_get_result */
	atomic_size_t refetched;		  /* donor chunks that did not verify */
	pthread_mutex_t lock;			  /* the failure of the lowest job */
	size_t err_job;
	struct err err;
	ZSTD_DCtx *dctx[STORE_WORKERS_MAX];
	EVP_MD_CTX *md[STORE_WORKERS_MAX];
	unsigned char *rbuf[STORE_WORKERS_MAX]; /* the range read */
	unsigned char *pbuf[STORE_WORKERS_MAX]; /* its chunks, plain and verified */
};

/* --- the jobs --------------------------------------------------------------- */

static int add_job(struct get *g, const struct range_job *job)
{
	if (g->njobs == g->cap) {
		size_t ncap = g->cap ? g->cap * 2 : 256;
		struct range_job *bigger = reallocarray(g->jobs, ncap, sizeof(*bigger));
		if (!bigger)
			return -ENOMEM;
		g->jobs = bigger;
		g->cap = ncap;
	}
	g->jobs[g->njobs++] = *job;
	return 0;
}

/*
 * Whether chunk @c is copied from a donor rather than read from the store:
 * a donor holds its hash with its length (a manifest that gives one hash
 * two lengths is no honest one; its other chunks come from the store).
 */
static bool is_local(const struct get *g, const struct manifest_chunk *c)
{
	const struct donor_ref *r =
	    c->pack == MANIFEST_ZERO ? NULL : donor_map_find(&g->donors, c->sha256);
	return r && r->chunk->len == c->len;
}

/*
 * Can chunk @c of the file (@local: a donor holds it) join @job? Both from
 * donors, or both from the same pack with @c right after the job's range;
 * neither the plain bytes nor the stored ones too long, for a local job too:
 * its chunks may have to be read back from the store into the same buffer.
 */
static bool extends(const struct get *g, const struct range_job *job,
		    const struct manifest_chunk *c, bool local)
{
	const struct manifest_chunk *first = &g->m.files[job->file].chunks[job->first];
	if (job->count == 0 || c->pack == MANIFEST_ZERO || local != job->local ||
	    job->plain + c->len > RANGE_MAX || job->len + c->zlen > RANGE_MAX)
		return false;
	return local || (c->pack == first->pack && c->off == job->off + job->len);
}

static int plan_file(struct get *g, size_t fi)
{
	const struct manifest_file *f = &g->m.files[fi];
	struct range_job job = {.file = fi};
	int64_t pos = 0;
	for (size_t i = 0; i < f->nchunks; pos += f->chunks[i].len, i++) {
		const struct manifest_chunk *c = &f->chunks[i];
		bool local = is_local(g, c);
		if (extends(g, &job, c, local)) {
			job.count++;
			job.len += c->zlen;
			job.plain += c->len;
			continue;
		}
		if (job.count > 0 && add_job(g, &job) < 0)
			return -ENOMEM;
		/* A zero run ends a job: it is a hole, and the job's chunks must be adjacent. */
		job = (struct range_job){.file = fi,
					 .first = i,
					 .count = 1,
					 .file_off = pos,
					 .plain = c->len,
					 .off = c->off,
					 .len = c->zlen,
					 .local = local};
		if (c->pack == MANIFEST_ZERO)
			job.count = 0;
	}
	return job.count > 0 ? add_job(g, &job) : 0;
}

/* --- the workers ------------------------------------------------------------ */

/* Keep the failure of the lowest job, so the message does not depend on timing. */
static void fail_job(struct get *g, size_t job, const struct err *e)
{
	pthread_mutex_lock(&g->lock);
	if (!atomic_load(&g->failed) || job < g->err_job) {
		g->err_job = job;
		g->err = *e;
	}
	atomic_store(&g->failed, true);
	pthread_mutex_unlock(&g->lock);
}

static int chunk_fail(struct get *g, const struct range_job *job, size_t i, const char *what,
		      struct err *e)
{
	const struct manifest_file *f = &g->m.files[job->file];
	const struct manifest_chunk *c = &f->chunks[i];
	char hex[SHA256_HEX_LEN + 1];
	int64_t at = job->file_off;
	for (size_t k = job->first; k < i; k++)
		at += f->chunks[k].len;
	sha256_to_hex(c->sha256, hex);
	return err_set(e, EIO, "snapshot %s: chunk %s of %s (at byte %lld) %s", g->id, hex, f->name,
		       (long long)at, what);
}

/* @len bytes at @off of the pack of chunk @i (of @job's file) into @buf; failures name @i. */
static int read_pack(struct get *g, const struct range_job *job, size_t i, int64_t off, int64_t len,
		     unsigned char *buf, struct err *e)
{
	const struct manifest_chunk *c = &g->m.files[job->file].chunks[i];
	char key[OBJ_KEY_MAX], what[ERR_MSG_MAX / 2];
	struct err inner = {0};
	/* A last guard: plan_file() plans no longer range, manifest_parse() no longer chunk. */
	if (len > (int64_t)RBUF_BYTES)
		return chunk_fail(g, job, i, "is in a stored range longer than the read buffer", e);
	store_pack_key(g->m.packs[c->pack], "pack", key);
	int rc = objstore_get_range(g->st->os, key, off, (size_t)len, buf, &inner);
	if (rc == 0) {
		atomic_fetch_add(&g->store_bytes, len);
		return 0;
	}
	if (rc == -ENOENT)
		snprintf(what, sizeof(what), "is missing from the store (pack %s)",
			 g->m.packs[c->pack]);
	else
		snprintf(what, sizeof(what), "cannot be read: %.400s", inner.msg);
	return chunk_fail(g, job, i, what, e);
}

/* Chunk @i, stored at @stored, plain into @plain (decompressed or copied), verified. */
static int verify_chunk(struct get *g, const struct range_job *job, size_t i,
			const unsigned char *stored, unsigned char *plain, unsigned worker,
			struct err *e)
{
	const struct manifest_chunk *c = &g->m.files[job->file].chunks[i];
	unsigned char sha[SHA256_LEN];
	if (c->zlen == c->len) {
		memcpy(plain, stored, (size_t)c->len);
	} else {
		size_t n = ZSTD_decompressDCtx(g->dctx[worker], plain, (size_t)c->len, stored,
					       (size_t)c->zlen);
		if (ZSTD_isError(n) || n != (size_t)c->len)
			return chunk_fail(g, job, i, "is corrupt (it does not decompress)", e);
	}
	if (!store_sha256(g->st, g->md[worker], plain, (size_t)c->len, sha))
		return err_set(e, EIO, "snapshot %s: SHA-256 failed", g->id);
	if (memcmp(sha, c->sha256, SHA256_LEN))
		return chunk_fail(g, job, i, "is corrupt (SHA-256 mismatch)", e);
	return 0;
}

/* Read the job's range of its pack and verify every chunk into the plain buffer. */
static int fetch_job(struct get *g, const struct range_job *job, unsigned worker, struct err *e)
{
	const struct manifest_file *f = &g->m.files[job->file];
	int rc = read_pack(g, job, job->first, job->off, job->len, g->rbuf[worker], e);
	int64_t at = 0;
	for (size_t i = job->first; rc == 0 && i < job->first + job->count; i++) {
		const struct manifest_chunk *c = &f->chunks[i];
		rc = verify_chunk(g, job, i, g->rbuf[worker] + (c->off - job->off),
				  g->pbuf[worker] + at, worker, e);
		at += c->len;
	}
	return rc;
}

/* Chunk @c from the donor that holds it into @plain: whether it was all there and verifies. */
static bool copy_chunk(struct get *g, const struct manifest_chunk *c, unsigned char *plain,
		       unsigned worker)
{
	const struct donor_ref *r = donor_map_find(&g->donors, c->sha256);
	unsigned char sha[SHA256_LEN];
	if (!r || pread_all(r->fd, plain, (size_t)c->len, r->off) < 0)
		return false;
	return store_sha256(g->st, g->md[worker], plain, (size_t)c->len, sha) &&
	       !memcmp(sha, c->sha256, SHA256_LEN);
}

/* Chunks [@from, @to) of a local job, back to back in one pack: read from the store into @plain. */
static int refetch(struct get *g, const struct range_job *job, size_t from, size_t to,
		   unsigned char *plain, unsigned worker, struct err *e)
{
	const struct manifest_chunk *ch = g->m.files[job->file].chunks;
	int64_t off = ch[from].off, len = ch[to - 1].off + ch[to - 1].zlen - off;
	atomic_fetch_add(&g->refetched, to - from);
	int rc = read_pack(g, job, from, off, len, g->rbuf[worker], e);
	for (size_t i = from; rc == 0 && i < to; i++) {
		rc = verify_chunk(g, job, i, g->rbuf[worker] + (ch[i].off - off), plain, worker, e);
		plain += ch[i].len;
	}
	return rc;
}

/* Does chunk @c come right after @prev in the same pack? */
static bool follows(const struct manifest_chunk *prev, const struct manifest_chunk *c)
{
	return c->pack == prev->pack && c->off == prev->off + prev->zlen;
}

/*
 * Copy each chunk of a local job from its donor into the plain buffer.
 * Chunks that do not verify (the donor's file changed since its manifest
 * was written) are read from the store instead, each run of them that lies
 * back to back in one pack with one ranged read, and verified as fetched
 * ones: a donor that is wrong throughout costs the reads a fetch would.
 */
static int copy_job(struct get *g, const struct range_job *job, unsigned worker, struct err *e)
{
	const struct manifest_chunk *ch = g->m.files[job->file].chunks;
	unsigned char *plain = g->pbuf[worker], *run_plain = NULL;
	size_t run = SIZE_MAX; /* the first chunk of the run to read from the store */
	size_t end = job->first + job->count;
	int rc = 0;
	for (size_t i = job->first; rc == 0 && i < end; i++) {
		bool copied = copy_chunk(g, &ch[i], plain, worker);
		if (run != SIZE_MAX && (copied || !follows(&ch[i - 1], &ch[i]))) {
			rc = refetch(g, job, run, i, run_plain, worker, e);
			run = SIZE_MAX;
		}
		if (copied) {
			atomic_fetch_add(&g->local_bytes, ch[i].len);
		} else if (run == SIZE_MAX) {
			run = i;
			run_plain = plain;
		}
		plain += ch[i].len;
	}
	if (rc == 0 && run != SIZE_MAX)
		rc = refetch(g, job, run, end, run_plain, worker, e);
	return rc;
}

/* Get every chunk of the job, verified, into the plain buffer, then write it with one call. */
static int run_job(struct get *g, const struct range_job *job, unsigned worker, struct err *e)
{
	const struct manifest_file *f = &g->m.files[job->file];
	int fd = g->fds[job->file];
	int rc = job->local ? copy_job(g, job, worker, e) : fetch_job(g, job, worker, e);
	if (fd < 0) /* store_verify_snapshot(): nothing to write */
		return rc;
	if (rc == 0)
		rc = pwrite_all(fd, g->pbuf[worker], (size_t)job->plain, job->file_off);
	if (rc < 0 && !e->code)
		rc = err_set(e, rc == -ENOSPC ? ENOSPC : EIO, "snapshot %s: cannot write %s: %s",
			     g->id, f->name, strerror(-rc));
	return rc;
}

static void worker_main(void *arg, unsigned worker)
{
	struct get *g = arg;
	while (!atomic_load(&g->failed)) {
		size_t i = atomic_fetch_add(&g->next, 1);
		if (i >= g->njobs)
			break;
		struct err e = {0};
		if (run_job(g, &g->jobs[i], worker, &e) < 0)
			fail_job(g, i, &e);
	}
}

/* --- files ------------------------------------------------------------------ */

static int open_files(struct get *g, const char *dir, struct err *e)
{
	char path[PATH_MAX];
	for (size_t i = 0; i < g->m.nfiles; i++) {
		const struct manifest_file *f = &g->m.files[i];
		if (xsnprintf(path, sizeof(path), "%s/%s", dir, f->name) < 0)
			return err_set(e, EINVAL, "snapshot %s: path %s/%s is too long", g->id, dir,
				       f->name);
		g->fds[i] = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		/* The size first: zero runs stay holes. */
		if (g->fds[i] < 0 || ftruncate(g->fds[i], f->size) < 0)
			return err_set(e, errno == ENOSPC ? ENOSPC : EIO,
				       "snapshot %s: cannot create %s: %s", g->id, path,
				       strerror(errno));
	}
	return 0;
}

/* Close the files; on failure remove those this get created, and @dir if it made it. */
static void close_files(struct get *g, const char *dir, bool failed, bool made_dir)
{
	char path[PATH_MAX];
	for (size_t i = 0; g->fds && i < g->m.nfiles; i++) {
		if (g->fds[i] < 0)
			continue;
		close(g->fds[i]);
		if (failed && xsnprintf(path, sizeof(path), "%s/%s", dir, g->m.files[i].name) >= 0)
			unlink(path);
	}
	if (failed && made_dir)
		rmdir(dir);
}

static int get_setup(struct get *g, struct err *e)
{
	g->fds = malloc((g->m.nfiles + 1) * sizeof(*g->fds));
	if (!g->fds)
		return err_set(e, ENOMEM, "out of memory");
	for (size_t i = 0; i < g->m.nfiles; i++)
		g->fds[i] = -1;
	for (size_t i = 0; i < g->m.nfiles; i++) {
		if (plan_file(g, i) < 0)
			return err_set(e, ENOMEM, "out of memory");
	}
	for (unsigned i = 0; i < g->st->workers; i++) {
		g->dctx[i] = ZSTD_createDCtx();
		g->md[i] = EVP_MD_CTX_new();
		g->rbuf[i] = malloc(RBUF_BYTES);
		g->pbuf[i] = malloc(PBUF_BYTES);
		if (!g->dctx[i] || !g->md[i] || !g->rbuf[i] || !g->pbuf[i])
			return err_set(e, ENOMEM, "out of memory");
	}
	return 0;
}

/* What the get read, into the store's totals (struct store_stats). */
static void get_account(struct get *g)
{
	pthread_mutex_lock(&g->st->lock);
	g->st->get_store_bytes += atomic_load(&g->store_bytes);
	g->st->get_local_bytes += atomic_load(&g->local_bytes);
	pthread_mutex_unlock(&g->st->lock);
}

static void get_teardown(struct get *g)
{
	get_account(g);
	donor_map_free(&g->donors);
	free(g->json);
	for (unsigned i = 0; i < STORE_WORKERS_MAX; i++) {
		ZSTD_freeDCtx(g->dctx[i]);
		EVP_MD_CTX_free(g->md[i]);
		free(g->rbuf[i]);
		free(g->pbuf[i]);
	}
	free(g->fds);
	free(g->jobs);
	manifest_free(&g->m);
	pthread_mutex_destroy(&g->lock);
}

/* Run the jobs into the files of @dir, or (@dir NULL) only check every chunk. */
static int get_files(struct get *g, const char *dir, struct err *e)
{
	int rc = get_setup(g, e);
	if (rc == 0 && dir)
		rc = open_files(g, dir, e);
	if (rc < 0)
		return rc;
	unsigned workers = g->st->workers;
	store_parallel(g->njobs < workers ? (unsigned)g->njobs : workers, worker_main, g);
	if (atomic_load(&g->failed)) {
		if (e)
			*e = g->err;
		return -g->err.code;
	}
	return 0;
}

static int get_begin(struct store *st, const char *id, struct get *g, struct err *e)
{
	*g = (struct get){.st = st, .id = id};
	int rc = store_get_manifest(st, id, &g->json, e);
	if (rc < 0)
		return rc;
	atomic_store(&g->store_bytes, (int64_t)strlen(g->json));
	pthread_mutex_init(&g->lock, NULL);
	rc = manifest_parse(g->json, id, &g->m, e);
	if (rc < 0) {
		get_account(g);
		pthread_mutex_destroy(&g->lock);
		free(g->json);
	}
	return rc;
}

int store_verify_snapshot(struct store *st, const char *id, struct err *e)
{
	struct get g;
	int rc = get_begin(st, id, &g, e);
	if (rc < 0)
		return rc;
	rc = get_files(&g, NULL, e);
	get_teardown(&g);
	return rc;
}

/* After a get: the caller's figures, and a word if donors did not hold what they said. */
static void get_result(struct get *g, int rc, struct store_get_result *res)
{
	size_t refetched = atomic_load(&g->refetched);
	if (refetched > 0)
		warning("snapshot %s: %zu chunks of local images did not verify (changed since "
			"they were written?); read from the store instead",
			g->id, refetched);
	if (!res || rc < 0)
		return;
	res->size_bytes = g->m.size_bytes;
	res->store_bytes = atomic_load(&g->store_bytes);
	res->local_bytes = atomic_load(&g->local_bytes);
	res->manifest = steal_ptr(g->json);
}

int store_get_snapshot(struct store *st, const char *id, const char *dir, struct err *e)
{
	return store_get_snapshot_from(st, id, dir, NULL, 0, NULL, e);
}

int store_get_snapshot_from(struct store *st, const char *id, const char *dir,
			    const struct store_donor *donors, size_t ndonors,
			    struct store_get_result *res, struct err *e)
{
	struct get g;
	if (res)
		*res = (struct store_get_result){0};
	int rc = get_begin(st, id, &g, e);
	if (rc < 0)
		return rc;
	int64_t found = donor_map_build(&g.donors, &g.m, donors, ndonors, id);
	if (ndonors > 0)
		debug("snapshot %s: %lld MiB of its chunks are in %zu local images", id,
		      (long long)(found >> 20), ndonors);
	struct stat sb;
	bool made_dir = stat(dir, &sb) < 0;
	rc = mkdir_p(dir, 0755);
	if (rc < 0)
		rc = err_set(e, -rc == ENOSPC ? ENOSPC : EIO, "snapshot %s: cannot create %s: %s",
			     id, dir, strerror(-rc));
	if (rc == 0)
		rc = get_files(&g, dir, e);
	close_files(&g, dir, rc < 0, made_dir);
	get_result(&g, rc, res);
	get_teardown(&g);
	return rc;
}

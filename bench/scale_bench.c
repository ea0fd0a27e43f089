/*
 * scale_bench.c - fills a fresh state directory and store with many
 * snapshots and sandboxes for bench/scale.sh, through the registry and
 * store APIs (no runsc, no FUSE): running 10,000 real checkpoints would
 * take hours on the benchmark machine and measure runsc, not the tree.
 *
 *   scale_bench STATE_DIR STORE_URL NSNAP NSB
 *
 * Makes NSB sandboxes `terminated` and NSNAP snapshots `completed`, taken
 * round-robin of them, each a registry row in STATE_DIR/registry.db (as the
 * daemon names it, ops/ops_life.c) and a manifest in the store with the
 * metadata snapmeta_build() writes, of a one-file image (its chunk shared by
 * all, so the store holds NSNAP manifests and one pack). The host id is
 * STATE_DIR's (made here), so the daemon later started on STATE_DIR finds
 * them its own, as if it had taken them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "backend/registry/registry.h"
#include "backend/store/store.h"
#include "lib/strbuf.h"
#include "lib/util.h"
#include "runtime/host.h"
#include "runtime/snapmeta.h"

#define RUNSC_VERSION "bench"

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int add_sandbox(struct registry *reg, int i, int64_t at)
{
	static struct sandbox sb; /* big: not on the stack */
	memset(&sb, 0, sizeof(sb));
	snprintf(sb.id, sizeof(sb.id), "sb%05d", i);
	snprintf(sb.runtime_id, sizeof(sb.runtime_id), "snapfs-%024x", i);
	snprintf(sb.image, sizeof(sb.image), "busybox");
	snprintf(sb.image_digest, sizeof(sb.image_digest), "sha256:%064x", 1);
	snprintf(sb.entrypoint, sizeof(sb.entrypoint), "sleep 1000");
	sb.state = SB_TERMINATED;
	sb.created_at = at;
	return registry_sandbox_insert(reg, &sb);
}

static int add_snapshot(struct registry *reg, struct store *st, const char *img, int i, int nsb,
			const char *host, int64_t at, struct err *e)
{
	static struct snapshot snap;
	memset(&snap, 0, sizeof(snap));
	snprintf(snap.id, sizeof(snap.id), "snap-%016x", i);
	snprintf(snap.sandbox_id, sizeof(snap.sandbox_id), "sb%05d", i % nsb);
	snprintf(snap.image, sizeof(snap.image), "busybox");
	snprintf(snap.image_digest, sizeof(snap.image_digest), "sha256:%064x", 1);
	snprintf(snap.entrypoint, sizeof(snap.entrypoint), "sleep 1000");
	snprintf(snap.host_json, sizeof(snap.host_json), "%s", host);
	snap.created_at = snap.completed_at = at;
	snap.state = SNAP_COMPLETED;
	snap.pause_ms = 100;
	cJSON *meta = snapmeta_build(&snap, RUNSC_VERSION);
	struct store_put_result res = {0};
	int rc = meta ? store_put_snapshot(st, snap.id, img, meta, NULL, NULL, &res, e) : -ENOMEM;
	cJSON_Delete(meta);
	snap.size_bytes = res.size_bytes;
	snap.stored_bytes = res.stored_bytes;
	return rc < 0 ? rc : registry_snapshot_insert(reg, &snap);
}

/* A one-file image under @state/bench-image. */
static int make_image(const char *state, char dir[PATH_MAX])
{
	char file[PATH_MAX + 16];
	snprintf(dir, PATH_MAX, "%s/bench-image", state);
	snprintf(file, sizeof(file), "%s/pages.img", dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	FILE *f = fopen(file, "w");
	if (!f)
		return -errno;
	for (int i = 0; i < 4096; i++)
		fputc(i & 0xff, f);
	return fclose(f) == 0 ? 0 : -EIO;
}

int main(int argc, char **argv)
{
	struct registry *reg = NULL;
	struct store *st = NULL;
	struct err e = {0};
	struct strbuf host = STRBUF_INIT;
	char path[PATH_MAX], img[PATH_MAX];
	if (argc != 5) {
		fprintf(stderr, "usage: scale_bench STATE_DIR STORE_URL NSNAP NSB\n");
		return 2;
	}
	int nsnap = atoi(argv[3]), nsb = atoi(argv[4]);
	snprintf(path, sizeof(path), "%s/registry.db", argv[1]);
	int rc = nsb > 0 && nsnap >= 0 ? host_id_init(argv[1], &e) : -EINVAL;
	if (rc == 0)
		rc = host_profile_json(RUNSC_VERSION, &host);
	if (rc == 0)
		rc = make_image(argv[1], img);
	if (rc == 0)
		rc = registry_open(path, &reg);
	if (rc == 0)
		rc = store_open(argv[2], NULL, &st, &e);
	int64_t t0 = wall_ms() - nsnap - nsb; /* one ms apart, all in the past */
	for (int i = 0; rc == 0 && i < nsb; i++)
		rc = add_sandbox(reg, i, t0 + i);
	for (int i = 0; rc == 0 && i < nsnap; i++)
		rc = add_snapshot(reg, st, img, i, nsb, strbuf_str(&host), t0 + nsb + i, &e);
	if (rc < 0)
		fprintf(stderr, "scale_bench: %s\n", e.msg[0] ? e.msg : strerror(-rc));
	store_close(st);
	registry_close(reg);
	strbuf_release(&host);
	return rc < 0 ? 1 : 0;
}

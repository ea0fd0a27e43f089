/* The top of the tree and images/ (docs/design.md, "The tree"). */
#include <errno.h>
#include <limits.h>

#include "fs/tree.h"
#include "lib/json.h"
#include "runtime/images.h"

static const char readme[] =
    "snapfs - gVisor sandboxes and their snapshots as files\n"
    "\n"
    "Every sandbox and every snapshot is a directory. Reading a file reports; writing a\n"
    "line to a control file acts. A write returns when the work is done (so `&&` chains\n"
    "and the exit status is the result) unless the line says `async`; an exec's write\n"
    "returns once the command started. An empty line or `1` means \"do it\". A refusal\n"
    "is an errno on the write and a sentence in the object's `error` file and in `errors`.\n"
    "\n"
    "  README      this text\n"
    "  version     snapfs version, runsc version, store URL\n"
    "  metrics     Prometheus text exposition\n"
    "  events      JSON lines, one per state change (tail -f follows it)\n"
    "  errors      JSON lines, one per refused or failed request\n"
    "  images/<name>/         digest, info.json\n"
    "  sandboxes/index        `<id> <status>` a line\n"
    "  sandboxes/new          write a spec: creates and starts a sandbox\n"
    "  sandboxes/<id>/        status info.json error image entrypoint env gpu start\n"
    "                         snapshot suspend resume terminate exec wait console usage\n"
    "                         snapshots/ parent\n"
    "                         memory cpus pids (limits: docs/limits.md)\n"
    "                         timeout autosnapshot\n"
    "                         ports (published ports: docs/network.md)\n"
    "                         network egress (docs/network.md)\n"
    "                         ps (the processes inside, as ps lists them)\n"
    "                         root -> .root/ (the sandbox's own files, read-write while it\n"
    "                         runs; a link, so grep -r and tar of the tree skip it)\n"
    "  (wait, in each sandbox and snapshot, blocks: no listing shows it, cat finds it)\n"
    "  snapshots/index        `<id> <status> <sandbox-id> <name>` a line (`-`: no name)\n"
    "  snapshots/by-name/     <name> -> ../<id>: the newest snapshot of each name\n"
    "  snapshots/<id>/        status info.json error progress fork delete wait\n"
    "                         restorable manifest.json source\n"
    "\n"
    "Sandbox states: created starting running snapshotting suspending suspended resuming\n"
    "terminating terminated failed. Snapshot states: pending in_progress completed failed.\n"
    "\n"
    "Examples (from the mount point):\n"
    "\n"
    "  # a sandbox from a spec; reading the same open file gives its id\n"
    "  exec 3<>sandboxes/new; echo '{\"image\": \"busybox\"}' >&3; read id <&3; exec 3>&-\n"
    "  printf 'image=busybox\\nentrypoint=sleep 1000\\nenv=A=1\\n\\n' > sandboxes/new\n"
    "  printf 'image=busybox\\nasync\\n\\n' > sandboxes/new   # async: return once accepted\n"
    "\n"
    "  # a sandbox set up step by step\n"
    "  mkdir sandboxes/web                         # state `created`\n"
    "  echo busybox > sandboxes/web/image\n"
    "  echo 'httpd -f -p 8080' > sandboxes/web/entrypoint\n"
    "  printf 'PORT=8080\\nMODE=dev\\n' > sandboxes/web/env   # the lines are the whole env\n"
    "  echo 0 > sandboxes/web/gpu\n"
    "  echo 512MiB > sandboxes/web/memory            # limits (512M, 0.5G too); 0: unlimited\n"
    "  echo 0.5 > sandboxes/web/cpus\n"
    "  echo 256 > sandboxes/web/pids\n"
    "  echo egress > sandboxes/web/network          # its own namespace, NAT out\n"
    "  printf 'deny 10.0.0.0/8\\n' > sandboxes/web/egress  # first match wins; any time\n"
    "  echo 1 > sandboxes/web/start\n"
    "\n"
    "  cat sandboxes/web/status                    # running\n"
    "  cat sandboxes/web/wait                      # blocks while it is in a transition\n"
    "  exec 3<>sandboxes/web/exec; echo 'ls /' >&3; cat <&3; exec 3>&-\n"
    "                      # the write starts it; cat waits for the output, then `exit N`\n"
    "  tail -f sandboxes/web/console               # the entrypoint's output, followed\n"
    "  cat sandboxes/web/usage                     # memory, cpu_seconds, pids while it runs\n"
    "\n"
    "  echo name=base > sandboxes/web/snapshot     # snapshot; it keeps running\n"
    "  cat sandboxes/web/snapshot                  # the newest snapshot's id\n"
    "  ls -l sandboxes/web/snapshots/              # one symlink per snapshot\n"
    "  echo 1 > sandboxes/web/suspend              # checkpoint and stop\n"
    "  echo 1 > sandboxes/web/resume               # back under the same id\n"
    "  echo '600 suspend' > sandboxes/web/timeout  # suspend it 600 s after each start,\n"
    "                                              # fork or resume (default: terminate)\n"
    "  cat sandboxes/web/timeout                   # the setting (600 suspend), or 0;\n"
    "                                              # the seconds left are in info.json\n"
    "  echo 0 > sandboxes/web/timeout              # no timeout (timeout=600 in a spec too)\n"
    "  echo 'every=60 keep=5' > sandboxes/web/autosnapshot  # a snapshot named auto-... a\n"
    "                                              # minute, the oldest beyond 5 deleted\n"
    "  echo 0 > sandboxes/web/autosnapshot         # stop taking them\n"
    "  echo 8080 > sandboxes/web/ports             # publish port 8080 on 127.0.0.1\n"
    "  echo '8080 18080' > sandboxes/web/ports     # ... on host port 18080 (EADDRINUSE: taken)\n"
    "  cat sandboxes/web/ports                     # `8080 127.0.0.1:NNNNN` a line\n"
    "  echo 'close 8080' > sandboxes/web/ports     # stop it; forks get new host ports\n"
    "  echo async > sandboxes/web/terminate        # stop for good, do not wait\n"
    "  rmdir sandboxes/web                         # once terminated or failed\n"
    "\n"
    "  cat snapshots/snap-0123456789abcdef/progress     # `DONE TOTAL` bytes\n"
    "  cat snapshots/snap-0123456789abcdef/wait         # blocks until completed or failed\n"
    "  cat snapshots/snap-0123456789abcdef/restorable   # `yes`, or why not\n"
    "  echo 1 > snapshots/snap-0123456789abcdef/fork    # restore into a new sandbox\n"
    "  echo 1 > snapshots/by-name/base/fork             # ... the newest one named base\n"
    "  echo memory=4G > snapshots/snap-0123456789abcdef/fork   # with more memory\n"
    "  echo timeout=60 > snapshots/snap-0123456789abcdef/fork   # ... whose timeout is 60 s\n"
    "  cat snapshots/snap-0123456789abcdef/fork         # the sandboxes forked from it\n"
    "  echo 1 > snapshots/snap-0123456789abcdef/delete  # or: rmdir snapshots/snap-...\n"
    "\n"
    "  tail -f events                              # follow state changes\n"
    "  fusermount3 -u MOUNTPOINT                   # unmount; sandboxes keep running\n"
    "\n"
    "Errno of a failed write: EINVAL bad input, EBUSY a state that forbids it, ENOENT\n"
    "gone, ENOSPC no room, EIO the runtime or the store failed, EFBIG a line over 4 KiB,\n"
    "EINTR the writer was interrupted (the work itself goes on), EACCES not allowed.\n"
    "\n"
    "Users: a sandbox is its creator's, a snapshot its sandbox's owner's; other users\n"
    "see neither (root sees all). Only root, or with --allow-group that group, creates.\n"
    "events and errors are root's.\n"
    "\n"
    "poll(2): `status` is always readable and adds POLLPRI once it differs from what the\n"
    "open file last read; `wait` becomes readable (POLLIN) once the object has settled.\n";

static int readme_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	(void)n, (void)who;
	strbuf_add(out, readme, sizeof(readme) - 1);
	return strbuf_error(out);
}

static int version_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	(void)n, (void)who;
	return ops_version_text(out);
}

static int metrics_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	(void)n;
	int rc = ops_metrics_text(who, out);
	if (rc < 0)
		return rc;
	strbuf_addf(out,
		    "# HELP snapfs_held_requests Requests answered later: waits, "
		    "writes whose work runs, reads of a running exec.\n"
		    "# TYPE snapfs_held_requests gauge\nsnapfs_held_requests %u\n",
		    pending_held());
	return strbuf_error(out);
}

/* --- images/<name>/ --------------------------------------------------- */

static int image_digest(const struct fs_node *n, char digest[DIGEST_MAX])
{
	struct err e = {0};
	int rc = images_digest(ops_images(), n->id, digest, &e);
	return rc == -ENOENT ? rc : rc < 0 ? -EIO : 0;
}

static int digest_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	(void)who;
	char digest[DIGEST_MAX];
	int rc = image_digest(n, digest);
	return rc < 0 ? rc : tree_line(out, digest);
}

static int image_info_read(const struct fs_node *n, const struct caller *who, struct strbuf *out)
{
	(void)who;
	char digest[DIGEST_MAX];
	char path[PATH_MAX];
	struct image_source src;
	struct err e = {0};
	int rc = images_info(ops_images(), n->id, digest, &src, &e);
	if (rc < 0)
		return rc == -ENOENT ? rc : -EIO;
	rc = images_path(ops_images(), n->id, path, sizeof(path));
	if (rc < 0)
		return rc;
	cJSON *info = cJSON_CreateObject();
	cJSON_AddStringToObject(info, "name", n->id);
	cJSON_AddStringToObject(info, "digest", digest);
	cJSON_AddStringToObject(info, "path", path);
	/* Where an imported image came from (snapfs-image import): only when known. */
	if (src.reference[0])
		cJSON_AddStringToObject(info, "reference", src.reference);
	if (src.index_digest[0])
		cJSON_AddStringToObject(info, "index_digest", src.index_digest);
	return json_print(out, info);
}

static const struct fs_entry image_files[] = {
    {"digest", S_IFREG | 0444, .read = digest_read},
    {"info.json", S_IFREG | 0444, .read = image_info_read},
};

static const struct fs_dir image_dir = FS_DIR(image_files);

static int images_list(const struct fs_node *dir, const struct caller *who,
		       int (*fn)(const char *name, void *arg), void *arg)
{
	(void)dir, (void)who; /* images are the host's: everybody sees them */
	return images_each(ops_images(), fn, arg);
}

static const struct fs_entry image_entry = {
    .mode = S_IFDIR | 0755,
    .scope = SCOPE_IMAGE,
    .flags = FS_OBJECT,
    .dir = &image_dir,
};

const struct fs_dir fs_images_dir = {
    .child = &image_entry,
    .each = images_list,
};

/* --- the root --------------------------------------------------------- */

/*
 * What every user may read: README, version (versions and the store's URL)
 * and metrics (counts, byte totals, and the ids and series of the reader's
 * own sandboxes alone: ops/ops_text.c). The journals name every
 * user's sandboxes and carry their messages, so they are root's alone; a
 * user follows its own objects through their status, error and wait files.
 * sandboxes/ and snapshots/ are writable by the group that may create
 * (mkdir, rmdir), sticky as /tmp: the kernel lets nobody else remove
 * another's entry, which ops/access.c refuses as well.
 */
static const struct fs_entry root_files[] = {
    {"README", S_IFREG | 0444, .read = readme_read},
    {"version", S_IFREG | 0444, .read = version_read},
    {"metrics", S_IFREG | 0444, .flags = FS_LIVE_TIME, .read = metrics_read},
    {"events", S_IFREG | 0400, .journal = ops_events_journal},
    {"errors", S_IFREG | 0400, .journal = ops_errors_journal},
    {"images", S_IFDIR | 0755, .dir = &fs_images_dir},
    {"sandboxes", S_IFDIR | 01775, .flags = FS_CREATORS | FS_SANDBOXES_TIME,
     .dir = &fs_sandboxes_dir},
    {"snapshots", S_IFDIR | 01775, .flags = FS_CREATORS | FS_SNAPSHOTS_TIME,
     .dir = &fs_snapshots_dir},
};

static const struct fs_dir root_dir = FS_DIR(root_files);

const struct fs_entry fs_root_entry = {"", S_IFDIR | 0755, .dir = &root_dir};

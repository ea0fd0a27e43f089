/*
 * runsc.h - the gVisor runsc driver: every runsc invocation snapfs makes.
 *
 * Each call spawns `runsc` (posix_spawn, argv array, never a shell) with the
 * global flags --root <runsc root> and, for run/restore,
 * --overlay2=root:memory --network=none. Standard input is /dev/null; a
 * detached sandbox's stdout and stderr go to a log file, never a pipe
 * (runsc keeps them open for the sandbox's lifetime). A short-lived command's
 * stderr is captured through a temporary file so a failure's message can
 * quote runsc's own last line.
 *
 * Errors: 0 on success; -ENOENT when the container does not exist; -EIO when
 * runsc fails, with @e saying which command failed and runsc's last stderr
 * line. Every function may be called from any thread.
 *
 * Container ids: runsc matches ids by prefix, so snapfs never passes a
 * sandbox name; runsc_new_container_id() makes a fixed-length id
 * ("snapfs-" + 24 hex digits) so no id is a prefix of another.
 */
#ifndef SNAPFS_RUNSC_H
#define SNAPFS_RUNSC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "backend/registry.h"
#include "lib/util.h"

struct runsc {
	char bin[4096];	   /* runsc binary (--runsc), default "runsc" from PATH */
	char root[4096];   /* runsc --root: <state>/runsc */
	char version[128]; /* first line of `runsc --version`, without "runsc version " */
	/* What runsc_probe_checkpoint() found; false until it runs. */
	bool checkpoint_direct; /* checkpoints that leave the sandbox running pass --direct */
	bool checkpoint_cuda;	/* checkpoint takes --cuda-checkpoint-path */
};

int runsc_init(struct runsc *rs, const char *bin, const char *root, struct err *e);

int runsc_new_container_id(char out[RUNTIME_ID_MAX]);

/*
 * Write an OCI bundle into @bundle_dir (created if missing): config.json
 * with root.path = @rootfs (absolute; writable only through the memory
 * overlay, so the image directory is never written), process args
 * ["/bin/sh","-c",@entrypoint], env PATH plus @env lines, cwd "/", a /proc
 * mount and a tmpfs /tmp, pid/ipc/uts/mount/network namespaces.
 */
int runsc_write_bundle(const char *bundle_dir, const char *rootfs, const char *entrypoint,
		       const char *env, struct err *e);

/*
 * The same with the host device nodes @devices (absolute paths, character
 * devices) in linux.devices, with their major and minor numbers and mode,
 * and allowed in linux.resources.devices: a GPU sandbox's NVIDIA devices
 * (runtime/gpu.h). A missing node is -ENODEV.
 */
int runsc_write_bundle_devices(const char *bundle_dir, const char *rootfs, const char *entrypoint,
			       const char *env, const char *const *devices, size_t ndevices,
			       struct err *e);

/*
 * Extra global flags for run and restore, a mask: a restore must be given
 * the flags of the run whose checkpoint it restores.
 */
#define RUNSC_NVPROXY 0x1u /* --nvproxy: the sandbox gets NVIDIA GPUs (docs/gpu.md) */

/* `runsc run --detach --bundle B CID`, stdio to @log_path. */
int runsc_run(const struct runsc *rs, const char *cid, const char *bundle, const char *log_path,
	      struct err *e);

/* The same with the RUNSC_* global @flags. */
int runsc_run_flags(const struct runsc *rs, unsigned flags, const char *cid, const char *bundle,
		    const char *log_path, struct err *e);

/* `runsc restore --detach --image-path IMG --bundle B CID`, stdio to @log_path. */
int runsc_restore(const struct runsc *rs, const char *cid, const char *bundle,
		  const char *image_dir, const char *log_path, struct err *e);
int runsc_restore_flags(const struct runsc *rs, unsigned flags, const char *cid, const char *bundle,
			const char *image_dir, const char *log_path, struct err *e);

/*
 * `runsc checkpoint --compression=none --image-path IMG [--leave-running] CID`.
 * Note: a failed checkpoint kills the sandbox even with leave_running.
 */
int runsc_checkpoint(const struct runsc *rs, const char *cid, const char *image_dir,
		     bool leave_running, struct err *e);
/*
 * The same, adding `--cuda-checkpoint-path=@cuda_checkpoint` when that is
 * not NULL: a runsc that has the flag (releases from 20260608) then
 * checkpoints the sandbox's CUDA processes itself (docs/gpu.md).
 */
int runsc_checkpoint_cuda(const struct runsc *rs, const char *cid, const char *image_dir,
			  bool leave_running, const char *cuda_checkpoint, struct err *e);

/* `runsc help SUBCOMMAND`: its output into *@text (caller frees). */
int runsc_help(const struct runsc *rs, const char *subcommand, char **text, struct err *e);
/* Does the `runsc help SUBCOMMAND` text @help list flag @flag (no dashes)? */
bool runsc_help_has_flag(const char *help, const char *flag);

/*
 * Ask `runsc help checkpoint` once, at start-up, and log the answers:
 * rs->checkpoint_cuda if it takes --cuda-checkpoint-path (docs/gpu.md);
 * rs->checkpoint_direct if it has --direct (O_DIRECT for the pages file) and
 * the filesystem of the directory @image_parent_fd (@image_parent, where
 * checkpoints are written) takes O_DIRECT writes; the probe's file is
 * created there with O_EXCL | O_NOFOLLOW and a random name. Written
 * through the page cache, the pages of a large sandbox cost the pause far
 * more, and far more unevenly, than the disk's own speed does
 * (docs/runsc-notes.md).
 */
void runsc_probe_checkpoint(struct runsc *rs, int image_parent_fd, const char *image_parent);

/*
 * `runsc exec CID /bin/sh -c CMDLINE`, stdout and stderr both to @out_fd.
 * *exit_code gets the command's exit status (128+N for a signal).
 */
int runsc_exec(const struct runsc *rs, const char *cid, const char *cmdline, int out_fd,
	       int *exit_code, struct err *e);
/*
 * The same with the command's stdin on @in_fd (-1: /dev/null). Every local
 * user reads runsc's command line (/proc/PID/cmdline): what is not for
 * them, a user's exec command, goes in through @in_fd instead.
 */
int runsc_exec_in(const struct runsc *rs, const char *cid, const char *cmdline, int in_fd,
		  int out_fd, int *exit_code, struct err *e);

int runsc_kill(const struct runsc *rs, const char *cid, int sig, struct err *e);
/* `runsc delete --force CID`; a missing container is 0. */
int runsc_delete(const struct runsc *rs, const char *cid, struct err *e);

/*
 * `runsc state CID`: @status gets runsc's word ("created", "running",
 * "stopped", "paused") and *pid the sandbox pid. -ENOENT if unknown.
 */
int runsc_state(const struct runsc *rs, const char *cid, char *status, size_t status_len,
		pid_t *pid, struct err *e);

#endif

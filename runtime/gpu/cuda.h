/*
 * cuda.h - a sandbox's CUDA processes around a checkpoint: who checkpoints
 * them, and NVIDIA's cuda-checkpoint driven by snapfs (the sequence and
 * its rules: docs/gpu.md). The host's GPUs are runtime/gpu/gpu.h's.
 *
 * runsc. A runsc whose checkpoint takes --cuda-checkpoint-path (releases
 * from 20260608) checkpoints and restores a GPU sandbox's CUDA processes
 * itself; runsc_probe_checkpoint() asks `runsc help checkpoint` once, at
 * start-up, and cuda_runsc_checkpoints() gives its answer.
 *
 * cuda-checkpoint. Otherwise snapfs drives NVIDIA's cuda-checkpoint through
 * `runsc exec`. The binary is the host's (--cuda-checkpoint, a struct
 * cuda_tool opened at start-up), never the image's: runsc exec --exec-fd
 * has the sentry load it from the host's fd, so nothing in the sandbox can
 * stand in for it, and each call is an exec of it with its argv, no shell
 * of the sandbox's in between. Every call has a deadline
 * (cuda_call_timeout_ms()) and at most OUTPUT_MAX bytes of its output are
 * taken. cuda_find() asks runsc for the sandbox's processes and lists the
 * CUDA ones (`--get-state --pid P` succeeds for them),
 * cuda_suspend() locks (`--action lock --timeout MS`) and then checkpoints
 * every one, and cuda_undo() restores and unlocks them, in the reverse
 * order, back to the state each had before. A struct cuda_procs remembers
 * both states of each process, so an undo after any failure touches only
 * what was done. The processes a checkpoint holds are recorded in its image
 * directory (GPU_RECORD_FILE), so a fork or resume knows which processes
 * to restore and unlock in the new sandbox.
 *
 * Errors: a negative errno; a failed cuda-checkpoint call is -EIO with @e
 * naming the step, the process and what cuda-checkpoint printed.
 * Threads: every function may be called from any thread.
 */
#ifndef SNAPFS_CUDA_H
#define SNAPFS_CUDA_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "lib/strbuf.h"
#include "lib/util.h"
#include "runtime/runsc/runsc.h"

/* The host's cuda-checkpoint: its name on PATH, and its argv[0] in the sandbox. */
#define GPU_TOOL_NAME "cuda-checkpoint"
/*
 * The image's: an image that ships it gets snapfs's sequence without a GPU
 * (the test double's hook), and a runsc that drives CUDA itself is given
 * this path in the sandbox.
 */
#define GPU_IMAGE_TOOL "/usr/bin/cuda-checkpoint"
/* Most processes of a sandbox cuda_find() asks, one exec each. */
#define GPU_FIND_MAX 256
/* Longest script a host tool may be (see struct cuda_tool). */
#define GPU_SCRIPT_MAX (64u << 10)
/* How long a lock waits for the CUDA work already submitted. */
#define GPU_LOCK_TIMEOUT_MS 10000
/* The CUDA processes of a checkpoint, in its image directory. */
#define GPU_RECORD_FILE "snapfs-cuda.json"

/* --- who drives CUDA ------------------------------------------------------ */

/* Does @rs's checkpoint take --cuda-checkpoint-path (runsc_probe_checkpoint())? */
bool cuda_runsc_checkpoints(const struct runsc *rs);

/* Who checkpoints a sandbox's CUDA processes. */
enum cuda_driver {
	CUDA_NONE,	  /* nobody: no GPU, no cuda-checkpoint in the image */
	CUDA_BY_RUNSC,	  /* runsc, with --cuda-checkpoint-path */
	CUDA_BY_SNAPFS,	  /* snapfs, through runsc exec */
	CUDA_UNAVAILABLE, /* a GPU sandbox whose image has no cuda-checkpoint */
};

/*
 * The rule: a GPU sandbox needs cuda-checkpoint on the host; runsc drives
 * it when it can, snapfs otherwise. A sandbox without GPU whose image ships
 * GPU_IMAGE_TOOL gets snapfs's sequence too, with the host's binary (that is
 * how the test double runs it without a GPU); runsc drives CUDA only under
 * --nvproxy.
 */
enum cuda_driver cuda_driver_for(bool gpu, bool image_has_tool, bool host_has_tool, bool runsc_can);
/* Does the image tree at @rootfs ship GPU_IMAGE_TOOL? */
bool cuda_image_has_tool(const char *rootfs);

/* --- cuda-checkpoint ------------------------------------------------------- */

/* cuda-checkpoint's process states (CUprocessState), and UNKNOWN for anything else. */
enum cuda_state {
	CUDA_RUNNING,
	CUDA_LOCKED,
	CUDA_CHECKPOINTED,
	CUDA_FAILED,
	CUDA_UNKNOWN,
};

#define CUDA_PROCS_MAX 64

struct cuda_proc {
	int pid;		/* in the sandbox's pid namespace */
	enum cuda_state before; /* when snapfs found it */
	enum cuda_state now;	/* as far as snapfs knows */
};

struct cuda_procs {
	size_t n;
	struct cuda_proc p[CUDA_PROCS_MAX];
};

const char *cuda_state_name(enum cuda_state s);
/* The first word of `--get-state` output; CUDA_UNKNOWN if it is none of the four. */
enum cuda_state cuda_state_parse(const char *text);

/*
 * The host's cuda-checkpoint, opened once. An ELF binary runs with `runsc
 * exec --exec-fd` (the dynamic loader and libraries it links are the
 * image's, as for any program in the sandbox). A script cannot run that
 * way (gVisor hands its interpreter a path it cannot open), so its text,
 * at most GPU_SCRIPT_MAX bytes, runs as `/bin/sh -c TEXT cuda-checkpoint
 * ARGS...` with the sandbox's shell: that is for the test double.
 */
struct cuda_tool {
	int fd;	      /* -1: the host has none */
	char *script; /* its text if it starts with "#!", else NULL */
};
/* Open @path; -ENOENT, -EINVAL (not a regular file), -EFBIG (a script too long). */
int cuda_tool_open(const char *path, struct cuda_tool *tool);
void cuda_tool_close(struct cuda_tool *tool);

/*
 * A cuda-checkpoint call's deadline: rs->timeout_ms, plus the lock's own
 * timeout for a lock; a checkpoint or restore moves all of a process's GPU
 * memory, so it gets GPU_MOVE_FACTOR times that.
 */
#define GPU_MOVE_FACTOR 10
int64_t cuda_call_timeout_ms(const struct runsc *rs, const char *action);

/* A sandbox as cuda-checkpoint runs in it, and what snapfs is doing, for messages. */
struct cuda_target {
	const struct runsc *rs;
	const struct cuda_tool *tool; /* the host's cuda-checkpoint */
	const char *cid;	      /* runsc container id */
	const char *what; /* "snapshot sandbox web": messages read "cannot <what>: ..." */
};

/*
 * List the CUDA processes of @t into @out. A process in state failed or
 * in an unknown state is refused (-EBUSY): the gVisor checkpoint of a
 * process that still holds GPU state fails and takes the sandbox with it.
 */
int cuda_find(const struct cuda_target *t, struct cuda_procs *out, struct err *e);
/*
 * Lock every running process (with GPU_LOCK_TIMEOUT_MS), then checkpoint
 * every locked one. On a failure everything done is undone (cuda_undo) and
 * @e names the step, the process and cuda-checkpoint's output, then what the
 * undo left.
 */
int cuda_suspend(const struct cuda_target *t, struct cuda_procs *procs, struct err *e);
/*
 * Bring every process back to its state before: restore what is
 * checkpointed, then unlock what snapfs locked, both in reverse order. A
 * failed call does not stop the others; a second pass retries what is not
 * back. Returns the first failure (in @e, with what is left appended).
 */
int cuda_undo(const struct cuda_target *t, struct cuda_procs *procs, struct err *e);
/*
 * After the failure @why (a sentence, without the "cannot <what>" start)
 * with errno @code: undo as cuda_undo() does, and say it all in @e:
 * "cannot <what>: <why>; rolled back: <outcome>" or "...; rollback failed:
 * <first failure>; <outcome>". Returns -@code.
 */
int cuda_rollback(const struct cuda_target *t, struct cuda_procs *procs, int code, const char *why,
		  struct err *e);
/* Ask every process of @procs its state now (a process that is gone: unknown). */
void cuda_refresh(const struct cuda_target *t, struct cuda_procs *procs);
/*
 * Append to @out where the processes stand: "CUDA processes 1 12 run unlocked again", ... A
 * sentence for a message: a failure in @out leaves it shorter, and its caller goes on.
 */
void cuda_outcome(const struct cuda_procs *procs, struct strbuf *out);

/* The record of a checkpoint's CUDA processes, GPU_RECORD_FILE in @image_dir. */
int cuda_record_write(const char *image_dir, const struct cuda_procs *procs, struct err *e);
/* -ENOENT when the checkpoint has none (no CUDA processes, or runsc drove them). */
int cuda_record_read(const char *image_dir, struct cuda_procs *procs, struct err *e);
/* The processes as JSON [{"pid","before","at_checkpoint"}], and back. */
cJSON *cuda_procs_json(const struct cuda_procs *procs);
int cuda_procs_from_json(const cJSON *arr, struct cuda_procs *out);
/* Add "cuda_processes" to a manifest @meta when @image_dir holds a record. */
void cuda_manifest_meta(cJSON *meta, const char *image_dir);

#endif

#include "runtime/gpu/cuda.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define OUTPUT_MAX (64u << 10) /* most of a cuda-checkpoint call's output the host takes */
#define QUOTE_MAX 300	       /* most of cuda-checkpoint's output quoted in a message */
#define RECORD_MAX (1u << 20)

/* --- who drives CUDA --------------------------------------------------------- */

bool cuda_runsc_checkpoints(const struct runsc *rs)
{
	return rs->checkpoint_cuda;
}

enum cuda_driver cuda_driver_for(bool gpu, bool image_has_tool, bool host_has_tool, bool runsc_can)
{
	if (gpu && runsc_can && image_has_tool)
		return CUDA_BY_RUNSC;
	if (gpu)
		return host_has_tool ? CUDA_BY_SNAPFS : CUDA_UNAVAILABLE;
	return image_has_tool && host_has_tool ? CUDA_BY_SNAPFS : CUDA_NONE;
}

bool cuda_image_has_tool(const char *rootfs)
{
	char path[PATH_MAX];
	struct stat st;
	if (xsnprintf(path, sizeof(path), "%s%s", rootfs, GPU_IMAGE_TOOL) < 0 ||
	    lstat(path, &st) < 0)
		return false;
	return S_ISREG(st.st_mode) || S_ISLNK(st.st_mode);
}

int64_t cuda_call_timeout_ms(const struct runsc *rs, const char *action)
{
	if (!strcmp(action, "lock"))
		return rs->timeout_ms + GPU_LOCK_TIMEOUT_MS;
	if (!strcmp(action, "checkpoint") || !strcmp(action, "restore"))
		return rs->timeout_ms * GPU_MOVE_FACTOR;
	return rs->timeout_ms;
}

/* --- cuda-checkpoint: states and parsing ------------------------------------ */

static const char *const state_names[] = {
    [CUDA_RUNNING] = "running", [CUDA_LOCKED] = "locked",   [CUDA_CHECKPOINTED] = "checkpointed",
    [CUDA_FAILED] = "failed",	[CUDA_UNKNOWN] = "unknown",
};

const char *cuda_state_name(enum cuda_state s)
{
	return (size_t)s < ARRAY_SIZE(state_names) ? state_names[s] : "unknown";
}

enum cuda_state cuda_state_parse(const char *text)
{
	const char *w = text + strspn(text, " \t\r\n");
	size_t n = strcspn(w, " \t\r\n");
	for (size_t s = 0; s < CUDA_UNKNOWN; s++)
		if (n == strlen(state_names[s]) && strncasecmp(w, state_names[s], n) == 0)
			return (enum cuda_state)s;
	return CUDA_UNKNOWN;
}

/* --- cuda-checkpoint: running it in the sandbox ----------------------------- */

int cuda_tool_open(const char *path, struct cuda_tool *tool)
{
	struct stat st;
	char head[2];
	tool->script = NULL;
	tool->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (tool->fd < 0)
		return -errno;
	int rc = fstat(tool->fd, &st) < 0 ? -errno : S_ISREG(st.st_mode) ? 0 : -EINVAL;
	if (rc == 0 && pread(tool->fd, head, 2, 0) == 2 && head[0] == '#' && head[1] == '!') {
		size_t len = (size_t)st.st_size;
		tool->script = st.st_size <= (off_t)GPU_SCRIPT_MAX ? malloc(len + 1) : NULL;
		if (st.st_size > (off_t)GPU_SCRIPT_MAX)
			rc = -EFBIG;
		else if (!tool->script)
			rc = -ENOMEM;
		else if (pread(tool->fd, tool->script, len, 0) != (ssize_t)len)
			rc = -EIO;
		else
			tool->script[len] = '\0';
	}
	if (rc < 0)
		cuda_tool_close(tool);
	return rc;
}

void cuda_tool_close(struct cuda_tool *tool)
{
	closep(&tool->fd);
	tool->fd = -1;
	free(tool->script);
	tool->script = NULL;
}

#define TOOL_ARGV_MAX 16

/*
 * Run the host's cuda-checkpoint with @args (NULL-terminated) in the
 * sandbox; at most OUTPUT_MAX bytes of its output into *@output. Past
 * @timeout_ms, or past OUTPUT_MAX, it is killed and fails.
 */
static int tool_run(const struct cuda_target *t, const char *const *args, int64_t timeout_ms,
		    char **output, int *code, struct err *e)
{
	_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
	const char *argv[TOOL_ARGV_MAX];
	size_t n = 0;
	if (!t->tool || t->tool->fd < 0)
		return err_set(e, ENOENT,
			       "this host has no cuda-checkpoint (--cuda-checkpoint PATH)");
	if (t->tool->script) {
		argv[n++] = "/bin/sh";
		argv[n++] = "-c";
		argv[n++] = t->tool->script;
	}
	argv[n++] = GPU_TOOL_NAME;
	for (size_t i = 0; args[i] && n + 1 < TOOL_ARGV_MAX; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	struct runsc_exec x = {.argv = argv,
			       .exec_fd = t->tool->script ? 0 : t->tool->fd,
			       .timeout_ms = timeout_ms,
			       .out = &out,
			       .cap = OUTPUT_MAX};
	int rc = runsc_exec(t->rs, t->cid, &x, e);
	if (rc < 0)
		return rc;
	if (x.timed_out)
		return err_set(e, EIO, "it timed out after %lld s and was killed",
			       (long long)(timeout_ms / 1000));
	if (x.truncated)
		return err_set(e, EIO, "it wrote more than %u bytes and was killed", OUTPUT_MAX);
	*code = x.exit_code;
	*output = strdup(strbuf_str(&out));
	return *output ? 0 : err_set(e, ENOMEM, "out of memory");
}

/* @text on one line, at most QUOTE_MAX bytes: what a message quotes. */
static void quote(const char *text, char *out, size_t len)
{
	size_t o = 0;
	const char *p = text + strspn(text, " \t\r\n");
	while (*p && o + 4 < len && o < QUOTE_MAX) {
		if (*p == '\n' || *p == '\r') {
			p += strspn(p, " \t\r\n");
			if (*p)
				o += (size_t)snprintf(out + o, len - o, " / ");
			continue;
		}
		out[o++] = *p++;
	}
	out[o] = '\0';
	rstrip(out);
	if (!out[0])
		snprintf(out, len, "(no output)");
}

/*
 * `--get-state` of @pid into *@state: 0 for a CUDA process, 1 for any other
 * (cuda-checkpoint fails for those), -errno when it could not run.
 */
static int ask_state(const struct cuda_target *t, int pid, enum cuda_state *state, struct err *e)
{
	char pidarg[16];
	_cleanup_free_ char *out = NULL;
	int code = -1;
	snprintf(pidarg, sizeof(pidarg), "%d", pid);
	const char *args[] = {"--get-state", "--pid", pidarg, NULL};
	int rc = tool_run(t, args, cuda_call_timeout_ms(t->rs, "get-state"), &out, &code, e);
	if (rc < 0)
		return rc;
	*state = code == 0 ? cuda_state_parse(out) : CUDA_UNKNOWN;
	return code == 0 ? 0 : 1;
}

static enum cuda_state get_state(const struct cuda_target *t, int pid)
{
	enum cuda_state state = CUDA_UNKNOWN;
	return ask_state(t, pid, &state, NULL) == 0 ? state : CUDA_UNKNOWN;
}

enum cuda_step { STEP_LOCK, STEP_CHECKPOINT, STEP_RESTORE, STEP_UNLOCK };

static const struct {
	const char *action;
	enum cuda_state from, to;
} steps[] = {
    [STEP_LOCK] = {"lock", CUDA_RUNNING, CUDA_LOCKED},
    [STEP_CHECKPOINT] = {"checkpoint", CUDA_LOCKED, CUDA_CHECKPOINTED},
    [STEP_RESTORE] = {"restore", CUDA_CHECKPOINTED, CUDA_LOCKED},
    [STEP_UNLOCK] = {"unlock", CUDA_LOCKED, CUDA_RUNNING},
};

/*
 * One `cuda-checkpoint --action` on @c. A failure's sentence (without the
 * "cannot <what>" prefix) goes to @e; the process's state is then asked
 * again, since a failed action may have moved it.
 */
static int run_step(const struct cuda_target *t, struct cuda_proc *c, enum cuda_step s,
		    struct err *e)
{
	char pidarg[16], ms[16], timeout[64] = "", said[QUOTE_MAX + 8];
	_cleanup_free_ char *out = NULL;
	int code = -1;
	snprintf(pidarg, sizeof(pidarg), "%d", c->pid);
	snprintf(ms, sizeof(ms), "%d", GPU_LOCK_TIMEOUT_MS);
	const char *args[] = {
	    "--action", steps[s].action, "--pid", pidarg, s == STEP_LOCK ? "--timeout" : NULL, ms,
	    NULL};
	int rc = tool_run(t, args, cuda_call_timeout_ms(t->rs, steps[s].action), &out, &code, e);
	if (rc < 0)
		return err_set(e, -rc, "cuda-checkpoint %s of process %d could not run: %s",
			       steps[s].action, c->pid, e ? e->msg : strerror(-rc));
	if (code == 0) {
		c->now = steps[s].to;
		return 0;
	}
	quote(out, said, sizeof(said));
	if (s == STEP_LOCK)
		snprintf(timeout, sizeof(timeout), ", lock timeout %d ms", GPU_LOCK_TIMEOUT_MS);
	err_set(e, EIO, "cuda-checkpoint %s of process %d failed (exit %d%s): %s", steps[s].action,
		c->pid, code, timeout, said);
	c->now = get_state(t, c->pid);
	return -EIO;
}

void cuda_refresh(const struct cuda_target *t, struct cuda_procs *procs)
{
	for (size_t i = 0; i < procs->n; i++)
		procs->p[i].now = get_state(t, procs->p[i].pid);
}

/* Step @s for every process in its from-state, in order; stops at the first failure. */
static int run_steps(const struct cuda_target *t, struct cuda_procs *procs, enum cuda_step s,
		     struct err *e)
{
	for (size_t i = 0; i < procs->n; i++) {
		if (procs->p[i].now != steps[s].from)
			continue;
		int rc = run_step(t, &procs->p[i], s, e);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Should @c be moved back by step @s? Only what snapfs moved, never past its state before. */
static bool needs(const struct cuda_proc *c, enum cuda_step s)
{
	if (s == STEP_RESTORE)
		return c->now == CUDA_CHECKPOINTED && c->before != CUDA_CHECKPOINTED;
	return c->now == CUDA_LOCKED && c->before == CUDA_RUNNING;
}

/* One pass of restore, then unlock, in reverse order; the first failure into @e. */
static int undo_pass(const struct cuda_target *t, struct cuda_procs *procs, struct err *e)
{
	static const enum cuda_step order[] = {STEP_RESTORE, STEP_UNLOCK};
	int first = 0;
	for (size_t k = 0; k < ARRAY_SIZE(order); k++) {
		for (size_t i = procs->n; i-- > 0;) {
			struct err se = {0};
			if (!needs(&procs->p[i], order[k]))
				continue;
			int rc = run_step(t, &procs->p[i], order[k], &se);
			if (rc < 0 && !first) {
				first = rc;
				if (e)
					*e = se;
			}
		}
	}
	return first;
}

/* Undo, and a second pass for whatever the first left; the first failure into @e. */
static int undo_twice(const struct cuda_target *t, struct cuda_procs *procs, struct err *e)
{
	int rc = undo_pass(t, procs, e);
	if (rc < 0)
		undo_pass(t, procs, NULL);
	return rc;
}

static bool all_back(const struct cuda_procs *procs)
{
	for (size_t i = 0; i < procs->n; i++)
		if (procs->p[i].now != procs->p[i].before)
			return false;
	return true;
}

void cuda_outcome(const struct cuda_procs *procs, struct strbuf *out)
{
	bool left = !all_back(procs);
	bool first = true;
	strbuf_adds(out, left ? "CUDA processes not back:" : "CUDA processes back as before:");
	for (size_t i = 0; i < procs->n; i++) {
		const struct cuda_proc *c = &procs->p[i];
		if (left && c->now == c->before)
			continue;
		strbuf_addf(out, "%s %d %s", first ? "" : ",", c->pid, cuda_state_name(c->now));
		if (left)
			strbuf_addf(out, " (was %s)", cuda_state_name(c->before));
		first = false;
	}
}

/* --- cuda-checkpoint: the public sequence ----------------------------------- */

/*
 * Every process of the sandbox, as runsc reports them (not the sandbox's
 * own /proc), asked for its state with the host's tool; a non-CUDA process
 * makes cuda-checkpoint fail and is skipped. One exec per process, so a
 * sandbox with more than GPU_FIND_MAX is refused.
 */
int cuda_find(const struct cuda_target *t, struct cuda_procs *out, struct err *e)
{
	int pids[GPU_FIND_MAX];
	size_t n = 0;
	memset(out, 0, sizeof(*out));
	int rc = runsc_ps(t->rs, t->cid, pids, ARRAY_SIZE(pids), &n, e);
	if (rc < 0)
		return err_set(e, -rc, "cannot %s: cannot list its processes: %s", t->what,
			       e ? e->msg : strerror(-rc));
	for (size_t i = 0; i < n; i++) {
		enum cuda_state state;
		rc = ask_state(t, pids[i], &state, e);
		if (rc < 0)
			return err_set(e, -rc,
				       "cannot %s: cannot ask process %d for its CUDA state: %s",
				       t->what, pids[i], e ? e->msg : strerror(-rc));
		if (rc > 0)
			continue;
		if (out->n == CUDA_PROCS_MAX)
			return err_set(e, E2BIG, "cannot %s: it has more than %d CUDA processes",
				       t->what, CUDA_PROCS_MAX);
		out->p[out->n++] = (struct cuda_proc){pids[i], state, state};
		if (state == CUDA_FAILED || state == CUDA_UNKNOWN)
			return err_set(e, EBUSY,
				       "cannot %s: CUDA process %d is in state %s, which "
				       "cuda-checkpoint cannot checkpoint",
				       t->what, pids[i], cuda_state_name(state));
	}
	return 0;
}

int cuda_rollback(const struct cuda_target *t, struct cuda_procs *procs, int code, const char *why,
		  struct err *e)
{
	struct err undo = {0};
	_cleanup_strbuf_ struct strbuf outcome = STRBUF_INIT;
	int urc = undo_twice(t, procs, &undo);
	const char *how = urc < 0 ? "rollback failed: " : "rolled back: ";
	cuda_outcome(procs, &outcome);
	if (urc == 0 && !all_back(procs))
		how = "rollback incomplete: ";
	return err_set(e, code, "cannot %s: %s; %s%s%s%s", t->what, why, how,
		       urc < 0 ? undo.msg : "", urc < 0 ? "; " : "", strbuf_str(&outcome));
}

int cuda_suspend(const struct cuda_target *t, struct cuda_procs *procs, struct err *e)
{
	struct err step = {0};
	int rc = run_steps(t, procs, STEP_LOCK, &step);
	if (rc == 0)
		rc = run_steps(t, procs, STEP_CHECKPOINT, &step);
	if (rc == 0)
		return 0;
	return cuda_rollback(t, procs, -rc, step.msg, e);
}

int cuda_undo(const struct cuda_target *t, struct cuda_procs *procs, struct err *e)
{
	struct err first = {0};
	_cleanup_strbuf_ struct strbuf outcome = STRBUF_INIT;
	int rc = undo_twice(t, procs, &first);
	if (rc == 0)
		return 0;
	cuda_outcome(procs, &outcome);
	return err_set(e, -rc, "cannot %s: %s; retried: %s", t->what, first.msg,
		       strbuf_str(&outcome));
}

/* --- the record ------------------------------------------------------------- */

cJSON *cuda_procs_json(const struct cuda_procs *procs)
{
	cJSON *arr = cJSON_CreateArray();
	for (size_t i = 0; arr && i < procs->n; i++) {
		cJSON *o = cJSON_CreateObject();
		if (!o || !cJSON_AddItemToArray(arr, o) ||
		    !cJSON_AddNumberToObject(o, "pid", procs->p[i].pid) ||
		    !cJSON_AddStringToObject(o, "before", cuda_state_name(procs->p[i].before)) ||
		    !cJSON_AddStringToObject(o, "at_checkpoint",
					     cuda_state_name(procs->p[i].now))) {
			cJSON_Delete(arr);
			return NULL;
		}
	}
	return arr;
}

int cuda_procs_from_json(const cJSON *arr, struct cuda_procs *out)
{
	const cJSON *o;
	memset(out, 0, sizeof(*out));
	if (!cJSON_IsArray(arr))
		return -EINVAL;
	cJSON_ArrayForEach(o, arr)
	{
		const cJSON *pid = cJSON_GetObjectItemCaseSensitive(o, "pid");
		const cJSON *before = cJSON_GetObjectItemCaseSensitive(o, "before");
		const cJSON *at = cJSON_GetObjectItemCaseSensitive(o, "at_checkpoint");
		if (!cJSON_IsNumber(pid) || pid->valuedouble < 1 || pid->valuedouble > INT_MAX ||
		    !cJSON_IsString(before) || !cJSON_IsString(at))
			return -EINVAL;
		if (out->n == CUDA_PROCS_MAX)
			return -E2BIG;
		struct cuda_proc *c = &out->p[out->n++];
		c->pid = (int)pid->valuedouble;
		c->before = cuda_state_parse(before->valuestring);
		c->now = cuda_state_parse(at->valuestring);
	}
	return 0;
}

static int record_path(const char *image_dir, char *out, size_t len)
{
	return xsnprintf(out, len, "%s/%s", image_dir, GPU_RECORD_FILE) < 0 ? -ENAMETOOLONG : 0;
}

int cuda_record_write(const char *image_dir, const struct cuda_procs *procs, struct err *e)
{
	char path[PATH_MAX];
	cJSON *rec = cJSON_CreateObject();
	cJSON *arr = cuda_procs_json(procs);
	_cleanup_free_ char *text = NULL;
	bool ok = rec && arr && cJSON_AddNumberToObject(rec, "format", 1) &&
		  cJSON_AddStringToObject(rec, "cuda_checkpoint", "host") &&
		  cJSON_AddItemToObject(rec, "processes", arr);
	if (!ok)
		cJSON_Delete(arr);
	text = ok ? cJSON_Print(rec) : NULL;
	cJSON_Delete(rec);
	if (!text)
		return err_set(e, ENOMEM, "cannot record the CUDA processes: out of memory");
	int rc = record_path(image_dir, path, sizeof(path));
	if (rc == 0)
		rc = write_file_durable(path, text, strlen(text));
	if (rc < 0)
		return err_set(e, -rc, "cannot write %s: %s", path, strerror(-rc));
	return 0;
}

int cuda_record_read(const char *image_dir, struct cuda_procs *procs, struct err *e)
{
	char path[PATH_MAX];
	_cleanup_free_ char *text = NULL;
	size_t len;
	memset(procs, 0, sizeof(*procs));
	int rc = record_path(image_dir, path, sizeof(path));
	if (rc == 0)
		rc = read_file(path, &text, &len, RECORD_MAX);
	if (rc == -ENOENT)
		return rc;
	if (rc < 0)
		return err_set(e, -rc, "cannot read %s: %s", path, strerror(-rc));
	cJSON *rec = cJSON_Parse(text);
	rc = rec ? cuda_procs_from_json(cJSON_GetObjectItemCaseSensitive(rec, "processes"), procs)
		 : -EINVAL;
	cJSON_Delete(rec);
	if (rc < 0)
		return err_set(e, EIO, "%s is not a record of CUDA processes", path);
	return 0;
}

void cuda_manifest_meta(cJSON *meta, const char *image_dir)
{
	struct cuda_procs procs;
	if (cuda_record_read(image_dir, &procs, NULL) < 0)
		return;
	cJSON *arr = cuda_procs_json(&procs);
	if (arr && !cJSON_AddItemToObject(meta, "cuda_processes", arr))
		cJSON_Delete(arr);
}

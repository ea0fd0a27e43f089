/*
 * ops_exec.c - exec in a running sandbox: the command's detour through a
 * file in the sandbox, its output's caps, and its deadline.
 */
#include "ops/ops_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/strbuf.h"

/*
 * Longest exec output the host takes: the exec that fetches it is killed
 * there, whatever the sandbox makes it (docs/security.md).
 */
#define EXEC_OUTPUT_MAX (1u << 20)
/* The exit line of a command killed at its deadline, as timeout(1) has it. */
#define EXEC_TIMED_OUT_CODE 124
/* The exit line of a command whose sandbox was terminated under it: SIGKILL. */
#define EXEC_TERMINATED_CODE 137
/* The exec's stdin, its command, once written: no write, growth or shrink, for good. */
#define EXEC_STDIN_SEALS (F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL)

/* --- exec ------------------------------------------------------------------ */

/*
 * Kill process @pid of the sandbox and its process group: runsc exec makes
 * the exec'd process lead a group of its own in the sandbox, so the group
 * takes the command's children along. The group kill runs through the
 * sandbox's shell (only the sandbox is hurt if that lies); the leader also
 * gets runsc's own kill.
 */
static void kill_in_sandbox(const char *runtime_id, int pid)
{
	char cmd[96];
	_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
	if (pid <= 0)
		return;
	snprintf(cmd, sizeof(cmd), "kill -KILL -- -%d %d 2>/dev/null; exit 0", pid, pid);
	struct runsc_exec x = {.cmdline = cmd, .out = &out, .cap = 4096};
	runsc_exec(&ops.runsc, runtime_id, &x, NULL);
	runsc_kill_pid(&ops.runsc, runtime_id, pid, SIGKILL, NULL);
}

/* The notes that end an exec's output, then its exit line. */
static void exec_result(const struct runsc_exec *run, const struct runsc_exec *get,
			struct strbuf *out)
{
	/* Killed by snapfs for its output (only a hostile sandbox gets there): as a SIGKILL. */
	int code = run->exit_code >= 0 ? run->exit_code : EXEC_TERMINATED_CODE;
	if (out->len && out->buf[out->len - 1] != '\n')
		strbuf_adds(out, "\n");
	if (run->truncated || get->truncated)
		strbuf_addf(out, "[snapfs: output truncated at %u bytes]\n", EXEC_OUTPUT_MAX);
	if (get->timed_out)
		strbuf_addf(out, "[snapfs: reading the output timed out after %lld s]\n",
			    (long long)(ops.runsc.timeout_ms / 1000));
	/*
	 * What came back is then not the command's output (runsc's words, or
	 * nothing: the sandbox may have ended meanwhile): say so. The exit line
	 * stays the command's own.
	 */
	if (get->exit_code != 0 && !get->timed_out && !get->truncated)
		strbuf_addf(out, "[snapfs: reading the output back failed (exit %d)]\n",
			    get->exit_code);
	if (run->timed_out) {
		strbuf_addf(out, "[snapfs: timed out after %lld s (--exec-timeout): killed]\n",
			    (long long)(ops.runsc.exec_timeout_ms / 1000));
		code = EXEC_TIMED_OUT_CODE;
	}
	strbuf_addf(out, "exit %d\n", code);
}

/*
 * Read the command's output file back into @out, then remove it. Neither
 * step forks inside the sandbox: each is a process runsc exec makes itself
 * (cat FILE, rm -f FILE, no shell), which the sandbox's RLIMIT_NPROC does
 * not refuse, so a command that left the sandbox at its pids limit still
 * gets its output back (docs/runsc-notes.md). runsc resolves a bare name
 * through the container's PATH, as the shell of the old fetch did: an image
 * with cat elsewhere than /bin works. Removed after the read, however the
 * read ended, a failed one too: else it stays in the sandbox's tmpfs.
 */
static int fetch_output(const char *runtime_id, const char *file, struct runsc_exec *get,
			struct strbuf *out, struct err *e)
{
	const char *cat[] = {"cat", file, NULL};
	const char *rm[] = {"rm", "-f", file, NULL};
	*get = (struct runsc_exec){.argv = cat, .out = out, .cap = EXEC_OUTPUT_MAX};
	int rc = runsc_exec(&ops.runsc, runtime_id, get, e);
	if (rc == 0 && (get->timed_out || get->truncated))
		kill_in_sandbox(runtime_id, get->pid);
	_cleanup_strbuf_ struct strbuf junk = STRBUF_INIT;
	struct runsc_exec gone = {.argv = rm, .out = &junk, .cap = 4096};
	runsc_exec(&ops.runsc, runtime_id, &gone, NULL);
	return rc;
}

/*
 * After a failed runsc exec: if sandbox @sb ended under the exec (the host's
 * OOM killer ended its sentry, its entrypoint exited), the answer is the
 * sentence its `error` got, in place of what came back (runsc's words about
 * a lost connection), and exit line @code: a SIGKILL's where the command
 * itself was cut off, the command's own where it ended and only the fetch
 * of its output found the sandbox gone (`touch /tmp/stop` that ends the
 * entrypoint exits 0).
 */
static bool exec_ended(const struct sandbox *sb, int code, struct strbuf *out)
{
	char why[MESSAGE_MAX];
	if (!sandbox_ended_under(sb->id, sb->created_at, why, sizeof(why)))
		return false;
	strbuf_reset(out);
	if (code == EXEC_TERMINATED_CODE)
		strbuf_addf(out, "[snapfs: %s]\nexit %d\n", why, code);
	else
		strbuf_addf(out, "[snapfs: the output could not be read back: %s]\nexit %d\n", why,
			    code);
	return true;
}

/*
 * Why exec output takes a detour through a file inside the sandbox: a
 * process holding the host descriptors that `runsc exec` hands it makes any
 * checkpoint taken meanwhile unrestorable ("no host FD available"). So the
 * command first points its stdio at a file in the sandbox's /tmp, and a
 * second exec reads that file back once it ended (fetch_output()). A
 * snapshot taken while the command runs then restores fine, without the
 * command (see docs/runsc-notes.md).
 *
 * The sandbox controls that file, /bin/sh and cat: the fetch's output
 * comes back through a pipe that runsc_exec() stops reading at
 * EXEC_OUTPUT_MAX, killing the fetch there, so nothing it does reaches the
 * host's disk or memory beyond that.
 *
 * The command itself comes in on stdin, read before anything else, and not
 * on runsc's command line, which every local user can read in /proc.
 *
 * runsc's own failures exit 128 (a command may too): then, and when the
 * fetch failed, exec_ended() asks whether the sandbox ended meanwhile.
 */
/*
 * Through the sandbox's agent (ops_agent.c): one request on a channel that
 * is already open, the output streamed back as the command writes it, no
 * process of runsc's per call. -ENOTCONN when there is no agent to ask
 * (none installed, or it would not start): then the slow way below.
 */
static int exec_by_agent(const struct sandbox *sb, const char *cmdline, struct exec_stream *st)
{
	struct err why = {0};
	struct strbuf *out = st->out;
	int rc = ops_agent_exec(sb, cmdline, st, &why);
	if (rc == -ENOTCONN)
		return rc;
	if (out->len && out->buf[out->len - 1] != '\n')
		strbuf_adds(out, "\n");
	if (rc < 0) {
		/* The agent died under it (the sandbox ended, or killed it): as a SIGKILL. */
		if (!exec_ended(sb, EXEC_TERMINATED_CODE, out))
			strbuf_addf(out, "[snapfs: %s]\nexit %d\n", why.msg, EXEC_TERMINATED_CODE);
		return 0;
	}
	if (st->truncated)
		strbuf_addf(out, "[snapfs: output truncated at %u bytes]\n", EXEC_OUTPUT_MAX);
	if (st->timed_out) {
		strbuf_addf(out, "[snapfs: timed out after %lld s (--exec-timeout): killed]\n",
			    (long long)(ops.runsc.exec_timeout_ms / 1000));
		st->code = EXEC_TIMED_OUT_CODE;
	}
	strbuf_addf(out, "exit %d\n", st->code);
	return 0;
}

/* The slow way: the command in a `runsc exec` of its own, its output in a file read back after. */
static int exec_by_runsc(const struct sandbox *sb, const char *cmdline, struct exec_stream *st,
			 struct err *e)
{
	struct strbuf *out = st->out;
	strbuf_reset(out);
	char hex[17], file[64], wrapped[192];
	int rc = random_hex(hex, 16);
	if (rc < 0)
		return err_set(e, -rc, "cannot name the exec output: %s", strerror(-rc));
	snprintf(file, sizeof(file), "/tmp/.snapfs-exec-%s", hex);
	snprintf(
	    wrapped, sizeof(wrapped),
	    "snapfs_cmd=$(cat); exec </dev/null >%s 2>&1; eval \"unset snapfs_cmd; $snapfs_cmd\"",
	    file);
	_cleanup_close_ int in = memfd_create("snapfs-exec", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	rc = in < 0 ? -errno : write_all(in, cmdline, strlen(cmdline));
	if (rc == 0 && lseek(in, 0, SEEK_SET) < 0)
		rc = -errno;
	/*
	 * Sealed: the sandbox gets this fd read-write (a memfd is), and its
	 * /bin/sh could otherwise grow it without bound in host memory.
	 */
	if (rc == 0 && fcntl(in, F_ADD_SEALS, EXEC_STDIN_SEALS) < 0)
		rc = -errno;
	if (rc < 0)
		return err_set(e, -rc, "cannot hand the exec its command: %s", strerror(-rc));
	struct runsc_exec run = {.cmdline = wrapped,
				 .stdin_fd = in,
				 .timeout_ms = ops.runsc.exec_timeout_ms,
				 .out = out,
				 .cap = EXEC_OUTPUT_MAX};
	struct runsc_exec get = {0};
	rc = runsc_exec(&ops.runsc, sb->runtime_id, &run, e);
	if (rc == 0 && (run.timed_out || run.truncated))
		kill_in_sandbox(sb->runtime_id, run.pid);
	if (rc == 0 && run.exit_code == 128 && exec_ended(sb, EXEC_TERMINATED_CODE, out))
		return 0;
	/* The command's own exit line, where it ran to its end. */
	const int code = rc == 0 && !run.timed_out && !run.truncated && run.exit_code >= 0
			     ? run.exit_code
			     : EXEC_TERMINATED_CODE;
	if (rc == 0)
		rc = fetch_output(sb->runtime_id, file, &get, out, e);
	bool fetch_failed = rc == 0 && get.exit_code != 0 && !get.timed_out && !get.truncated;
	if (rc != -ECANCELED && (rc < 0 || fetch_failed) && exec_ended(sb, code, out))
		return 0;
	if (rc < 0)
		return rc;
	exec_result(&run, &get, out);
	return 0;
}

static int exec_in_sandbox(const struct sandbox *sb, const char *cmdline, struct exec_stream *st,
			   struct err *e)
{
	int by_agent = exec_by_agent(sb, cmdline, st);
	if (by_agent != -ENOTCONN)
		return by_agent;
	int rc = exec_by_runsc(sb, cmdline, st, e);
	ops_inside_exec_done(sb->id); /* what root/ keeps may be what the command changed */
	return rc;
}

/*
 * Hand the exec's result over, unless the daemon is shutting down. A
 * failure goes into the sandbox's `error` only if @ours: not into a later
 * sandbox of the name.
 */
static void exec_finish(struct sandbox_job *job, struct exec_run *run, int rc, bool ours,
			struct err *e, struct strbuf *out)
{
	pthread_rwlock_rdlock(&ops.gate);
	if (!ops.running) {
		pthread_rwlock_unlock(&ops.gate);
		return;
	}
	if (rc < 0) {
		if (!e->code)
			err_set(e, EIO, "exec in sandbox %s failed: %s", job->id, strerror(-rc));
		report_job_failure(ours ? OPS_OBJ_SANDBOX : OPS_OBJ_LIST, job->id, "exec", e);
		exec_run_end(run, -e->code, e->msg, strlen(e->msg));
	} else {
		exec_run_end(run, 0, out->buf, out->len);
	}
	pthread_rwlock_unlock(&ops.gate);
}

static void exec_job(void *arg)
{
	struct sandbox_job *job = arg;
	struct exec_run *run = job->run;
	struct err e = {0};
	struct sandbox sb;
	_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
	struct exec_stream st = {
	    .out = &out, .cap = EXEC_OUTPUT_MAX, .progress = exec_run_progress, .ctx = run};
	int rc = row_sandbox_get(job->id, &sb);
	/* Its id, owner and birth say it is the one the exec was written to. */
	const bool ours =
	    rc == 0 && sb.created_at == job->created_at && sb.owner_uid == job->owner_uid;
	if (!ours)
		rc = err_set(&e, ENOENT,
			     "cannot exec in sandbox %s: it was removed before the exec ran",
			     job->id);
	if (rc == 0)
		rc = exec_in_sandbox(&sb, job->cmdline, &st, &e);
	/* Terminated under it: what it wrote so far, and the exit line of a SIGKILL. */
	if (rc == -ECANCELED) {
		if (out.len && out.buf[out.len - 1] != '\n')
			strbuf_adds(&out, "\n");
		strbuf_addf(&out, "[snapfs: sandbox %s was terminated]\nexit %d\n", job->id,
			    EXEC_TERMINATED_CODE);
		rc = 0;
	}
	int kept = strbuf_error(&out);
	if (rc == 0 && kept < 0)
		rc = err_set(&e, -kept, "cannot keep the output of an exec in sandbox %s: %s",
			     job->id, strerror(-kept));
	exec_finish(job, run, rc, ours, &e, &out);
	exec_run_unref(run);
	free(job);
}

int ops_sandbox_exec_check(const struct caller *who, const char *id, const char *cmdline,
			   struct err *e)
{
	struct sandbox sb;
	int rc = sandbox_find(who, id, &sb, e);
	if (rc < 0)
		return rc;
	if (sb.state != SB_RUNNING)
		return err_set(e, EBUSY, "cannot exec in sandbox %s: it is %s, not running", id,
			       sandbox_state_name(sb.state));
	if (!*cmdline)
		return err_set(e, EINVAL, "exec needs a command line");
	if (strlen(cmdline) >= ENTRYPOINT_MAX)
		return err_set(e, EFBIG, "exec command line is too long");
	return 0;
}

/*
 * A place in the exec queue, taken when a script's first line is written
 * (a full queue refuses that write with EAGAIN, as it always did) and used
 * when the script starts, at the read or the close that follows.
 */
int ops_sandbox_exec_reserve(const struct caller *who, const char *id, const char *cmdline,
			     struct ops_exec_slot **out, struct err *e)
{
	struct sandbox sb;
	int rc = ops_sandbox_exec_check(who, id, cmdline, e);
	if (rc == 0)
		rc = sandbox_find(who, id, &sb, e);
	if (rc < 0)
		return rc;
	/* No completion of its own: the run's followers are told (exec_run_end()). */
	struct sandbox_job *job = sandbox_job_new(JOB_EXEC, id, NULL, NULL, e);
	if (!job)
		return -e->code;
	job->created_at = sb.created_at;
	job->owner_uid = sb.owner_uid;
	*out = (struct ops_exec_slot *)job;
	return 0;
}

void ops_sandbox_exec_unreserve(struct ops_exec_slot *slot)
{
	if (slot)
		op_job_drop((struct sandbox_job *)slot, 0);
}

int ops_sandbox_exec_start(const struct caller *who, struct ops_exec_slot *slot,
			   const char *cmdline, ops_progress_fn progress, ops_done_fn done,
			   void *ctx, struct err *e)
{
	struct sandbox_job *job = (struct sandbox_job *)slot;
	if (xsnprintf(job->cmdline, sizeof(job->cmdline), "%s", cmdline) < 0)
		return op_job_drop(job, err_set(e, EFBIG, "exec command line is too long"));
	job->run = exec_run_new(who, job->id, progress, done, ctx);
	if (!job->run)
		return op_job_drop(job, err_set(e, ENOMEM, "exec: out of memory"));
	return op_job_queue(job, exec_job);
}

int ops_sandbox_exec(const struct caller *who, const char *id, const char *cmdline,
		     ops_progress_fn progress, ops_done_fn done, void *ctx, struct err *e)
{
	struct ops_exec_slot *slot;
	int rc = ops_sandbox_exec_reserve(who, id, cmdline, &slot, e);
	return rc < 0 ? rc : ops_sandbox_exec_start(who, slot, cmdline, progress, done, ctx, e);
}

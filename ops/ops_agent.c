/*
 * ops_agent.c - the agents of running sandboxes (runtime/agent/agent.h),
 * and what sandboxes/<id>/root/ and ps ask of them.
 *
 * One agent per sandbox's container, started at the first use and kept in
 * `agents` (its own leaf lock: nothing is called with it held but
 * agent_ref()). A sandbox's state decides first (state_errno()): only a
 * running one is asked, so a suspended or snapshotting one answers EBUSY
 * at once and a terminated one ENOENT, and none of this writes `error`.
 * A checkpoint detaches the agent first (ops_agent_detach(), before the
 * pause), so nothing in the sandbox holds a host file when runsc saves it.
 * A keeper that will not start is tried again at most AGENT_FAILS_MAX times
 * in AGENT_FAIL_WINDOW_MS; between, root/ answers EIO at once.
 *
 * Files: an open file remembers its path and flags, and opens itself again
 * in a new attachment (a checkpoint closed its handle inside).
 */
#include "ops/ops_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/files.h"
#include "lib/strbuf.h"
#include "lib/strset.h"
#include "ops/ahead.h"
#include "runtime/agent/agent.h"

#define AGENT_FAILS_MAX 3
#define AGENT_FAIL_WINDOW_MS 60000
/* How long a listing's attributes answer a stat of its entries: the kernel's attr timeout. */
#define LISTING_FRESH_MS 1000
/*
 * Write-behind: a write to a write-only file through root/ is answered once
 * its WRITE is in the agent's channel, not once the agent has written it,
 * and at most INSIDE_BEHIND_MAX of one file's writes (1 MiB each) and
 * AGENT_POSTED_MAX of a sandbox's are unanswered. The
 * keeper serves its channel in order, so whatever is asked through snapfs
 * after a write (a read, a stat, a listing, an exec, a checkpoint's
 * DETACH) finds it written; only a process inside looking at the file in
 * those milliseconds may not. Without it each 1 MiB waited for the agent
 * and the next waited for the answer: the host and the sandbox took turns
 * (64 MiB `cat >` 1.7 times raw runsc; a pipe into `runsc exec cat >`
 * overlaps them). A failed write sticks to the open file: its every later
 * write, fsync and close (FLUSH) answers it (struct behind).
 */
#define INSIDE_BEHIND_MAX 4

/*
 * The newest full listing of one directory with its entries' attributes
 * (READDIR carries them): an `ls -l`, a `cp -r` or a `find` then stats
 * each entry without a request. Any change made through root/ drops it.
 */
struct listing {
	char dir[WIRE_PATH_MAX + 1];
	int64_t at_ms;
	size_t n, alloc;
	struct listed {
		char *name;
		struct wire_attr attr;
		size_t pos; /* where the agent listed it: the order walks open files in */
	} * v;		    /* sorted by name once complete */
	size_t *by_pos;	    /* then the index in @v of each pos (NULL: none) */
};

/*
 * The directories made through root/ in the last LISTING_FRESH_MS, each
 * with the names made, moved or removed in it through root/ since: any
 * other name in one is absent without a crossing. A `cp -r` into root/
 * looks up every name before it makes it, and each of those lookups was
 * a crossing to the agent. A name is noted before its request is sent, so
 * a lookup racing the request asks the agent. The sandbox's own processes
 * could make a name there in that second too; like a listing's
 * attributes, the answer may be that second old. A rename or rmdir through
 * root/ forgets them all (a directory moved or removed takes its path).
 */
/*
 * The attributes the newest opens answered, each for LISTING_FRESH_MS:
 * the kernel asks for a file's attributes again when a read goes past
 * the size it knows and they are over its second old, so a `cp` of a
 * small file (it reads past the end to find it) whose listing is older
 * cost a crossing more. Dropped with the listing at any change.
 */
#define RECENT_MAX 32

struct recent {
	char *path; /* NULL: a free slot */
	struct wire_attr attr;
	int64_t at_ms;
};

#define MADE_DIRS_MAX 8
#define MADE_NAMES_MAX 1024 /* each note sorts them again, under agents.lock */

struct made_dir {
	char path[WIRE_PATH_MAX + 1]; /* "" : a free slot */
	int64_t at_ms;
	struct strset names; /* sealed after each add */
	bool full;	     /* past MADE_NAMES_MAX: no longer answers */
};

struct agent_entry {
	char id[OPS_VIEW_ID_MAX]; /* a sandbox's, or a snapshot's view's (ops_snapview.c) */
	char runtime_id[RUNTIME_ID_MAX];
	struct agent *agent;
	unsigned generation; /* attachments made: an open file's handle is of one */
	int fails;
	int64_t first_fail_ms;
	char why[MESSAGE_MAX]; /* the last failure's sentence */
	struct listing listing;
	struct recent recent[RECENT_MAX]; /* a ring; next is the slot to fill */
	unsigned recent_next;
	struct made_dir made[MADE_DIRS_MAX];
	struct ahead_set ahead; /* files read ahead (ahead.h) */
	bool more_refused;	/* this attachment's keeper refused WIRE_OPEN_MORE */
	/* Set anew (agents.changes) at each ops_inside_changed(): a reply asked before is not kept.
	 */
	uint64_t changes;
	struct agent_entry *next;
};

static struct {
	pthread_mutex_t lock;
	struct agent_entry *list;
	int exe_fd;	  /* the agent program, opened once (-1: none: root/ is EIO) */
	uint64_t changes; /* the last agent_entry.changes given: unique across entries */
	char exe_path[PATH_MAX];
} agents = {.lock = PTHREAD_MUTEX_INITIALIZER, .exe_fd = -1};

struct ops_inside_file {
	char id[OPS_VIEW_ID_MAX];
	char path[WIRE_PATH_MAX + 1];
	int flags; /* the open's, less O_CREAT, O_EXCL and O_TRUNC once it is open */
	uint32_t handle;
	unsigned generation;
	struct agent *agent; /* a reference */
	/*
	 * A read-only open's head: the file's first bytes as the open found
	 * them (WIRE_OPEN_PEEK), served to reads within it without a crossing,
	 * as if the kernel had read them ahead; freed once read to its end.
	 * head_whole: the file ended within it. Guarded by lock.
	 */
	pthread_mutex_t lock;
	uint8_t *head;
	size_t head_len;
	bool head_whole;
	/*
	 * Held while the file is opened again (a new attachment, or a read past
	 * a WIRE_OPEN_WHOLE head): agent, generation and handle change under
	 * it, the handle under lock too, so two reads never open it twice.
	 */
	pthread_mutex_t open_lock;
	/*
	 * Write-behind (ops_inside_write()), a write-only file's: its writes
	 * posted and not yet answered. behind_lock is held by a write from its
	 * wait for room to its post, so the file's writes leave in the order
	 * they came; @behind is shared with the posted writes' answers.
	 */
	pthread_mutex_t behind_lock;
	struct behind *behind;
};

/*
 * What a write-only file's posted writes tell (behind_told(), on an
 * agent's reader thread under its lock): @lock is a leaf. @refs: the
 * file's and one per write posted and unanswered (@pending). @err, the
 * first failure (-errno; @short_of: the bytes a short write left out, or
 * 0), stays: every later write, fsync and close of the file answers it,
 * for a file with a hole in it is no good.
 */
struct behind {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int refs;
	unsigned pending;
	int err;
	size_t short_of;
};

/* --- the program --------------------------------------------------------- */

/* Beside the daemon's own executable: a build tree's build/snapfs-agent. */
static int beside_exe(char *out, size_t size)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return -ENOENT;
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	/* build/asan/snapfs's agent is build/snapfs-agent: the agent has no sanitizers. */
	char *asan = strstr(self, "/build/asan");
	if (asan && !asan[11])
		asan[6] = '\0';
	return xsnprintf(out, size, "%s/snapfs-agent", self) < 0 ? -ENAMETOOLONG : 0;
}

int ops_agent_init(const char *path, struct err *e)
{
	char found[PATH_MAX];
	const char *try[3] = {path, NULL, NULL};
	if (path && !*path)
		return 0; /* --agent '': none (exec takes the slow way, root/ answers EIO) */
	if (!path) {
		try[0] = SNAPFS_AGENT_DEFAULT;
		if (beside_exe(found, sizeof(found)) == 0)
			try[1] = found;
	}
	for (int i = 0; i < 3 && try[i] && agents.exe_fd < 0; i++) {
		agents.exe_fd = open(try[i], O_RDONLY | O_CLOEXEC);
		if (agents.exe_fd >= 0)
			snprintf(agents.exe_path, sizeof(agents.exe_path), "%s", try[i]);
	}
	if (agents.exe_fd < 0 && path)
		return err_set(e, errno, "cannot open the agent %s (--agent): %s", path,
			       strerror(errno));
	if (agents.exe_fd < 0)
		warning("no snapfs-agent at %s: sandboxes/<id>/root/ and ps answer EIO, exec "
			"takes the slow way",
			SNAPFS_AGENT_DEFAULT);
	else
		info("agent: %s", agents.exe_path);
	return 0;
}

static void listing_clear(struct listing *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].name);
	free(l->v);
	free(l->by_pos);
	*l = (struct listing){0};
}

static void made_clear(struct agent_entry *en)
{
	for (int i = 0; i < MADE_DIRS_MAX; i++) {
		strset_release(&en->made[i].names);
		en->made[i] = (struct made_dir){.names = STRSET_INIT};
	}
}

static void recent_clear(struct agent_entry *en)
{
	for (int i = 0; i < RECENT_MAX; i++) {
		free(en->recent[i].path);
		en->recent[i] = (struct recent){0};
	}
}

/* Free @en, already out of the list (not under agents.lock). */
static void entry_free(struct agent_entry *en)
{
	agent_unref(en->agent);
	listing_clear(&en->listing);
	recent_clear(en);
	made_clear(en);
	pthread_mutex_lock(&agents.lock); /* the sets share their counts (ahead.h) */
	ahead_clear(&en->ahead);
	pthread_mutex_unlock(&agents.lock);
	free(en);
}

void ops_agent_fini(void)
{
	pthread_mutex_lock(&agents.lock);
	struct agent_entry *list = agents.list;
	agents.list = NULL;
	pthread_mutex_unlock(&agents.lock);
	while (list) {
		struct agent_entry *next = list->next;
		entry_free(list);
		list = next;
	}
	closep(&agents.exe_fd);
	agents.exe_fd = -1;
}

/* --- the table ------------------------------------------------------------ */

/* 0 for a running sandbox; else what an access inside it answers now. */
static int state_errno(enum sandbox_state st)
{
	switch (st) {
	case SB_RUNNING:
		return 0;
	case SB_STARTING:
	case SB_SNAPSHOTTING:
	case SB_SUSPENDING:
	case SB_SUSPENDED:
	case SB_RESUMING:
		return EBUSY;
	default:
		return ENOENT;
	}
}

static struct agent_entry *find_locked(const char *id)
{
	for (struct agent_entry *en = agents.list; en; en = en->next)
		if (strcmp(en->id, id) == 0)
			return en;
	return NULL;
}

/* Drop @id's entry (its container went); the agent goes with its last reference. */
void ops_agent_forget(const char *id)
{
	pthread_mutex_lock(&agents.lock);
	struct agent_entry **p = &agents.list, *gone = NULL;
	for (; *p; p = &(*p)->next)
		if (strcmp((*p)->id, id) == 0) {
			gone = *p;
			*p = gone->next;
			break;
		}
	pthread_mutex_unlock(&agents.lock);
	if (gone)
		entry_free(gone);
}

#define PRUNE_MAX 64

/* What every sandbox read ahead and did not open within its second goes (ahead.h). */
static void ahead_prune_all(void)
{
	int64_t now = mono_ms();
	pthread_mutex_lock(&agents.lock);
	for (struct agent_entry *en = agents.list; en; en = en->next)
		ahead_prune(&en->ahead, now);
	pthread_mutex_unlock(&agents.lock);
}

void ops_agent_prune_views(void)
{
	ahead_prune_all();
	struct {
		char id[OPS_VIEW_ID_MAX];
		char runtime_id[RUNTIME_ID_MAX];
	} seen[PRUNE_MAX];
	size_t n = 0;
	pthread_mutex_lock(&agents.lock);
	for (struct agent_entry *en = agents.list; en && n < PRUNE_MAX; en = en->next)
		if (ops_is_view(en->id)) {
			memcpy(seen[n].id, en->id, sizeof(seen[n].id));
			memcpy(seen[n].runtime_id, en->runtime_id, sizeof(seen[n].runtime_id));
			n++;
		}
	pthread_mutex_unlock(&agents.lock);
	for (size_t i = 0; i < n; i++) {
		if (snapview_current(seen[i].id, seen[i].runtime_id))
			continue;
		struct agent_entry **p = &agents.list, *gone = NULL;
		pthread_mutex_lock(&agents.lock);
		for (; *p; p = &(*p)->next)
			if (!strcmp((*p)->id, seen[i].id) &&
			    !strcmp((*p)->runtime_id, seen[i].runtime_id)) {
				gone = *p;
				*p = gone->next;
				break;
			}
		pthread_mutex_unlock(&agents.lock);
		if (gone)
			entry_free(gone);
	}
}

/*
 * The entry of @id's container @runtime_id (a new one for a new container),
 * with a reference to its agent.
 */
static int entry_get(const char *id, const char *runtime_id, struct agent **out, unsigned *gen,
		     struct err *e)
{
	if (agents.exe_fd < 0)
		return err_set(e, EIO,
			       "no snapfs-agent is installed: the inside of sandbox %s "
			       "cannot be reached",
			       id);
	pthread_mutex_lock(&agents.lock);
	struct agent_entry *en = find_locked(id);
	bool stale = en && strcmp(en->runtime_id, runtime_id) != 0;
	pthread_mutex_unlock(&agents.lock);
	if (stale)
		ops_agent_forget(id);
	pthread_mutex_lock(&agents.lock);
	en = find_locked(id);
	int rc = 0;
	if (!en) {
		en = calloc(1, sizeof(*en));
		rc = en ? agent_new(&ops.runsc, runtime_id, agents.exe_fd, &en->agent, e)
			: err_set(e, ENOMEM, "out of memory");
		if (rc == 0) {
			snprintf(en->id, sizeof(en->id), "%s", id);
			snprintf(en->runtime_id, sizeof(en->runtime_id), "%s", runtime_id);
			en->changes = ++agents.changes; /* no reply asked of an older entry fits */
			en->next = agents.list;
			agents.list = en;
		} else {
			free(en);
		}
	}
	if (rc == 0) {
		agent_ref(en->agent);
		*out = en->agent;
		*gen = en->generation;
	}
	pthread_mutex_unlock(&agents.lock);
	return rc;
}

/* After an attach of @id's agent: count it (and its failure, for the backoff). */
static int note_attach(const char *id, int rc, unsigned *gen, struct err *e)
{
	pthread_mutex_lock(&agents.lock);
	struct agent_entry *en = find_locked(id);
	int64_t now = mono_ms();
	if (en && rc == 0) {
		en->fails = 0;
		en->more_refused = false; /* a new keeper may know it */
		*gen = ++en->generation;
	} else if (en && rc < 0) {
		if (!en->fails || now - en->first_fail_ms > AGENT_FAIL_WINDOW_MS)
			en->fails = 0, en->first_fail_ms = now;
		en->fails++;
		snprintf(en->why, sizeof(en->why), "%s", e->msg);
	}
	pthread_mutex_unlock(&agents.lock);
	return rc;
}

/* May @id's keeper be tried now? -EIO with the last failure's sentence when not. */
static int backoff_check(const char *id, struct err *e)
{
	pthread_mutex_lock(&agents.lock);
	struct agent_entry *en = find_locked(id);
	int rc = 0;
	if (en && en->fails >= AGENT_FAILS_MAX &&
	    mono_ms() - en->first_fail_ms < AGENT_FAIL_WINDOW_MS)
		rc = err_set(e, EIO, "the agent of sandbox %s failed %d times within %d s: %s", id,
			     en->fails, AGENT_FAIL_WINDOW_MS / 1000, en->why);
	pthread_mutex_unlock(&agents.lock);
	return rc;
}

/*
 * The attached agent of sandbox @id as @who may use it, with a reference
 * (agent_unref() it), and the generation of its attachment.
 */
/* The agent of snapshot view @id (ops_snapview.c), as inside_agent()'s. */
static int view_agent(const struct caller *who, const char *id, struct agent **out, unsigned *gen,
		      struct err *e)
{
	char runtime_id[RUNTIME_ID_MAX];
	int rc = snapview_container(who, id, runtime_id, e);
	if (rc == 0)
		rc = entry_get(id, runtime_id, out, gen, e);
	if (rc < 0 || agent_attached(*out))
		return rc;
	rc = backoff_check(id, e);
	if (rc == 0)
		rc = note_attach(id, agent_attach(*out, e), gen, e);
	if (rc < 0)
		agent_unref(*out);
	return rc;
}

static int inside_agent(const struct caller *who, const char *id, struct agent **out, unsigned *gen,
			struct err *e)
{
	struct sandbox sb;
	if (ops_is_view(id))
		return view_agent(who, id, out, gen, e);
	int rc = sandbox_find(who, id, &sb, e);
	if (rc < 0)
		return rc;
	int busy = state_errno(sb.state);
	if (busy)
		return err_set(e, busy, "sandbox %s is %s, not running", id,
			       sandbox_state_name(sb.state));
	rc = entry_get(sb.id, sb.runtime_id, out, gen, e);
	if (rc < 0 || agent_attached(*out))
		return rc;
	rc = backoff_check(id, e);
	if (rc == 0)
		rc = note_attach(id, agent_attach(*out, e), gen, e);
	if (rc < 0) {
		agent_unref(*out);
		/* A sandbox that stopped meanwhile answers as one that is not running. */
		if (row_sandbox_get(id, &sb) == 0 && state_errno(sb.state))
			return err_set(e, state_errno(sb.state), "sandbox %s is %s, not running",
				       id, sandbox_state_name(sb.state));
	}
	return rc;
}

/* An agent's -ENOTCONN (detached meanwhile: a checkpoint began) is EBUSY to the caller. */
static int agent_rc(int rc, struct err *e)
{
	if (rc == -ENOTCONN)
		return err_set(e, EBUSY, "the sandbox is being checkpointed");
	return rc;
}

/* --- checkpoints ---------------------------------------------------------- */

int ops_agent_detach(const struct sandbox *sb, struct err *e)
{
	pthread_mutex_lock(&agents.lock);
	struct agent_entry *en = find_locked(sb->id);
	struct agent *a = en && !strcmp(en->runtime_id, sb->runtime_id) ? en->agent : NULL;
	if (a)
		agent_ref(a);
	pthread_mutex_unlock(&agents.lock);
	if (!a)
		return 0;
	int rc = agent_detach(a, e);
	agent_unref(a);
	return rc;
}

void ops_agent_after_checkpoint(const struct sandbox *sb, bool still_running)
{
	if (!still_running) {
		ops_agent_forget(sb->id);
		return;
	}
	pthread_mutex_lock(&agents.lock);
	struct agent_entry *en = find_locked(sb->id);
	struct agent *a = en ? en->agent : NULL;
	if (a)
		agent_ref(a);
	pthread_mutex_unlock(&agents.lock);
	if (!a)
		return;
	/* Execs wait for their output across the checkpoint: attach for them now. */
	struct err e = {0};
	if (agent_execs_waiting(a))
		note_attach(sb->id, agent_attach(a, &e), &(unsigned){0}, &e);
	agent_unref(a);
}

/* --- root/ ------------------------------------------------------------------ */

static void stat_of(const struct wire_attr *a, struct stat *st)
{
	*st = (struct stat){
	    .st_mode = a->mode,
	    .st_nlink = a->nlink,
	    .st_uid = a->uid,
	    .st_gid = a->gid,
	    .st_size = (off_t)(a->size > INT64_MAX ? INT64_MAX : a->size),
	    .st_blocks = (blkcnt_t)(a->blocks > INT64_MAX ? INT64_MAX : a->blocks),
	    .st_ino = a->ino,
	    .st_rdev = a->rdev,
	    /*
	     * The best I/O size: one request's most. cat and cp size their
	     * buffers by it, and each write(2) is one crossing to the agent
	     * (no writeback cache: a write is seen inside at once).
	     */
	    .st_blksize = WIRE_DATA_MAX,
	};
	st->st_atim = (struct timespec){a->sec[0], a->nsec[0]};
	st->st_mtim = (struct timespec){a->sec[1], a->nsec[1]};
	st->st_ctim = (struct timespec){a->sec[2], a->nsec[2]};
}

/* --- the listing ------------------------------------------------------------ */

static int listed_cmp(const void *a, const void *b)
{
	return strcmp(((const struct listed *)a)->name, ((const struct listed *)b)->name);
}

/*
 * Sandbox @id changed through root/ or by an exec: drop its listing, the
 * attributes of recent opens and the files read ahead. A change calls it
 * before its request and again after the answer (a write gone behind:
 * once it is in the channel), and nothing asked before a change is kept
 * after it (ahead_epoch() for files read ahead, @changes for listings and
 * opens' attributes): a reply in flight across a write gone behind may
 * have been read before the write was made.
 */
void ops_inside_changed(const char *id)
{
	pthread_mutex_lock(&agents.lock);
	struct agent_entry *en = find_locked(id);
	if (en) {
		en->changes = ++agents.changes;
		listing_clear(&en->listing);
		recent_clear(en);
		ahead_clear(&en->ahead);
	}
	pthread_mutex_unlock(&agents.lock);
}

/* Sandbox @id's count of changes (ops_inside_changed()), to ask a request under. */
static uint64_t changes_of(const char *id)
{
	pthread_mutex_lock(&agents.lock);
	struct agent_entry *en = find_locked(id);
	uint64_t n = en ? en->changes : 0;
	pthread_mutex_unlock(&agents.lock);
	return n;
}

/* An open of @path in sandbox @id, asked after @since changes, answered @attr now. */
static void recent_note(const char *id, const char *path, const struct wire_attr *attr,
			uint64_t since)
{
	char *copy = strdup(path);
	if (!copy)
		return;
	pthread_mutex_lock(&agents.lock);
	struct agent_entry *en = find_locked(id);
	if (en && en->changes == since) {
		struct recent *r = &en->recent[en->recent_next++ % RECENT_MAX];
		free(r->path);
		*r = (struct recent){copy, *attr, mono_ms()};
		copy = NULL;
	}
	pthread_mutex_unlock(&agents.lock);
	free(copy);
}

/* @path's attributes from a recent open; false when none is under LISTING_FRESH_MS. */
static bool recent_stat(const char *id, const char *path, struct wire_attr *attr)
{
	bool found = false;
	pthread_mutex_lock(&agents.lock);
	struct agent_entry *en = find_locked(id);
	for (unsigned i = 0; en && i < RECENT_MAX && !found; i++) {
		/* Newest first: a path opened twice answers its latest. */
		const struct recent *r = &en->recent[(en->recent_next - 1 - i) % RECENT_MAX];
		if (r->path && mono_ms() - r->at_ms < LISTING_FRESH_MS && !strcmp(r->path, path))
			*attr = r->attr, found = true;
	}
	pthread_mutex_unlock(&agents.lock);
	return found;
}

/* @path's attributes from a fresh listing of its directory; false when it has none. */
static bool listing_stat(const char *id, const char *path, struct wire_attr *attr)
{
	const char *slash = strrchr(path, '/');
	size_t dir_len = slash ? (size_t)(slash - path) : 0;
	struct listed key = {.name = (char *)(slash ? slash + 1 : path)};
	bool found = false;
	pthread_mutex_lock(&agents.lock);
	struct agent_entry *en = find_locked(id);
	struct listing *l = en ? &en->listing : NULL;
	if (l && l->v && mono_ms() - l->at_ms < LISTING_FRESH_MS && strlen(l->dir) == dir_len &&
	    strncmp(l->dir, path, dir_len) == 0) {
		struct listed *hit = bsearch(&key, l->v, l->n, sizeof(*l->v), listed_cmp);
		if (hit)
			*attr = hit->attr, found = true;
	}
	pthread_mutex_unlock(&agents.lock);
	return found;
}

/* --- names made through root/ (struct made_dir) ---------------------------------- */

/* @path's directory part and name; the directory is "" for root/. */
static void path_split(const char *path, char dir[WIRE_PATH_MAX + 1], const char **name)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;
	memcpy(dir, path, n);
	dir[n] = '\0';
	*name = slash ? slash + 1 : path;
}

static struct made_dir *made_find_locked(struct agent_entry *en, const char *dir)
{
	for (int i = 0; i < MADE_DIRS_MAX; i++)
		if (en->made[i].path[0] && strcmp(en->made[i].path, dir) == 0)
			return &en->made[i];
	return NULL;
}

/*
 * Sandbox @id's made directory that would hold @path, under agents.lock;
 * *@name is @path's last component. NULL when there is none.
 */
static struct made_dir *made_of_locked(const char *id, const char *path, const char **name)
{
	char dir[WIRE_PATH_MAX + 1];
	path_split(path, dir, name);
	struct agent_entry *en = find_locked(id);
	return en ? made_find_locked(en, dir) : NULL;
}

/* A change to @path through root/ is about to be asked: its name is no longer known absent. */
static void made_note(const char *id, const char *path)
{
	const char *name;
	pthread_mutex_lock(&agents.lock);
	struct made_dir *m = made_of_locked(id, path, &name);
	if (m && mono_ms() - m->at_ms >= LISTING_FRESH_MS) {
		/* Its second is over: it answers nothing more, and frees its names. */
		strset_release(&m->names);
		*m = (struct made_dir){.names = STRSET_INIT};
	} else if (m && !m->full && !strset_has(&m->names, name)) {
		m->full = m->names.n >= MADE_NAMES_MAX || strset_add(&m->names, name) < 0 ||
			  strset_seal(&m->names) < 0;
	}
	pthread_mutex_unlock(&agents.lock);
}

/* @path is a directory just made through root/: empty. The oldest slot (a free one is oldest). */
static void made_dir_new(const char *id, const char *path)
{
	pthread_mutex_lock(&agents.lock);
	struct agent_entry *en = find_locked(id);
	if (en) {
		struct made_dir *slot = &en->made[0];
		for (int i = 1; i < MADE_DIRS_MAX; i++)
			if (en->made[i].at_ms < slot->at_ms)
				slot = &en->made[i];
		strset_release(&slot->names);
		*slot = (struct made_dir){.names = STRSET_INIT, .at_ms = mono_ms()};
		snprintf(slot->path, sizeof(slot->path), "%s", path);
	}
	pthread_mutex_unlock(&agents.lock);
}

/*
 * Forget sandbox @id's made directories: an exec may make names in them,
 * an EEXIST says something other than root/ did, and a rename or rmdir
 * takes a directory's path.
 */
static void made_forget(const char *id)
{
	pthread_mutex_lock(&agents.lock);
	struct agent_entry *en = find_locked(id);
	if (en)
		made_clear(en);
	pthread_mutex_unlock(&agents.lock);
}

void ops_inside_exec_done(const char *id)
{
	made_forget(id);
	ops_inside_changed(id);
}

/* Is @path known absent: in a directory made here less than a second ago, never named since? */
static bool made_absent(const char *id, const char *path)
{
	const char *name;
	pthread_mutex_lock(&agents.lock);
	struct made_dir *m = made_of_locked(id, path, &name);
	bool absent = m && !m->full && mono_ms() - m->at_ms < LISTING_FRESH_MS &&
		      !strset_has(&m->names, name);
	pthread_mutex_unlock(&agents.lock);
	return absent;
}

int ops_inside_stat(const struct caller *who, const char *id, const char *path, struct stat *st,
		    struct err *e)
{
	struct agent *a;
	unsigned gen;
	struct wire_attr attr;
	int rc = inside_agent(who, id, &a, &gen, e);
	if (rc < 0)
		return rc;
	if (listing_stat(id, path, &attr) || recent_stat(id, path, &attr))
		rc = 0;
	else if (made_absent(id, path))
		rc = -ENOENT;
	else
		rc = agent_rc(agent_lstat(a, path, &attr, e), e);
	agent_unref(a);
	if (rc == 0)
		stat_of(&attr, st);
	return rc;
}

struct list_ctx {
	ops_inside_list_fn fn;
	void *arg;
	struct listing l; /* what becomes the sandbox's listing */
};

static int list_one(const char *name, const struct wire_attr *attr, void *arg)
{
	struct list_ctx *c = arg;
	char *copy = ALLOC_GROW(c->l.v, c->l.alloc, c->l.n + 1) == 0 ? strdup(name) : NULL;
	if (copy) {
		c->l.v[c->l.n] = (struct listed){copy, *attr, c->l.n};
		c->l.n++;
	}
	struct stat st;
	stat_of(attr, &st);
	return c->fn(name, &st, c->arg);
}

/* The complete listing @c made, asked after @since changes, becomes sandbox @id's. */
static void listing_keep(const char *id, struct list_ctx *c, const char *path, uint64_t since)
{
	if (!c->l.n)
		return;
	qsort(c->l.v, c->l.n, sizeof(*c->l.v), listed_cmp);
	c->l.by_pos = malloc(c->l.n * sizeof(*c->l.by_pos));
	for (size_t i = 0; c->l.by_pos && i < c->l.n; i++)
		c->l.by_pos[c->l.v[i].pos] = i;
	snprintf(c->l.dir, sizeof(c->l.dir), "%s", path);
	c->l.at_ms = mono_ms();
	pthread_mutex_lock(&agents.lock);
	struct agent_entry *en = find_locked(id);
	if (en && en->changes == since) {
		listing_clear(&en->listing);
		en->listing = c->l;
		c->l = (struct listing){0};
	}
	pthread_mutex_unlock(&agents.lock);
}

int ops_inside_list(const struct caller *who, const char *id, const char *path,
		    ops_inside_list_fn fn, void *arg, struct err *e)
{
	struct agent *a;
	unsigned gen;
	struct sandbox sb;
	/* root/ of a sandbox that does not run lists nothing (docs/design.md). */
	if (!*path && !ops_is_view(id) && sandbox_find(who, id, &sb, e) == 0 &&
	    state_errno(sb.state))
		return 0;
	int rc = inside_agent(who, id, &a, &gen, e);
	if (rc < 0)
		return rc;
	struct list_ctx c = {.fn = fn, .arg = arg};
	uint64_t cookie = 0, since = changes_of(id);
	do
		rc = agent_rc(agent_readdir(a, path, cookie, list_one, &c, &cookie, e), e);
	while (rc == 0 && cookie);
	agent_unref(a);
	if (rc == 0)
		listing_keep(id, &c, path, since);
	listing_clear(&c.l);
	return rc;
}

/*
 * @f opened in attachment @gen, asked after @since changes: @handle, @attr,
 * and @head_len bytes of @head (taken).
 */
static void file_set(struct ops_inside_file *f, unsigned gen, uint64_t since, uint32_t handle,
		     const struct wire_attr *attr, uint8_t *head, size_t head_len, struct stat *st)
{
	pthread_mutex_lock(&f->lock);
	f->handle = handle;
	free(f->head);
	f->head = head && head_len ? realloc(head, head_len) : NULL;
	if (!f->head)
		free(head);
	f->head_len = f->head ? head_len : 0;
	f->head_whole = head_len < WIRE_PEEK_MAX;
	pthread_mutex_unlock(&f->lock);
	f->generation = gen;
	f->flags &= ~(O_CREAT | O_EXCL | O_TRUNC);
	/* Only a read-only open: a writer changes them with its first write. */
	if ((f->flags & O_ACCMODE) == O_RDONLY && !(f->flags & O_APPEND))
		recent_note(f->id, f->path, attr, since);
	if (st)
		stat_of(attr, st);
}

/* Open @f's path in the attachment @gen of @a. */
static int file_open_in(struct ops_inside_file *f, struct agent *a, unsigned gen, mode_t mode,
			struct stat *st, struct err *e)
{
	struct wire_attr attr;
	uint32_t flags = (uint32_t)f->flags & (O_ACCMODE | O_CREAT | O_EXCL | O_TRUNC | O_APPEND);
	uint8_t *head = flags == O_RDONLY ? malloc(WIRE_PEEK_MAX) : NULL;
	size_t head_len = 0;
	uint32_t handle;
	uint64_t since = changes_of(f->id);
	int rc =
	    agent_rc(agent_open(a, f->path, flags, mode, &handle, &attr, head, &head_len, e), e);
	if (rc < 0) {
		free(head);
		return rc;
	}
	file_set(f, gen, since, handle, &attr, head, head_len, st);
	return 0;
}

/* --- files read ahead (ahead.h) ------------------------------------------------- */

/* What one listing lets an open ask for besides its own file. */
#define AHEAD_ASK_BYTES_MAX (768u << 10)

/* Is @a a file a WIRE_OPEN_MORE open may bring whole? */
static bool small_file(const struct wire_attr *a)
{
	return S_ISREG(a->mode) && a->size < WIRE_PEEK_MAX;
}

/* @dir's entry @name as a path ("" is root/ itself): 0, or -1 when it is too long. */
static int path_join(char out[WIRE_PATH_MAX + 1], const char *dir, const char *name)
{
	return xsnprintf(out, WIRE_PATH_MAX + 1, "%s%s%s", dir, *dir ? "/" : "", name);
}

/* How far past a file a listing is searched for small files to ask with it. */
#define AHEAD_SCAN_MAX (4 * WIRE_MORE_MAX)

/*
 * The small files listed in @l after @hit (a walk opened those before it),
 * none kept in @en already, into @names (allocated): their count.
 */
static uint32_t ahead_scan(struct agent_entry *en, const struct listing *l,
			   const struct listed *hit, char **names, int64_t now)
{
	uint32_t n = 0;
	size_t bytes = 0, end = hit->pos + 1 + AHEAD_SCAN_MAX;
	for (size_t k = hit->pos + 1; k < l->n && k < end && n < WIRE_MORE_MAX; k++) {
		const struct listed *o = &l->v[l->by_pos[k]];
		char path[WIRE_PATH_MAX + 1];
		if (!small_file(&o->attr) || path_join(path, l->dir, o->name) < 0 ||
		    ahead_has(&en->ahead, path, now))
			continue;
		if (bytes + o->attr.size > AHEAD_ASK_BYTES_MAX || !(names[n] = strdup(o->name)))
			break;
		bytes += o->attr.size;
		n++;
	}
	return n;
}

/*
 * What to ask with the open of @path, itself listed as a small file in a
 * fresh listing of its directory: the names into @names, their count (0:
 * open it alone), and the epoch to ask under into *@epoch.
 */
static uint32_t ahead_names(const char *id, const char *path, char **names, uint64_t *epoch)
{
	char dir[WIRE_PATH_MAX + 1];
	const char *name;
	path_split(path, dir, &name);
	uint32_t n = 0;
	int64_t now = mono_ms();
	pthread_mutex_lock(&agents.lock);
	struct agent_entry *en = find_locked(id);
	const struct listing *l = en && !en->more_refused ? &en->listing : NULL;
	struct listed key = {.name = (char *)name}, *hit = NULL;
	if (l && l->by_pos && now - l->at_ms < LISTING_FRESH_MS && strcmp(l->dir, dir) == 0)
		hit = bsearch(&key, l->v, l->n, sizeof(*l->v), listed_cmp);
	if (hit && small_file(&hit->attr)) {
		n = ahead_scan(en, l, hit, names, now);
		*epoch = ahead_epoch(&en->ahead);
	}
	pthread_mutex_unlock(&agents.lock);
	return n;
}

struct ahead_reply {
	const char *dir;
	char **names;
	int64_t asked_ms;
	struct ahead_file got[WIRE_MORE_MAX];
};

static void ahead_one(uint32_t i, uint32_t err, const struct wire_attr *attr, const void *data,
		      size_t len, void *arg)
{
	struct ahead_reply *r = arg;
	struct ahead_file f = {.attr = *attr, .len = len, .asked_ms = r->asked_ms};
	char path[WIRE_PATH_MAX + 1];
	if (err || path_join(path, r->dir, r->names[i]) < 0 || !(f.path = strdup(path)))
		return;
	if (len && !(f.data = malloc(len))) {
		free(f.path);
		return;
	}
	if (len)
		memcpy(f.data, data, len);
	r->got[i] = f;
}

/* Keep what @r brought, asked under @epoch, for sandbox @id; free the rest of @r. */
static void ahead_store(const char *id, uint64_t epoch, struct ahead_reply *r, uint32_t n)
{
	pthread_mutex_lock(&agents.lock);
	struct agent_entry *en = find_locked(id);
	for (uint32_t i = 0; i < n; i++) {
		if (en && r->got[i].path)
			ahead_keep(&en->ahead, epoch, &r->got[i], mono_ms());
		ahead_file_release(&r->got[i]);
		free(r->names[i]);
	}
	pthread_mutex_unlock(&agents.lock);
}

/* The keeper of attachment @gen refused WIRE_OPEN_MORE (an older one). */
static void ahead_refused(const char *id, unsigned gen)
{
	pthread_mutex_lock(&agents.lock);
	struct agent_entry *en = find_locked(id);
	if (en && en->generation == gen)
		en->more_refused = true;
	pthread_mutex_unlock(&agents.lock);
}

/* @f's file as read ahead, if it was: true, and @f is open. */
static bool ahead_open_kept(struct ops_inside_file *f, unsigned gen, struct stat *st)
{
	struct ahead_file k;
	pthread_mutex_lock(&agents.lock);
	struct agent_entry *en = find_locked(f->id);
	bool hit = en && ahead_take(&en->ahead, f->path, mono_ms(), &k);
	/* Kept only if asked since the last change (ahead_epoch()): as fresh as an open now. */
	uint64_t since = en ? en->changes : 0;
	pthread_mutex_unlock(&agents.lock);
	if (!hit)
		return false;
	file_set(f, gen, since, WIRE_HANDLE_NONE, &k.attr, k.data, k.len, st);
	k.data = NULL;
	ahead_file_release(&k);
	return true;
}

/*
 * A plain read-only open of @f: from the files read ahead, or with its
 * listed neighbours asked for (WIRE_OPEN_MORE), or alone.
 */
static int file_open_ahead(struct ops_inside_file *f, struct agent *a, unsigned gen,
			   struct stat *st, struct err *e)
{
	if (ahead_open_kept(f, gen, st))
		return 0;
	struct ahead_reply r = {.asked_ms = mono_ms()};
	char *names[WIRE_MORE_MAX], dir[WIRE_PATH_MAX + 1];
	const char *name;
	uint64_t epoch = 0, since = changes_of(f->id);
	uint32_t n = ahead_names(f->id, f->path, names, &epoch);
	uint8_t *head = n ? malloc(WIRE_PEEK_MAX) : NULL;
	int rc = -EAGAIN; /* open it alone */
	if (head) {
		struct wire_attr attr;
		uint32_t handle;
		size_t head_len = 0;
		path_split(f->path, dir, &name);
		r.dir = dir;
		r.names = names;
		rc = agent_open_more(a, f->path, (const char *const *)names, n, ahead_one, &r,
				     &handle, &attr, head, &head_len, e);
		if (rc == 0)
			file_set(f, gen, since, handle, &attr, head, head_len, st);
		else
			free(head);
		if (rc == -EINVAL) { /* a keeper older than WIRE_OPEN_MORE */
			ahead_refused(f->id, gen);
			rc = -EAGAIN;
		}
	}
	ahead_store(f->id, epoch, &r, n);
	if (rc == -EAGAIN)
		return file_open_in(f, a, gen, 0, st, e);
	return agent_rc(rc, e);
}

static struct behind *behind_new(void)
{
	struct behind *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	pthread_mutex_init(&b->lock, NULL);
	cond_init_mono(&b->cond);
	b->refs = 1;
	return b;
}

static void behind_unref(struct behind *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&b->lock);
	bool last = --b->refs == 0;
	pthread_mutex_unlock(&b->lock);
	if (!last)
		return;
	pthread_mutex_destroy(&b->lock);
	pthread_cond_destroy(&b->cond);
	free(b);
}

/* A posted write's answer (agent_wrote_fn): on an agent's reader thread, under its lock. */
static void behind_told(void *arg, ssize_t done, size_t n)
{
	struct behind *b = arg;
	pthread_mutex_lock(&b->lock);
	if (!b->err && (done < 0 || (size_t)done < n)) {
		b->err = done < 0 ? (int)done : -EIO;
		b->short_of = done < 0 ? 0 : n - (size_t)done;
	}
	b->pending--;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
	behind_unref(b);
}

/* @f's memory, its agent's reference and its locks; nothing is asked of the agent. */
static void file_free(struct ops_inside_file *f)
{
	if (f->agent)
		agent_unref(f->agent);
	free(f->head);
	pthread_mutex_destroy(&f->lock);
	pthread_mutex_destroy(&f->open_lock);
	pthread_mutex_destroy(&f->behind_lock);
	behind_unref(f->behind);
	free(f);
}

int ops_inside_open(const struct caller *who, const char *id, const char *path, int flags,
		    mode_t mode, struct ops_inside_file **out, struct stat *st, struct err *e)
{
	struct ops_inside_file *f = calloc(1, sizeof(*f));
	if (!f)
		return err_set(e, ENOMEM, "out of memory");
	pthread_mutex_init(&f->lock, NULL);
	pthread_mutex_init(&f->open_lock, NULL);
	pthread_mutex_init(&f->behind_lock, NULL);
	snprintf(f->id, sizeof(f->id), "%s", id);
	if (xsnprintf(f->path, sizeof(f->path), "%s", path) < 0) {
		file_free(f);
		return err_set(e, ENAMETOOLONG, "path too long");
	}
	f->flags = flags;
	if ((flags & O_ACCMODE) == O_WRONLY && !(f->behind = behind_new())) {
		file_free(f);
		return err_set(e, ENOMEM, "out of memory");
	}
	if (ops_is_view(id) && ((flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC)))) {
		file_free(f);
		return err_set(e, EROFS, "a snapshot's files are read-only");
	}
	if (flags & (O_CREAT | O_TRUNC))
		ops_inside_changed(id);
	if (flags & O_CREAT)
		made_note(id, path);
	unsigned gen;
	int rc = inside_agent(who, id, &f->agent, &gen, e);
	bool plain = (flags & (O_ACCMODE | O_CREAT | O_EXCL | O_TRUNC | O_APPEND)) == O_RDONLY;
	if (rc == 0)
		rc = plain ? file_open_ahead(f, f->agent, gen, st, e)
			   : file_open_in(f, f->agent, gen, mode, st, e);
	if (flags & (O_CREAT | O_TRUNC))
		ops_inside_changed(id);
	if (rc == -EEXIST)
		made_forget(id); /* not made through root/: none is known absent */
	if (rc < 0) {
		file_free(f);
		return rc;
	}
	*out = f;
	return 0;
}

/* @f's handle, opened again if its attachment is not the agent's current one. */
static int file_ready(struct ops_inside_file *f, const struct caller *who, struct agent **a,
		      struct err *e)
{
	unsigned gen;
	int rc = inside_agent(who, f->id, a, &gen, e);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&f->open_lock);
	if (*a != f->agent || gen != f->generation) {
		agent_unref(f->agent);
		agent_ref(*a);
		f->agent = *a;
		rc = file_open_in(f, *a, gen, 0, NULL, e);
	}
	pthread_mutex_unlock(&f->open_lock);
	if (rc < 0)
		agent_unref(*a);
	return rc;
}

static uint32_t handle_of(struct ops_inside_file *f)
{
	pthread_mutex_lock(&f->lock);
	uint32_t h = f->handle;
	pthread_mutex_unlock(&f->lock);
	return h;
}

/*
 * A read of @n at @off from @f's head, into a copy made for it (*@mem: the
 * head goes once read to its end), *@got bytes: 1, 0 when the head does
 * not hold it, -ENOMEM.
 */
static int head_read(struct ops_inside_file *f, size_t n, off_t off, void **mem, size_t *got)
{
	int rc = 0;
	pthread_mutex_lock(&f->lock);
	size_t at = (size_t)off;
	if (f->head && off >= 0 && at < f->head_len && (n <= f->head_len - at || f->head_whole)) {
		*got = n < f->head_len - at ? n : f->head_len - at;
		*mem = malloc(*got);
		rc = *mem ? 1 : -ENOMEM;
		if (*mem)
			memcpy(*mem, f->head + at, *got);
		if (*mem && at + *got == f->head_len) {
			free(f->head);
			f->head = NULL;
			f->head_len = 0;
		}
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

/*
 * @f was closed inside at its open (it ended within its head,
 * WIRE_OPEN_WHOLE) and is read past what is left of the head: it grew, or
 * the kernel reads again what it dropped. Opened again by its path, for a
 * new head or a handle, once however many reads ask.
 */
static int reopen_whole(struct ops_inside_file *f, struct agent *a, struct err *e)
{
	int rc = 0;
	pthread_mutex_lock(&f->open_lock);
	if (a != f->agent) /* another read moved it to a new attachment meanwhile */
		rc = agent_rc(-ENOTCONN, e);
	else if (handle_of(f) == WIRE_HANDLE_NONE) /* or opened it already */
		rc = file_open_in(f, a, f->generation, 0, NULL, e);
	pthread_mutex_unlock(&f->open_lock);
	return rc;
}

void ops_read_release(struct ops_read *r)
{
	free(r->mem);
	agent_hold_release(r->hold);
	*r = (struct ops_read){0};
}

ssize_t ops_inside_read(struct ops_inside_file *f, const struct caller *who, size_t n, off_t off,
			struct ops_read *r, struct err *e)
{
	struct agent *a;
	int rc = file_ready(f, who, &a, e);
	if (rc < 0)
		return rc;
	size_t got = 0;
	int held = head_read(f, n, off, &r->mem, &got);
	if (held == 0 && handle_of(f) == WIRE_HANDLE_NONE) {
		rc = reopen_whole(f, a, e);
		held = rc < 0 ? rc : head_read(f, n, off, &r->mem, &got);
		if (held == 0 && handle_of(f) == WIRE_HANDLE_NONE)
			held = 1; /* it still ends before @off: 0 bytes */
	}
	ssize_t n_read = (ssize_t)got;
	if (held == 0)
		n_read = agent_read(a, handle_of(f), (uint64_t)off, n, &r->hold, &r->data, e);
	else
		r->data = r->mem;
	agent_unref(a);
	if (held == -ENOMEM)
		return err_set(e, ENOMEM, "read: out of memory");
	if (held < 0)
		return held;
	return n_read < 0 ? agent_rc((int)n_read, e) : n_read;
}

/*
 * Wait until at most @keep of @f's posted writes are unanswered; then the
 * file's failure, if one was told: -errno with @e, else 0. A keeper that
 * answers nothing in AGENT_REPLY_TIMEOUT_MS is EIO.
 */
static int behind_wait(struct ops_inside_file *f, unsigned keep, struct err *e)
{
	struct behind *b = f->behind;
	if (!b)
		return 0;
	int64_t deadline = mono_ms() + AGENT_REPLY_TIMEOUT_MS;
	pthread_mutex_lock(&b->lock);
	bool late = false;
	while (b->pending > keep && !late)
		late = !cond_wait_until(&b->cond, &b->lock, deadline);
	late = b->pending > keep; /* a timeout that raced the last answer is none */
	int err = b->err;
	size_t short_of = b->short_of;
	pthread_mutex_unlock(&b->lock);
	if (late) {
		/* Its writes are told EIO: no later call waits again. */
		pthread_mutex_lock(&f->open_lock);
		struct agent *a = f->agent;
		agent_ref(a);
		pthread_mutex_unlock(&f->open_lock);
		agent_stuck(a);
		agent_unref(a);
		return err_set(e, EIO, "the agent of sandbox %s did not answer a write of /%s",
			       f->id, f->path);
	}
	if (err && short_of)
		return err_set(e, -err, "a write to /%s inside sandbox %s left %zu bytes out",
			       f->path, f->id, short_of);
	if (err)
		return err_set(e, -err, "a write to /%s failed inside sandbox %s: %s", f->path,
			       f->id, strerror(-err));
	return 0;
}

/*
 * @f's @n bytes at @off, posted to @a: 0, or -errno. *@busy when there was
 * no room to post it (the sandbox's posted writes, or every request slot,
 * in use): nothing was sent. Under behind_lock.
 */
static int behind_post(struct ops_inside_file *f, struct agent *a, const void *buf, size_t n,
		       off_t off, bool *busy, struct err *e)
{
	struct behind *b = f->behind;
	pthread_mutex_lock(&b->lock);
	b->refs++, b->pending++;
	pthread_mutex_unlock(&b->lock);
	struct err pe = {0};
	int rc = agent_write_post(a, handle_of(f), (uint64_t)off, buf, n, behind_told, b, &pe);
	if (rc < 0) {
		/* Never told: undone here. */
		pthread_mutex_lock(&b->lock);
		b->pending--;
		b->refs--;
		pthread_mutex_unlock(&b->lock);
	}
	*busy = rc == -EBUSY || rc == -EAGAIN;
	if (rc < 0 && !*busy && e)
		*e = pe;
	return *busy ? 0 : rc;
}

/*
 * @f's write through @a, gone behind: @n, or -errno. *@wait when it could
 * not go (no room): @f's posted writes are then all answered, and the
 * caller writes and waits instead.
 */
static ssize_t write_behind(struct ops_inside_file *f, struct agent *a, const void *buf, size_t n,
			    off_t off, bool *wait, struct err *e)
{
	pthread_mutex_lock(&f->behind_lock);
	int rc = behind_wait(f, INSIDE_BEHIND_MAX - 1, e);
	if (rc == 0)
		rc = behind_post(f, a, buf, n, off, wait, e);
	if (rc == 0 && *wait)
		rc = behind_wait(f, 0, e);
	pthread_mutex_unlock(&f->behind_lock);
	return rc < 0 ? rc : (ssize_t)n;
}

ssize_t ops_inside_write(struct ops_inside_file *f, const struct caller *who, const void *buf,
			 size_t n, off_t off, struct err *e)
{
	struct agent *a;
	if (ops_is_view(f->id))
		return err_set(e, EROFS, "a snapshot's files are read-only");
	int rc = file_ready(f, who, &a, e);
	if (rc < 0)
		return rc;
	n = n < WIRE_DATA_MAX ? n : WIRE_DATA_MAX;
	/*
	 * Only a write-only file goes behind: a reader's page cache would keep
	 * bytes that a failed write never put inside.
	 */
	bool wait = !f->behind;
	ssize_t done = f->behind ? write_behind(f, a, buf, n, off, &wait, e) : 0;
	if (done >= 0 && wait)
		done = agent_write(a, handle_of(f), (uint64_t)off, buf, n, e);
	agent_unref(a);
	ops_inside_changed(f->id);
	return done < 0 ? agent_rc((int)done, e) : done;
}

int ops_inside_flush(struct ops_inside_file *f, struct err *e)
{
	pthread_mutex_lock(&f->behind_lock);
	int rc = behind_wait(f, 0, e);
	pthread_mutex_unlock(&f->behind_lock);
	return agent_rc(rc, e);
}

int ops_inside_fsync(struct ops_inside_file *f, const struct caller *who, struct err *e)
{
	struct agent *a;
	int rc = ops_inside_flush(f, e);
	if (rc < 0)
		return rc;
	rc = file_ready(f, who, &a, e);
	if (rc < 0)
		return rc;
	/* A file closed inside at its open was only read: nothing of it to sync. */
	uint32_t h = handle_of(f);
	if (h != WIRE_HANDLE_NONE)
		rc = agent_rc(agent_handle_op(a, WIRE_FSYNC, h, e), e);
	agent_unref(a);
	return rc;
}

const char *ops_inside_file_id(const struct ops_inside_file *f)
{
	return f->id;
}

void ops_inside_close(struct ops_inside_file *f)
{
	if (!f)
		return;
	/* Writes still unanswered (a release without a FLUSH) keep @behind till they are. */
	/* Only in the attachment it was opened in: a detach closed it inside already. */
	if (agent_attached(f->agent) && f->handle != WIRE_HANDLE_NONE)
		agent_close_nowait(f->agent, f->handle);
	file_free(f);
}

/* One path request that changes sandbox @id (never a snapshot's view: EROFS). */
#define INSIDE_CALL(who, id, e, call)                                                              \
	({                                                                                         \
		struct agent *a;                                                                   \
		unsigned gen_;                                                                     \
		ops_inside_changed(id);                                                            \
		int rc_ = ops_is_view(id) ? err_set(e, EROFS, "a snapshot's files are read-only")  \
					  : inside_agent(who, id, &a, &gen_, e);                   \
		if (rc_ == 0) {                                                                    \
			rc_ = agent_rc(call, e);                                                   \
			agent_unref(a);                                                            \
			ops_inside_changed(id);                                                    \
		}                                                                                  \
		if (rc_ == -EEXIST)                                                                \
			made_forget(id); /* not made through root/: none is known absent */        \
		rc_;                                                                               \
	})

int ops_inside_setattr(const struct caller *who, const char *id, const char *path,
		       const struct ops_inside_attr *set, struct err *e)
{
	int rc = 0;
	if (set->what & OPS_INSIDE_MODE)
		rc = INSIDE_CALL(who, id, e, agent_path_op(a, WIRE_CHMOD, path, set->mode, 0, e));
	if (rc == 0 && (set->what & (OPS_INSIDE_UID | OPS_INSIDE_GID)))
		rc = INSIDE_CALL(who, id, e,
				 agent_path_op(a, WIRE_CHOWN, path,
					       set->what & OPS_INSIDE_UID ? set->uid : (uint32_t)-1,
					       set->what & OPS_INSIDE_GID ? set->gid : (uint32_t)-1,
					       e));
	if (rc == 0 && (set->what & OPS_INSIDE_SIZE))
		rc = INSIDE_CALL(who, id, e,
				 agent_path_op(a, WIRE_TRUNCATE, path, (uint64_t)set->size, 0, e));
	if (rc == 0 && (set->what & OPS_INSIDE_TIMES))
		rc = INSIDE_CALL(who, id, e, agent_utimens(a, path, set->times, e));
	return rc;
}

int ops_inside_mkdir(const struct caller *who, const char *id, const char *path, mode_t mode,
		     struct stat *st, struct err *e)
{
	struct wire_attr attr;
	made_note(id, path);
	int rc = INSIDE_CALL(who, id, e, agent_mkdir(a, path, mode, &attr, e));
	if (rc == 0) {
		made_dir_new(id, path); /* empty: what cp -r makes in it is absent first */
		stat_of(&attr, st);
	}
	return rc;
}

int ops_inside_remove(const struct caller *who, const char *id, const char *path, bool dir,
		      struct err *e)
{
	uint16_t op = dir ? WIRE_RMDIR : WIRE_UNLINK;
	if (dir)
		made_forget(id);
	else
		made_note(id, path);
	return INSIDE_CALL(who, id, e, agent_path_op(a, op, path, 0, 0, e));
}

int ops_inside_rename(const struct caller *who, const char *id, const char *from, const char *to,
		      unsigned flags, struct err *e)
{
	made_forget(id);
	return INSIDE_CALL(who, id, e, agent_rename(a, from, to, flags, e));
}

int ops_inside_symlink(const struct caller *who, const char *id, const char *target,
		       const char *path, struct stat *st, struct err *e)
{
	struct wire_attr attr;
	made_note(id, path);
	int rc = INSIDE_CALL(who, id, e, agent_symlink(a, target, path, &attr, e));
	if (rc == 0)
		stat_of(&attr, st);
	return rc;
}

int ops_inside_link(const struct caller *who, const char *id, const char *from, const char *to,
		    struct stat *st, struct err *e)
{
	struct wire_attr attr;
	made_note(id, to);
	int rc = INSIDE_CALL(who, id, e, agent_link(a, from, to, &attr, e));
	if (rc == 0)
		stat_of(&attr, st);
	return rc;
}

int ops_inside_readlink(const struct caller *who, const char *id, const char *path, char *buf,
			size_t size, struct err *e)
{
	char target[WIRE_PATH_MAX + 1];
	struct agent *a;
	unsigned gen;
	int rc = inside_agent(who, id, &a, &gen, e);
	if (rc == 0) {
		rc = agent_rc(agent_readlink(a, path, target, sizeof(target), e), e);
		agent_unref(a);
	}
	if (rc == 0 && inside_link_contain(path, target, buf, size) < 0)
		rc = err_set(e, ENAMETOOLONG, "the link /%s leads too far", path);
	return rc;
}

/* --- links -------------------------------------------------------------------- */

/* Push @name (n bytes) on @out as a component; -1 past @size. */
static int push_comp(char *out, size_t *len, size_t size, const char *name, size_t n)
{
	if (*len + n + 2 > size)
		return -1;
	if (*len)
		out[(*len)++] = '/';
	memcpy(out + *len, name, n);
	*len += n;
	out[*len] = '\0';
	return 0;
}

/* Pop the last component of @out. */
static void pop_comp(char *out, size_t *len)
{
	char *slash = memrchr(out, '/', *len);
	*len = slash ? (size_t)(slash - out) : 0;
	out[*len] = '\0';
}

/*
 * Does relative @target, followed from @depth directories below root/, stay
 * under it as the host kernel walks it? Only when its ".."s all lead: the
 * kernel walks a ".." after a name from wherever that name led, and the
 * name may be a link (to root/ itself, say: then "x/.." is root/'s parent,
 * though it reads as the link's own directory). Such a target is resolved
 * lexically instead.
 */
static bool stays_below(const char *target, size_t depth)
{
	if (target[0] == '/')
		return false;
	bool named = false;
	for (const char *p = target; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (named || depth == 0)
				return false;
			depth--;
		} else if (n && !(n == 1 && p[0] == '.')) {
			named = true;
		}
		p += n;
		while (*p == '/')
			p++;
	}
	return true;
}

/*
 * Resolve @target lexically as the link at @link_path would inside (".." at
 * / stays at /, as it does there), into components below root/; then write
 * it as the host kernel must follow it: one "../" per directory between the
 * link and root/, then those components. The kernel never climbs past
 * root/ through it, whatever the sandbox wrote (docs/security.md): its
 * ".."s all lead, and each name below is a directory or a link contained
 * in turn.
 */
int inside_link_contain(const char *link_path, const char *target, char *buf, size_t size)
{
	char comps[WIRE_PATH_MAX + 1] = "";
	size_t len = 0, depth = 0;
	for (const char *p = link_path; *p; p++)
		depth += *p == '/';
	/* A relative link that never climbs past root/ leads where it says: kept as written. */
	if (stays_below(target, depth)) {
		if (strlen(target) >= size)
			return -1;
		memcpy(buf, target, strlen(target) + 1);
		return 0;
	}
	depth = 0;
	/* The link's directory: its components, and how deep it is below root/. */
	const char *last = strrchr(link_path, '/');
	if (target[0] != '/' && last) {
		if ((size_t)(last - link_path) >= sizeof(comps))
			return -1;
		memcpy(comps, link_path, (size_t)(last - link_path));
		len = (size_t)(last - link_path);
		comps[len] = '\0';
	}
	for (const char *p = link_path; last && p <= last; p++)
		depth += *p == '/';
	for (const char *p = target; *p;) {
		while (*p == '/')
			p++;
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			pop_comp(comps, &len);
		else if (n && !(n == 1 && p[0] == '.') &&
			 push_comp(comps, &len, sizeof(comps), p, n) < 0)
			return -1;
		p += n;
	}
	size_t out = 0;
	for (size_t i = 0; i < depth; i++) {
		if (out + 3 >= size)
			return -1;
		memcpy(buf + out, i + 1 < depth || len ? "../" : "..", 3);
		out += i + 1 < depth || len ? 3 : 2;
	}
	if (out + len + 2 > size)
		return -1;
	memcpy(buf + out, len || out ? comps : ".", len || out ? len + 1 : 2);
	return 0;
}

/* --- exec ------------------------------------------------------------------- */

/* The output into the stream, up to its cap; past it the command is killed. */
static int exec_take(void *arg, const char *data, size_t len)
{
	struct exec_stream *s = arg;
	size_t room = s->out->len < s->cap ? s->cap - s->out->len : 0;
	size_t n = len < room ? len : room;
	strbuf_add(s->out, data, n);
	if (strbuf_error(s->out) < 0)
		return 1;
	if (n && s->progress)
		s->progress(s->ctx, data, n);
	if (len <= room)
		return 0;
	s->truncated = true;
	return 1;
}

int ops_agent_exec(const struct sandbox *sb, const char *cmdline, struct exec_stream *s,
		   struct err *e)
{
	struct agent *a;
	unsigned gen;
	struct caller root = {0};
	made_forget(sb->id);	    /* the command may make names in them */
	ops_inside_changed(sb->id); /* and change any file: at its start and its end */
	int rc = inside_agent(&root, sb->id, &a, &gen, e);
	if (rc < 0)
		return -ENOTCONN; /* nothing was sent: the caller may take the slow way */
	int status = 0;
	int64_t deadline = ops.runsc.exec_timeout_ms ? mono_ms() + ops.runsc.exec_timeout_ms : 0;
	rc = agent_exec(a, cmdline, exec_take, s, deadline, &status, e);
	agent_unref(a);
	ops_inside_exec_done(sb->id);
	if (rc == -ENOTCONN || rc == -EAGAIN)
		return -ENOTCONN; /* refused before it was sent */
	s->timed_out = rc == -ETIMEDOUT;
	if (rc == -ETIMEDOUT)
		rc = 0;
	if (rc < 0)
		return rc;
	s->code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	return 0;
}

/* --- ps (sandboxes/<id>/ps) ---------------------------------------------------- */

/* @s seconds as ps writes a time: [[DD-]HH:]MM:SS. */
static void ps_time(char *out, size_t size, uint64_t s)
{
	uint64_t d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60;
	if (d)
		snprintf(out, size, "%" PRIu64 "-%02" PRIu64 ":%02" PRIu64 ":%02" PRIu64, d, h, m,
			 s % 60);
	else if (h)
		snprintf(out, size, "%02" PRIu64 ":%02" PRIu64 ":%02" PRIu64, h, m, s % 60);
	else
		snprintf(out, size, "%02" PRIu64 ":%02" PRIu64, m, s % 60);
}

static int ps_line(const struct agent_proc *p, void *arg)
{
	char t[32];
	ps_time(t, sizeof(t), p->cpu_ms / 1000);
	strbuf_addf(arg, "%7" PRIu32 " %7" PRIu32 " %5" PRIu32 " %-5c %9" PRIu64 " %8s %s\n",
		    p->pid, p->ppid, p->uid, p->state, p->rss / 1024, t, p->comm);
	return strbuf_error(arg);
}

bool ops_sandbox_has_ps(const struct sandbox *sb)
{
	return state_errno(sb->state) != ENOENT;
}

int ops_sandbox_ps(const struct caller *who, const char *id, struct strbuf *out, struct err *e)
{
	struct agent *a;
	unsigned gen;
	int rc = inside_agent(who, id, &a, &gen, e);
	if (rc < 0)
		return rc;
	size_t start = out->len;
	strbuf_addf(out, "%7s %7s %5s %-5s %9s %8s %s\n", "PID", "PPID", "UID", "STATE", "RSS",
		    "TIME", "COMMAND");
	rc = agent_rc(agent_ps(a, ps_line, out, e), e);
	agent_unref(a);
	if (rc == 0 && strbuf_error(out) < 0)
		rc = err_set(e, ENOMEM, "out of memory");
	if (rc < 0)
		strbuf_setlen(out, start); /* no half a list */
	return rc;
}

/*
 * tree.h - the shape of the mounted tree, as data.
 *
 * Every directory is a table of struct fs_entry rows (its fixed names) plus
 * at most one kind of dynamic child (one per image, sandbox or snapshot).
 * A row says what the file is (mode), how its content is made (read),
 * what a written line does (write), and so on; root.c, sandboxes.c and
 * snapshots.c hold the tables and the small functions they name. tree.c
 * walks the tables: lookup, existence, attributes and listings. file.c
 * serves open files from the same rows.
 *
 * Nothing here caches objects: each lookup and getattr asks ops whether
 * the node's object still exists, so deleted objects give ENOENT.
 *
 * Who asks: every function that shows or loads an object takes the
 * caller's credentials (@who) and hands them to ops (ops/ops_view.c),
 * which shows only what ops/access.h lets it see: another user's
 * sandbox or snapshot gives ENOENT, its files and listings included, and
 * listings leave it out. Nodes under an object are
 * owned by the object's owner (st_uid, st_gid), the rest by root, with the
 * modes of the tables, which are the same with or without allow_other.
 *
 * Adding a control file (say sandboxes/<id>/X):
 *
 *  1. The operation, in ops/: an ops_sandbox_*() or ops_snapshot_*() call
 *     (ops/ops.h) that checks the line's words and acts, 0 or -errno with
 *     the sentence in its struct err. A setting of a `created` sandbox is
 *     a new enum sandbox_field for ops_sandbox_set(); one that may change
 *     later has a call of its own (ops_sandbox_set_timeout). If a spec may
 *     carry it too, its key goes in ops/spec.c; if info.json shows it, in
 *     ops/ops_view.c.
 *  2. The row, in its directory's table: sandbox_files[] in
 *     fs/sandboxes.c, snapshot_files[] in fs/snapshots.c, root_files[] in
 *     fs/root.c. Its name, its mode (0400 read, 0600 read and write:
 *     owner-only under an object, see ops/access.h; no file is write-only,
 *     so tar and rsync of a directory read every file) and how it acts:
 *       - one-word actions ("1", "async"): .write = file_action_write,
 *         .read = file_empty_read and .action = the ops call (start,
 *         suspend, delete);
 *       - a line that sets a value: a .write (and a .read that gives it
 *         back), a small function beside the others (timeout_write);
 *       - work that makes objects and answers their ids (snapshot, fork,
 *         new): FS_STREAM and file_id_action() (fs/file.h);
 *       - lines that are one value together: file_collect() (env), or
 *         file_collect_check() with a .flush (egress);
 *       - a read that waits: FS_WAIT with .action and .settled (wait).
 *     The table's order is the listing's. Nothing else in fs/ changes:
 *     tree.c walks the table (lookup, getattr, readdir) and file.c frames
 *     the lines (fs/control.h), answers the write and reports a refusal
 *     in `errors` (and a sandbox's `error`: ops_report_error()).
 *  3. The mounted README: readme[] in fs/root.c lists the file in its
 *     directory's lines, and its examples show a write that takes words.
 *  4. The documents: docs/design.md, "The tree" (what a read gives, what a
 *     write does, its errnos); docs/control-files.md where the contract
 *     leaves a choice open; snapfs(8)'s CONTROL FILES
 *     (docs/man/snapfs.8.scd).
 *  5. Tests: the ops call in a tests/unit/test_ops_*.c (fake-runsc); the file
 *     on a mount in tests/integration/ (test_controls.sh or the feature's
 *     own, as test_autosnapshot.sh), each refusal with expect_refusal; a
 *     sandbox's file in test_basic.sh's list of the files a sandbox has.
 */
#ifndef SNAPFS_FS_TREE_H
#define SNAPFS_FS_TREE_H

#include <stdbool.h>
#include <sys/stat.h>

#include "fs/fs.h"
#include "fs/inode.h"
#include "fs/pending.h"
#include "lib/strbuf.h"
#include "ops/ops.h"

struct fs_file;

/* Content of a generated file, made afresh for @who. -ENOENT when the object is gone. */
typedef int (*fs_read_fn)(const struct fs_node *n, const struct caller *who, struct strbuf *out);
/* Act on one whole line written to @f; long work finishes through @p. */
typedef int (*fs_write_fn)(struct fs_file *f, const char *line, struct pending *p, struct err *e);
/* Act on what is left at FLUSH (beyond the last line, already handed to write). */
typedef int (*fs_flush_fn)(struct fs_file *f, struct pending *p, struct err *e);
/* An ops_* call taking an object id and a completion (start, wait, delete...). */
typedef int (*fs_action_fn)(const struct caller *who, const char *id, ops_done_fn done, void *ctx,
			    struct err *e);
/* Symlink target into @buf. */
typedef int (*fs_link_fn)(const struct fs_node *n, const struct caller *who, char *buf,
			  size_t size);
/* Does @n exist for @who beyond its object existing? (conditional and dynamic rows) */
typedef int (*fs_exists_fn)(const struct fs_node *n, const struct caller *who);

enum fs_flags {
	FS_OBJECT = 1 << 0,   /* a dynamic directory named by its object: id = name */
	FS_STREAM = 1 << 1,   /* reads on an open file continue; a write's result replaces them */
	FS_WAIT = 1 << 2,     /* a read at offset 0 is held until .action completes */
	FS_STATUS = 1 << 3,   /* poll: POLLPRI once it differs from what this file saw */
	FS_CREATORS = 1 << 4, /* group-owned by who may create (access_create_gid) */
	FS_INSIDE = 1 << 5,   /* root/: what is under it is the sandbox's own (fs/inside.h) */
	FS_SCRIPT = 1 << 6,   /* lines make one script, run at a read or the close (exec) */
	FS_NOSIZE = 1 << 7,   /* st_size 0, as /proc's: a read costs a runsc call (usage) */
	/* mtime: the last change of any sandbox, or snapshot (ops_tree_changed_at: indexes) */
	FS_SANDBOXES_TIME = 1 << 8,
	FS_SNAPSHOTS_TIME = 1 << 9,
	/* mtime: now (metrics: made afresh at each read) */
	FS_LIVE_TIME = 1 << 10,
	/* Left out of listings, found by name, as /proc's thread ids: what crawlers must not read.
	 */
	FS_UNLISTED = 1 << 11,
	/*
	 * A link whose target never changes (root -> .root): the kernel keeps
	 * its entry as a directory's, so a path through root/ costs no lookup
	 * of it each time, only its readlink.
	 */
	FS_STABLE_LINK = 1 << 12,
};

struct fs_entry {
	const char *name;     /* NULL for the dynamic child row */
	mode_t mode;	      /* S_IFDIR | 0700, S_IFREG | 0400 / 0600 ... */
	enum fs_scope scope;  /* FS_OBJECT rows: the scope they open */
	unsigned flags;	      /* enum fs_flags */
	fs_read_fn read;      /* regular files: content (the fresh read for rw files) */
	fs_write_fn write;    /* writable files */
	fs_flush_fn flush;    /* writable files that collect lines (sandboxes/new) */
	fs_action_fn action;  /* FS_WAIT and the one-word control files */
	fs_exists_fn exists;  /* conditional and dynamic rows; NULL: exists with its object */
	fs_exists_fn settled; /* FS_WAIT: 1 once settled (poll: POLLIN), 0 before */
	fs_link_fn link;      /* symlinks */
	/* FS_SCRIPT: a read of a file nothing was written on follows what this starts */
	int (*follow)(struct fs_file *f, struct err *e);
	struct logfile *(*journal)(void); /* journals: read at the offset (lib/logfile.h) */
	const struct fs_log *log;	  /* an object's log (console): read at the offset */
	const struct fs_dir *dir;	  /* directories */
};

/*
 * An object's log, read at the offset as the journals are (lib/logfile.h):
 * an open file holds a view (@open) until it is freed (@close), so its
 * offsets only grow across rotations; a stat opens one for the size.
 */
struct fs_log {
	int (*open)(const struct fs_node *n, const struct caller *who, struct logfile **out);
	void (*close)(struct logfile *lf);
	ssize_t (*read)(struct logfile *lf, char *buf, size_t size, int64_t off);
	int (*stat)(struct logfile *lf, int64_t *size, struct timespec *mtime);
};

struct fs_dir {
	const struct fs_entry *entries; /* the fixed names */
	size_t nentries;
	const struct fs_entry *child; /* the dynamic children's row, or NULL */
	/* Call @fn with each dynamic child's name @who may see; a non-zero return stops. */
	int (*each)(const struct fs_node *dir, const struct caller *who,
		    int (*fn)(const char *name, void *arg), void *arg);
	int (*mkdir)(const struct fs_node *dir, const struct caller *who, const char *name,
		     struct err *e);
	/* Remove @child; long work answers through @p. */
	int (*rmdir)(const struct fs_node *child, const struct caller *who, struct pending *p,
		     struct err *e);
};

#define FS_DIR(tbl, ...)                                                                           \
	{                                                                                          \
		.entries = (tbl), .nentries = ARRAY_SIZE(tbl), __VA_ARGS__                         \
	}

/* The tables (root.c, sandboxes.c, snapshots.c). */
extern const struct fs_entry fs_root_entry;
extern const struct fs_dir fs_images_dir;
extern const struct fs_dir fs_sandboxes_dir;
extern const struct fs_dir fs_snapshots_dir;

/*
 * The child @name of directory @dir, checked to exist for @who: 0,
 * -ENOENT, or -ENOTDIR. Unless -ENOTDIR, @out is filled (all but ino) even
 * when the object does not exist (mkdir needs it); out->ent is NULL when
 * @dir has no row for the name at all.
 */
int tree_child(const struct fs_node *dir, const char *name, const struct caller *who,
	       struct fs_node *out);
/* Does @n (still) exist for @who? 0 or -ENOENT. */
int tree_check(const struct fs_node *n, const struct caller *who);
/*
 * May @who open @n with open(2) @flags? 0; -ENOENT as tree_check; -EACCES
 * for a mode that does not let it (root, too, neither writes a read-only
 * file nor reads a write-only one). The errno is the whole answer: an open
 * the mode refuses is no request, so it is reported nowhere (`cat *`,
 * `grep -r` and `tar` open every file of a directory, the write-only ones
 * too, and must not rewrite its `error` or fill `errors`).
 */
int tree_open_check(const struct fs_node *n, const struct caller *who, int flags);
/* Attributes of @n as @who sees them, checked to exist; the size of generated files is honest. */
int tree_stat(const struct fs_node *n, const struct caller *who, struct stat *st);
/* How long the kernel may keep @n's entry and attributes. */
double tree_timeout(const struct fs_node *n);
/*
 * Other users' requests arrive (allow_other). The kernel's entry cache is
 * shared by every user: an object's directory that root looked up would
 * be found by anybody else without asking, so none is cached then.
 */
void tree_set_shared(bool on);
/*
 * Call @fn for each entry of directory @dir @who may see, "." and ".." first;
 * FS_UNLISTED rows are not among them (they answer a lookup by name only).
 */
typedef int (*tree_fill_fn)(const char *name, mode_t mode, fuse_ino_t ino, void *arg);
int tree_list(const struct fs_node *dir, const struct caller *who, tree_fill_fn fn, void *arg);

/*
 * Report @who's refused request on @n with ops_report_error (@e gets a
 * sentence if it has none).
 */
void tree_report(const struct fs_node *n, const struct caller *who, int rc, struct err *e);

/* The objects as @who sees them, loaded afresh (caller frees): -ENOENT when gone or another's. */
int tree_sandbox(const struct caller *who, const char *id, struct sandbox **out);
int tree_snapshot(const struct caller *who, const char *id, struct snapshot **out);

/*
 * Names collected during a walk (ops_sandboxes_each() and friends), handed
 * on after it: walks stay short (writes on the registry's connection wait
 * for them) and callbacks may query.
 */
int tree_names_add(struct strbuf *names, const char *name);
/* Walk callbacks that add the object's id to @names (a struct strbuf). */
int tree_sandbox_name(const struct sandbox *sb, void *names);
int tree_snapshot_name(const struct snapshot *snap, void *names);
int tree_names_each(const struct strbuf *names, int (*fn)(const char *name, void *arg), void *arg);

/* For readers: @s and a newline ("" stays empty). JSON views: lib/json.h json_print(). */
int tree_line(struct strbuf *out, const char *s);

#endif

/*
 * scratch.h - the scratch store: the bytes of the files users create in
 * the tree's writable directories, held until a rename(2) applies them to
 * a control or setting file (fs/replace.c; docs/control-files.md,
 * "Atomic replace").
 *
 * Editors, `sed -i`, Python's tempfile + os.replace and Ansible write a
 * temporary file beside the target and rename it onto the target; `mv`
 * across filesystems and `install` unlink the target and create it anew
 * with O_EXCL. The store holds what that takes, and nothing more:
 *
 *  - a scratch file: the bytes written under one name by one uid, seen by
 *    that uid only. It lives while open and SCRATCH_LINGER_MS after its
 *    last close (the tools close it before they rename it), then goes; an
 *    unlink or a rename takes it at once. A *bound* one was created where
 *    its creator had just unlinked a control file (a mark, below): its
 *    close applies it to that file, and it goes at its last close.
 *  - a mark: a writable control file its uid unlinked, hidden from that
 *    uid for SCRATCH_MARK_MS so that the create with O_EXCL which follows
 *    (install, mv) reaches the daemon; the create takes it.
 *
 * Bounds, per uid, marks included in the count: SCRATCH_FILES_MAX entries
 * (-EDQUOT past it), SCRATCH_FILE_MAX bytes in one file (-EFBIG, as
 * write(2) past a file size limit), SCRATCH_BYTES_MAX bytes in all
 * (-EDQUOT). So what one user holds is bounded, and every user's together
 * grows only with the number of users.
 *
 * Names: an entry is its uid and its node path ("sandboxes/web/sedX1").
 * Open files hold an entry by its id, which is never reused; an entry an
 * open file holds outlives its name (unlink, rename) until its last close.
 *
 * Ownership and threads: the store owns every entry and its bytes behind
 * one lock; callers get copies. Expired entries are dropped by the calls
 * that look (no thread). Pure code: no FUSE, no ops; tests/unit/test_scratch.c.
 */
#ifndef SNAPFS_FS_SCRATCH_H
#define SNAPFS_FS_SCRATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/strbuf.h"

#define SCRATCH_FILES_MAX 16
#define SCRATCH_FILE_MAX (1u << 20)
#define SCRATCH_BYTES_MAX (4u << 20)
#define SCRATCH_LINGER_MS 10000
#define SCRATCH_MARK_MS 2000
#define SCRATCH_PATH_MAX 512

/*
 * Create @uid's scratch file @path, open once (scratch_close() ends that):
 * its id into @id. @bound: it takes @uid's mark of @path, which must be
 * there (-ENOENT otherwise). -EEXIST when @uid has a file of that name,
 * -EDQUOT past the count, -ENAMETOOLONG.
 */
int scratch_create(uid_t uid, const char *path, bool bound, uint64_t *id);
/*
 * What @uid sees at @path: 1 and its id when a scratch file, -ENOENT when
 * a mark hides the tree's file there, 0 when the store has nothing.
 */
int scratch_lookup(uid_t uid, const char *path, uint64_t *id);
/* Hide the tree's file @path from @uid for SCRATCH_MARK_MS. -EDQUOT past the count. */
int scratch_mark(uid_t uid, const char *path);

/* One more open of entry @id; -ENOENT when gone. */
int scratch_open(uint64_t id);
/* One open fewer: the last close starts the linger, or frees a bound or nameless entry. */
void scratch_close(uint64_t id);

/* Read up to @size bytes at @off into @buf: the count, or -ENOENT. */
ssize_t scratch_read(uint64_t id, char *buf, size_t size, off_t off);
/* Write @size bytes at @off (a hole reads as zeros): the count, -EFBIG, -EDQUOT, -ENOENT. */
ssize_t scratch_write(uint64_t id, const char *buf, size_t size, off_t off);
/* Set the size (truncate or extend with zeros): 0, -EFBIG, -EDQUOT, -ENOENT. */
int scratch_truncate(uint64_t id, off_t size);

struct scratch_info {
	uid_t uid;
	bool bound;
	size_t size;
	int64_t mtime_ms;
	char path[SCRATCH_PATH_MAX];
};
/* Entry @id's attributes: 0, or -ENOENT when gone. */
int scratch_info(uint64_t id, struct scratch_info *out);

/*
 * Take entry @id's bytes into @out and end its name (rename, and a bound
 * file's close): open files keep it until their last close, reading what
 * it held. With @only_dirty, 0 and nothing taken unless written since the
 * last take (a bound file closed twice applies once); 1 when taken.
 */
int scratch_take(uint64_t id, bool only_dirty, struct strbuf *out);
/* Rename @uid's scratch file @from to @to, replacing @uid's file there. -ENOENT, -ENAMETOOLONG. */
int scratch_rename(uid_t uid, const char *from, const char *to);
/* Unlink @uid's scratch file @path (or take back its mark): 0 or -ENOENT. */
int scratch_unlink(uid_t uid, const char *path);

/*
 * Call @fn with the name of each of @uid's scratch files in directory
 * @dir (a node path), the lock not held; a non-zero return stops.
 */
int scratch_each(uid_t uid, const char *dir, int (*fn)(const char *name, void *arg), void *arg);
/*
 * Every uid's names under directory @dir (a node path) go: its object was
 * removed (rmdir, rm -rf), and a sandbox made again under the same name
 * must not find its files hidden by marks or its directory holding old
 * scratch files. Open files keep their entries until their last close.
 */
void scratch_forget_dir(const char *dir);
/* Entries @uid holds now, and their bytes (metrics, tests). */
void scratch_usage(uid_t uid, unsigned *files, size_t *bytes);
/* Drop every entry, open or not (shutdown, tests). */
void scratch_reset(void);

#endif

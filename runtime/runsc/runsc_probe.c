/*
 * runsc_probe.c - what this runsc's checkpoint can do, asked once at
 * start-up (runtime/runsc/runsc.h: runsc_probe_checkpoint()). Only the public
 * runsc calls are used here.
 */
#include "runtime/runsc/runsc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool runsc_help_has_flag(const char *help, const char *flag)
{
	size_t n = strlen(flag);
	for (const char *p = help; *p; p += strcspn(p, "\n"), p += (*p == '\n')) {
		const char *w = p + strspn(p, " \t");
		if (*w != '-')
			continue;
		w += (w[1] == '-') ? 2 : 1;
		if (strncmp(w, flag, n) == 0 && strchr(" \t=\n", w[n]))
			return true;
	}
	return false;
}

/*
 * 0 if an aligned O_DIRECT write into a new file in directory @dfd works,
 * else why not (-errno). The file is new (O_EXCL, no symlink followed): the
 * probe never writes to or truncates anything that was there.
 */
static int dir_takes_direct(int dfd)
{
	char name[32], hex[17];
	int rc = random_hex(hex, 16);
	if (rc < 0)
		return rc;
	snprintf(name, sizeof(name), ".direct-probe-%s", hex);
	_cleanup_free_ void *block = NULL;
	if (posix_memalign(&block, 4096, 4096) != 0)
		return -ENOMEM;
	memset(block, 0, 4096);
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_DIRECT | O_CLOEXEC,
			0600);
	ssize_t n = fd < 0 ? -1 : write(fd, block, 4096);
	if (n < 0)
		rc = -errno;
	else if (n != 4096)
		rc = -EIO; /* short: this filesystem does not take whole O_DIRECT blocks */
	if (fd >= 0) {
		close(fd);
		unlinkat(dfd, name, 0);
	}
	return rc;
}

void runsc_probe_checkpoint(struct runsc *rs, int image_parent_fd, const char *image_parent)
{
	_cleanup_free_ char *help = NULL;
	struct err e = {0};
	if (runsc_help(rs, "checkpoint", &help, &e) < 0)
		warning("cannot ask runsc which checkpoint flags it has: %s", e.msg);
	rs->checkpoint_cuda = help && runsc_help_has_flag(help, "cuda-checkpoint-path");
	info("runsc %s %s --cuda-checkpoint-path: %s checkpoints CUDA processes", rs->version,
	     rs->checkpoint_cuda ? "has" : "lacks", rs->checkpoint_cuda ? "runsc" : "snapfs");
	if (!help || !runsc_help_has_flag(help, "direct")) {
		info("snapshots write their pages through the page cache (runsc lacks --direct)");
		return;
	}
	int rc = dir_takes_direct(image_parent_fd);
	rs->checkpoint_direct = rc == 0;
	if (rc == 0)
		info("snapshots write their pages with O_DIRECT (runsc --direct)");
	else
		info("snapshots write their pages through the page cache: an O_DIRECT write "
		     "into %s failed: %s",
		     image_parent, strerror(-rc));
}

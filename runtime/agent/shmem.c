/*
 * shmem.c - the keeper's read memory, a sealed memfd of slots (shmem.h).
 */
#include "runtime/agent/shmem.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/log.h"
#include "runtime/agent/wire.h"

/* The memfd's name: its /proc links read "/memfd:snapfs-agent-reads (deleted)". */
#define SHMEM_NAME "snapfs-agent-reads"

void shmem_init(struct shmem *s)
{
	s->fd = -1;
	s->base = NULL;
	s->busy = 0;
	pthread_mutex_init(&s->lock, NULL);
}

int shmem_open(struct shmem *s, struct err *e)
{
	if (s->fd >= 0)
		return 0;
	int fd = memfd_create(SHMEM_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return err_set(e, errno, "cannot make the agent's read memory: %s",
			       strerror(errno));
	/* Sealed before the sandbox ever has it: it can never shrink our mapping. */
	void *p = MAP_FAILED;
	if (ftruncate(fd, WIRE_SHM_BYTES) == 0 &&
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0)
		p = mmap(NULL, WIRE_SHM_BYTES, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		int err = errno;
		close(fd);
		return err_set(e, err, "cannot make the agent's read memory: %s", strerror(err));
	}
	s->fd = fd;
	s->base = p;
	return 0;
}

bool shmem_take(struct shmem *s, uint32_t *slot)
{
	bool took = false;
	pthread_mutex_lock(&s->lock);
	for (uint32_t i = 0; s->base && i < WIRE_SHM_SLOTS && !took; i++)
		if (!(s->busy & (1u << i))) {
			s->busy |= 1u << i;
			*slot = i;
			took = true;
		}
	pthread_mutex_unlock(&s->lock);
	return took;
}

void shmem_give(struct shmem *s, uint32_t slot)
{
	pthread_mutex_lock(&s->lock);
	s->busy &= ~(1u << slot);
	pthread_mutex_unlock(&s->lock);
}

const uint8_t *shmem_slot(const struct shmem *s, uint32_t slot)
{
	return s->base + (size_t)slot * WIRE_DATA_MAX;
}

/*
 * Is @name (an entry of a /proc/PID/fd) a descriptor of the file @ours is
 * the stat of? Only a memfd of ours is stat()ed: following any other link
 * could wait on a file system that does not answer.
 */
static bool is_ours(int dfd, const char *name, const struct stat *ours)
{
	static const char prefix[] = "/memfd:" SHMEM_NAME;
	char target[sizeof(prefix)];
	struct stat st;
	ssize_t n = readlinkat(dfd, name, target, sizeof(target) - 1);
	if (n != (ssize_t)sizeof(target) - 1)
		return false;
	target[n] = 0;
	return !strcmp(target, prefix) && fstatat(dfd, name, &st, 0) == 0 &&
	       st.st_dev == ours->st_dev && st.st_ino == ours->st_ino;
}

/* Has process @pid a descriptor of the file @ours is the stat of? */
static bool has_file(const char *pid, const struct stat *ours)
{
	char path[300];
	snprintf(path, sizeof(path), "/proc/%s/fd", pid);
	DIR *d = opendir(path);
	if (!d) /* gone meanwhile is nothing held; not readable proves nothing */
		return errno != ENOENT && errno != ESRCH;
	bool held = false;
	struct dirent *de;
	while (!held && (de = readdir(d)))
		held = de->d_name[0] != '.' && is_ours(dirfd(d), de->d_name, ours);
	closedir(d);
	return held;
}

bool shmem_held_inside(const struct shmem *s)
{
	struct stat ours;
	if (s->fd < 0 || fstat(s->fd, &ours) < 0)
		return false;
	DIR *proc = opendir("/proc");
	if (!proc)
		return true; /* nothing proven */
	char me[24];
	snprintf(me, sizeof(me), "%d", (int)getpid());
	bool held = false;
	struct dirent *de;
	while (!held && (de = readdir(proc)))
		held = de->d_name[0] >= '1' && de->d_name[0] <= '9' &&
		       strcmp(de->d_name, me) != 0 && has_file(de->d_name, &ours);
	closedir(proc);
	return held;
}

void shmem_close(struct shmem *s)
{
	if (s->base)
		munmap((void *)s->base, WIRE_SHM_BYTES);
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	s->base = NULL;
	pthread_mutex_destroy(&s->lock);
}

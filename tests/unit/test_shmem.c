/* runtime/agent/shmem.c: the keeper's read memory, sealed, read-only to us, lent a slot at a time.
 */
#include "runtime/agent/shmem.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/agent/wire.h"
#include "tests/unit/t.h"

/* What the sandbox can do to it: write any slot, but not resize it, nor unseal it. */
static void test_sealed(void)
{
	struct shmem s;
	shmem_init(&s);
	struct err e = {0};
	CHECK(shmem_open(&s, &e) == 0);
	struct stat st;
	CHECK(fstat(s.fd, &st) == 0 && st.st_size == WIRE_SHM_BYTES);
	int seals = fcntl(s.fd, F_GET_SEALS);
	CHECK(seals >= 0 && (seals & F_SEAL_SHRINK) && (seals & F_SEAL_GROW) &&
	      (seals & F_SEAL_SEAL));
	CHECK(ftruncate(s.fd, 4096) < 0);	/* a shrink would fault our reads */
	CHECK(fcntl(s.fd, F_ADD_SEALS, 0) < 0); /* sealed for good */
	/* A write of the keeper's is what our slot shows. */
	uint8_t *theirs = mmap(NULL, WIRE_SHM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, s.fd, 0);
	CHECK(theirs != MAP_FAILED);
	memcpy(theirs + 3 * (size_t)WIRE_DATA_MAX, "inside", 6);
	CHECK(memcmp(shmem_slot(&s, 3), "inside", 6) == 0);
	munmap(theirs, WIRE_SHM_BYTES);
	/* Our mapping is read-only: nothing of ours goes into it by mistake. */
	char line[512];
	bool read_only = false;
	FILE *maps = fopen("/proc/self/maps", "r");
	unsigned long lo;
	while (maps && fgets(line, sizeof(line), maps))
		if (sscanf(line, "%lx-", &lo) == 1 && lo == (unsigned long)s.base)
			read_only = strncmp(strchr(line, ' ') + 1, "r--s", 4) == 0;
	if (maps)
		fclose(maps);
	CHECK(read_only);
	shmem_close(&s);
}

static void test_slots(void)
{
	struct shmem s;
	shmem_init(&s);
	uint32_t slot, got[WIRE_SHM_SLOTS];
	CHECK(!shmem_take(&s, &slot)); /* none before it is open */
	struct err e = {0};
	CHECK(shmem_open(&s, &e) == 0);
	int fd = s.fd;
	CHECK(shmem_open(&s, &e) == 0 && s.fd == fd); /* once per agent */
	for (uint32_t i = 0; i < WIRE_SHM_SLOTS; i++) {
		CHECK(shmem_take(&s, &got[i]));
		for (uint32_t k = 0; k < i; k++)
			CHECK(got[k] != got[i]);
	}
	CHECK(!shmem_take(&s, &slot)); /* all lent: the read goes by the pipe */
	shmem_give(&s, got[5]);
	CHECK(shmem_take(&s, &slot) && slot == got[5]);
	for (uint32_t i = 0; i < WIRE_SHM_SLOTS; i++)
		shmem_give(&s, got[i]);
	shmem_close(&s);
}

/* The detach proof: another process (as a sentry) holding it open is seen, until it ends. */
static void test_held_inside(void)
{
	struct shmem s;
	shmem_init(&s);
	struct err e = {0};
	CHECK(shmem_open(&s, &e) == 0);
	CHECK(!shmem_held_inside(&s)); /* our own descriptor is not another's */
	int ready[2];
	CHECK(pipe(ready) == 0);
	pid_t pid = fork();
	if (pid == 0) { /* keeps the inherited memfd, as gVisor keeps a donated one */
		close(ready[0]);
		(void)!write(ready[1], "r", 1);
		pause();
		_exit(0);
	}
	char c;
	close(ready[1]);
	CHECK(read(ready[0], &c, 1) == 1);
	CHECK(shmem_held_inside(&s));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	CHECK(!shmem_held_inside(&s));
	close(ready[0]);
	shmem_close(&s);
}

int main(void)
{
	test_sealed();
	test_slots();
	test_held_inside();
	return t_done();
}

/*
 * shmem.h - the memory a sandbox's keeper reads files into for the daemon
 * (READ_SHM, wire.h): one sealed memfd of WIRE_SHM_SLOTS slots of
 * WIRE_DATA_MAX bytes, made once per agent and handed to every keeper
 * that attaches (runsc exec --pass-fd), so a READ's bytes cross without
 * a write into the channel pipe inside gVisor, which was most of a large
 * read's time (runtime/agent/DESIGN.md).
 *
 * Trust: the sandbox may write any slot at any time. The daemon maps the
 * memfd read-only and only copies bytes out of a slot it lent for one
 * request, for that request's reply: a slot's bytes are the sandbox's
 * file data, which it could have answered anyway. The memfd is sealed
 * (no shrink, no grow, no new seals), so the sandbox cannot cut the
 * daemon's mapping short: a read of it never faults.
 *
 * Threads: shmem_take() and shmem_give() from any thread (@lock guards
 * @busy); shmem_open() and shmem_close() by the owner alone.
 */
#ifndef SNAPFS_AGENT_SHMEM_H
#define SNAPFS_AGENT_SHMEM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/util.h"

struct shmem {
	int fd;		     /* the memfd, passed to each attach; -1: none */
	const uint8_t *base; /* our read-only mapping of it */
	pthread_mutex_t lock;
	uint32_t busy; /* bit i: slot i is lent to a request; under lock */
};

/* @s empty (fd -1): shmem_take() lends nothing until shmem_open(). */
void shmem_init(struct shmem *s);
/* Make and map the memfd, if not yet: 0, or -errno with @e (reads then go by the pipe). */
int shmem_open(struct shmem *s, struct err *e);
/* A free slot's index into *@slot: true, or false when none is free or there is no memfd. */
bool shmem_take(struct shmem *s, uint32_t *slot);
void shmem_give(struct shmem *s, uint32_t slot);
/* Slot @slot's WIRE_DATA_MAX bytes (the sandbox's to write). */
const uint8_t *shmem_slot(const struct shmem *s, uint32_t slot);
/*
 * Does another process (a sandbox's sentry) hold the memfd open? gVisor
 * keeps a donated host file open for as long as anything inside refers to
 * it, a descriptor or a mapping: the detach proof for the read memory,
 * since a checkpoint taken while the sandbox holds a host file does not
 * restore. Every process's descriptors are looked at (a sentry is not
 * always our child: not after a daemon restart), by their links: one
 * readlink each, and a stat only of a memfd of this name. From /proc, not
 * runsc, whose calls wait on a container's lock.
 */
bool shmem_held_inside(const struct shmem *s);
/* Unmap and close, at the agent's end: no slot may be lent. */
void shmem_close(struct shmem *s);

#endif

/*
 * ports.h - a sandbox's published ports as text: the `ports` file's lines
 * and the record kept of them (docs/network.md, "Published ports").
 *
 * The record is "PORT HOSTPORT" lines, one per published port, in the
 * order they were published: a sandbox's row holds the host ports bound
 * (so a restart binds them again), a snapshot's and its manifest hold 0
 * for each (a fork publishes them on new host ports). The record also
 * comes from the bucket (another host's manifest): ports_decode() is the
 * one check of it. Pure functions; nothing allocates.
 */
#ifndef SNAPFS_PORTS_H
#define SNAPFS_PORTS_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/limits.h"
#include "lib/util.h"

struct port_map {
	uint16_t port;	    /* the sandbox's, 1..65535 */
	uint16_t host_port; /* 0: none bound yet (a snapshot's, a fork's before it publishes) */
};

struct ports {
	struct port_map v[PORTS_SANDBOX_MAX];
	unsigned n;
};

enum ports_verb {
	PORTS_PUBLISH, /* `PORT`, `PORT HOSTPORT` or `PORT ADDRESS:HOSTPORT` (a read's line) */
	PORTS_CLOSE,   /* `close PORT` */
};

struct ports_line {
	enum ports_verb verb;
	uint16_t port;
	uint16_t host_port; /* 0: one the kernel picks */
	bool has_address;   /* `ADDRESS:HOSTPORT`: the line names the address it listens on */
	uint32_t address;   /* that IPv4 address, in network byte order */
};

/*
 * One line written to `ports`: 0, or -EINVAL with the sentence in @e. A
 * publish may give its host port as a read shows it, `ADDRESS:HOSTPORT`
 * (a dotted IPv4 address), so that a read's lines can be written back.
 */
int ports_line_parse(const char *line, struct ports_line *out, struct err *e);
/* A spec's `ports`: sandbox ports separated by spaces (host ports 0); -EINVAL with a sentence. */
int ports_list_parse(const char *words, struct ports *out, struct err *e);
/* A record into @out: 0, or -EINVAL for one that is not (bad numbers, a port twice, too many). */
int ports_decode(const char *text, struct ports *out);
/* Is @text a record? (the snapshot metadata's check: runtime/snapmeta.c) */
bool ports_record_ok(const char *text);
/* @p as a record; with @hosts false every host port is written as 0 (a snapshot's). */
void ports_encode(const struct ports *p, bool hosts, char out[PORTS_TEXT_MAX]);
/* The index of sandbox port @port in @p, or -1. */
int ports_find(const struct ports *p, uint16_t port);
void ports_remove(struct ports *p, unsigned i);

#endif

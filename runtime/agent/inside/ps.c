/*
 * ps.c - the agent's PS: the sandbox's processes from its own /proc, the
 * keeper and its ready shell (exec.c) left out. What the sentry's /proc says is copied as is; the
 * daemon checks every field before it shows one (ops/ops_agent.c).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/agent/inside/inside.h"

/* /proc/@pid/@what into @buf (NUL-terminated); its length, or -1. */
static ssize_t slurp(long pid, const char *what, char *buf, size_t size)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%ld/%s", pid, what);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

/* The command line, NULs made spaces; else the stat's (comm). */
static size_t command(long pid, const char *comm, size_t comm_len, char *out)
{
	ssize_t n = slurp(pid, "cmdline", out, WIRE_COMM_MAX);
	while (n > 0 && out[n - 1] == '\0')
		n--;
	if (n > 0) {
		for (ssize_t i = 0; i < n; i++)
			if (out[i] == '\0')
				out[i] = ' ';
		return (size_t)n;
	}
	size_t len = comm_len < WIRE_COMM_MAX - 2 ? comm_len : WIRE_COMM_MAX - 2;
	out[0] = '[';
	memcpy(out + 1, comm, len);
	out[len + 1] = ']';
	return len + 2;
}

static uint32_t uid_of(long pid)
{
	char buf[2048];
	if (slurp(pid, "status", buf, sizeof(buf)) < 0)
		return 0;
	const char *u = strstr(buf, "\nUid:");
	return u ? (uint32_t)strtoul(u + 5, NULL, 10) : 0;
}

/* One process into the reply; 0 when it went meanwhile or said nothing we read. */
static int one(long pid, struct inside_reply *r)
{
	char stat[1024], cmd[WIRE_COMM_MAX];
	if (slurp(pid, "stat", stat, sizeof(stat)) < 0)
		return 0;
	char *open_paren = strchr(stat, '('), *close_paren = strrchr(stat, ')');
	if (!open_paren || !close_paren || close_paren < open_paren)
		return 0;
	char state = 0;
	long ppid = 0;
	unsigned long utime = 0, stime = 0;
	long rss = 0;
	/* Fields 3.. after the comm: state ppid pgrp session tty tpgid flags minflt cminflt
	 * majflt cmajflt utime stime cutime cstime priority nice threads itreal starttime vsize rss
	 */
	if (sscanf(
		close_paren + 1,
		" %c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d %*d %*d %*d %*d %*u "
		"%*u %ld",
		&state, &ppid, &utime, &stime, &rss) != 5)
		return 0;
	size_t n = command(pid, open_paren + 1, (size_t)(close_paren - open_paren - 1), cmd);
	long hz = sysconf(_SC_CLK_TCK) > 0 ? sysconf(_SC_CLK_TCK) : 100;
	wire_put_u32(&r->body, (uint32_t)pid);
	wire_put_u32(&r->body, (uint32_t)ppid);
	wire_put_u32(&r->body, uid_of(pid));
	wire_put_u8(&r->body, (uint8_t)state);
	wire_put_u64(&r->body, (uint64_t)(rss > 0 ? rss : 0) * 4096u);
	wire_put_u64(&r->body, (uint64_t)(utime + stime) * 1000u / (uint64_t)hz);
	wire_put_str(&r->body, cmd, n);
	return 1;
}

void ps_serve(struct inside_reply *r)
{
	DIR *d = opendir("/proc");
	if (!d) {
		r->err = ENOENT; /* no /proc in this sandbox */
		return;
	}
	size_t count_at = r->body.len;
	wire_put_u32(&r->body, 0);
	uint32_t n = 0;
	long self = (long)getpid();
	struct dirent *de;
	while ((de = readdir(d)) && n < WIRE_PS_MAX) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		long pid = strtol(de->d_name, NULL, 10);
		if (pid != self && pid != (long)exec_ready_pid())
			n += (uint32_t)one(pid, r);
	}
	closedir(d);
	struct wire_out at = {.buf = r->body.buf + count_at, .cap = 4};
	wire_put_u32(&at, n);
}

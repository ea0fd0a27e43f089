#include "ops/access.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Big enough for any sane /etc/group line; a longer one is reported, not cut. */
#define GROUP_BUF_MAX (64u << 10)

const struct caller access_root = {.uid = 0, .gid = 0};

static struct {
	bool group_set; /* --allow-group was given */
	gid_t group;
} rules;

/* @s as a gid if it is all digits: 1, 0 if it is a name, -EINVAL if out of range. */
static int parse_gid(const char *s, gid_t *out)
{
	if (strspn(s, "0123456789") != strlen(s))
		return 0;
	char *end = NULL;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || v >= (gid_t)-1)
		return -EINVAL;
	*out = (gid_t)v;
	return 1;
}

static int lookup_group(const char *name, gid_t *out, struct err *e)
{
	struct group grp, *found = NULL;
	_cleanup_free_ char *buf = malloc(GROUP_BUF_MAX);
	if (!buf)
		return err_set(e, ENOMEM, "out of memory");
	int rc = getgrnam_r(name, &grp, buf, GROUP_BUF_MAX, &found);
	if (rc != 0)
		return err_set(e, rc, "--allow-group: cannot look up group %s: %s", name,
			       strerror(rc));
	if (!found)
		return err_set(e, ENOENT, "--allow-group: there is no group %s", name);
	*out = grp.gr_gid;
	return 0;
}

int access_init(const char *group, struct err *e)
{
	rules.group_set = false;
	if (!group || !*group)
		return 0;
	int rc = parse_gid(group, &rules.group);
	if (rc < 0)
		return err_set(e, EINVAL, "--allow-group: %s is not a group id", group);
	if (rc == 0) {
		rc = lookup_group(group, &rules.group, e);
		if (rc < 0)
			return rc;
	}
	rules.group_set = true;
	return 0;
}

bool access_is_root(const struct caller *c)
{
	return c->uid == 0 || c->uid == geteuid();
}

bool access_may_see(const struct caller *c, uid_t owner)
{
	return access_is_root(c) || c->uid == owner;
}

static bool in_group(const struct caller *c, gid_t gid)
{
	if (c->gid == gid)
		return true;
	unsigned n = c->ngroups < CALLER_GROUPS_MAX ? c->ngroups : CALLER_GROUPS_MAX;
	for (unsigned i = 0; i < n; i++)
		if (c->groups[i] == gid)
			return true;
	return false;
}

int access_check_create(const struct caller *c, const char *what, struct err *e)
{
	if (access_is_root(c) || (rules.group_set && in_group(c, rules.group)))
		return 0;
	if (!rules.group_set)
		return err_set(e, EACCES,
			       "cannot %s: only root creates sandboxes (see --allow-group)", what);
	return err_set(e, EACCES, "cannot %s: uid %u is not in group %u (--allow-group)", what,
		       (unsigned)c->uid, (unsigned)rules.group);
}

uid_t access_root_uid(void)
{
	return geteuid();
}

gid_t access_root_gid(void)
{
	return getegid();
}

gid_t access_create_gid(void)
{
	return rules.group_set ? rules.group : access_root_gid();
}

bool access_may_open(const struct caller *c, uid_t uid, gid_t gid, mode_t mode, int accmode)
{
	unsigned need = (accmode != O_WRONLY ? 4u : 0u) | (accmode != O_RDONLY ? 2u : 0u);
	unsigned have;
	if (access_is_root(c))
		have = (mode >> 6 | mode >> 3 | mode) & 7u;
	else if (c->uid == uid)
		have = (mode >> 6) & 7u;
	else if (in_group(c, gid))
		have = (mode >> 3) & 7u;
	else
		have = mode & 7u;
	return (have & need) == need;
}

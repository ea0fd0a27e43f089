/*
 * ops_net.c - a sandbox's network in its operations (runtime/net.h): the
 * `egress` file, and the steps start, fork and resume take before runsc
 * (a container's network goes with its runtime id: delete_container()).
 */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "runtime/net.h"
#include "runtime/ops_internal.h"

int ops_sandbox_set_egress(const struct caller *who, const char *id, const char *text,
			   struct err *e)
{
	struct net_rule rules[NET_RULES_MAX];
	struct sandbox sb;
	int n;
	if (strlen(text) >= sizeof(sb.egress))
		return err_set(e, EFBIG, "egress of %s is longer than %zu bytes", id,
			       sizeof(sb.egress) - 1);
	int rc = net_rules_parse(text, rules, &n, e);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&ops.lock);
	rc = sandbox_find(who, id, &sb, e);
	if (rc == 0) {
		snprintf(sb.egress, sizeof(sb.egress), "%s", text);
		rc = row_sandbox_update(&sb);
		if (rc < 0)
			err_set(e, EIO, "cannot record the egress of %s", id);
	}
	pthread_mutex_unlock(&ops.lock);
	/* The chain of a running sandbox now; one stopped gets it at its next start. */
	return rc < 0 ? rc : net_set_egress(sb.runtime_id, sb.egress, e);
}

int net_prepare(const char *id, const char *runtime_id, char netns[PATH_MAX], char resolv[PATH_MAX],
		struct err *e)
{
	struct sandbox sb;
	netns[0] = resolv[0] = '\0';
	if (row_sandbox_get(id, &sb) < 0 || sb.network != SB_NET_EGRESS)
		return 0;
	int rc = sandbox_path(id, "resolv.conf", resolv, PATH_MAX);
	if (rc == 0)
		rc = net_netns_path(runtime_id, netns, PATH_MAX);
	if (rc < 0)
		return err_set(e, ENAMETOOLONG, "cannot set up the network of %s: path too long",
			       id);
	char dir[PATH_MAX];
	rc = sandbox_path(id, NULL, dir, sizeof(dir));
	if (rc == 0)
		rc = mkdir_p(dir, 0700);
	if (rc < 0)
		return err_set(e, -rc, "cannot create the directory of sandbox %s", id);
	rc = net_write_resolv(resolv, e);
	if (rc == 0)
		rc = net_up(runtime_id, sb.egress, e);
	return rc;
}

/*
 * The mount point of the resolv.conf bind mount in an egress sandbox's
 * image, made before the image's digest is taken: runsc makes a missing one
 * in the image's own directory as the sandbox starts, which changed the
 * digest after the sandbox recorded it, and its snapshots could not be
 * forked ("image changed"). Anything there already (a file, a link) is
 * left as it is; /etc a link is left alone too.
 */
int net_image_prepare(const char *id, const char *rootfs, struct err *e)
{
	struct sandbox sb;
	if (row_sandbox_get(id, &sb) < 0 || sb.network != SB_NET_EGRESS)
		return 0;
	_cleanup_close_ int root = open(rootfs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int etc =
	    root < 0 ? -1 : openat(root, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (etc < 0)
		return errno == ENOENT || errno == ELOOP || errno == ENOTDIR
			   ? 0
			   : err_set(e, errno, "cannot open /etc of the image of %s: %s", id,
				     strerror(errno));
	int fd =
	    openat(etc, "resolv.conf", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 && errno != EEXIST)
		return err_set(e, errno, "cannot make /etc/resolv.conf in the image of %s: %s", id,
			       strerror(errno));
	closep(&fd);
	return 0;
}

struct net_want {
	const char *runtime_id;
	bool found;
};

static int net_claims(const struct sandbox *sb, void *arg)
{
	struct net_want *w = arg;
	bool alive = sb->state == SB_RUNNING || sb->state == SB_SNAPSHOTTING ||
		     sb->state == SB_SUSPENDING || sb->state == SB_STARTING ||
		     sb->state == SB_RESUMING;
	if (alive && strcmp(sb->runtime_id, w->runtime_id) == 0)
		w->found = true;
	return 0;
}

bool reconcile_net_wanted(const char *runtime_id, void *arg)
{
	struct net_want w = {runtime_id, false};
	(void)arg;
	row_sandbox_each(net_claims, &w);
	return w.found;
}

cJSON *net_info(const struct sandbox *sb)
{
	struct in_addr a;
	char text[INET_ADDRSTRLEN];
	bool up = sb->network == SB_NET_EGRESS && net_sandbox_addr(sb->runtime_id, &a) == 0 &&
		  inet_ntop(AF_INET, &a, text, sizeof(text));
	cJSON *o = cJSON_CreateObject();
	if (o && (!cJSON_AddStringToObject(o, "mode", sandbox_network_name(sb->network)) ||
		  !(up ? cJSON_AddStringToObject(o, "address", text)
		       : cJSON_AddNullToObject(o, "address")))) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

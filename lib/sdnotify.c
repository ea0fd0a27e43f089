#include "lib/sdnotify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/util.h"

static struct sockaddr_un notify_addr;
static socklen_t notify_len; /* 0: no NOTIFY_SOCKET */

int sdnotify_init(void)
{
	const char *name = getenv("NOTIFY_SOCKET");
	size_t len = name ? strlen(name) : 0;
	int rc = 0;
	notify_len = 0;
	if (!name)
		return 0;
	if ((name[0] != '/' && name[0] != '@') || len < 2 || len >= sizeof(notify_addr.sun_path)) {
		rc = -EINVAL;
		goto out;
	}
	notify_addr.sun_family = AF_UNIX;
	memcpy(notify_addr.sun_path, name, len);
	if (name[0] == '@')
		notify_addr.sun_path[0] = '\0'; /* the abstract namespace */
	notify_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
out:
	unsetenv("NOTIFY_SOCKET");
	return rc < 0 ? rc : 1;
}

int sdnotify(const char *state)
{
	if (!notify_len)
		return 0;
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	ssize_t n = sendto(fd, state, strlen(state), MSG_NOSIGNAL,
			   (const struct sockaddr *)&notify_addr, notify_len);
	return n < 0 ? -errno : 0;
}

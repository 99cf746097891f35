/*
 * notify.h - tell systemd that a daemon is ready (or stopping), for units
 * of Type=notify (dist/systemd/): header-only, shared by the serve and
 * mount daemons.
 *
 * The protocol (sd_notify(3)) is one datagram of "KEY=VALUE" lines sent to
 * the AF_UNIX socket named by $NOTIFY_SOCKET (a path, or "@name" in the
 * abstract namespace).  It is written out here rather than linked from
 * libsystemd: a dozen lines, and no run-time dependency on libsystemd for
 * the daemons (nor for the library, which they link) on hosts that do not
 * run systemd.  Without $NOTIFY_SOCKET it does nothing.
 */
#ifndef WSTORE_COMMON_NOTIFY_H
#define WSTORE_COMMON_NOTIFY_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Send state (e.g. "READY=1") to systemd: 1 sent, 0 not under a notify
 * unit, -1 failed (the daemon carries on; systemd then times it out). */
static inline int wstore_notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa;
	size_t len;
	ssize_t n;
	int fd;

	if (!path || (path[0] != '/' && path[0] != '@'))
		return 0;
	len = strlen(path);
	if (len >= sizeof(sa.sun_path))
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, len);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0';
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	n = sendto(fd, state, strlen(state), MSG_NOSIGNAL,
		   (const struct sockaddr *)&sa,
		   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len));
	close(fd);
	return n < 0 ? -1 : 1;
}

#endif

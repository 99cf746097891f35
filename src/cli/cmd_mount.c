/*
 * cmd_mount.c - wstore mount: hands over to the mount daemon, wstore-mount
 * (src/mount/), so that the CLI itself never links libfuse3.
 *
 * The resolved configuration (defaults < file < env < flags) goes to the
 * daemon as WSTORE_<KEY> environment variables, never on its command line
 * (a password in argv would show in ps).  The daemon is looked for next to
 * this executable (the build tree), then in the install's libexec folder.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#ifdef WSTORE_HAVE_MOUNT
/* Export every set key of cfg as WSTORE_<KEY>. */
static int export_config(const wstore_config *cfg)
{
	const char *const *keys = wstore_config_keys();
	char var[64];

	for (size_t k = 0; keys[k]; k++) {
		const char *v = wstore_config_get(cfg, keys[k]);
		size_t n = strlen("WSTORE_");

		if (!v)
			continue;
		if (n + strlen(keys[k]) >= sizeof(var))
			return -1;
		memcpy(var, "WSTORE_", n);
		for (const char *p = keys[k]; *p; p++)
			var[n++] =
				(char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
		var[n] = '\0';
		if (setenv(var, v, 1) < 0)
			return -1;
	}
	return 0;
}

/* wstore-mount beside /proc/self/exe, else the installed one. */
static int find_daemon(char *out, size_t cap)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n > 0) {
		self[n] = '\0';
		if ((slash = strrchr(self, '/'))) {
			*slash = '\0';
			if ((size_t)snprintf(out, cap, "%s/wstore-mount",
					     self) < cap &&
			    access(out, X_OK) == 0)
				return 0;
		}
	}
	if ((size_t)snprintf(out, cap, "%s", WSTORE_MOUNT_DAEMON) < cap &&
	    access(out, X_OK) == 0)
		return 0;
	return -1;
}

int cmd_mount(struct cli *c, int argc, char **argv)
{
	char path[PATH_MAX];

	if (find_daemon(path, sizeof(path)) < 0) {
		fprintf(stderr,
			"wstore: mount: cannot find the mount daemon "
			"wstore-mount (looked beside wstore and at %s)\n",
			WSTORE_MOUNT_DAEMON);
		return EXIT_ERR;
	}
	if (export_config(c->cfg) < 0) {
		fprintf(stderr, "wstore: mount: cannot pass the configuration "
				"to wstore-mount\n");
		return EXIT_ERR;
	}
	argv[0] = "wstore-mount";
	(void)argc;
	execv(path, argv);
	fprintf(stderr, "wstore: mount: cannot run %s: %s\n", path,
		strerror(errno));
	return EXIT_ERR;
}
#else
int cmd_mount(struct cli *c, int argc, char **argv)
{
	(void)c;
	(void)argc;
	(void)argv;
	fprintf(stderr, "wstore: mount: not available, this wstore was built "
			"without FUSE (meson setup -Dfuse=enabled)\n");
	return EXIT_ERR;
}
#endif

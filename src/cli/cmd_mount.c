/*
 * cmd_mount.c - wstore mount: hands over to the mount daemon, wstore-mount
 * (src/mount/), so that the CLI itself never links libfuse3.  How the
 * daemon is found and given the configuration: cli_exec_daemon.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#ifdef WSTORE_HAVE_MOUNT
/*
 * --checkpoint takes a model name too, as every command does: the name is
 * resolved here, once, and the daemon is given the checkpoint id (the
 * mount then shows that checkpoint, even after a newer import takes the
 * name over).
 */
static int resolve_checkpoint(struct cli *c, int argc, char **argv)
{
	static char eq[600];
	wstore_store *s = NULL;
	const char *id;
	char **slot = NULL, *name = NULL;

	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "--checkpoint") && i + 1 < argc) {
			slot = &argv[i + 1];
			name = argv[i + 1];
		} else if (!strncmp(argv[i], "--checkpoint=", 13)) {
			slot = &argv[i];
			name = argv[i] + 13;
		}
	}
	if (!name || !strchr(name, '/'))
		return 0;
	id = name;
	if (cli_open_named(c, &s, &id))
		return EXIT_ERR;
	if (*slot == name) {
		*slot = (char *)id;
	} else if ((size_t)snprintf(eq, sizeof(eq), "--checkpoint=%s", id) <
		   sizeof(eq)) {
		*slot = eq;
	}
	cli_close_store(s);
	return 0;
}

int cmd_mount(struct cli *c, int argc, char **argv)
{
	int rc = cli_wants_help(argc, argv) ? 0
					    : resolve_checkpoint(c, argc, argv);

	if (rc)
		return rc;
	return cli_exec_daemon(c, "mount", "wstore-mount", WSTORE_MOUNT_DAEMON,
			       argv);
}
#else
int cmd_mount(struct cli *c, int argc, char **argv)
{
	(void)c;
	(void)argc;
	(void)argv;
	wfront_err("mount: not available, this wstore was built "
		   "without FUSE (meson setup -Dfuse=enabled)");
	return EXIT_ERR;
}
#endif

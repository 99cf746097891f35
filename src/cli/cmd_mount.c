/*
 * cmd_mount.c - wstore mount: hands over to the mount daemon, wstore-mount
 * (src/mount/), so that the CLI itself never links libfuse3.  How the
 * daemon is found and given the configuration: cli_exec_daemon.
 */
#include <stdio.h>

#include "cli.h"

#ifdef WSTORE_HAVE_MOUNT
int cmd_mount(struct cli *c, int argc, char **argv)
{
	(void)argc;
	return cli_exec_daemon(c, "mount", "wstore-mount", WSTORE_MOUNT_DAEMON,
			       argv);
}
#else
int cmd_mount(struct cli *c, int argc, char **argv)
{
	(void)c;
	(void)argc;
	(void)argv;
	cli_err("mount: not available, this wstore was built "
		"without FUSE (meson setup -Dfuse=enabled)");
	return EXIT_ERR;
}
#endif

/*
 * cmd_serve.c - wstore serve: hands over to the HTTP server, wstore-serve
 * (src/serve/), so that the CLI itself never links libmicrohttpd; the
 * server is an optional part of the build (-Dserve=enabled|disabled|auto).
 */
#include <stdio.h>

#include "cli.h"

#ifdef WSTORE_HAVE_SERVE
int cmd_serve(struct cli *c, int argc, char **argv)
{
	(void)argc;
	return cli_exec_daemon(c, "serve", "wstore-serve", WSTORE_SERVE_DAEMON,
			       argv);
}
#else
int cmd_serve(struct cli *c, int argc, char **argv)
{
	(void)c;
	(void)argc;
	(void)argv;
	wfront_err("serve: not available, this wstore was built "
		   "without the HTTP server (install libmicrohttpd-dev, "
		   "meson setup -Dserve=enabled)");
	return EXIT_ERR;
}
#endif

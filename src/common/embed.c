/*
 * embed.c - the embedding shim every wstore executable links (the CLI,
 * the mount daemon, the HTTP server; meson.build lists it for each).
 *
 * Mooncake's client, on its first create, takes SIGINT, SIGTERM and SIGHUP
 * for itself (it blocks them in the calling thread and starts a thread
 * that tears the client down and re-raises them) unless the process
 * defines Py_IsInitialized, which it takes to mean that the host owns its
 * signals.  Each executable owns them on every backend: the CLI (an
 * interrupted import writes a FAILED manifest and releases its lock), the
 * mount daemon (SIGTERM unmounts), the HTTP server (SIGTERM stops it
 * cleanly).  So each defines the symbol, exported from the executable by
 * src/dynamic.list, answering truthfully that no Python interpreter runs
 * in this process (docs/mooncake.md, "Signals").
 */
int Py_IsInitialized(void);

int Py_IsInitialized(void)
{
	return 0;
}

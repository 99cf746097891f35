/*
 * version.c - wstore_version(): the version of this build of the library
 * (release plus git commit, scripts/version.sh), alone in its file since
 * the header it reads is made again at every build.
 */
#include "wstore/wstore.h"
#include "wstore_build.h"

const char *wstore_version(void)
{
	return WSTORE_BUILD_VERSION;
}

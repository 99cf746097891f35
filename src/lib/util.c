/*
 * util.c - small helpers every core module may use (util.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "util.h"

int wstore__set_str(char **field, const char *value)
{
	char *copy = NULL;

	if (value && !(copy = strdup(value)))
		return wstore__errc(-ENOMEM, "cannot copy string");
	free(*field);
	*field = copy;
	return 0;
}

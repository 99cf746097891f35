/*
 * config.c - the configuration: a fixed set of known keys with string
 * values, loaded from JSON files, overlaid from WSTORE_* environment
 * variables, saved atomically.
 *
 * The layers, lowest first (wstore_config_load_layered): the system file
 * (/etc/wstore/config.json), the user's file ($XDG_CONFIG_HOME/wstore/
 * config.json, else ~/.config/wstore/config.json), the environment; a
 * front end puts its flags on top.  The default store, used when no layer
 * names one, is $WSTORE_HOME, else $XDG_DATA_HOME/wstore, else
 * ~/.local/share/wstore (the XDG base directory rules: a relative XDG
 * variable is ignored).
 *
 * Values are kept as strings, one slot per known key (NULL = unset).
 * Integer-valued keys (replica_num, *_timeout_ms) hold the decimal string
 * of a positive integer (1..INT32_MAX, no sign, no leading zero); set() and
 * load refuse anything else, and save() writes them as JSON integers.  In a
 * file a value may be a string, an integer or null (unset); any other type,
 * and any unknown key, is an error naming the file and the key.  An empty
 * environment variable counts as unset.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "config.h"
#include "durable.h"
#include "error.h"
#include "util.h"

#define NKEYS wstore__config_nkeys()

struct wstore_config {
	char **values; /* NKEYS slots, NULL = unset */
};

int wstore_config_new(wstore_config **out)
{
	*out = calloc(1, sizeof(**out));
	if (*out && !((*out)->values = calloc(NKEYS, sizeof(char *)))) {
		free(*out);
		*out = NULL;
	}
	if (!*out)
		return wstore__errc(-ENOMEM, "cannot allocate config");
	return 0;
}

void wstore_config_free(wstore_config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < NKEYS; i++)
		free(cfg->values[i]);
	free(cfg->values);
	free(cfg);
}

/* Check key and value (config_keys.c); messages start with ctx ("config
 * 'f': " or ""). */
static int check_kv(const char *ctx, const char *key, const char *value,
		    unsigned how, int *out_idx)
{
	int rc = wstore__config_check(ctx, key, value, how);

	if (rc < 0)
		return rc;
	*out_idx = wstore__config_key_index(key);
	return 0;
}

int wstore_config_set(wstore_config *cfg, const char *key, const char *value)
{
	int i, rc;

	if ((rc = check_kv("", key, value, 0, &i)))
		return rc;
	return wstore__set_str(&cfg->values[i], value);
}

const char *wstore_config_get(const wstore_config *cfg, const char *key)
{
	int i = wstore__config_key_index(key);

	return cfg && i >= 0 ? cfg->values[i] : NULL;
}

int wstore_config_merge(wstore_config *dst, const wstore_config *src)
{
	int rc;

	for (size_t i = 0; src && i < NKEYS; i++) {
		if (src->values[i] &&
		    (rc = wstore__set_str(&dst->values[i], src->values[i])))
			return rc;
	}
	return 0;
}

static int load_credentials(wstore_config *cfg);

/* The environment: systemd's credentials, then the WSTORE_* variables. */
int wstore_config_load_env(wstore_config *cfg)
{
	char var[64], ctx[96];
	const char *v;
	int i, rc;

	if ((rc = load_credentials(cfg)) < 0)
		return rc;
	for (size_t k = 0; k < NKEYS; k++) {
		size_t n = strlen("WSTORE_");

		memcpy(var, "WSTORE_", n);
		for (const char *p = wstore__config_key_name(k); *p; p++)
			var[n++] = (char)toupper((unsigned char)*p);
		var[n] = '\0';
		v = getenv(var);
		if (!v || !*v)
			continue;
		snprintf(ctx, sizeof(ctx), "environment variable '%s': ", var);
		if ((rc = check_kv(ctx, wstore__config_key_name(k), v, 0,
				   &i)) ||
		    (rc = wstore__set_str(&cfg->values[i], v)))
			return rc;
	}
	return 0;
}

/* ---- loading ------------------------------------------------------------- */

static int load_value(wstore_config *cfg, const char *name, const char *key,
		      json_t *v)
{
	char ctx[300], num[32];
	const char *s = NULL;
	int i, rc;

	snprintf(ctx, sizeof(ctx), "config '%.200s': ", name);
	if (wstore__config_key_index(key) < 0)
		return wstore__err(WSTORE_EINVAL, "%sunknown key '%.80s'", ctx,
				   key);
	if (json_is_string(v)) {
		s = json_string_value(v);
	} else if (json_is_integer(v) && wstore__config_key_takes_int(key)) {
		snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT,
			 json_integer_value(v));
		s = num;
	} else if (!json_is_null(v)) {
		return wstore__err(
			WSTORE_EINVAL, "%skey '%s' must be a %s", ctx, key,
			wstore__config_key_takes_int(key) ? "string or integer"
							  : "string");
	}
	if ((rc = check_kv(ctx, key, s, WSTORE__CHECK_FILE, &i)))
		return rc;
	return wstore__set_str(&cfg->values[i], s);
}

int wstore__config_parse(wstore_config **out, const char *json, size_t len,
			 const char *name)
{
	json_error_t jerr;
	json_t *root, *v;
	const char *key;
	wstore_config *cfg;
	int rc;

	*out = NULL;
	root = json_loadb(json ? json : "", json ? len : 0,
			  JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return wstore__err(WSTORE_EINVAL,
				   "config '%s': line %d column %d: %s", name,
				   jerr.line, jerr.column, jerr.text);
	if (!json_is_object(root)) {
		json_decref(root);
		return wstore__err(WSTORE_EINVAL,
				   "config '%s': must be a JSON object", name);
	}
	if ((rc = wstore_config_new(&cfg))) {
		json_decref(root);
		return rc;
	}
	json_object_foreach(root, key, v)
	{
		if ((rc = load_value(cfg, name, key, v)))
			break;
	}
	json_decref(root);
	if (rc) {
		wstore_config_free(cfg);
		return rc;
	}
	*out = cfg;
	return 0;
}

static int read_file(char **out, size_t *out_len, const char *path)
{
	char *buf = NULL, *p;
	size_t len = 0, cap = 0, n;
	FILE *f = fopen(path, "rb");

	if (!f)
		return wstore__errc(-errno, "cannot open config '%s'", path);
	for (;;) {
		if (len == cap) {
			cap = cap ? cap * 2 : 4096;
			if (!(p = realloc(buf, cap))) {
				free(buf);
				fclose(f);
				return wstore__errc(-ENOMEM,
						    "cannot read config '%s'",
						    path);
			}
			buf = p;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(f)) {
		int e = errno ? errno : EIO;

		free(buf);
		fclose(f);
		return wstore__errc(-e, "cannot read config '%s'", path);
	}
	fclose(f);
	*out = buf;
	*out_len = len;
	return 0;
}

int wstore_config_load(wstore_config **out, const char *path)
{
	char *data = NULL;
	size_t len = 0;
	int rc;

	*out = NULL;
	if (!path)
		return wstore__err(WSTORE_EINVAL, "config path is missing");
	if ((rc = read_file(&data, &len, path)))
		return rc;
	rc = wstore__config_parse(out, data, len, path);
	free(data);
	return rc;
}

/* ---- saving -------------------------------------------------------------- */

/* $HOME, else the password database's home of this user. */
static int home_dir(char *buf, size_t cap)
{
	const char *home = getenv("HOME");
	struct passwd pw, *res = NULL;
	char pwbuf[4096];

	if (!home || !*home) {
		if (getpwuid_r(getuid(), &pw, pwbuf, sizeof(pwbuf), &res) ||
		    !res || !res->pw_dir || !*res->pw_dir)
			return -1;
		home = res->pw_dir;
	}
	return (size_t)snprintf(buf, cap, "%s", home) < cap ? 0 : -1;
}

/* env/sub when env names an absolute directory (XDG base directory rules:
 * a relative value is ignored), else ~/home_sub/sub. */
static char *xdg_path(const char *env, const char *home_sub, const char *sub)
{
	const char *v = getenv(env);
	char home[PATH_MAX], *out;

	if (v && v[0] == '/') {
		if (asprintf(&out, "%s/%s", v, sub) < 0)
			return NULL;
		return out;
	}
	if (home_dir(home, sizeof(home)) < 0)
		return NULL;
	if (asprintf(&out, "%s/%s/%s", home, home_sub, sub) < 0)
		return NULL;
	return out;
}

char *wstore_config_default_path(void)
{
	const char *env = getenv("WSTORE_CONFIG");

	if (env && *env)
		return strdup(env);
	return xdg_path("XDG_CONFIG_HOME", ".config", "wstore/config.json");
}

char *wstore_config_system_path(void)
{
	const char *env = getenv("WSTORE_SYSTEM_CONFIG");

	return strdup(env && *env ? env : "/etc/wstore/config.json");
}

char *wstore_config_default_store(void)
{
	const char *env = getenv("WSTORE_HOME");

	if (env && *env)
		return strdup(env);
	return xdg_path("XDG_DATA_HOME", ".local/share", "wstore");
}

/* Overlay the file at path onto cfg; a missing file is skipped unless
 * required. */
static int overlay_file(wstore_config *cfg, const char *path, int required)
{
	wstore_config *f = NULL;
	int rc;

	if (!required && access(path, F_OK) < 0 && errno == ENOENT)
		return 0;
	if ((rc = wstore_config_load(&f, path)) == 0)
		rc = wstore_config_merge(cfg, f);
	wstore_config_free(f);
	return rc;
}

/*
 * systemd's credentials (LoadCredential=): a file named after a secret
 * key (serve_token, redis_password) in $CREDENTIALS_DIRECTORY is that
 * key's value, its trailing newline dropped; above the files, below the
 * environment.  Unlike Environment=, systemd shows them to nobody else.
 */
static int load_credentials(wstore_config *cfg)
{
	static const char *const secrets[] = { "serve_token", "redis_password",
					       NULL };
	const char *dir = getenv("CREDENTIALS_DIRECTORY");
	char path[PATH_MAX], ctx[PATH_MAX + 32], *data = NULL;
	size_t len = 0;
	int rc = 0;

	for (size_t k = 0; dir && *dir && secrets[k] && rc == 0; k++) {
		snprintf(path, sizeof(path), "%s/%s", dir, secrets[k]);
		if (access(path, F_OK) < 0)
			continue;
		if ((rc = read_file(&data, &len, path)) < 0)
			break;
		while (len && (data[len - 1] == '\n' || data[len - 1] == '\r'))
			len--;
		if (memchr(data, '\0', len) || len > 4096) {
			rc = wstore__err(
				WSTORE_EINVAL,
				"credential '%s': not one line of text", path);
		} else {
			data[len] = '\0';
			snprintf(ctx, sizeof(ctx), "credential '%s': ", path);
			rc = wstore__config_check(ctx, secrets[k], data, 0);
			if (rc == 0)
				rc = wstore__set_str(
					&cfg->values[wstore__config_key_index(
						secrets[k])],
					data);
		}
		free(data);
		data = NULL;
	}
	return rc;
}

int wstore_config_load_layered(wstore_config **out, const char *user_path)
{
	const char *env = getenv("WSTORE_CONFIG");
	/* a file named by the caller or $WSTORE_CONFIG must exist */
	int required = user_path || (env && *env);
	char *sys = wstore_config_system_path();
	char *user =
		user_path ? strdup(user_path) : wstore_config_default_path();
	wstore_config *cfg = NULL;
	int rc;

	*out = NULL;
	if (!sys || (user_path && !user))
		rc = wstore__errc(-ENOMEM, "cannot load the configuration");
	else if ((rc = wstore_config_new(&cfg)) == 0)
		rc = overlay_file(cfg, sys, 0);
	if (rc == 0 && user)
		rc = overlay_file(cfg, user, required);
	if (rc == 0)
		rc = wstore_config_load_env(cfg);
	free(sys);
	free(user);
	if (rc < 0) {
		wstore_config_free(cfg);
		return rc;
	}
	*out = cfg;
	return 0;
}

static json_t *to_json(const wstore_config *cfg)
{
	json_t *obj = json_object(), *v;

	for (size_t i = 0; obj && i < NKEYS; i++) {
		const char *s = cfg->values[i];

		if (!s)
			continue;
		if (wstore__config_key_is_int(i))
			v = json_integer(strtoll(s, NULL, 10));
		else
			v = json_string(s);
		if (!v ||
		    json_object_set_new(obj, wstore__config_key_name(i), v)) {
			json_decref(obj);
			return NULL;
		}
	}
	return obj;
}

/* mkdir -p dir, new directories with the given mode. */
static int mkdirs(const char *dir, mode_t mode)
{
	char *p, *copy = strdup(dir);

	if (!copy)
		return wstore__errc(-ENOMEM, "cannot create '%s'", dir);
	for (p = copy + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;

		*p = '\0';
		if (mkdir(copy, mode) < 0 && errno != EEXIST) {
			int rc = wstore__errc(
				-errno, "cannot create directory '%s'", copy);
			free(copy);
			return rc;
		}
		*p = c;
		if (!c)
			break;
	}
	free(copy);
	return 0;
}

/* Write data to path durably (durable.c: a temp file in dir, fsync,
 * rename, fsync of dir); mode 0600 for a new file, which may hold a
 * password. */
static int write_atomic(const char *dir, const char *path, const char *data,
			size_t len)
{
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	wstore__durable d = { .fd = -1 };
	mode_t mode = 0600;
	struct stat st;
	size_t off = 0;
	int dfd, rc;

	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return wstore__errc(-errno, "cannot open directory '%s'", dir);
	rc = wstore__check_target(dfd, base, path);
	/* a file replaced keeps its permissions (a system file that others
	 * read stays readable); a new one is 0600 */
	if (rc == 0 && fstatat(dfd, base, &st, 0) == 0 && S_ISREG(st.st_mode))
		mode = st.st_mode & 07777;
	if (rc == 0)
		rc = wstore__durable_open(&d, dfd, mode, path);
	if (rc == 0 && fchmod(d.fd, mode) < 0)
		rc = wstore__errc(-errno, "cannot set the mode of '%s'", path);
	while (rc == 0 && off < len) {
		ssize_t n = write(d.fd, data + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			rc = wstore__errc(-errno, "cannot write '%s'", path);
		else
			off += (size_t)n;
	}
	if (rc == 0)
		rc = wstore__durable_commit(&d, base, path);
	else
		wstore__durable_abort(&d);
	close(dfd);
	return rc;
}

static int is_system_path(const char *path)
{
	char *sys = wstore_config_system_path();
	int yes = sys && strcmp(sys, path) == 0;

	free(sys);
	return yes;
}

int wstore_config_save(const wstore_config *cfg, const char *path)
{
	char *dir, *slash, *text = NULL, *full = NULL;
	json_t *obj;
	int rc;

	if (!cfg || !path || !*path)
		return wstore__err(WSTORE_EINVAL,
				   "cannot save config: no path");
	if (!(obj = to_json(cfg)))
		return wstore__err(
			WSTORE_EINVAL,
			"cannot save config '%s': a value is not valid UTF-8",
			path);
	text = json_dumps(obj, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(obj);
	if (!text || asprintf(&full, "%s\n", text) < 0) {
		free(text);
		return wstore__errc(-ENOMEM, "cannot save config '%s'", path);
	}
	free(text);
	if (!(dir = strdup(path))) {
		free(full);
		return wstore__errc(-ENOMEM, "cannot save config '%s'", path);
	}
	slash = strrchr(dir, '/');
	if (!slash)
		strcpy(dir, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	/* the system file's directory (/etc/wstore) is for every user and
	 * service to read; a user's own, private */
	rc = mkdirs(dir, is_system_path(path) ? 0755 : 0700);
	if (!rc)
		rc = write_atomic(dir, path, full, strlen(full));
	free(dir);
	free(full);
	return rc;
}

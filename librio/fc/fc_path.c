/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_path.c -- which paths belong to a file cache, and their names in it
 *
 * A file is named in the cache by its path relative to the cache directory
 * (stored canonical, realpath at open).  A path given by the caller is
 * resolved the way the kernel would reach the file: the directory part
 * through realpath(3) (so symbolic links and ".." in it are followed), and
 * a final component that is a symbolic link is followed too; a final
 * component that does not exist yet (O_CREAT) is taken as is.
 *
 * Invariants
 *   N1. Two paths that reach the same directory entry resolve to the same
 *       relative name (so one file has one record).
 *   N2. A relative name never starts with '/', never contains "." or ".."
 *       components, and is shorter than RIO_FC_PATH_MAX.
 *   N3. The cache directory itself is not a file of the cache
 *       (RIO_EOUTSIDE): only entries below it are.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fc_int.h"

/* Split path into a realpath'ed directory and a last component. */
static int
canonical(const char *path, char *out)
{
	char dirbuf[PATH_MAX], resolved[PATH_MAX];
	const char *slash, *base;
	struct stat st;
	size_t dlen;

	if (path == NULL || *path == '\0')
		return -ENOENT;
	if (strlen(path) >= PATH_MAX)
		return -ENAMETOOLONG;
	/* A final symlink is followed, as open(2) would. */
	if (rio__sys.lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
		if (realpath(path, out) == NULL)
			return -errno;
		return 0;
	}
	slash = strrchr(path, '/');
	if (slash == NULL) {
		strcpy(dirbuf, ".");
		base = path;
	} else {
		dlen = (size_t)(slash - path);
		if (dlen == 0)
			dlen = 1; /* "/name" */
		memcpy(dirbuf, path, dlen);
		dirbuf[dlen] = '\0';
		base = slash + 1;
	}
	if (realpath(dirbuf, resolved) == NULL)
		return -errno;
	if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
		/* "dir/", "dir/.", "dir/..": a directory, resolve it all. */
		if (realpath(path, out) == NULL)
			return -errno;
		return 0;
	}
	if (strlen(resolved) + 1 + strlen(base) >= PATH_MAX)
		return -ENAMETOOLONG;
	if (strcmp(resolved, "/") == 0)
		resolved[0] = '\0';
	strcpy(out, resolved);
	strcat(out, "/");
	strcat(out, base);
	return 0;
}

int
rio__fc_resolve(const rio_fc_cache *c, const char *path, char **rel,
	char **abs)
{
	char full[PATH_MAX];
	const char *r;
	int rc;

	*rel = NULL;
	if (abs)
		*abs = NULL;
	rc = canonical(path, full);
	if (rc)
		return rio__err(rc, "resolve %s: %s", path ? path : "(null)",
			strerror(-rc));
	if (strncmp(full, c->dir, c->dir_len) != 0 || full[c->dir_len] != '/' ||
	    full[c->dir_len + 1] == '\0')
		return rio__err(RIO_EOUTSIDE,
			"%s (%s) is not below the cache directory %s", path,
			full, c->dir);
	r = full + c->dir_len + 1;
	if (strlen(r) >= RIO_FC_PATH_MAX)
		return rio__err(-ENAMETOOLONG,
			"%s: %zu bytes below the cache directory, at most %u",
			path, strlen(r), RIO_FC_PATH_MAX - 1);
	*rel = strdup(r);
	if (abs)
		*abs = strdup(full);
	if (*rel == NULL || (abs && *abs == NULL)) {
		free(*rel);
		*rel = NULL;
		if (abs) {
			free(*abs);
			*abs = NULL;
		}
		return rio__err(-ENOMEM, "out of memory");
	}
	return 0;
}

int
rio_fc_covers(rio_fc_cache *c, const char *path)
{
	char full[PATH_MAX];
	int rc = canonical(path, full);

	if (rc)
		return rc;
	return strncmp(full, c->dir, c->dir_len) == 0 &&
		full[c->dir_len] == '/' && full[c->dir_len + 1] != '\0';
}

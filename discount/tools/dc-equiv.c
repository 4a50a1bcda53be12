/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dc-equiv.c -- the equivalence function of the theory (Definition 2)
 *
 *   dc-equiv [-v] [--events] REFERENCE OBSERVED
 *
 * REFERENCE is the visible output of a failure-free run, OBSERVED that of
 * a run that failed and recovered.  What a visible event is:
 *   line mode (default, for plain text): one line, its \r\n or \n
 *     dropped (a terminal's line ends);
 *   --events: one line of an events file written by `dc-run --events`,
 *     one line per write(2) the program made, C-escaped (events.c) -- the
 *     program's own events: a line written in several calls (a prompt,
 *     then the answer) is several events, and a prompt written again by
 *     a recovered run is a duplicate, not a different line.
 * They
 * are equivalent when OBSERVED is REFERENCE except for duplicates of
 * earlier OBSERVED events: walking both, an observed event equal to the
 * next reference event matches it; one that does not must equal an
 * earlier observed event (a duplicate) and is skipped; anything else, or
 * a reference event never matched, makes them not equivalent.  Matching
 * greedily is optimal: skipping a matchable event can never help, since a
 * later copy of it would itself be a skippable duplicate.
 *
 * Exit status: 0 equivalent, 1 not equivalent (the first offending event
 * is printed), 2 usage or I/O error.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lines {
	char **v;
	size_t n;
};

static void
lines_free(struct lines *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

static bool events_mode;

/* Read PATH into L, one event per line; on failure L is empty. */
static int
load(const char *path, struct lines *l)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0, alloc = 0;
	ssize_t k;
	int rc = 0;

	l->v = NULL;
	l->n = 0;
	if (!f) {
		perror(path);
		return -1;
	}
	while (rc == 0 && (k = getline(&line, &cap, f)) >= 0) {
		if (l->n == alloc) {
			size_t a = alloc ? 2 * alloc : 256;
			char **v = realloc(l->v, a * sizeof(*l->v));
			if (!v) {
				rc = -1;
				break;
			}
			l->v = v;
			alloc = a;
		}
		/* terminals send \r\n: a visible event is the text; an
		 * events file escapes every byte of the event but the line's
		 * own end */
		if (events_mode && k > 0 && line[k - 1] == '\n')
			line[--k] = '\0';
		while (!events_mode && k > 0 &&
		       (line[k - 1] == '\n' || line[k - 1] == '\r'))
			line[--k] = '\0';
		if ((l->v[l->n] = strdup(line)) == NULL)
			rc = -1;
		else
			l->n++;
	}
	if (rc == 0 && ferror(f))
		rc = -1;
	if (rc)
		fprintf(stderr, "dc-equiv: cannot read %s\n", path);
	free(line);
	fclose(f);
	if (rc)
		lines_free(l);
	return rc;
}

/* A set of the observed events seen so far (open addressing). */
struct set {
	uint64_t *h;
	size_t cap, n;
};

static uint64_t
hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h | 1;
}

static int
set_add(struct set *s, uint64_t h)
{
	if (2 * (s->n + 1) > s->cap) {
		struct set t = { calloc(s->cap ? 2 * s->cap : 1024, 8),
			s->cap ? 2 * s->cap : 1024, 0 };
		if (t.h == NULL)
			return -1;
		for (size_t i = 0; i < s->cap; i++)
			if (s->h[i])
				set_add(&t, s->h[i]);
		free(s->h);
		*s = t;
	}
	size_t i = h & (s->cap - 1);
	while (s->h[i] && s->h[i] != h)
		i = (i + 1) & (s->cap - 1);
	if (!s->h[i]) {
		s->h[i] = h;
		s->n++;
	}
	return 0;
}

static bool
set_has(const struct set *s, uint64_t h)
{
	if (!s->cap)
		return false;
	size_t i = h & (s->cap - 1);
	while (s->h[i]) {
		if (s->h[i] == h)
			return true;
		i = (i + 1) & (s->cap - 1);
	}
	return false;
}

int
main(int argc, char **argv)
{
	bool verbose = false;
	int i0 = 1;
	for (; i0 < argc && argv[i0][0] == '-'; i0++) {
		if (!strcmp(argv[i0], "-v"))
			verbose = true;
		else if (!strcmp(argv[i0], "--events"))
			events_mode = true;
		else
			break;
	}
	if (argc != i0 + 2) {
		fprintf(stderr, "usage: dc-equiv [-v] [--events] REFERENCE "
			"OBSERVED\n");
		return 2;
	}
	const char *unit = events_mode ? "event" : "line";
	struct lines ref, obs = { 0 };
	if (load(argv[i0], &ref))
		return 2;
	if (load(argv[i0 + 1], &obs)) {
		lines_free(&ref);
		return 2;
	}
	struct set seen = { 0 };
	size_t j = 0, dups = 0;
	int rc = 0;
	for (size_t i = 0; i < obs.n && rc == 0; i++) {
		uint64_t h = hash(obs.v[i]);
		/* exact comparison for the match; the set (hashes) only
		 * decides "equal to an earlier observed event", confirmed
		 * below by a scan when the hash is present */
		if (j < ref.n && !strcmp(obs.v[i], ref.v[j])) {
			j++;
		} else {
			bool dup = false;
			if (set_has(&seen, h))
				for (size_t k = 0; k < i && !dup; k++)
					dup = !strcmp(obs.v[k], obs.v[i]);
			if (!dup) {
				printf("not equivalent: observed %s %zu "
				       "\"%s\" is neither reference %s %zu "
				       "\"%s\" nor a repeat of an earlier "
				       "event\n", unit, i + 1, obs.v[i], unit,
					j + 1, j < ref.n ? ref.v[j] : "(end)");
				rc = 1;
				break;
			}
			dups++;
		}
		if (set_add(&seen, h)) {
			fprintf(stderr, "dc-equiv: out of memory\n");
			rc = 2;
		}
	}
	if (rc == 0 && j < ref.n) {
		printf("not equivalent: reference %s %zu \"%s\" never "
		       "appeared (output lost)\n", unit, j + 1, ref.v[j]);
		rc = 1;
	}
	if (rc == 0 && verbose)
		printf("equivalent: %zu events, %zu duplicates\n", ref.n, dups);
	free(seen.h);
	lines_free(&ref);
	lines_free(&obs);
	return rc;
}

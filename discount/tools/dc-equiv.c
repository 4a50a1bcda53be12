/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dc-equiv.c -- the equivalence function of the theory (Definition 2)
 *
 *   dc-equiv [-v] REFERENCE OBSERVED
 *
 * REFERENCE is the visible output of a failure-free run, OBSERVED that of
 * a run that failed and recovered; one visible event is one line.  They
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

static int
load(const char *path, struct lines *l)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		perror(path);
		return -1;
	}
	char *line = NULL;
	size_t cap = 0, alloc = 0;
	ssize_t k;
	l->v = NULL;
	l->n = 0;
	while ((k = getline(&line, &cap, f)) >= 0) {
		if (l->n == alloc) {
			alloc = alloc ? 2 * alloc : 256;
			l->v = realloc(l->v, alloc * sizeof(*l->v));
			if (!l->v)
				return -1;
		}
		/* terminals send \r\n: a visible event is the text */
		while (k > 0 && (line[k - 1] == '\n' || line[k - 1] == '\r'))
			line[--k] = '\0';
		l->v[l->n++] = strdup(line);
	}
	free(line);
	fclose(f);
	return 0;
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

static void
set_add(struct set *s, uint64_t h)
{
	if (2 * (s->n + 1) > s->cap) {
		struct set t = { calloc(s->cap ? 2 * s->cap : 1024, 8),
			s->cap ? 2 * s->cap : 1024, 0 };
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
	bool verbose = argc > 1 && !strcmp(argv[1], "-v");
	if (argc != 3 + verbose) {
		fprintf(stderr, "usage: dc-equiv [-v] REFERENCE OBSERVED\n");
		return 2;
	}
	struct lines ref, obs;
	if (load(argv[1 + verbose], &ref) || load(argv[2 + verbose], &obs))
		return 2;
	struct set seen = { 0 };
	size_t j = 0, dups = 0;
	for (size_t i = 0; i < obs.n; i++) {
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
				printf("not equivalent: observed line %zu "
				       "\"%s\" is neither reference line %zu "
				       "\"%s\" nor a repeat of an earlier "
				       "event\n", i + 1, obs.v[i], j + 1,
					j < ref.n ? ref.v[j] : "(end)");
				return 1;
			}
			dups++;
		}
		set_add(&seen, h);
	}
	if (j < ref.n) {
		printf("not equivalent: reference line %zu \"%s\" never "
		       "appeared (output lost)\n", j + 1, ref.v[j]);
		return 1;
	}
	if (verbose)
		printf("equivalent: %zu events, %zu duplicates\n", ref.n, dups);
	return 0;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * riotool.c -- describe the machine's persistent memory; create, check,
 * dump and sync rio pools
 *
 * Exit codes: 0 success, 1 the operation failed (or found damage),
 * 2 usage error.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <ndctl/libndctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rio.h"
#include "riotool_fc.h"

#define EXIT_USAGE 2
#define EXIT_DAMAGED 3 /* check: usable, but a copy of the image is bad */

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: riotool COMMAND [OPTIONS] [ARGS]\n"
		"\n"
		"commands:\n"
		"  info [PATH]              NVDIMM regions and namespaces (libndctl),\n"
		"                           CPU flush support, and the persistence\n"
		"                           domain libpmem2 reports for PATH\n"
		"  create [-s SIZE] [-S] [-l LAYOUT] PATH\n"
		"                           create a pool (SIZE accepts K/M/G; -S keeps\n"
		"                           a safe-sync image PATH.img)\n"
		"  check PATH               validate a pool header and its image\n"
		"                           (exit 1: unusable; 3: a bad image copy,\n"
		"                           a restore would use an older one)\n"
		"  dump [-o OFF] [-n LEN] PATH\n"
		"                           print the header and a hex dump of the\n"
		"                           user area (OFF/LEN relative to it)\n"
		"  sync PATH                safe-sync a pool to its image now\n"
		"  fc PATH                  a Rio file cache pool: the files with\n"
		"                           blocks not written back, and those\n"
		"                           whose write-back failed\n"
		"\n"
		"environment: RIO_DOMAIN=byte|cacheline|page forces a domain.\n");
}

static int
fail(const char *what, int rc)
{
	fprintf(stderr, "riotool: %s: %s (%s)\n", what,
		*rio_errormsg() ? rio_errormsg() : rio_strerror(rc),
		rio_err_name(rc));
	return 1;
}

/*
 * A size: decimal, 0x hex or 0 octal, with an optional k/M/G/T suffix
 * (powers of 1024).  A sign, blanks, trailing text, or a value that does
 * not fit in size_t once scaled is an error, never a wrapped value.
 */
static int
parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!isdigit((unsigned char)*s)) /* strtoull would take "-1", " 1" */
		return -1;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: break;
	}
	if (*end != '\0' || v > (SIZE_MAX >> shift))
		return -1;
	*out = (size_t)(v << shift);
	return 0;
}

static const char *
ns_mode_name(enum ndctl_namespace_mode m)
{
	switch (m) {
	case NDCTL_NS_MODE_FSDAX: return "fsdax";
	case NDCTL_NS_MODE_SECTOR: return "sector";
	case NDCTL_NS_MODE_RAW: return "raw";
	case NDCTL_NS_MODE_DEVDAX: return "devdax";
	default: return "unknown";
	}
}

static const char *
persistence_name(enum ndctl_persistence_domain d)
{
	switch (d) {
	case PERSISTENCE_CPU_CACHE: return "cpu-cache (eADR: byte)";
	case PERSISTENCE_MEM_CTRL: return "memory-controller (ADR: cacheline)";
	case PERSISTENCE_NONE: return "none";
	default: return "unknown";
	}
}

static void
info_ndctl(void)
{
	struct ndctl_ctx *ctx;
	struct ndctl_bus *bus;
	struct ndctl_region *region;
	struct ndctl_namespace *ns;
	struct badblock *bb;
	int nregions = 0;

	printf("NVDIMM regions (libndctl):\n");
	if (ndctl_new(&ctx) != 0) {
		printf("  none found (libndctl could not start)\n");
		return;
	}
	ndctl_bus_foreach(ctx, bus) {
		ndctl_region_foreach(bus, region) {
			unsigned nbad = 0;
			nregions++;
			ndctl_region_badblock_foreach(region, bb)
				nbad++;
			printf("  %s: %s, %llu bytes, numa node %d, "
			       "persistence %s, %u bad blocks\n",
				ndctl_region_get_devname(region),
				ndctl_region_get_type_name(region),
				ndctl_region_get_size(region),
				ndctl_region_get_numa_node(region),
				persistence_name(
					ndctl_region_get_persistence_domain(
						region)),
				nbad);
			ndctl_namespace_foreach(region, ns) {
				const char *blk =
					ndctl_namespace_get_block_device(ns);
				printf("    %s: mode %s, %llu bytes%s%s\n",
					ndctl_namespace_get_devname(ns),
					ns_mode_name(
						ndctl_namespace_get_mode(ns)),
					ndctl_namespace_get_size(ns),
					blk && *blk ? ", /dev/" : "",
					blk && *blk ? blk : "");
			}
		}
	}
	if (nregions == 0)
		printf("  none found\n");
	ndctl_unref(ctx);
}

/* For a directory, ask about a scratch file created in it. */
static int
domain_of(const char *path, enum rio_domain *d)
{
	struct stat st;
	char tmp[64];
	int fd, rc;

	if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
		return rio_domain_of_path(path, d);
	fd = open(path, O_TMPFILE | O_RDWR, 0600);
	if (fd < 0)
		return rio_seterr(-errno, "create a scratch file in %s: %s",
			path, strerror(errno));
	if (ftruncate(fd, 2 << 20) != 0) {
		rc = rio_seterr(-errno, "size a scratch file in %s: %s", path,
			strerror(errno));
		close(fd);
		return rc;
	}
	snprintf(tmp, sizeof(tmp), "/proc/self/fd/%d", fd);
	rc = rio_domain_of_path(tmp, d);
	close(fd);
	return rc;
}

static int
cmd_info(int argc, char **argv)
{
	const char *env = getenv("RIO_DOMAIN");

	info_ndctl();
	printf("CPU: cacheline domain flushes with %s + sfence; "
	       "protection keys %s\n", rio_flush_instruction(),
		rio_pkeys_available() ? "available" : "not available "
		"(write protection uses mprotect)");
	if (env != NULL)
		printf("RIO_DOMAIN=%s forces the domain of pools opened "
		       "here\n", env);
	for (int i = 1; i < argc; i++) {
		enum rio_domain d;
		int rc = domain_of(argv[i], &d);
		if (rc)
			return fail(argv[i], rc);
		printf("%s: libpmem2 reports the %s persistence domain%s\n",
			argv[i], rio_domain_name(d),
			d == RIO_DOMAIN_PAGE ?
				" (not DAX: msync makes data durable; "
				"emulated pools use safe sync)" :
				"");
	}
	return 0;
}

static void
print_uuid(const uint8_t u[16])
{
	for (int i = 0; i < 16; i++)
		printf("%s%02x", (i == 4 || i == 6 || i == 8 || i == 10) ?
			"-" : "", u[i]);
}

static void
describe(rio_pool *p)
{
	uint8_t uuid[16];

	rio_pool_uuid(p, uuid);
	printf("pool       %s\n", rio_pool_path(p));
	printf("uuid       ");
	print_uuid(uuid);
	printf("\nsize       %zu bytes (user area %zu)\n",
		rio_pool_size(p) + RIO_POOL_HDR_SIZE, rio_pool_size(p));
	printf("domain     %s (libpmem2 reports %s)\n",
		rio_domain_name(rio_pool_domain(p)),
		rio_domain_name(rio_pool_native_domain(p)));
	printf("image      %s\n",
		rio_pool_image_path(p) ? rio_pool_image_path(p) : "(none)");
}

static int
cmd_create(int argc, char **argv)
{
	struct rio_pool_opts opts = { 0 };
	size_t size = 64 << 20;
	unsigned flags = 0;
	rio_pool *p;
	int c, rc;

	while ((c = getopt(argc, argv, "s:Sl:")) != -1) {
		switch (c) {
		case 's':
			if (parse_size(optarg, &size)) {
				fprintf(stderr, "riotool: bad size %s\n",
					optarg);
				return EXIT_USAGE;
			}
			break;
		case 'S': flags |= RIO_SAFE_SYNC; break;
		case 'l': opts.layout = optarg; break;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return EXIT_USAGE;
	}
	rc = rio_pool_create_opts(argv[optind], size, flags, &opts, &p);
	if (rc)
		return fail("create", rc);
	describe(p);
	rc = rio_pool_close(p);
	return rc ? fail("close", rc) : 0;
}

static int
cmd_check(int argc, char **argv)
{
	struct rio_image_info info;
	rio_pool *p;
	const char *img;
	char *img_copy = NULL;
	int rc, bad = 0;

	if (argc != 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	rc = rio_pool_open(argv[1], RIO_RDONLY, &p);
	if (rc)
		return fail(argv[1], rc);
	describe(p);
	printf("header     ok\n");
	img = rio_pool_image_path(p);
	if (img == NULL && asprintf(&img_copy, "%s.img", argv[1]) > 0 &&
	    access(img_copy, F_OK) == 0)
		img = img_copy; /* RDONLY opens do not attach images */
	if (img != NULL) {
		rc = rio_image_check(img, &info);
		if (rc) {
			fail(img, rc);
			bad = 1;
		} else if (info.present_slots > info.valid_slots) {
			printf("image      DAMAGED: %d of 2 copies torn or "
			       "corrupt; a restore would use generation %"
			       PRIu64 " in slot %d\n",
				info.present_slots - info.valid_slots,
				info.generation, info.slot);
			bad = EXIT_DAMAGED;
		} else {
			printf("image      ok: generation %" PRIu64
			       " in slot %d, %d of 2 copies valid\n",
				info.generation, info.slot, info.valid_slots);
		}
	}
	free(img_copy);
	rio_pool_close(p);
	return bad;
}

static int
cmd_dump(int argc, char **argv)
{
	size_t off = 0, len = 256;
	rio_pool *p;
	int c, rc;

	while ((c = getopt(argc, argv, "o:n:")) != -1) {
		size_t *dst = c == 'o' ? &off : &len;
		if ((c != 'o' && c != 'n') || parse_size(optarg, dst)) {
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return EXIT_USAGE;
	}
	rc = rio_pool_open(argv[optind], RIO_RDONLY, &p);
	if (rc)
		return fail(argv[optind], rc);
	describe(p);
	if (off > rio_pool_size(p)) {
		fprintf(stderr, "riotool: offset %zu is past the user area "
				"(%zu bytes)\n", off, rio_pool_size(p));
		rio_pool_close(p);
		return 1;
	}
	if (len > rio_pool_size(p) - off)
		len = rio_pool_size(p) - off;
	const unsigned char *b = (const unsigned char *)rio_pool_base(p) + off;
	for (size_t i = 0; i < len; i += 16) {
		printf("%08zx ", off + i);
		for (size_t j = i; j < i + 16; j++)
			if (j < len)
				printf(" %02x", b[j]);
			else
				printf("   ");
		printf("  |");
		for (size_t j = i; j < i + 16 && j < len; j++)
			putchar(b[j] >= 32 && b[j] < 127 ? b[j] : '.');
		printf("|\n");
	}
	rio_pool_close(p);
	return 0;
}

static int
cmd_sync(int argc, char **argv)
{
	uint64_t gen = 0;
	rio_pool *p;
	int rc;

	if (argc != 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	rc = rio_pool_open(argv[1], RIO_NO_SIGNALS, &p);
	if (rc)
		return fail(argv[1], rc);
	rc = rio_safe_sync(p, &gen);
	if (rc) {
		fail("sync", rc);
		rio_pool_close(p);
		return 1;
	}
	printf("%s: synced to %s, generation %" PRIu64 "\n", argv[1],
		rio_pool_image_path(p), gen);
	rc = rio_pool_close(p);
	return rc ? fail("close", rc) : 0;
}

int
main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	argc--;
	argv++;
	if (!strcmp(argv[0], "info"))
		return cmd_info(argc, argv);
	if (!strcmp(argv[0], "create"))
		return cmd_create(argc, argv);
	if (!strcmp(argv[0], "check"))
		return cmd_check(argc, argv);
	if (!strcmp(argv[0], "dump"))
		return cmd_dump(argc, argv);
	if (!strcmp(argv[0], "sync"))
		return cmd_sync(argc, argv);
	if (!strcmp(argv[0], "fc")) {
		int rc = riotool_fc(argc, argv);
		if (rc < 0)
			usage(stderr);
		return rc < 0 ? EXIT_USAGE : rc;
	}
	fprintf(stderr, "riotool: unknown command '%s'\n", argv[0]);
	usage(stderr);
	return EXIT_USAGE;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fs_probe.c -- an ordinary program, run under librio-fs.so by
 * fs_shim_test.cpp: plain POSIX and stdio calls on files of the cached
 * directory (argv[1]) and outside it (argv[2]), each result checked.
 * Raw system calls (syscall(2)) see the disk, bypassing the shim, so the
 * probe can tell that data went to the cache and not to the disk.
 * Exits 0 if every check passed; prints the first failure otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *dir, *out;
static int checks;

#define CHECK(cond)                                                      \
	do {                                                             \
		checks++;                                                \
		if (!(cond)) {                                           \
			fprintf(stderr, "FAIL %s:%d: %s (errno %d %s)\n", \
				__FILE__, __LINE__, #cond, errno,        \
				strerror(errno));                        \
			exit(1);                                         \
		}                                                        \
	} while (0)

static char *
in(const char *name)
{
	static char buf[8][PATH_MAX];
	static int k;
	char *p = buf[k++ % 8];

	snprintf(p, PATH_MAX, "%s/%s", dir, name);
	return p;
}

/* The disk's size of a file, bypassing the shim. */
static long
disk_size(const char *path)
{
	struct stat st;

	if (syscall(SYS_newfstatat, AT_FDCWD, path, &st, 0) != 0)
		return -1;
	return (long)st.st_size;
}

static void
test_data_calls(void)
{
	char buf[256];
	struct stat st;
	int fd, d, ap;

	fd = open(in("a"), O_RDWR | O_CREAT, 0644);
	CHECK(fd >= 0);
	CHECK(write(fd, "hello world", 11) == 11);
	CHECK(lseek(fd, 0, SEEK_CUR) == 11);
	CHECK(pwrite(fd, "W", 1, 6) == 1);
	memset(buf, 0, sizeof(buf));
	CHECK(pread(fd, buf, sizeof(buf), 0) == 11);
	CHECK(strcmp(buf, "hello World") == 0);
	/* In the cache, not on disk: the write-back period is long. */
	CHECK(disk_size(in("a")) == 0);
	CHECK(fsync(fd) == 0);
	CHECK(fdatasync(fd) == 0);
	CHECK(disk_size(in("a")) == 0); /* and fsync did not change that */
	CHECK(fstat(fd, &st) == 0 && st.st_size == 11);
	CHECK(stat(in("a"), &st) == 0 && st.st_size == 11);
	CHECK(lstat(in("a"), &st) == 0 && st.st_size == 11);
	CHECK(lseek(fd, 0, SEEK_END) == 11);
	CHECK(lseek(fd, -5, SEEK_CUR) == 6);
	CHECK(lseek(fd, -100, SEEK_CUR) == -1 && errno == EINVAL);
	CHECK(lseek(fd, 3, SEEK_DATA) == 3);
	CHECK(lseek(fd, 3, SEEK_HOLE) == 11);

	/* dup'ed descriptors share the offset. */
	d = dup(fd);
	CHECK(d >= 0);
	CHECK(lseek(fd, 0, SEEK_SET) == 0);
	memset(buf, 0, sizeof(buf));
	CHECK(read(d, buf, 5) == 5 && memcmp(buf, "hello", 5) == 0);
	CHECK(lseek(fd, 0, SEEK_CUR) == 5);
	CHECK(dup2(fd, 100) == 100);
	CHECK(lseek(100, 0, SEEK_CUR) == 5);
	CHECK(close(100) == 0);
	CHECK(fcntl(fd, F_DUPFD_CLOEXEC, 50) >= 50);
	CHECK(close(d) == 0);

	/* O_APPEND, through open and fcntl. */
	ap = open(in("a"), O_WRONLY | O_APPEND);
	CHECK(ap >= 0);
	CHECK(write(ap, "!", 1) == 1);
	CHECK(pwrite(ap, "?", 1, 0) == 1); /* Linux appends this too */
	CHECK(close(ap) == 0);
	memset(buf, 0, sizeof(buf));
	CHECK(pread(fd, buf, sizeof(buf), 0) == 13);
	CHECK(strcmp(buf, "hello World!?") == 0);

	/* Vectors. */
	{
		struct iovec v[2] = { { (void *)"ab", 2 }, { (void *)"cd", 2 } };
		char x[3] = { 0 }, y[3] = { 0 };
		struct iovec r[2] = { { x, 2 }, { y, 2 } };
		CHECK(pwritev(fd, v, 2, 20) == 4);
		CHECK(preadv(fd, r, 2, 20) == 4);
		CHECK(strcmp(x, "ab") == 0 && strcmp(y, "cd") == 0);
		CHECK(lseek(fd, 0, SEEK_SET) == 0);
		CHECK(writev(fd, v, 2) == 4);
		CHECK(lseek(fd, 0, SEEK_CUR) == 4);
	}
	CHECK(fstat(fd, &st) == 0 && st.st_size == 24);
	/* The gap 13..20 reads as zeros. */
	CHECK(pread(fd, buf, 7, 13) == 7);
	CHECK(memcmp(buf, "\0\0\0\0\0\0\0", 7) == 0);

	/* Truncation. */
	CHECK(ftruncate(fd, 5) == 0);
	CHECK(fstat(fd, &st) == 0 && st.st_size == 5);
	CHECK(truncate(in("a"), 3) == 0);
	CHECK(stat(in("a"), &st) == 0 && st.st_size == 3);
	CHECK(posix_fallocate(fd, 0, 4096) == 0);
	CHECK(fstat(fd, &st) == 0 && st.st_size == 4096);
	CHECK(ftruncate(fd, 3) == 0);
	CHECK(close(fd) == 0);
	CHECK(close(fd) == -1 && errno == EBADF);
}

static void
test_stdio(void)
{
	char line[64];
	FILE *f;

	f = fopen(in("s.txt"), "w");
	CHECK(f != NULL);
	CHECK(fprintf(f, "line %d\n", 42) == 8);
	CHECK(fclose(f) == 0);
	CHECK(disk_size(in("s.txt")) == 0); /* in the cache */
	f = fopen(in("s.txt"), "a+");
	CHECK(f != NULL);
	CHECK(fputs("more\n", f) >= 0);
	CHECK(fseek(f, 0, SEEK_SET) == 0);
	CHECK(fgets(line, sizeof(line), f) != NULL);
	CHECK(strcmp(line, "line 42\n") == 0);
	CHECK(fgets(line, sizeof(line), f) != NULL);
	CHECK(strcmp(line, "more\n") == 0);
	CHECK(fclose(f) == 0);
}

static void
test_names_and_refusals(void)
{
	struct stat st;
	void *p;
	int fd, dfd;

	fd = open(in("m"), O_RDWR | O_CREAT, 0644);
	CHECK(fd >= 0);
	CHECK(write(fd, "x", 1) == 1);
	/* Refused loudly rather than bypassing the cache. */
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(p == MAP_FAILED && errno == ENODEV);
	CHECK(link(in("m"), in("m2")) == -1 && errno == EPERM);
	CHECK(open(dir, O_RDWR | O_TMPFILE, 0600) == -1 &&
		errno == EOPNOTSUPP);
	CHECK(close(fd) == 0);

	/* Copies with one end cached go through the cache. */
	{
		char o[PATH_MAX], buf[8] = { 0 };
		int src, dst;
		off_t off = 0;
		snprintf(o, sizeof(o), "%s/copy", out);
		src = open(in("m"), O_RDONLY);
		dst = open(o, O_RDWR | O_CREAT | O_TRUNC, 0644);
		CHECK(src >= 0 && dst >= 0);
		CHECK(sendfile(dst, src, &off, 100) == 1 && off == 1);
		CHECK(pread(dst, buf, 8, 0) == 1 && buf[0] == 'x');
		{
			off_t ioff = 0, ooff = 1;
			CHECK(copy_file_range(src, &ioff, dst, &ooff, 5, 0) == 1);
			CHECK(ioff == 1 && ooff == 2);
			CHECK(pread(dst, buf, 8, 0) == 2 && buf[1] == 'x');
		}
		close(src);
		close(dst);
	}

	/* unlink and rename. */
	CHECK(rename(in("m"), in("m3")) == 0);
	CHECK(stat(in("m"), &st) == -1 && errno == ENOENT);
	CHECK(stat(in("m3"), &st) == 0 && st.st_size == 1);
	CHECK(unlink(in("m3")) == 0);
	CHECK(open(in("m3"), O_RDONLY) == -1 && errno == ENOENT);
	CHECK(unlink(in("m3")) == -1 && errno == ENOENT);
	CHECK(mkdir(in("sub"), 0755) == 0);
	fd = open(in("sub/f"), O_RDWR | O_CREAT, 0644);
	CHECK(fd >= 0 && write(fd, "sub", 3) == 3 && close(fd) == 0);

	/* A directory descriptor: fsync is free unless the directory had
	 * changes the cache does not record (the mkdir and rename above). */
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	CHECK(dfd >= 0);
	CHECK(fsync(dfd) == 0);
	CHECK(fsync(dfd) == 0);
	CHECK(close(dfd) == 0);
}

static void
test_outside(void)
{
	char o[PATH_MAX], buf[8] = { 0 };
	int fd;

	snprintf(o, sizeof(o), "%s/plain", out);
	fd = open(o, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK(write(fd, "plain", 5) == 5);
	/* Untouched: on disk at once, as the kernel does it. */
	CHECK(disk_size(o) == 5);
	CHECK(syscall(SYS_pread64, fd, buf, 5, 0) == 5);
	CHECK(memcmp(buf, "plain", 5) == 0);
	CHECK(fsync(fd) == 0);
	CHECK(close(fd) == 0);
}

static void
test_fork(void)
{
	int fd = open(in("forked"), O_RDWR | O_CREAT, 0644), st = 0;
	pid_t pid;

	CHECK(fd >= 0);
	CHECK(write(fd, "parent", 6) == 6);
	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		/* The parent's cache: refused, loudly. */
		if (write(fd, "child", 5) != -1 || errno != EIO)
			_exit(1);
		if (open(in("other"), O_RDWR | O_CREAT, 0644) != -1)
			_exit(2);
		_exit(0);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(close(fd) == 0);
}

/* Exec'ed with a descriptor the parent opened through the cache. */
static int
exec_child(int fd)
{
	char c;

	if (read(fd, &c, 1) != -1 || errno != EBADF)
		return 1;
	if (write(fd, "x", 1) != -1 || errno != EBADF)
		return 2;
	return 0;
}

static void
test_exec(const char *self)
{
	int fd = open(in("inherited"), O_RDWR | O_CREAT, 0644), st = 0;
	char num[16];
	pid_t pid;

	CHECK(fd >= 0);
	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		snprintf(num, sizeof(num), "%d", fd);
		execl(self, self, "--exec-child", num, (char *)NULL);
		_exit(127);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(close(fd) == 0);
}

/* A write past RLIMIT_FSIZE fails at the call with EFBIG, as the kernel's
 * (here without its SIGXFSZ), and the file stays as it was. */
static void
test_limits(void)
{
	struct rlimit old, rl;
	struct stat st;
	int fd;

	CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
	rl = old;
	rl.rlim_cur = 1 << 20;
	CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
	fd = open(in("lim"), O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK(pwrite(fd, "ab", 2, (1 << 20) - 1) == -1 && errno == EFBIG);
	CHECK(ftruncate(fd, (1 << 20) + 1) == -1 && errno == EFBIG);
	CHECK(pwrite(fd, "a", 1, (1 << 20) - 1) == 1);
	CHECK(fstat(fd, &st) == 0 && st.st_size == 1 << 20);
	CHECK(close(fd) == 0);
	CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
	CHECK(unlink(in("lim")) == 0);
}

int
main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--exec-child") == 0)
		return exec_child(atoi(argv[2]));
	if (argc != 3) {
		fprintf(stderr, "usage: fs_probe CACHED_DIR OTHER_DIR\n");
		return 2;
	}
	dir = argv[1];
	out = argv[2];
	test_data_calls();
	test_stdio();
	test_names_and_refusals();
	test_outside();
	test_fork();
	test_exec(argv[0]);
	test_limits();
	printf("%d checks passed\n", checks);
	return 0;
}

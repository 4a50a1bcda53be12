// SPDX-License-Identifier: BSD-3-Clause
// safesync_test.cpp -- the disk image of an emulated pool
#include "../common/hdr_rules.hpp"
#include "../common/test_util.hpp"
#include "image_layout.h"
#include "rio_testhook.h"

using test::TempDir;

static const size_t POOL = 1 << 20;
static const uint64_t NPAGES = POOL / 4096;

static rio_pool *create(const std::string &path, unsigned flags = 0,
	const struct rio_pool_opts *o = nullptr)
{
	rio_pool *p = nullptr;
	REQUIRE_OK(rio_pool_create_opts(path.c_str(), POOL,
		RIO_SAFE_SYNC | RIO_NO_SIGNALS | flags, o, &p));
	return p;
}

static uint64_t sync_now(rio_pool *p)
{
	uint64_t gen = 0;
	REQUIRE_OK(rio_safe_sync(p, &gen));
	return gen;
}

static uint64_t pages_written(rio_pool *p)
{
	struct rio_stats st;
	rio_stats(p, &st);
	return st.sync_pages_written;
}

TEST_CASE("round trip: the pool is restored from its image after a reboot",
	"[safesync]")
{
	TempDir d;
	std::string path = d / "p";
	rio_pool *p = create(path);
	REQUIRE(std::string(rio_pool_image_path(p)) == path + ".img");
	char *b = (char *)rio_pool_base(p);
	for (size_t i = 0; i < rio_pool_size(p); i += 512)
		b[i] = (char)(i / 512);
	uint64_t gen = sync_now(p);
	REQUIRE(gen >= 2);
	REQUIRE_OK(rio_pool_close(p)); // syncs once more

	struct rio_image_info info;
	REQUIRE_OK(rio_image_check((path + ".img").c_str(), &info));
	REQUIRE(info.generation == gen + 1);
	REQUIRE(info.valid_slots == 2);
	REQUIRE(info.pool_size == POOL);

	REQUIRE(unlink(path.c_str()) == 0); // the memory copy is gone
	REQUIRE_OK(rio_pool_open(path.c_str(), 0, &p));
	REQUIRE(rio_pool_restored(p));
	b = (char *)rio_pool_base(p);
	for (size_t i = 0; i < rio_pool_size(p); i += 512)
		REQUIRE(b[i] == (char)(i / 512));
	REQUIRE_OK(rio_pool_close(p));
	REQUIRE(test::list_dir(d.path) ==
		(std::vector<std::string>{ "p", "p.img" }));
}

TEST_CASE("a sync writes only the pages changed since the slot it replaces",
	"[safesync]")
{
	TempDir d;
	rio_pool *p = create(d / "p");
	char *b = (char *)rio_pool_base(p);
	sync_now(p);
	sync_now(p); // both slots now hold the same content
	uint64_t w0 = pages_written(p);
	sync_now(p);
	REQUIRE(pages_written(p) == w0); // nothing changed: no page written

	b[3 * 4096] = 1;
	b[10 * 4096 + 7] = 2;
	sync_now(p);
	REQUIRE(pages_written(p) == w0 + 2);
	sync_now(p); // the other slot catches up on the same two pages
	REQUIRE(pages_written(p) == w0 + 4);
	sync_now(p);
	REQUIRE(pages_written(p) == w0 + 4);
	REQUIRE_OK(rio_pool_close(p));
}

TEST_CASE("a damaged newest copy falls back to the older one; two damaged "
	  "copies are refused",
	"[safesync][badinput]")
{
	TempDir d;
	std::string path = d / "p", img = path + ".img";
	rio_pool *p = create(path);
	char *b = (char *)rio_pool_base(p);
	strcpy(b, "old");
	uint64_t g1 = sync_now(p);
	strcpy(b, "new");
	uint64_t g2 = sync_now(p);
	REQUIRE(g2 == g1 + 1);
	rio_pool_close(p); // gen g2 + 1 holds "new" as well
	REQUIRE(unlink(path.c_str()) == 0);

	struct rio_image_info info;
	REQUIRE_OK(rio_image_check(img.c_str(), &info));
	unsigned newest = (unsigned)info.slot;
	// Damage a data page (the first user page) of the newest slot.
	uint64_t data = rio_img_slot_off(NPAGES, newest) +
		rio_img_table_bytes(NPAGES) + 4096;
	test::patch_file(img, (off_t)data + 100, "!", 1);
	REQUIRE_OK(rio_image_check(img.c_str(), &info));
	REQUIRE(info.valid_slots == 1);
	REQUIRE(info.generation == g2);

	REQUIRE_OK(rio_pool_open(path.c_str(), 0, &p));
	REQUIRE(std::string((char *)rio_pool_base(p)) == "new"); // gen g2
	REQUIRE_OK(rio_pool_close(p));
	REQUIRE(unlink(path.c_str()) == 0);

	// Damage both slots' superblocks: nothing valid, nothing created.
	test::patch_file(img, 100, "!", 1);
	test::patch_file(img, 4096 + 100, "!", 1);
	REQUIRE_RC(rio_image_check(img.c_str(), &info), RIO_EIMAGE);
	std::string before = test::read_file(img);
	REQUIRE_RC(rio_pool_open(path.c_str(), 0, &p), RIO_EIMAGE);
	REQUIRE(!test::exists(path));
	REQUIRE(test::read_file(img) == before);
	REQUIRE(test::list_dir(d.path) == std::vector<std::string>{ "p.img" });
}

TEST_CASE("create refuses to overwrite an existing image; another pool's "
	  "image is not taken over",
	"[safesync][badinput]")
{
	TempDir d;
	rio_pool *p = create(d / "a");
	REQUIRE_OK(rio_pool_close(p));
	REQUIRE(unlink((d / "a").c_str()) == 0);
	std::string before = test::read_file(d / "a.img");
	REQUIRE_RC(rio_pool_create((d / "a").c_str(), POOL, RIO_SAFE_SYNC, &p),
		-EEXIST);
	REQUIRE(test::read_file(d / "a.img") == before);

	// A pool with an image flag finds a foreign image at its image path.
	REQUIRE_OK(rio_pool_create((d / "c").c_str(), POOL, RIO_SAFE_SYNC, &p));
	REQUIRE_OK(rio_pool_close(p));
	REQUIRE(rename((d / "a.img").c_str(), (d / "c.img").c_str()) == 0);
	before = test::read_file(d / "c.img");
	REQUIRE_RC(rio_pool_open((d / "c").c_str(), 0, &p), RIO_EIMAGE);
	REQUIRE(test::read_file(d / "c.img") == before);
}

TEST_CASE("an image that is truncated is rebuilt from the pool", "[safesync]")
{
	TempDir d;
	std::string path = d / "p";
	rio_pool *p = create(path);
	strcpy((char *)rio_pool_base(p), "keep");
	REQUIRE_OK(rio_pool_close(p));
	REQUIRE(truncate((path + ".img").c_str(), 8192) == 0);
	REQUIRE_OK(rio_pool_open(path.c_str(), RIO_NO_SIGNALS, &p));
	REQUIRE_OK(rio_pool_close(p));
	REQUIRE(unlink(path.c_str()) == 0);
	REQUIRE_OK(rio_pool_open(path.c_str(), 0, &p));
	REQUIRE(std::string((char *)rio_pool_base(p)) == "keep");
	REQUIRE_OK(rio_pool_close(p));
}

TEST_CASE("a failing fdatasync leaves the previous generation loadable",
	"[safesync][faults]")
{
	TempDir d;
	std::string path = d / "p";
	rio_pool *p = create(path);
	char *b = (char *)rio_pool_base(p);
	strcpy(b, "good");
	uint64_t g = sync_now(p);
	strcpy(b, "lost");
	rio_sys_fdatasync_fn saved = rio_testhook_fdatasync([](int) {
		errno = EIO;
		return -1;
	});
	REQUIRE_RC(rio_safe_sync(p, nullptr), -EIO);
	rio_testhook_fdatasync(saved);
	struct rio_image_info info;
	REQUIRE_OK(rio_image_check((path + ".img").c_str(), &info));
	REQUIRE(info.generation == g);

	// The next sync rewrites the failed slot completely and succeeds.
	uint64_t w0 = pages_written(p);
	REQUIRE(sync_now(p) == g + 1);
	REQUIRE(pages_written(p) - w0 == NPAGES);
	REQUIRE_OK(rio_pool_close(p));
}

TEST_CASE("a custom image path", "[safesync]")
{
	TempDir d;
	std::string img = d / "elsewhere.image";
	struct rio_pool_opts o = {};
	o.image_path = img.c_str();
	rio_pool *p = create(d / "p", 0, &o);
	strcpy((char *)rio_pool_base(p), "custom");
	REQUIRE_OK(rio_pool_close(p));
	REQUIRE(test::exists(img));
	REQUIRE(unlink((d / "p").c_str()) == 0);
	REQUIRE_RC(rio_pool_open((d / "p").c_str(), 0, &p), -ENOENT);
	REQUIRE_OK(rio_pool_open_opts((d / "p").c_str(), 0, &o, &p));
	REQUIRE(std::string((char *)rio_pool_base(p)) == "custom");
	REQUIRE_OK(rio_pool_close(p));
}

TEST_CASE("pools without an image refuse safe sync", "[safesync][badinput]")
{
	TempDir d;
	rio_pool *p = nullptr;
	REQUIRE_OK(rio_pool_create((d / "p").c_str(), POOL, 0, &p));
	REQUIRE_RC(rio_safe_sync(p, nullptr), RIO_ENOSYNC);
	REQUIRE_OK(rio_pool_close(p));
	REQUIRE(!test::exists(d / "p.img"));
}

TEST_CASE("fatal signals safe-sync before the process dies", "[safesync][signals]")
{
	TempDir d;
	std::string path = d / "p";
	rio_pool *p = nullptr;
	REQUIRE_OK(rio_pool_create(path.c_str(), POOL, RIO_SAFE_SYNC, &p));
	REQUIRE_OK(rio_pool_close(p));
	for (int sig : { SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGSEGV }) {
		INFO("signal " << sig);
		auto r = test::run_child([&] {
			rio_pool *q = nullptr;
			if (rio_pool_open(path.c_str(), 0, &q))
				_exit(10);
			snprintf((char *)rio_pool_base(q), 32, "sig %d", sig);
			raise(sig);
			_exit(11);
		});
		INFO(r.err);
		REQUIRE(r.signal == sig);
		REQUIRE(r.err.find("safe sync of") != std::string::npos);
		REQUIRE(unlink(path.c_str()) == 0);
		REQUIRE_OK(rio_pool_open(path.c_str(), RIO_NO_SIGNALS, &p));
		REQUIRE(rio_pool_restored(p));
		REQUIRE(std::string((char *)rio_pool_base(p)) ==
			"sig " + std::to_string(sig));
		REQUIRE_OK(rio_pool_close(p));
	}
}

TEST_CASE("periodic safe sync from a background thread", "[safesync][periodic]")
{
	TempDir d;
	std::string path = d / "p";
	rio_pool *p = nullptr;
	REQUIRE_OK(rio_pool_create(path.c_str(), POOL, RIO_SAFE_SYNC, &p));
	REQUIRE_OK(rio_pool_close(p));
	auto r = test::run_child([&] {
		struct rio_pool_opts o = {};
		o.sync_interval_ms = 5;
		rio_pool *q = nullptr;
		if (rio_pool_open_opts(path.c_str(), 0, &o, &q))
			_exit(10);
		strcpy((char *)rio_pool_base(q), "periodic");
		// Wait until the thread has synced twice after the store.
		struct rio_stats st;
		rio_stats(q, &st);
		uint64_t want = st.syncs + 2;
		for (int i = 0; i < 2000 && st.syncs < want; i++) {
			usleep(1000);
			rio_stats(q, &st);
		}
		kill(getpid(), SIGKILL); // no close, no signal handler
	});
	REQUIRE(r.signal == SIGKILL);
	REQUIRE(unlink(path.c_str()) == 0);
	REQUIRE_OK(rio_pool_open(path.c_str(), 0, &p));
	REQUIRE(std::string((char *)rio_pool_base(p)) == "periodic");
	REQUIRE_OK(rio_pool_close(p));
}

TEST_CASE("read-only opens never restore and never sync", "[safesync]")
{
	TempDir d;
	std::string path = d / "p";
	rio_pool *p = create(path);
	REQUIRE_OK(rio_pool_close(p));
	std::string img = test::read_file(path + ".img");
	REQUIRE_OK(rio_pool_open(path.c_str(), RIO_RDONLY, &p));
	REQUIRE(rio_pool_image_path(p) != nullptr);
	REQUIRE_OK(rio_pool_close(p));
	REQUIRE(test::read_file(path + ".img") == img);
	REQUIRE(unlink(path.c_str()) == 0);
	REQUIRE_RC(rio_pool_open(path.c_str(), RIO_RDONLY, &p), -ENOENT);
	REQUIRE_RC(rio_pool_open(path.c_str(), RIO_NO_RESTORE, &p), -ENOENT);
}

// Apply fn to both superblocks of an image and reseal them.
template <typename F> static void edit_supers(const std::string &img, F fn)
{
	std::string f = test::read_file(img);
	for (unsigned k = 0; k < 2; k++) {
		struct rio_img_super sb;
		memcpy(&sb, f.data() + k * RIO_IMG_BLOCK, sizeof(sb));
		fn(sb);
		sb.checksum = rio_checksum(&sb,
			offsetof(struct rio_img_super, checksum),
			RIO_IMG_SUPER_CSUM_SEED);
		test::patch_file(img, (off_t)k * RIO_IMG_BLOCK, &sb,
			sizeof(sb));
	}
}

TEST_CASE("image header rules: one test per rule, a refusal changes nothing",
	"[safesync][badinput][hdr]")
{
	using R = hdr_rules::Rule<rio_img_super>;
	TempDir d;
	std::string path = d / "p", img = path + ".img";
	rio_pool *p = create(path);
	strcpy((char *)rio_pool_base(p), "kept");
	REQUIRE_OK(rio_pool_close(p));
	std::string pool = test::read_file(path);
	REQUIRE(unlink(path.c_str()) == 0);

	// An unusable slot (bad magic, damage) is one a sync may retract: with
	// no usable slot the image is RIO_EIMAGE.  Another version or an
	// unknown feature refuses the whole image.  The image has no compat
	// or ro_compat mask.  Read-only use: rio_image_check; read-write:
	// restoring the missing pool from it.
	hdr_rules::State st{
		[&] { return test::read_file(img) + (test::exists(path) ?
				"+pool" : ""); },
		[&](const std::string &s) {
			unlink(path.c_str());
			test::write_file(img, s);
		},
	};
	hdr_rules::run(st,
		std::vector<R>{
			{ "bad magic", [](rio_img_super &s) { s.magic[0] ^= 1; },
				RIO_EIMAGE, RIO_EIMAGE },
			{ "newer major", [](rio_img_super &s) { s.major++; },
				RIO_EVERSION, RIO_EVERSION },
			{ "older major", [](rio_img_super &s) { s.major--; },
				RIO_EVERSION, RIO_EVERSION },
			{ "newer minor accepted",
				[](rio_img_super &s) { s.minor++; }, 0, 0 },
			{ "unknown incompat refused",
				[](rio_img_super &s) { s.incompat |= 1u << 30; },
				RIO_EFEATURE, RIO_EFEATURE },
			{ "non-zero reserved refused",
				[](rio_img_super &s) {
					s.reserved[sizeof(s.reserved) - 1] = 1;
				},
				RIO_EIMAGE, RIO_EIMAGE },
		},
		[&](const std::function<void(rio_img_super &)> &fn) {
			edit_supers(img, fn);
		},
		[&](bool ro) {
			if (ro) {
				struct rio_image_info info;
				return rio_image_check(img.c_str(), &info);
			}
			rio_pool *q = nullptr;
			int rc = rio_pool_open(path.c_str(), 0, &q);
			if (rc == 0) {
				REQUIRE(std::string((char *)rio_pool_base(q)) ==
					"kept");
				REQUIRE_OK(rio_pool_close(q));
			}
			return rc;
		});

	// With the pool present, an image of another version is not synced
	// over: the open is refused and the image left as it was.
	test::write_file(path, pool);
	edit_supers(img, [](rio_img_super &s) { s.major++; });
	std::string before = test::read_file(img);
	REQUIRE_RC(rio_pool_open(path.c_str(), 0, &p), RIO_EVERSION);
	REQUIRE(test::read_file(img) == before);
}

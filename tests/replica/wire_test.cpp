// SPDX-License-Identifier: BSD-3-Clause
// wire_test.cpp -- the stream's records, the diff, and libvista's hook
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <thread>
#include <vector>

#include "vr_test.hpp"

extern "C" {
#include "replica_layout.h"
#include "vr_int.h"
}

static std::vector<char> make_rec(uint16_t type, uint32_t count,
	const void *payload, size_t plen, uint64_t seq = 7, uint64_t epoch = 3)
{
	std::vector<char> b(sizeof(vr_rec_hdr) + plen);
	memcpy(b.data() + sizeof(vr_rec_hdr), payload, plen);
	vr__rec_seal((vr_rec_hdr *)b.data(), type, count, seq, epoch, b.size(),
		b.data() + sizeof(vr_rec_hdr));
	return b;
}

static int verify(std::vector<char> &b, uint64_t seg = 1 << 20)
{
	return vr__rec_verify((vr_rec_hdr *)b.data(),
		b.data() + sizeof(vr_rec_hdr), seg);
}

// A REDO record of pieces {off, bytes}.
static std::vector<char> redo(
	const std::vector<std::pair<uint64_t, std::string>> &ps)
{
	std::vector<char> p;
	for (auto &x : ps) {
		vr_piece pc = vr_piece_make(x.first,
			(uint32_t)x.second.size());
		p.insert(p.end(), (char *)&pc, (char *)(&pc + 1));
	}
	for (auto &x : ps)
		p.insert(p.end(), x.second.begin(), x.second.end());
	p.resize((p.size() + 7) & ~(size_t)7);
	return make_rec(VR_REC_REDO, (uint32_t)ps.size(), p.data(), p.size());
}

TEST_CASE("every record type seals and verifies", "[wire]")
{
	vr_hello h = {};
	h.seg_size = 4096;
	vr_ack a = { 5, 640, 99 };
	vr_refuse r = { VR_EOTHERSET, 0 };
	auto hello = make_rec(VR_REC_HELLO, 0, &h, sizeof(h));
	auto ack = make_rec(VR_REC_ACK, 0, &a, sizeof(a));
	auto end = make_rec(VR_REC_COPY_END, 0, &a, sizeof(a));
	auto beat = make_rec(VR_REC_BEAT, 0, nullptr, 0);
	auto grant = make_rec(VR_REC_GRANT, 0, nullptr, 0);
	auto ref = make_rec(VR_REC_REFUSE, 0, &r, sizeof(r));
	auto rd = redo({ { 8, "abc" }, { 100, "0123456789" } });
	std::string chunk(64, 'x');
	auto copy = redo({ { 0, chunk } });
	((vr_rec_hdr *)copy.data())->type = VR_REC_COPY;
	vr__rec_seal((vr_rec_hdr *)copy.data(), VR_REC_COPY, 1, 0, 3,
		copy.size(), copy.data() + sizeof(vr_rec_hdr));
	for (auto *b : { &hello, &ack, &end, &beat, &grant, &ref, &rd,
		     &copy }) {
		VR_REQUIRE_OK(verify(*b));
		REQUIRE(b->size() % 8 == 0);
	}
	// A GRANT carries no payload.
	auto grant2 = make_rec(VR_REC_GRANT, 0, &a, sizeof(a));
	VR_REQUIRE_RC(verify(grant2), VR_ECORRUPT);
	// A COPY record carries exactly one piece.
	auto copy2 = redo({ { 0, "ab" }, { 8, "cd" } });
	vr__rec_seal((vr_rec_hdr *)copy2.data(), VR_REC_COPY, 2, 0, 3,
		copy2.size(), copy2.data() + sizeof(vr_rec_hdr));
	VR_REQUIRE_RC(verify(copy2), VR_ECORRUPT);
}

TEST_CASE("a flipped byte anywhere in a record is refused", "[wire]")
{
	auto rd = redo({ { 8, "abcdefgh" }, { 64, "xy" } });
	// Through the reader, as the backup takes them: a flipped length
	// makes the record end early (corrupt) or late (truncated).
	for (size_t i = 0; i < rd.size(); i++) {
		auto b = rd;
		b[i] ^= 0x10;
		int sv[2];
		REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
		REQUIRE(write(sv[0], b.data(), b.size()) == (ssize_t)b.size());
		close(sv[0]);
		void *buf = nullptr;
		size_t cap = 0;
		int rc = vr__read_rec(sv[1], &buf, &cap, 1000, NULL, 1 << 20);
		free(buf);
		close(sv[1]);
		INFO("byte " << i << " -> " << vr_err_name(rc));
		REQUIRE((rc == VR_ECORRUPT || rc == VR_EVERSION ||
			rc == VR_ETRUNC));
	}
}

TEST_CASE("bad headers and shapes are clear errors", "[wire]")
{
	auto rd = redo({ { 8, "abc" } });
	auto *h = (vr_rec_hdr *)rd.data();

	SECTION("another wire version") {
		h->major = VR_WIRE_MAJOR + 1;
		VR_REQUIRE_RC(vr__hdr_check(h), VR_EVERSION);
	}
	SECTION("a peer of the previous wire version (16-byte pieces)") {
		h->major = 1;
		VR_REQUIRE_RC(vr__hdr_check(h), VR_EVERSION);
		REQUIRE(std::string(vr_errormsg()).find("wire major 1") !=
			std::string::npos);
	}
	SECTION("another magic") {
		h->magic = 0x12345678;
		VR_REQUIRE_RC(vr__hdr_check(h), VR_ECORRUPT);
	}
	SECTION("unknown type") {
		h->type = 42;
		VR_REQUIRE_RC(vr__hdr_check(h), VR_ECORRUPT);
	}
	SECTION("length beyond the limit") {
		h->len = VR_MAX_REC + 8;
		VR_REQUIRE_RC(vr__hdr_check(h), VR_ECORRUPT);
	}
	SECTION("a piece outside the segment") {
		auto b = redo({ { 4090, "abcdefgh" } });
		VR_REQUIRE_RC(verify(b, 4096), VR_ECORRUPT);
		VR_REQUIRE_OK(verify(b, 8192));
	}
	SECTION("pieces that do not add up") {
		auto b = redo({ { 8, "abc" } });
		*(vr_piece *)(b.data() + sizeof(vr_rec_hdr)) =
			vr_piece_make(8, 20);
		vr__rec_seal((vr_rec_hdr *)b.data(), VR_REC_REDO, 1, 7, 3,
			b.size(), b.data() + sizeof(vr_rec_hdr));
		VR_REQUIRE_RC(verify(b), VR_ECORRUPT);
	}
	SECTION("pieces' data back to back, one padding at the end") {
		auto b = redo({ { 8, "abc" }, { 100, "hello" }, { 3000, "x" } });
		REQUIRE(b.size() == sizeof(vr_rec_hdr) + 3 * 8 + 16);
		VR_REQUIRE_OK(verify(b));
		auto *pc = (vr_piece *)(b.data() + sizeof(vr_rec_hdr));
		REQUIRE(vr_piece_off(&pc[1]) == 100);
		REQUIRE(vr_piece_len(&pc[1]) == 5);
		REQUIRE(memcmp(b.data() + sizeof(vr_rec_hdr) + 24,
			"abchellox", 9) == 0);
	}
	SECTION("a whole word of padding") {
		auto b = redo({ { 8, "abc" } });
		b.resize(b.size() + 8, 0);
		vr__rec_seal((vr_rec_hdr *)b.data(), VR_REC_REDO, 1, 7, 3,
			b.size(), b.data() + sizeof(vr_rec_hdr));
		VR_REQUIRE_RC(verify(b), VR_ECORRUPT);
	}
	SECTION("a piece of no bytes") {
		auto b = redo({ { 8, "abcdefgh" } });
		*(vr_piece *)(b.data() + sizeof(vr_rec_hdr)) =
			vr_piece_make(8, 0);
		vr__rec_seal((vr_rec_hdr *)b.data(), VR_REC_REDO, 1, 7, 3,
			b.size(), b.data() + sizeof(vr_rec_hdr));
		VR_REQUIRE_RC(verify(b), VR_ECORRUPT);
	}
}

TEST_CASE("a record cut short by the peer is VR_ETRUNC, never a part",
	"[wire]")
{
	auto rd = redo({ { 8, "abcdefgh" }, { 64, std::string(300, 'q') } });
	for (size_t cut : { (size_t)0, (size_t)10, sizeof(vr_rec_hdr),
		     rd.size() - 1, rd.size() }) {
		int sv[2];
		REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
		REQUIRE(write(sv[0], rd.data(), cut) == (ssize_t)cut);
		close(sv[0]);
		void *buf = nullptr;
		size_t cap = 0;
		int rc = vr__read_rec(sv[1], &buf, &cap, 1000, NULL,
			1 << 20);
		INFO("cut at " << cut);
		if (cut == 0)
			VR_REQUIRE_RC(rc, VR_EPEERLOST);
		else if (cut == rd.size())
			VR_REQUIRE_OK(rc);
		else
			VR_REQUIRE_RC(rc, VR_ETRUNC);
		free(buf);
		close(sv[1]);
	}
}

TEST_CASE("the diff sends the changed bytes only", "[diff]")
{
	std::vector<unsigned char> b(1000, 0), c(1000, 0);
	uint64_t ol[2 * 64];

	REQUIRE(vr_diff(b.data(), c.data(), b.size(), 16, ol, 64) == 0);
	c[5] = 1;
	REQUIRE(vr_diff(b.data(), c.data(), b.size(), 16, ol, 64) == 1);
	REQUIRE(ol[0] == 5);
	REQUIRE(ol[1] == 1);
	// Two changes 10 equal bytes apart: one piece; 100 apart: two.
	c[16] = 1;
	REQUIRE(vr_diff(b.data(), c.data(), b.size(), 16, ol, 64) == 1);
	REQUIRE(ol[0] == 5);
	REQUIRE(ol[1] == 12);
	c[200] = 1;
	c[999] = 1;
	REQUIRE(vr_diff(b.data(), c.data(), b.size(), 16, ol, 64) == 3);
	REQUIRE(ol[4] == 999);
	REQUIRE(ol[5] == 1);
	REQUIRE(vr_diff(b.data(), c.data(), b.size(), 16, ol, 2) == -E2BIG);

	// Random changes: applying the pieces to before gives cur, and no
	// piece starts or ends on an equal byte.
	std::mt19937 rng(7);
	for (int it = 0; it < 200; it++) {
		std::vector<unsigned char> x(1 + rng() % 3000), y;
		for (auto &e : x)
			e = (unsigned char)rng();
		y = x;
		for (int k = rng() % 20; k > 0; k--)
			y[rng() % y.size()] ^= (unsigned char)(1 + rng() % 255);
		std::vector<uint64_t> o(2 * 4096);
		int n = vr_diff(x.data(), y.data(), x.size(), 1 + rng() % 32,
			o.data(), 4096);
		REQUIRE(n >= 0);
		auto z = x;
		size_t sent = 0;
		for (int i = 0; i < n; i++) {
			REQUIRE(x[o[2 * i]] != y[o[2 * i]]);
			REQUIRE(x[o[2 * i] + o[2 * i + 1] - 1] !=
				y[o[2 * i] + o[2 * i + 1] - 1]);
			memcpy(&z[o[2 * i]], &y[o[2 * i]], o[2 * i + 1]);
			sent += o[2 * i + 1];
		}
		REQUIRE(z == y);
		REQUIRE(sent <= y.size());
	}
}

// The byte-at-a-time diff the word-at-a-time one must equal, piece for
// piece: a piece starts at a changed byte and grows while the next changed
// byte is fewer than gap equal bytes away.
static std::vector<uint64_t> diff_ref(const std::vector<unsigned char> &b,
	const std::vector<unsigned char> &c, size_t gap)
{
	std::vector<uint64_t> o;
	size_t i = 0, len = b.size();
	if (gap == 0)
		gap = 1;
	while (i < len) {
		while (i < len && b[i] == c[i])
			i++;
		if (i == len)
			break;
		size_t lo = i, hi = i + 1, eq = 0;
		for (i = hi; i < len; i++) {
			if (b[i] != c[i]) {
				hi = i + 1;
				eq = 0;
			} else if (++eq >= gap) {
				break;
			}
		}
		i = hi;
		o.push_back(lo);
		o.push_back(hi - lo);
	}
	return o;
}

TEST_CASE("the diff equals the byte-at-a-time diff", "[diff]")
{
	std::mt19937 rng(11);
	for (int it = 0; it < 3000; it++) {
		// Lengths around the word size, changes near word edges,
		// runs of changed bytes and gaps around `gap`.
		size_t len = it < 64 ? (size_t)it : 1 + rng() % 300;
		std::vector<unsigned char> x(len), y;
		for (auto &e : x)
			e = (unsigned char)rng();
		y = x;
		for (int k = len ? rng() % 12 : 0; k > 0; k--) {
			size_t at = rng() % len, run = 1 + rng() % 10;
			for (size_t j = at; j < len && j < at + run; j++)
				y[j] ^= (unsigned char)(1 + rng() % 255);
		}
		size_t gap = rng() % 20;
		std::vector<uint64_t> o(2 * 1024);
		int n = vr_diff(x.data(), y.data(), len, gap, o.data(), 1024);
		auto want = diff_ref(x, y, gap);
		REQUIRE(n == (int)(want.size() / 2));
		o.resize(2 * (size_t)n);
		REQUIRE(o == want);
	}
}

// ---- libvista's transaction hook ----

struct Seen {
	unsigned event = 0;
	int refuse = 0;
	int calls = 0;
	std::vector<std::pair<size_t, std::string>> after, before;
	char *base = nullptr;
};

static int hook(void *arg, unsigned event, struct vista_txinfo *tx)
{
	auto *s = (Seen *)arg;
	struct vista_txrange r;
	s->calls++;
	s->event = event;
	s->after.clear();
	s->before.clear();
	while (vista_txinfo_next(tx, &r) == 1) {
		size_t off = (char *)r.addr - s->base;
		s->after.push_back({ off, std::string((char *)r.addr, r.len) });
		s->before.push_back(
			{ off, std::string((const char *)r.before, r.len) });
	}
	return event == VISTA_HOOK_COMMIT ? s->refuse : 0;
}

TEST_CASE("the hook sees each range with its before- and after-image",
	"[hook]")
{
	test::TempDir d;
	std::string lp = d / "log", sp = d / "seg";
	struct vista_opts vo = {};
	vo.log_path = lp.c_str();
	vista *v;
	vista_segment *seg;
	VR_REQUIRE_OK(vista_init(&vo, &v));
	VR_REQUIRE_OK(vista_map(v, sp.c_str(), vrt::addr(40), 1 << 16,
		VISTA_CREATE, &seg));
	char *b = (char *)vista_segment_base(seg);
	Seen s;
	s.base = b;
	memcpy(b, "old-AAAAold-BBBB", 16);
	VR_REQUIRE_OK(vista_set_tx_hook(v, hook, &s));

	VR_REQUIRE_OK(vista_begin_transaction(v, 0));
	VR_REQUIRE_OK(vista_set_range(v, b, 4));
	struct vista_range rs[2] = { { b + 8, 4 }, { b + 100, 8 } };
	VR_REQUIRE_OK(vista_set_ranges(v, 2, rs));
	memcpy(b, "NEW!", 4);
	memcpy(b + 8, "new2", 4);
	// The hook cannot be changed under a running transaction.
	VR_REQUIRE_RC(vista_set_tx_hook(v, nullptr, nullptr), VISTA_EINTX);
	s.refuse = -EPERM;
	VR_REQUIRE_RC(vista_end_transaction(v), -EPERM);
	REQUIRE(vista_in_transaction(v)); // refused: still running
	REQUIRE(s.event == VISTA_HOOK_COMMIT);
	REQUIRE(s.after.size() == 3);
	REQUIRE(s.after[0] == std::make_pair((size_t)0, std::string("NEW!")));
	REQUIRE(s.before[0] == std::make_pair((size_t)0, std::string("old-")));
	REQUIRE(s.before[1].second == "old-");
	REQUIRE(s.after[1].second == "new2");
	REQUIRE(s.after[2].first == 100);
	s.refuse = 0;
	VR_REQUIRE_OK(vista_end_transaction(v));
	REQUIRE(s.calls == 2);
	REQUIRE(memcmp(b, "NEW!", 4) == 0);

	// Abort: the hook sees the images before they are put back.
	VR_REQUIRE_OK(vista_begin_transaction(v, 0));
	VR_REQUIRE_OK(vista_set_range(v, b, 4));
	memcpy(b, "XXXX", 4);
	VR_REQUIRE_OK(vista_abort_transaction(v));
	REQUIRE(s.event == VISTA_HOOK_ABORT);
	REQUIRE(s.after[0].second == "XXXX");
	REQUIRE(s.before[0].second == "NEW!");
	REQUIRE(memcmp(b, "NEW!", 4) == 0);

	// vista_chain_transaction commits through the hook too, and a
	// refusal leaves the transaction running.
	VR_REQUIRE_OK(vista_begin_transaction(v, 0));
	VR_REQUIRE_OK(vista_set_range(v, b + 200, 8));
	memcpy(b + 200, "chained!", 8);
	s.refuse = -EPERM;
	VR_REQUIRE_RC(vista_chain_transaction(v), -EPERM);
	REQUIRE(s.calls == 4);
	s.refuse = 0;
	VR_REQUIRE_OK(vista_chain_transaction(v));
	REQUIRE(s.calls == 5);
	REQUIRE(s.after[0].second == "chained!");
	VR_REQUIRE_OK(vista_end_transaction(v)); // declared nothing
	REQUIRE(s.calls == 5);

	// A transaction that declared nothing is not shown; unset, none is.
	VR_REQUIRE_OK(vista_begin_transaction(v, 0));
	VR_REQUIRE_OK(vista_end_transaction(v));
	REQUIRE(s.calls == 5);
	VR_REQUIRE_OK(vista_set_tx_hook(v, nullptr, nullptr));
	VR_REQUIRE_OK(vista_begin_transaction(v, 0));
	VR_REQUIRE_OK(vista_set_range(v, b, 4));
	VR_REQUIRE_OK(vista_end_transaction(v));
	REQUIRE(s.calls == 5);
	VR_REQUIRE_OK(vista_fini(v));
}

TEST_CASE("the buffered reader returns whole records, and none of a cut one",
	"[wire]")
{
	auto a = redo({ { 8, "abcdefgh" } });
	auto b = redo({ { 64, std::string(5000, 'z') }, { 9000, "x" } });
	std::vector<char> all;
	for (int i = 0; i < 50; i++) {
		all.insert(all.end(), a.begin(), a.end());
		all.insert(all.end(), b.begin(), b.end());
	}
	int sv[2];
	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	std::thread w([&] {
		// In odd slices, the last record cut in the middle.
		size_t end = all.size() - b.size() / 2;
		for (size_t off = 0; off < end;) {
			size_t n = std::min((size_t)777, end - off);
			REQUIRE(write(sv[0], all.data() + off, n) == (ssize_t)n);
			off += n;
		}
		close(sv[0]);
	});
	struct vr_reader rd = { sv[1], nullptr, 0, 0, 0 };
	const vr_rec_hdr *h;
	int got = 0, rc;
	while ((rc = vr__reader_next(&rd, &h, 2000, NULL, 1 << 20)) == 0) {
		REQUIRE(h->len == (got % 2 ? b.size() : a.size()));
		REQUIRE(memcmp(h, got % 2 ? b.data() : a.data(), h->len) == 0);
		got++;
	}
	w.join();
	VR_REQUIRE_RC(rc, VR_ETRUNC);
	REQUIRE(got == 99);
	free(rd.buf);
	close(sv[1]);
}

// SPDX-License-Identifier: BSD-3-Clause
// hdr_rules.hpp -- one test per header rule (docs/FORMAT.md, "Header
// rules"), table-driven: a format lists, for each rule, how to break its
// header and the code each kind of open must return; run() applies each
// row to a good copy and checks the code and that a refusal changed nothing.
#ifndef HDR_RULES_HPP
#define HDR_RULES_HPP

#include <functional>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace hdr_rules {

// "This kind of open does not exist for the format" (codes are <= 0).
constexpr int NONE = 1;

template <typename H> struct Rule {
	const char *name;
	std::function<void(H &)> edit;
	int want;           // read-write use: 0 accepted, else the code
	int want_ro = NONE; // read-only use, where the format has one
};

// The persistent state the rules act on: where it lives is the format's.
struct State {
	std::function<std::string()> save;              // every byte that counts
	std::function<void(const std::string &)> restore;
};

// A State over whole files.
inline State files(std::vector<std::string> paths)
{
	return State{
		[paths] {
			std::string s;
			for (auto &p : paths) {
				std::string f = test::read_file(p);
				s += std::to_string(f.size()) + ":" + f;
			}
			return s;
		},
		[paths](const std::string &s) {
			size_t at = 0;
			for (auto &p : paths) {
				size_t colon = s.find(':', at);
				size_t n = std::stoul(s.substr(at, colon - at));
				test::write_file(p, s.substr(colon + 1, n));
				at = colon + 1 + n;
			}
		},
	};
}

// For each rule, from the good state: edit(rule.edit) breaks the header
// (and reseals its checksum); open(read_only) tries the format's open,
// closes what it opened, and returns the code.  A refused open must leave
// the state byte for byte.  The good state is put back after each rule.
template <typename H, typename Edit, typename Open>
void run(const State &st, const std::vector<Rule<H>> &rules, Edit edit,
	Open open)
{
	const std::string good = st.save();
	for (const Rule<H> &r : rules) {
		INFO("header rule: " << r.name);
		edit(r.edit);
		for (int ro = 0; ro < 2; ro++) {
			int want = ro ? r.want_ro : r.want;
			if (want == NONE)
				continue;
			INFO((ro ? "read-only use" : "read-write use"));
			const std::string before = st.save();
			int rc = open(ro != 0);
			INFO("got " << rc << ", want " << want);
			REQUIRE(rc == want);
			if (want != 0)
				REQUIRE(st.save() == before);
		}
		st.restore(good);
	}
}

} // namespace hdr_rules

#endif
